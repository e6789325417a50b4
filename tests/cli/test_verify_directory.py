#!/usr/bin/env python3
# verify of a packed directory against hand-edited manifests: each disagreement between the
# manifest, its shard files and the program is reported by name (exit 1), every other check
# still runs, and a weight_map that disagrees with the shards is refused by the manifest reader.
import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, flip, load_json  # noqa: E402

suite = Suite()

ALIAS = "prefill/layers.0.attention.wq.weight"
OWNER = "decode/layers.0.attention.wq.weight"


def packed(ctx, *options):
    """The examples packed into a fresh directory, and its manifest."""
    prefill = os.path.join(ctx.examples, "prefill.json")
    decode = os.path.join(ctx.examples, "decode.json")
    out = os.path.join(ctx.mkdir(), "m")
    ctx.run_ok("pack", prefill, decode, "-o", out, *options)
    with open(os.path.join(out, "manifest.json")) as handle:
        return out, json.load(handle)


def save(out, manifest):
    with open(os.path.join(out, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)


def expect_problems(ctx, out, what, *needles, extra=()):
    r = ctx.run("verify", out, "--json", *extra)
    ctx.code(r, 1, what)
    problems = json.loads(r.out)["problems"] if r.out else []
    for needle in needles:
        ctx.check(any(needle in p for p in problems), f"{what}: {needle!r} not in {problems!r}")
    return problems


@suite.test
def the_untouched_directory_verifies(ctx):
    for options in ((), ("--max-shard-bytes", "3000"), ("--shard-format", "safetensors")):
        out, manifest = packed(ctx, *options)
        r = ctx.run("verify", out, "--json")
        ctx.code(r, 0, f"verify {options}")
        report = json.loads(r.out)
        ctx.equal(report["problems"], [], f"problems {options}")
        ctx.equal(report["tensors_checked"], len(manifest["tensors"]), f"tensors {options}")


@suite.test
def a_tensor_in_an_unlisted_shard(ctx):
    out, m = packed(ctx)
    m["tensors"][OWNER]["shard"] = "weights-0000000000000000.ptd"
    save(out, m)
    expect_problems(ctx, out, "unlisted shard",
                    f"tensor '{OWNER}': shard weights-0000000000000000.ptd is not listed")


@suite.test
def a_stray_key_in_a_shard_file(ctx):
    # The key stays in the file and its shard's list but leaves the tensors table.
    out, m = packed(ctx)
    del m["tensors"][ALIAS]
    save(out, m)
    problems = expect_problems(ctx, out, "stray key",
                               f"key '{ALIAS}' in {m['shards'][0]['file']} is not in the manifest")
    # Nothing references the owner's copy any more: the program still needs the key.
    ctx.check(any("has no data" in p and ALIAS in p for p in problems),
              f"the program's missing data is not reported: {problems!r}")


@suite.test
def keys_in_a_file_differ_from_its_list(ctx):
    out, m = packed(ctx, "--max-shard-bytes", "3000")
    first = m["shards"][0]
    moved = first["keys"].pop()
    m["shards"][1]["keys"] = sorted(m["shards"][1]["keys"] + [moved])
    save(out, m)
    r = ctx.run("verify", out)
    # The weight_map now disagrees with the lists: the reader refuses the manifest first.
    ctx.code(r, 1, "keys moved between lists")
    ctx.check(f"manifest field weight_map['{moved}']" in r.err, f"not reported: {r.err!r}")
    m["weight_map"][moved] = m["shards"][1]["file"]
    save(out, m)
    expect_problems(ctx, out, "keys moved between lists",
                    f"{first['file']}: keys in the file differ from the manifest's list "
                    f"({len(first['keys']) + 1} in file, {len(first['keys'])} listed)")


@suite.test
def aliases_that_disagree(ctx):
    out, m = packed(ctx)
    m["tensors"][ALIAS]["alias_of"] = ALIAS.replace("weight", "nothing")
    save(out, m)
    expect_problems(ctx, out, "alias of no tensor", "is not a stored owner")

    out, m = packed(ctx)
    m["tensors"][ALIAS]["sha256"] = "0" * 64
    save(out, m)
    expect_problems(ctx, out, "alias with another digest",
                    f"tensor '{ALIAS}': alias_of '{OWNER}' disagrees (digest, shard or owner order)")
    expect_problems(ctx, out, "alias with another digest, --tensors",
                    f"tensor '{ALIAS}': alias_of '{OWNER}' disagrees (digest, shard or owner order)",
                    f"tensor '{ALIAS}': bytes do not match the manifest's SHA-256",
                    extra=("--tensors",))

    out, m = packed(ctx)
    m["tensors"][ALIAS]["mutable"] = True
    save(out, m)
    expect_problems(ctx, out, "mutable alias",
                    f"tensor '{ALIAS}': state key is an alias (state is never deduplicated)",
                    f"tensor '{ALIAS}': mutable flag disagrees with the program")


@suite.test
def a_safetensors_alias_reads_through_its_owner(ctx):
    out, m = packed(ctx, "--shard-format", "safetensors")
    ctx.require(ALIAS not in m["shards"][0]["keys"], "aliases are not in safetensors files")
    m["tensors"][ALIAS]["shape"] = [1]
    save(out, m)
    expect_problems(ctx, out, "safetensors alias with another shape",
                    f"tensor '{ALIAS}': manifest says BYTE [1] 128 bytes but",
                    "holds BYTE [16, 8] 128 bytes")


@suite.test
def state_that_disagrees_with_the_program(ctx):
    out, m = packed(ctx)
    m["state"] = ["state/pos"]
    save(out, m)
    expect_problems(ctx, out, "state list", "state list differs from the program's mutable keys")


@suite.test
def a_weight_map_that_disagrees_is_refused_by_the_reader(ctx):
    for edit, needle in (
            (lambda w: w.update({OWNER: "other.ptd"}), f"weight_map['{OWNER}']: names 'other.ptd'"),
            (lambda w: w.pop(OWNER), f"weight_map['{OWNER}']: missing (a shard lists the key)"),
            (lambda w: w.update({"zzz": w[OWNER]}), "weight_map['zzz']: is not a key of any shard")):
        out, m = packed(ctx)
        edit(m["weight_map"])
        save(out, m)
        for command in ("verify", "dump"):
            r = ctx.run(command, out)
            ctx.code(r, 1 if command == "verify" else 3, f"{command} with {needle}")
            ctx.check(needle in r.err and "manifest.json: manifest field" in r.err,
                      f"{command}: {needle!r} not in {r.err!r}")
        again = os.path.join(ctx.mkdir(), "again")
        r = ctx.run("pack", out, "-o", again)
        # A packed input that verify rejects: verify's lines, its problem's code (3).
        ctx.code(r, 3, f"pack of a directory with {needle}")
        ctx.check(needle in r.err, f"pack: {needle!r} not in {r.err!r}")
        ctx.check(not os.path.exists(again), "pack wrote an output from a corrupt manifest")


@suite.test
def a_safetensors_index_that_disagrees(ctx):
    out, m = packed(ctx, "--shard-format", "safetensors")
    index = os.path.join(out, "model.safetensors.index.json")
    with open(index) as handle:
        text = handle.read()
    with open(index, "w") as handle:
        handle.write(text.replace('"total_size"', '"total_size" ', 1))
    expect_problems(ctx, out, "edited index", "does not match the manifest's weight_map")
    shutil.rmtree(out)


@suite.test
def every_byte_is_hashed_once(ctx):
    """verify hashes each file whole once, and its digest proves the tensors in it;
    --tensors also hashes each stored tensor once: an alias, which reads its owner's bytes,
    is checked against its digest without hashing them again. A tensor in a changed file is
    hashed on its own, to name it."""
    for extra in ([], ["--shard-format", "safetensors"]):
        out = os.path.join(ctx.mkdir(), "m")
        ctx.run_ok("pack", os.path.join(ctx.examples, "prefill.json"),
                   os.path.join(ctx.examples, "decode.json"), "-o", out, "-q", *extra)
        manifest = load_json(os.path.join(out, "manifest.json"))
        files = [manifest["program"]] + manifest["shards"]
        owners = [t for t in manifest["tensors"].values() if "alias_of" not in t]
        ctx.check(len(owners) < len(manifest["tensors"]), "the example has aliases")
        report = ctx.run_ok("verify", out, "--json").json()
        ctx.equal(report["bytes_hashed"], sum(f["size"] for f in files), f"bytes hashed {extra}")
        ctx.equal(report["tensors_checked"], len(manifest["tensors"]), f"every key {extra}")
        deep = ctx.run_ok("verify", out, "--json", "--tensors").json()
        ctx.equal(deep["bytes_hashed"], sum(f["size"] for f in files) +
                  sum(t["nbytes"] for t in owners), f"bytes hashed --tensors {extra}")
        ctx.equal(deep["tensors_checked"], len(manifest["tensors"]), f"--tensors {extra}")
        if not extra:
            continue
        # The last byte of a safetensors shard (the last tensor's) changed: the tensors of
        # that shard are hashed again, no other, and the changed one is named.
        shard = manifest["shards"][0]
        flip(os.path.join(out, shard["file"]), shard["size"] - 1)
        damaged = ctx.run("verify", out, "--json")
        ctx.code(damaged, 1, "a changed shard")
        report = damaged.json()
        in_shard = [t for t in owners if t["shard"] == shard["file"]]
        ctx.equal(report["bytes_hashed"], sum(f["size"] for f in files) +
                  sum(t["nbytes"] for t in in_shard), "bytes hashed with a changed shard")
        ids = [p["id"] for p in report["problem_details"]]
        ctx.equal(ids.count("tensor_bytes"), 1, f"one tensor named: {report['problems']}")


@suite.test
def a_listed_program_holding_its_own_constants_is_hashed_once(ctx):
    """verify DIR/prog.pte hashes the program whole against its record, and does not read
    the constants it holds a second time: the program, with its constants inside, in place
    of the slim one its manifest listed (the record rewritten to match)."""
    fixture = os.path.join(ctx.data, "pte", "portable_keyword_spotting.pte")
    out = os.path.join(ctx.mkdir(), "d")
    ctx.run_ok("pack", fixture, "-o", out, "-q")
    manifest = load_json(os.path.join(out, "manifest.json"))
    entry = manifest["programs"][0]
    with open(fixture, "rb") as handle:
        data = handle.read()
    with open(os.path.join(out, entry["file"]), "wb") as handle:
        handle.write(data)
    entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
    report = ctx.run_ok("verify", os.path.join(out, entry["file"]), "--json").json()
    shards = sum(os.path.getsize(os.path.join(out, s)) for s in entry["shards"])
    ctx.equal(report["bytes_hashed"], len(data) + shards, "the program and its shards, once")


if __name__ == "__main__":
    suite.main()
