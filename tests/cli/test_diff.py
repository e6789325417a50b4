#!/usr/bin/env python3
# `ptepack diff`: equivalence by content across artifact kinds, exactly the changed keys and
# shards reported, exit 0 / 1 / error codes; the JSON report checked field by field.
import json
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, load_json  # noqa: E402

suite = Suite()


def inputs(ctx, directory, flip_key=None):
    """Copies of the example programs and weights in `directory`; with `flip_key`, one bit of
    that decode tensor flipped."""
    for name in ("prefill.json", "decode.json", "prefill.safetensors", "decode.safetensors"):
        shutil.copy(os.path.join(ctx.examples, name), directory)
    if flip_key:
        path = os.path.join(directory, "decode.safetensors")
        with open(path, "rb") as handle:
            blob = bytearray(handle.read())
        size = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + size])
        blob[8 + size + header[flip_key]["data_offsets"][0]] ^= 1
        with open(path, "wb") as handle:
            handle.write(blob)
    return [os.path.join(directory, "prefill.json"), os.path.join(directory, "decode.json")]


def pack(ctx, programs, out, *options):
    ctx.run_ok("pack", *programs, "-o", out, "-q", *options)
    return out


def key_name(report):
    return report["keys_changed"][0]["key"]


@suite.test
def identical_inputs_are_equivalent(ctx):
    d = ctx.mkdir()
    programs = inputs(ctx, ctx.mkdir("in"))
    a = pack(ctx, programs, os.path.join(d, "a"), "--max-shard-bytes", "3000")
    b = pack(ctx, programs, os.path.join(d, "b"), "--max-shard-bytes", "3000")
    result = ctx.run("diff", a, b)
    ctx.code(result, 0, "identical directories")
    ctx.check("equivalent" in result.out.splitlines()[0], result.out)
    report = ctx.run("diff", a, b, "--json")
    ctx.code(report, 0, "identical --json")
    j = report.json()
    ctx.equal((j["format"], j["version"], j["equivalent"]), ("ptepack.diff", 2, True), "header")
    manifest = load_json(os.path.join(a, "manifest.json"))
    ctx.equal(sorted(s["file"] for s in j["files"]["unchanged"]),
              sorted([s["file"] for s in manifest["shards"]] + [manifest["program"]["file"]]),
              "every file unchanged, the program included")
    ctx.equal((j["files"]["added"], j["files"]["download_bytes"]), ([], 0), "nothing to download")


@suite.test
def a_package_and_the_directory_packed_from_it_are_equivalent(ctx):
    d = ctx.mkdir()
    programs = inputs(ctx, ctx.mkdir("in"))
    ptn = pack(ctx, programs, os.path.join(d, "m.ptn"))
    directory = pack(ctx, [ptn], os.path.join(d, "m"), "--max-shard-bytes", "3000")
    for a, b in ((ptn, directory), (directory, ptn)):
        result = ctx.run("diff", a, b, "--json")
        ctx.code(result, 0, f"{a} vs {b}")
        j = result.json()
        ctx.equal(j["equivalent"], True, "equivalent")
        ctx.equal(j["files"], None, "no file comparison with a package")


@suite.test
def one_changed_tensor_names_that_key_and_its_shard(ctx):
    d = ctx.mkdir()
    a = pack(ctx, inputs(ctx, ctx.mkdir("in_a")), os.path.join(d, "a"), "--max-shard-bytes", "3000")
    b = pack(ctx, inputs(ctx, ctx.mkdir("in_b"), flip_key="layers.0.attention.wq.weight"),
             os.path.join(d, "b"), "--max-shard-bytes", "3000")
    result = ctx.run("diff", a, b, "--json")
    ctx.code(result, 1, "one tensor differs")
    j = result.json()
    ctx.equal(j["equivalent"], False, "equivalent")
    ctx.equal([c["key"] for c in j["keys_changed"]], ["decode/layers.0.attention.wq.weight"],
              "changed keys")
    ctx.equal(j["keys_changed"][0]["changes"], ["bytes"], "what changed")
    ctx.equal((j["keys_added"], j["keys_removed"]), ([], []), "keys added/removed")
    ctx.equal(j["methods"], [], "methods")
    # Every verdict of "differ" lists what differs, in `differences` as for .pte programs.
    ctx.equal([(x["what"], x["text"]) for x in j["differences"]],
              [("key", f"key '{key_name(j)}': bytes changed")], "differences")
    # The changed bytes live in exactly one shard of each side: that one is replaced.
    manifest_a = load_json(os.path.join(a, "manifest.json"))
    manifest_b = load_json(os.path.join(b, "manifest.json"))
    key = "decode/layers.0.attention.wq.weight"
    old, new = manifest_a["tensors"][key]["shard"], manifest_b["tensors"][key]["shard"]
    ctx.check(new in [s["file"] for s in j["files"]["added"]], f"{new} not reported new")
    ctx.check(old in [s["file"] for s in j["files"]["removed"]], f"{old} not reported gone")
    sizes = {s["file"]: s["size"] for s in manifest_b["shards"]}
    sizes[manifest_b["program"]["file"]] = manifest_b["program"]["size"]
    ctx.equal(j["files"]["download_bytes"], sum(sizes[s["file"]] for s in j["files"]["added"]),
              "download bytes = sizes of the new files")
    ctx.equal({s["file"]: s["sha256"] for s in j["files"]["added"]},
              {s["file"]: s["sha256"] for s in manifest_b["shards"] if s["file"] in
               [f["file"] for f in j["files"]["added"]]}, "new files are shards (same program)")
    text = ctx.run("diff", a, b)
    ctx.code(text, 1, "text report")
    ctx.check(f"~ {key}: bytes " in text.out, text.out)


@suite.test
def an_added_method_is_reported(ctx):
    d = ctx.mkdir()
    programs = inputs(ctx, ctx.mkdir("in"))
    one = pack(ctx, programs[:1], os.path.join(d, "one.ptn"))
    two = pack(ctx, programs, os.path.join(d, "two.ptn"))
    j = ctx.run("diff", one, two, "--json").json()
    # decode mutates pos, so with it prefill reads state/pos instead of its own prefill/pos:
    # prefill's graph changes too, and that key goes.
    ctx.equal([(m["method"], m["change"]) for m in j["methods"]],
              [("decode", "added"), ("prefill", "changed")], "methods")
    added = j["keys_added"]
    ctx.equal((j["keys_removed"], j["keys_changed"]), (["prefill/pos"], []),
              "the key that became state")
    ctx.check("state/pos" in j["state_added"], f"state/pos added: {j['state_added']}")
    ctx.check(all(k.startswith("decode/") or k.startswith("state/") for k in added),
              f"added keys: {added}")
    ctx.check(added, "decode's keys are added")
    ctx.check(len(j["differences"]) >= 2 + len(added) and
              {x["what"] for x in j["differences"]} == {"method", "key", "state"},
              f"every change among the differences: {j['differences'][:4]}")
    back = ctx.run("diff", two, one)
    ctx.code(back, 1, "method removed")
    ctx.check("  - decode" in back.out, back.out)


@suite.test
def an_unreadable_side_is_an_error_not_a_difference(ctx):
    d = ctx.mkdir()
    ptn = pack(ctx, inputs(ctx, ctx.mkdir("in")), os.path.join(d, "m.ptn"))
    missing = ctx.run("diff", ptn, os.path.join(d, "nothing.ptn"))
    ctx.code(missing, 5, "missing file")
    ctx.check("nothing.ptn" in missing.err, missing.err)
    broken = os.path.join(d, "broken.ptn")
    with open(ptn, "rb") as handle:
        blob = handle.read()
    with open(broken, "wb") as handle:
        handle.write(blob[: len(blob) // 2])
    result = ctx.run("diff", ptn, broken)
    ctx.code(result, 3, "truncated package")
    ctx.equal(result.out, "", "nothing printed on stdout")


if __name__ == "__main__":
    suite.main()
