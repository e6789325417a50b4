#!/usr/bin/env python3
# CLI suite for what pack writes and verify checks: dropped data, --dry-run, --json, shard caps
# and suffixes, content-addressed names, safe replacement of outputs, and verify on corruption.
import json
import math
import os
import re
import shutil
import sys

from cli_common import (Suite, Tensor, add_constant, load_json, meta, method, ptd_reader,
                        read_file, read_ptn, read_safetensors, read_shard, sha256_file,
                        snapshot, synthetic_program, temp_leftovers, tensor, tree_differences,
                        write_safetensors)

suite = Suite()
# The identifiers docs/problems.md documents (its table's first column).
PROBLEM_IDS = set(re.findall(r"^\| `([a-z_]+)` \|", open(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "problems.md"),
    encoding="utf-8").read(), re.M))
SUMMARY_FIELDS = {"output": str, "kind": str, "dry_run": bool, "methods": list, "renames": list,
                  "state": list, "aliases": dict, "tensor_count": int, "stored_tensor_count": int,
                  "referenced_bytes": int, "stored_bytes": int, "dedup_saved_bytes": int,
                  "dropped_keys": int, "dropped_bytes": int, "output_bytes": int}
DIRECTORY_FIELDS = {"shard_format": str, "cap_mode": str, "shards": list}
SHARD_NAME = re.compile(r"^(?P<prefix>.+)-(?P<hex>[0-9a-f]{8,64})\.(?P<ext>ptd|safetensors)$")


def fixtures(ctx):
    return [os.path.join(ctx.data, stem + ".json") for stem in ("prefill", "decode")]


def equal_tensors_model(ctx, directory, count, shape=(750,), fills=None, stem="m"):
    """One method binding `count` F32 tensors of one shape, each with distinct bytes."""
    keys = [f"t{i:02d}" for i in range(count)]
    fills = fills or {}
    data = {k: tensor("F32", list(shape), fills.get(k, k)) for k in keys}
    program = synthetic_program(stem, [(k, "F32", list(shape)) for k in keys])
    return ctx.write_model(directory, stem, program, data)


def shards_of(directory):
    """[(file, size, {key: (dtype, shape, sha)}, payload)] read from the files themselves."""
    manifest = load_json(os.path.join(directory, "manifest.json"))
    out = []
    for shard in manifest["shards"]:
        path = os.path.join(directory, shard["file"])
        if path.endswith(".ptd"):
            payload = sum(s["size"] for s in ptd_reader.parse(path)["segments"])
        else:
            payload = sum(len(t.data) for t in read_safetensors(path).values())
        out.append((shard["file"], os.path.getsize(path), read_shard(path), payload))
    return out


# ---------------------------------------------------------------- D. dropped data

@suite.test
def unreferenced_data_is_dropped_and_reported(ctx):
    directory = ctx.mkdir("in")
    program, data = ctx.fixture("prefill")
    data["unused.bias"] = tensor("F32", [10, 10], "unused")
    source = ctx.write_model(directory, "prefill", program, data)
    for out in (os.path.join(directory, "out.ptn"), os.path.join(directory, "out")):
        summary = ctx.run_ok("pack", source, "-o", out, "--json").json()
        ctx.equal((summary["dropped_keys"], summary["dropped_bytes"]), (1, 400), f"{out} summary")
        if out.endswith(".ptn"):
            keys = set(read_ptn(out)["tensors"]) | set(read_ptn(out)["aliases"])
        else:
            keys = set(load_json(os.path.join(out, "manifest.json"))["tensors"])
            for _, _, shard_keys, _ in shards_of(out):
                keys |= set(shard_keys)
        ctx.equal([k for k in keys if "unused" in k], [], f"{out}: dropped key stored")
    text = ctx.run_ok("pack", source, "-o", os.path.join(directory, "again"))
    ctx.check(re.search(r"dropped: 1 unreferenced keys?, 400 B", text.out),
              f"pack text does not report the drop: {text.out!r}")
    dump = ctx.run_ok("dump", source, "--json").json()
    ctx.equal((dump["summary"]["unreferenced_keys"], dump["summary"]["unreferenced_bytes"]),
              (1, 400), "dump --json of the input")
    ctx.equal(dump["tensors"]["unused.bias"].get("referenced"), False, "unused.bias referenced")
    text = ctx.run_ok("dump", source).out
    ctx.check("unreferenced" in text and "400 B" in text, f"dump text: {text[-300:]!r}")


# ---------------------------------------------------------------- D. --dry-run and --json

@suite.test
def dry_run_writes_nothing_and_prints_the_plan(ctx):
    directory = ctx.mkdir("dry")
    for out in ("x.ptn", "x"):
        target = os.path.join(directory, out)
        cap = [] if out.endswith(".ptn") else ["--max-shard-bytes", "3000"]
        result = ctx.run_ok("pack", *fixtures(ctx), "-o", target, "--dry-run", "-v", *cap)
        ctx.equal(os.listdir(directory), [], f"{out}: --dry-run wrote files")
        for needle in ("prefill", "decode", "pos -> state/pos", "state/kv_cache", "4 aliases",
                       "tok_embeddings.weight -> prefill/tok_embeddings.weight"):
            ctx.check(needle in result.out, f"{out}: plan lacks {needle!r}: {result.out!r}")
        if cap:
            ctx.check(re.search(r"shards: [2-9]", result.out), f"plan lacks shards: {result.out!r}")
        dry = ctx.run_ok("pack", *fixtures(ctx), "-o", target, "--dry-run", "--json", *cap).json()
        ctx.equal(os.listdir(directory), [], f"{out}: --dry-run --json wrote files")
        real = ctx.run_ok("pack", *fixtures(ctx), "-o", target, "--json", *cap).json()
        ctx.equal((dry["dry_run"], real["dry_run"]), (True, False), "dry_run flags")
        # The plan predicts the real run; shard names are only known once written.
        for field in ("methods", "renames", "state", "aliases", "tensor_count", "stored_tensor_count",
                      "stored_bytes", "dropped_keys"):
            ctx.equal(dry.get(field), real.get(field), f"{out}: dry-run {field}")
        # A plan cannot count manifest.json: its text holds the shards' digests.
        unplanned = 0 if out.endswith(".ptn") else os.path.getsize(os.path.join(target, "manifest.json"))
        ctx.equal(dry.get("output_bytes"), real.get("output_bytes") - unplanned, f"{out}: dry-run output_bytes")
        ctx.equal([(s["size"], s["payload_bytes"], s["keys"]) for s in dry.get("shards", [])],
                  [(s["size"], s["payload_bytes"], s["keys"]) for s in real.get("shards", [])],
                  f"{out}: planned shards")
        shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)


@suite.test
def json_summary_fields_match_the_files(ctx):
    directory = ctx.mkdir("json")
    for out in ("x.ptn", "x"):
        target = os.path.join(directory, out)
        cap = [] if out.endswith(".ptn") else ["--max-shard-bytes", "3000"]
        summary = ctx.run_ok("pack", *fixtures(ctx), "-o", target, "--json", *cap).json()
        expected = dict(SUMMARY_FIELDS, **({} if out.endswith(".ptn") else DIRECTORY_FIELDS))
        for field, kind in expected.items():
            ctx.check(isinstance(summary.get(field), kind), f"{out}: field {field} missing/type")
        ctx.equal([m["name"] for m in summary["methods"]], ["prefill", "decode"], "methods")
        ctx.equal(summary["state"], ["state/kv_cache", "state/pos"], "state")
        ctx.equal((summary["tensor_count"], summary["stored_tensor_count"]), (11, 7), "tensor counts")
        ctx.equal(summary["dedup_saved_bytes"],
                  summary["referenced_bytes"] - summary["stored_bytes"], "dedup arithmetic")
        ctx.equal(len(summary["aliases"]), summary["tensor_count"] - summary["stored_tensor_count"],
                  "aliases vs counts")
        files = snapshot(target)
        if out.endswith(".ptn"):
            ctx.equal(summary["output_bytes"], len(files[""]), "output_bytes of a package")
        if out == "x":
            manifest = load_json(os.path.join(target, "manifest.json"))
            ctx.equal(summary["max_shard_bytes"], 3000, "max_shard_bytes")
            ctx.equal([(s["file"], s["size"], s["payload_bytes"], s["keys"])
                       for s in summary["shards"]],
                      [(s["file"], s["size"], s["payload_bytes"], s["keys"])
                       for s in manifest["shards"]], "summary shards vs manifest")
            ctx.equal(sum(s["payload_bytes"] for s in summary["shards"]),
                      summary["stored_bytes"], "stored bytes vs shard payloads")
            for shard in summary["shards"]:
                ctx.equal(shard["size"], len(files[shard["file"]]), f"size of {shard['file']}")


@suite.test
def output_bytes_counts_every_file_written(ctx):
    target = os.path.join(ctx.mkdir("dir"), "x")
    summary = ctx.run_ok("pack", *fixtures(ctx), "-o", target, "--json").json()
    written = sum(len(b) for b in snapshot(target).values())
    ctx.equal(summary["output_bytes"], written, "output_bytes vs bytes in the directory")


@suite.test
def manifest_matches_the_shards(ctx):
    for fmt in ("ptd", "safetensors"):
        out = os.path.join(ctx.mkdir(fmt), "out")
        ctx.run_ok("pack", *fixtures(ctx), "-o", out, "--max-shard-bytes", "3000",
                   "--shard-format", fmt)
        check_manifest(ctx, out, fmt)


def check_manifest(ctx, out, fmt):
    manifest = load_json(os.path.join(out, "manifest.json"))
    ctx.equal((manifest["format"], manifest["version"], manifest["shard_format"]),
              ("ptepack.manifest", 1, fmt), "header")
    program = os.path.join(out, manifest["program"]["file"])
    ctx.equal((manifest["program"]["sha256"], manifest["program"]["size"]),
              (sha256_file(program), os.path.getsize(program)), "program entry")
    listed = {manifest["program"]["file"], "manifest.json"}
    tensors, readable = manifest["tensors"], {}
    for shard in manifest["shards"]:
        path = os.path.join(out, shard["file"])
        listed.add(shard["file"])
        ctx.equal((shard["sha256"], shard["size"]), (sha256_file(path), os.path.getsize(path)),
                  f"{fmt} {shard['file']} hash/size")
        contents = read_shard(path)
        ctx.equal(shard["keys"], sorted(contents, key=str.encode), f"{fmt} {shard['file']} keys")
        for key in shard["keys"]:
            readable[key] = shard["file"]
            entry = tensors[key]
            ctx.equal((entry["shard"], entry["dtype"], entry["shape"], entry["sha256"]),
                      (shard["file"], *contents[key]), f"{fmt} manifest entry of {key}")
    ctx.equal(manifest["weight_map"], readable, f"{fmt} weight_map vs keys in the shard files")
    for key, entry in tensors.items():
        owner = entry.get("alias_of")
        if owner is None:
            ctx.check(key in readable, f"{fmt} {key}: not an alias but in no shard")
            continue
        ctx.check(owner in tensors and "alias_of" not in tensors[owner] and
                  tensors[owner]["sha256"] == entry["sha256"] and
                  tensors[owner]["shard"] == entry["shard"], f"{fmt} alias {key} -> {owner}")
        # .ptd names every key in the file; safetensors stores the owner only.
        ctx.equal(key in readable, fmt == "ptd", f"{fmt} alias {key} readable from its shard")
    ctx.equal(manifest["metadata"]["total_size"],
              sum(s["payload_bytes"] for s in manifest["shards"]), f"{fmt} metadata.total_size")
    ctx.equal(manifest["state"], ["state/kv_cache", "state/pos"], f"{fmt} state")
    if fmt == "safetensors":
        listed.add("model.safetensors.index.json")
        index = load_json(os.path.join(out, "model.safetensors.index.json"))
        ctx.equal((index["weight_map"], index["metadata"]["total_size"]),
                  (manifest["weight_map"], manifest["metadata"]["total_size"]), "index")
    ctx.equal(sorted(os.listdir(out)), sorted(listed), f"{fmt} files in the directory")


# ---------------------------------------------------------------- D. dedup rules

@suite.test
def mutable_keys_are_never_deduplicated(ctx):
    # pos2 and pos3 are mutable with pos's bytes; decode's lifted constant has them too.
    directory = ctx.mkdir("in")

    def mutate(programs, datas):
        add_constant(method(programs["decode"]), "b_pos2", "pos2", meta("LONG", [1]), "BUFFER",
                     True)
        add_constant(method(programs["prefill"]), "b_pos3", "pos3", meta("LONG", [1]), "BUFFER",
                     True)
        datas["decode"]["pos2"] = datas["prefill"]["pos3"] = datas["decode"]["pos"]
    inputs = ctx.fixture_pair(directory, mutate)
    state = ["state/pos", "state/pos2", "state/pos3"]
    ctx.run_ok("pack", *inputs, "-o", os.path.join(directory, "o.ptn"))
    ptn = read_ptn(os.path.join(directory, "o.ptn"))
    ctx.check(all(k in ptn["tensors"] for k in state), f"state keys not stored: {ptn['tensors']}")
    for alias, owner in ptn["aliases"].items():
        ctx.check(alias not in state and owner not in state, f"{alias} -> {owner} involves state")
    out = os.path.join(directory, "o")
    ctx.run_ok("pack", *inputs, "-o", out)
    for shard in load_json(os.path.join(out, "manifest.json"))["shards"]:
        parsed = ptd_reader.parse(os.path.join(out, shard["file"]))
        owners = {}
        for entry in parsed["named_data"]:
            owners.setdefault(entry["segment_index"], []).append(entry["key"])
        for keys in owners.values():
            ctx.check(len(keys) == 1 or not set(keys) & set(state),
                      f"state key shares a .ptd segment: {keys}")


@suite.test
def ptd_dedups_by_bytes_but_ptn_needs_same_dtype_and_shape(ctx):
    directory = ctx.mkdir("in")
    same = tensor("F32", [4, 4], "same")
    data = {"a": same, "b": Tensor("I32", [4, 4], same.data), "c": Tensor("F32", [16], same.data),
            "d": tensor("F32", [4, 4], "same")}
    program = synthetic_program("m", [("a", "F32", [4, 4]), ("b", "I32", [4, 4]),
                                      ("c", "F32", [16]), ("d", "F32", [4, 4])])
    source = ctx.write_model(directory, "m", program, data)
    ctx.run_ok("pack", source, "-o", os.path.join(directory, "o.ptn"))
    ptn = read_ptn(os.path.join(directory, "o.ptn"))
    ctx.equal(ptn["aliases"], {"m/d": "m/a"}, "ptn aliases (only same dtype+shape+bytes)")
    out = os.path.join(directory, "o")
    ctx.run_ok("pack", source, "-o", out)
    manifest = load_json(os.path.join(out, "manifest.json"))
    parsed = ptd_reader.parse(os.path.join(out, manifest["shards"][0]["file"]))
    segments = {e["key"]: e["segment_index"] for e in parsed["named_data"]}
    ctx.equal(len(set(segments.values())), 1, f".ptd segments for equal bytes: {segments}")
    layouts = {e["key"]: (e["tensor_layout"]["scalar_type_name"], e["tensor_layout"]["sizes"])
               for e in parsed["named_data"]}
    ctx.equal(layouts, {"m/a": ("FLOAT", [4, 4]), "m/b": ("INT", [4, 4]), "m/c": ("FLOAT", [16]),
                        "m/d": ("FLOAT", [4, 4])}, "per-key layouts")
    ctx.equal(sum(s["size"] for s in parsed["segments"]), 64, "payload stored once")


@suite.test
def zero_element_tensors_among_many_pack_and_read_back(ctx):
    # Empty tensors start where the next one (or the next ZIP entry) does; with many
    # pieces the writer must still order them so none overlaps another.
    directory = ctx.mkdir("empty")
    data = {}
    for i in range(40):
        shape = [0, i + 1] if i % 3 == 0 else [i % 7 + 1, 5]
        data[f"t{i:02d}"] = tensor("F32", shape, f"fill{i}")
    data["z_last"] = tensor("F32", [0], "last")
    program = synthetic_program("m", [(k, "F32", t.shape) for k, t in sorted(data.items())])
    source = ctx.write_model(directory, "m", program, data)
    expected = {f"m/{k}": t for k, t in data.items()}
    for jobs in ("1", "2"):
        out = os.path.join(directory, f"o{jobs}.ptn")
        ctx.run_ok("pack", "-j", jobs, source, "-o", out)
        ptn = read_ptn(out)
        ctx.equal(ptn["testzip"], None, f"-j {jobs}: zipfile.testzip()")
        stored = {k: t for k, t in ptn["tensors"].items()}
        for alias, owner in ptn["aliases"].items():
            stored[alias] = stored[owner]
        ctx.equal(stored, expected, f"-j {jobs}: every tensor, empty ones included")
        ctx.run_ok("verify", out)
    for fmt in ("ptd", "safetensors"):
        out = os.path.join(directory, f"dir_{fmt}")
        ctx.run_ok("pack", source, "-o", out, "--shard-format", fmt, "--max-shard-bytes", "3KiB")
        ctx.run_ok("verify", out)
        manifest = load_json(os.path.join(out, "manifest.json"))
        ctx.check(len(manifest["shards"]) > 1, f"{fmt}: several shards")
        ctx.equal(sorted(manifest["tensors"]), sorted(expected), f"{fmt}: manifest keys")


# ---------------------------------------------------------------- D. shard caps

@suite.test
def size_suffixes_are_decimal_and_binary(ctx):
    """Hugging Face's max_shard_size spellings: K/M/G/T powers of 1000, KiB.. of 1024, any case,
    decimals and spaces."""
    directory = ctx.mkdir("sizes")
    for text, value in (("9000", 9000), ("9K", 9000), ("9KiB", 9216), ("1M", 10 ** 6),
                        ("1MiB", 1 << 20), ("2G", 2 * 10 ** 9), ("2GiB", 2 << 30),
                        ("1.5M", 1_500_000), ("1.5GiB", 3 << 29), ("10 K", 10_000),
                        ("3 kb", 3000), ("5gb", 5 * 10 ** 9), ("2T", 2 * 10 ** 12),
                        ("1TiB", 1 << 40)):
        out = os.path.join(directory, "o" + text)
        ctx.run_ok("pack", *fixtures(ctx), "-o", out, "--max-shard-bytes", text)
        ctx.equal(load_json(os.path.join(out, "manifest.json"))["max_shard_bytes"], value, text)
    for text in ("12X", "K", "-5", "0", "1.5", "1.0001K", "99999999999999999999", "1..5M"):
        out = os.path.join(directory, "bad")
        result = ctx.run("pack", *fixtures(ctx), "-o", out, "--max-shard-bytes", text)
        ctx.code(result, 2, f"--max-shard-bytes {text!r}")
        ctx.check(not os.path.exists(out), f"{text!r}: output written")
        ctx.check("KiB, MiB, GiB, TiB (powers of 1024)" in result.err,
                  f"{text!r}: the error lists the accepted forms: {result.err!r}")


@suite.test
def summary_counts_long_lists_and_verbose_lists_them(ctx):
    """Default summary: renames counted, state keys and shards listed up to 8; -v lists all."""
    directory = ctx.mkdir("summary")
    count = 40
    names = [f"w{i:03d}" for i in range(count)]
    program = os.path.join(directory, "m.json")
    data = os.path.join(directory, "m.safetensors")
    with open(program, "w", encoding="utf-8") as handle:
        json.dump(synthetic_program("m", [(name, "F32", [64]) for name in names]), handle)
    write_safetensors(data, {name: tensor("F32", [64], i) for i, name in enumerate(names)})
    out = os.path.join(directory, "o")
    args = ("pack", program + "@" + data, "-o", out, "--max-shard-bytes", "1KiB")
    short = ctx.run_ok(*args).out
    ctx.check(f"renamed keys: {count} (-v lists them)" in short, f"rename count: {short!r}")
    ctx.check(" -> " not in short, f"renames listed by default: {short!r}")
    ctx.check("... " in short and "more (-v lists all)" in short, f"shards not cut: {short!r}")
    ctx.check(len(short.splitlines()) <= 24, f"{len(short.splitlines())} lines by default")
    ctx.check("fill " in short, f"shard fill missing: {short!r}")
    full = ctx.run_ok(*args, "-v").out
    for name in names:
        ctx.check(f"m: {name} -> m/{name}" in full, f"-v lacks the rename of {name}")
    ctx.check(len(re.findall(r"^  #\d+ ", full, re.M)) == len(load_json(
        os.path.join(out, "manifest.json"))["shards"]), "-v lists every shard")


@suite.test
def oversize_own_shard_and_max_shard_tensors(ctx):
    """--oversize own-shard: a tensor over the cap alone in its shard, recorded in the manifest
    and accepted by verify only alone; --max-shard-tensors bounds stored tensors per shard."""
    directory = ctx.mkdir("oversize")
    refused = ctx.run("pack", *fixtures(ctx), "-o", os.path.join(directory, "x"),
                      "--max-shard-bytes", "1000")
    ctx.code(refused, 4, "a tensor over the cap")
    for remedy in ("--max-shard-bytes 2432 or more", "--oversize own-shard"):
        ctx.check(remedy in refused.err, f"remedy {remedy!r} not named: {refused.err!r}")
    out = os.path.join(directory, "own")
    ctx.run_ok("pack", *fixtures(ctx), "-o", out, "--max-shard-bytes", "1000",
               "--oversize", "own-shard", "-q")
    manifest = load_json(os.path.join(out, "manifest.json"))
    ctx.equal(manifest.get("oversize"), "own-shard", "manifest records the oversize shard")
    for shard in manifest["shards"]:
        stored = {manifest["tensors"][k]["sha256"] for k in shard["keys"]}
        if shard["size"] > 1000:
            ctx.equal(len(stored), 1, f"{shard['file']} over the cap holds one stored tensor")
    ctx.check(any(s["size"] > 1000 for s in manifest["shards"]), "no shard over the cap")
    ctx.run_ok("verify", out)
    # Without the manifest's permission the same shard is a problem.
    del manifest["oversize"]
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
        handle.write("\n")
    tampered = ctx.run("verify", out)
    ctx.code(tampered, 1, "over the cap without oversize")
    ctx.check("exceed the cap 1000" in tampered.out + tampered.err, tampered.out + tampered.err)
    # When every tensor fits, --oversize own-shard changes nothing.
    plain, own = (os.path.join(directory, n) for n in ("plain", "own2"))
    ctx.run_ok("pack", *fixtures(ctx), "-o", plain, "--max-shard-bytes", "3000", "-q")
    ctx.run_ok("pack", *fixtures(ctx), "-o", own, "--max-shard-bytes", "3000", "-q",
               "--oversize", "own-shard")
    ctx.equal(tree_differences(snapshot(plain), snapshot(own)), [],
              "own-shard without an oversize tensor")
    for limit in (1, 2, 3):
        out = os.path.join(directory, f"t{limit}")
        ctx.run_ok("pack", *fixtures(ctx), "-o", out, "--max-shard-tensors", str(limit), "-q")
        manifest = load_json(os.path.join(out, "manifest.json"))
        for shard in manifest["shards"]:
            stored = {manifest["tensors"][k]["sha256"] for k in shard["keys"]}
            ctx.check(len(stored) <= limit, f"{limit}: {shard['file']} holds {len(stored)}")
        ctx.run_ok("verify", out)
    result = ctx.run("pack", *fixtures(ctx), "-o", os.path.join(directory, "p.ptn"),
                     "--max-shard-tensors", "2")
    ctx.code(result, 2, "--max-shard-tensors with a .ptn output")


@suite.test
def output_forms_parents_and_case(ctx):
    """Missing parents of -o are made; .PTN is a package; shard options on one file are refused."""
    directory = ctx.mkdir("forms")
    nested = os.path.join(directory, "a", "b", "model.PTN")
    reference = os.path.join(directory, "ref.ptn")
    ctx.run_ok("pack", *fixtures(ctx), "-o", nested, "--quiet")
    ctx.run_ok("pack", *fixtures(ctx), "-o", reference, "--quiet")
    ctx.equal(read_file(nested), read_file(reference), "a .PTN output is the same package")
    shard_dir = os.path.join(directory, "c", "d")
    ctx.run_ok("pack", *fixtures(ctx), "-o", shard_dir, "--quiet")
    ctx.check(os.path.isfile(os.path.join(shard_dir, "manifest.json")), "nested directory output")
    blocker = os.path.join(directory, "file")
    with open(blocker, "w", encoding="utf-8") as handle:
        handle.write("x")
    result = ctx.run("pack", *fixtures(ctx), "-o", os.path.join(blocker, "x.ptn"))
    ctx.code(result, 5, "a parent that is a file")
    ctx.check("is not a directory" in result.err, result.err)
    for option in (["--alignment", "64"], ["--shard-format", "safetensors"],
                   ["--shard-prefix", "w"], ["--cap-mode", "payload"]):
        target = os.path.join(directory, "one.ptn")
        result = ctx.run("pack", *fixtures(ctx), "-o", target, *option)
        ctx.code(result, 2, f"{option[0]} with a .ptn output")
        ctx.check(f"{option[0]} applies to directory outputs" in result.err, result.err)
        ctx.check(not os.path.exists(target), f"{option[0]}: output written")
    result = ctx.run("pack", *fixtures(ctx), "-o", "-")
    ctx.code(result, 2, "-o -")
    ctx.check("not standard output" in result.err, result.err)


@suite.test
def too_small_cap_names_the_key_and_both_sizes(ctx):
    directory = ctx.mkdir("cap")
    for mode, needed in (("file", None), ("payload", 2048)):
        for out in ("o", "o.ptn"):
            target = os.path.join(directory, out)
            result = ctx.run("pack", *fixtures(ctx), "-o", target, "--max-shard-bytes", "1000",
                             "--cap-mode", mode)
            if out == "o.ptn":  # a package has no shards: a cap is a usage error
                ctx.code(result, 2, f"{mode} .ptn with a cap")
                ctx.check(not os.path.exists(target), f"{mode}: .ptn written")
                continue
            ctx.code(result, 4, mode)
            ctx.error_names(result, ["tok_embeddings.weight", "1000"], mode)
            numbers = [int(n) for n in re.findall(r"\d+", result.err)]
            ctx.check(any(n >= 2048 for n in numbers) and (needed is None or needed in numbers),
                      f"{mode}: the tensor's size is not in {result.err!r}")
            ctx.check(not os.path.exists(target) and not temp_leftovers(directory),
                      f"{mode}: output or temp files left")


def check_caps(ctx, source, cap, extra, bound):
    """Packs with a cap; every shard's `bound` (file size or payload) stays within it."""
    out = os.path.join(ctx.mkdir("capped"), "out")
    ctx.run_ok("pack", source, "-o", out, "--max-shard-bytes", str(cap), *extra)
    shards = shards_of(out)
    for name, size, keys, payload in shards:
        measured = size if bound == "file" else payload
        ctx.check(measured <= cap, f"{extra} cap {cap}: {name} has {measured} {bound} bytes")
    ctx.code(ctx.run("verify", out), 0, f"verify of {extra} cap {cap}")
    return out, shards


@suite.test
def file_cap_bounds_every_shard_file(ctx):
    directory = ctx.mkdir("in")
    source = equal_tensors_model(ctx, directory, 12)  # 12 x 3000 bytes
    for cap in (4096 * 2 + 1, 12288, 12289, 16384, 20000, 50000):
        out, shards = check_caps(ctx, source, cap, ["--alignment", "4096"], "file")
        ctx.check(len(shards) >= 2, f"cap {cap}: expected several shards, got {len(shards)}")
        for name, _, _, _ in shards:
            for segment in ptd_reader.parse(os.path.join(out, name))["segments"]:
                ctx.equal(segment["file_offset"] % 4096, 0, f"{name} segment alignment")
    for cap in (3200, 6300, 7000, 10000):
        check_caps(ctx, source, cap, ["--shard-format", "safetensors"], "file")


@suite.test
def file_cap_fit_is_tight_within_the_documented_slack(ctx):
    """docs/shard-planner.md: room in file mode is an upper bound of the file (trailing segment
    padding, safetensors offsets counted with 20 digits, a few dozen bytes per key). A cap of
    the real one-shard size plus that slack keeps one shard; one byte less than the real size
    must split it, and no file may exceed the cap."""
    for extra, alignment in ((["--alignment", "4096"], 4096), ([], 128),
                             (["--shard-format", "safetensors"], 0)):
        directory = ctx.mkdir("exact")
        source = equal_tensors_model(ctx, directory, 2)
        whole = os.path.join(directory, "whole")
        ctx.run_ok("pack", source, "-o", whole, *extra)
        (_, size, _, _), = shards_of(whole)
        _, shards = check_caps(ctx, source, size + alignment + 2 * 64, extra, "file")
        ctx.equal(len(shards), 1, f"{extra}: cap of the one-shard size + slack")
        _, shards = check_caps(ctx, source, size - 1, extra, "file")
        ctx.equal(len(shards), 2, f"{extra}: cap one byte below the one-shard file")


@suite.test
def payload_cap_bounds_unique_tensor_bytes(ctx):
    directory = ctx.mkdir("in")
    source = equal_tensors_model(ctx, directory, 12)
    for cap in (3000, 5999, 6000, 9000, 10000):
        for fmt in ("ptd", "safetensors"):
            _, shards = check_caps(ctx, source, cap, ["--cap-mode", "payload",
                                                      "--shard-format", fmt], "payload")
            ctx.equal(len(shards), math.ceil(12 / (cap // 3000)), f"{fmt} payload cap {cap}")


def first_fit(groups, cap):
    """docs/shard-planner.md "first-fit", written independently: groups [(keys, bytes)]."""
    shards = []
    for keys, size in sorted(groups, key=lambda g: sorted(k.encode() for k in g[0])):
        for shard in shards:
            if shard[1] + size <= cap:
                shard[0].extend(keys)
                shard[1] += size
                break
        else:
            shards.append([list(keys), size])
    return sorted(sorted(keys) for keys, _ in shards)


@suite.test
def payload_first_fit_follows_the_documented_order(ctx):
    sizes = {"a": 700, "b": 500, "c": 400, "d": 300, "e": 200, "f": 100, "g": 600, "h": 50}
    data = {k: tensor("U8", [n], k) for k, n in sizes.items()}
    data["i"] = data["b"]  # stored once with b: one group of two keys
    program = synthetic_program("m", [(k, "U8", t.shape) for k, t in sorted(data.items())])
    source = ctx.write_model(ctx.mkdir("in"), "m", program, data)
    groups = [([f"m/{k}"] + (["m/i"] if k == "b" else []), n) for k, n in sizes.items()]
    expected = first_fit(groups, 1000)
    ctx.equal(expected, [["m/a", "m/d"], ["m/b", "m/c", "m/f", "m/i"], ["m/e", "m/g", "m/h"]],
              "the independent first-fit itself")
    out = os.path.join(ctx.mkdir("out"), "out")
    ctx.run_ok("pack", source, "-o", out, "--max-shard-bytes", "1000", "--cap-mode", "payload")
    actual = sorted(sorted(keys) for _, _, keys, _ in shards_of(out))
    ctx.equal(actual, expected, "shard contents (read from the .ptd files)")


@suite.test
def shard_names_change_only_with_their_contents(ctx):
    for fmt in ("ptd", "safetensors"):
        directory = ctx.mkdir(fmt)
        options = ["--max-shard-bytes", "2048", "--cap-mode", "payload", "--shard-format", fmt]
        trees = {}
        for label, fills in (("before", {}), ("after", {"t05": "changed"})):
            source = equal_tensors_model(ctx, ctx.mkdir(label), 8, (256,), fills)
            out = os.path.join(directory, label)
            ctx.run_ok("pack", source, "-o", out, *options)
            trees[label] = snapshot(out)
        before, after = trees["before"], trees["after"]
        shards_before = {n for n in before if n.startswith("weights-")}
        shards_after = {n for n in after if n.startswith("weights-")}
        ctx.equal(len(shards_before), 4, f"{fmt}: shards for 8 x 1 KiB at 2 KiB")
        ctx.equal((len(shards_before - shards_after), len(shards_after - shards_before)), (1, 1),
                  f"{fmt}: renamed shards")
        for name in shards_before & shards_after:
            ctx.equal(before[name] == after[name], True, f"{fmt}: unchanged shard {name}")
        holder = load_json(os.path.join(directory, "after", "manifest.json"))["tensors"]["m/t05"]
        ctx.check(holder["shard"] in shards_after - shards_before,
                  f"{fmt}: m/t05 is not in the renamed shard")
        ctx.equal(before["program.ptg"], after["program.ptg"], f"{fmt}: program.ptg")
        for name in shards_after:
            match = SHARD_NAME.match(name)
            ctx.check(match and match["prefix"] == "weights" and match["ext"] == fmt,
                      f"{fmt}: shard name {name}")
        # The prefix option changes only the prefix.
        source = equal_tensors_model(ctx, ctx.mkdir("prefix"), 8, (256,))
        out = os.path.join(directory, "prefixed")
        ctx.run_ok("pack", source, "-o", out, *options, "--shard-prefix", "model")
        ctx.equal(sorted(n for n in os.listdir(out) if n.startswith("model-")),
                  sorted("model-" + n[len("weights-"):] for n in shards_before
                         ), f"{fmt}: --shard-prefix names")


@suite.test
def shard_prefix_cannot_leave_the_output_directory(ctx):
    directory = ctx.mkdir("prefix")
    target = os.path.join(directory, "sub", "out")
    os.makedirs(os.path.dirname(target))
    for prefix in ("../evil", "a/b", "", ".hidden", "/abs"):
        result = ctx.run("pack", *fixtures(ctx), "-o", target, "--shard-prefix", prefix)
        ctx.code(result, 2, f"--shard-prefix {prefix!r}")
        ctx.equal(sorted(os.listdir(directory)), ["sub"], f"{prefix!r}: files beside sub/")
        ctx.equal(os.listdir(os.path.dirname(target)), [], f"{prefix!r}: files in sub/")


# ---------------------------------------------------------------- D. output replacement

@suite.test
def existing_outputs_are_replaced_whole_on_success(ctx):
    directory = ctx.mkdir("replace")
    other = equal_tensors_model(ctx, ctx.mkdir("other"), 3, (16,))
    for name in ("out", "out.ptn"):
        target = os.path.join(directory, name)
        prefix = ["--shard-prefix", "old"] if name == "out" else []  # old shard names differ
        ctx.run_ok("pack", *fixtures(ctx), "-o", target, *prefix)
        ctx.run_ok("pack", other, "-o", target)
        fresh = os.path.join(ctx.mkdir("fresh"), name)
        ctx.run_ok("pack", other, "-o", fresh)
        ctx.equal(tree_differences(snapshot(fresh), snapshot(target)), [],
                  f"{name}: replaced output vs a fresh pack")
    ctx.equal(sorted(os.listdir(directory)), ["out", "out.ptn"], "files beside the outputs")


@suite.test
def foreign_directory_needs_force(ctx):
    directory = ctx.mkdir("foreign")
    target = os.path.join(directory, "out")
    os.makedirs(os.path.join(target, "sub"))
    with open(os.path.join(target, "notes.txt"), "w") as handle:
        handle.write("not ptepack's\n")
    before = snapshot(target)
    result = ctx.run("pack", *fixtures(ctx), "-o", target)
    ctx.code(result, 2, "non-ptepack directory without --force")
    ctx.error_names(result, ["out"])
    ctx.equal(tree_differences(before, snapshot(target)), [], "foreign directory changed")
    ctx.equal(temp_leftovers(directory), [], "temp files")
    ctx.run_ok("pack", *fixtures(ctx), "-o", target, "--force")
    fresh = os.path.join(ctx.mkdir("fresh"), "out")
    ctx.run_ok("pack", *fixtures(ctx), "-o", fresh)
    ctx.equal(tree_differences(snapshot(fresh), snapshot(target)), [], "after --force")
    empty = os.path.join(directory, "empty")
    os.makedirs(empty)
    ctx.code(ctx.run("pack", *fixtures(ctx), "-o", empty), 0, "empty existing directory")
    ctx.equal(sorted(os.listdir(directory)), ["empty", "out"], "files beside the outputs")


@suite.test
def output_that_is_an_input_is_refused(ctx):
    directory = ctx.mkdir("self")
    package, folder = os.path.join(directory, "m.ptn"), os.path.join(directory, "m")
    ctx.run_ok("pack", *fixtures(ctx), "-o", package)
    ctx.run_ok("pack", *fixtures(ctx), "-o", folder)
    inputs = ctx.fixture_pair(ctx.mkdir("inputs"))
    cases = [([package], package), ([folder], folder),
             ([os.path.join(folder, "manifest.json")], folder), (inputs, inputs[0])]
    # A directory output holding an input (the program, or only its data) would delete it.
    holder = ctx.mkdir("holder")
    held = ctx.fixture_pair(holder)
    program, _ = ctx.fixture("prefill")
    graph_only = ctx.write_model(ctx.mkdir("graph"), "graph", program, None)
    data_spec = f"prefill={graph_only}@{os.path.join(holder, 'prefill.safetensors')}"
    cases += [(held, holder), ([data_spec, inputs[1]], holder)]
    for args, target in cases:
        before = {p: snapshot(p) for p in (target, *[a.split("=")[-1].split("@")[0]
                                                     for a in args])}
        for force in ([], ["--force"]):
            result = ctx.run("pack", *args, "-o", target, *force)
            ctx.code(result, 2, f"{args} -o {target} {force}")
            for path, tree in before.items():
                ctx.equal(tree_differences(tree, snapshot(path)), [], f"{path} changed")
            ctx.equal(temp_leftovers(os.path.dirname(target)), [], "temp files")


# ---------------------------------------------------------------- E. verify

def packed(ctx, kind):
    """A fresh artifact: 'ptn', 'ptd' (directory) or 'safetensors' (directory)."""
    directory = ctx.mkdir(kind)
    target = os.path.join(directory, "model.ptn" if kind == "ptn" else "model")
    extra = [] if kind == "ptn" else ["--shard-format", kind, "--max-shard-bytes", "3000"]
    ctx.run_ok("pack", *fixtures(ctx), "-o", target, *extra)
    return target


def expect_verify_failure(ctx, path, names, what, *extra):
    result = ctx.run("verify", path, *extra)
    ctx.code(result, 1, what)
    text = result.out + result.err
    for name in names:
        ctx.check(name in text, f"{what}: verify output does not name {name!r}: {text!r}")
    report = ctx.run("verify", path, "--json", *extra)
    ctx.code(report, 1, what + " --json")
    try:
        parsed = report.json()
        ctx.check(parsed["ok"] is False and parsed["problems"], f"{what}: --json report {parsed}")
        # The fields a program reads: no key was given, so no signature was checked; one
        # documented identifier per problem line.
        signature = parsed.get("signature", {"checked": False, "valid": False})  # none: unsigned
        ctx.equal((signature["checked"], signature["valid"]), (False, False),
                  f"{what}: --json signature")
        details = parsed["problem_details"]
        ctx.equal(len(details), len(parsed["problems"]), f"{what}: one detail per problem")
        ctx.equal(sorted({p["id"] for p in details} - PROBLEM_IDS), [],
                  f"{what}: undocumented problem identifiers")
    except ValueError:
        ctx.check(False, f"{what}: verify --json is not JSON: {report.out!r}")


def flip(path, offset):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x20]))


@suite.test
def verify_accepts_fresh_artifacts(ctx):
    for kind in ("ptn", "ptd", "safetensors"):
        target = packed(ctx, kind)
        paths = [target] + ([] if kind == "ptn" else [os.path.join(target, "manifest.json")])
        for path in paths:
            result = ctx.run("verify", path)
            ctx.code(result, 0, f"verify {kind}")
            ctx.equal(result.err, "", f"verify {kind} stderr")
            report = ctx.run("verify", path, "--json").json()
            ctx.equal((report["ok"], report["problems"]), (True, []), f"verify --json {kind}")


def shard_offsets(path, size):
    """Offsets worth corrupting: header bytes, flatbuffer/JSON, tensor data, the last byte."""
    if path.endswith(".ptd"):
        data = ptd_reader.parse(path)["segments"][0]["file_offset"]
        return [0, 5, 9, 20, 50, 60, data - 1, data, data + 3, size - 1]
    length = int.from_bytes(read_file(path)[:8], "little")
    return [0, 1, 8, 8 + length // 2, 8 + length + 1, size - 1]


@suite.test
def verify_finds_flipped_shard_bytes(ctx):
    for kind in ("ptd", "safetensors"):
        target = packed(ctx, kind)
        manifest = load_json(os.path.join(target, "manifest.json"))
        for shard in manifest["shards"] + [manifest["program"]]:
            original = os.path.join(target, shard["file"])
            offsets = (shard_offsets(original, shard["size"]) if shard["file"].startswith("weights")
                       else [0, 4, shard["size"] // 2, shard["size"] - 1])
            for offset in sorted(set(offsets)):
                copy = os.path.join(ctx.mkdir("flip"), "model")
                shutil.copytree(target, copy)
                flip(os.path.join(copy, shard["file"]), offset)
                expect_verify_failure(ctx, copy, [shard["file"]],
                                      f"{kind}: byte {offset} of {shard['file']} flipped")


@suite.test
def verify_finds_missing_stray_and_edited_files(ctx):
    for kind in ("ptd", "safetensors"):
        target = packed(ctx, kind)
        manifest = load_json(os.path.join(target, "manifest.json"))
        shard = manifest["shards"][0]["file"]

        def variant(change):
            copy = os.path.join(ctx.mkdir("v"), "model")
            shutil.copytree(target, copy)
            change(copy)
            return copy
        expect_verify_failure(ctx, variant(lambda d: os.remove(os.path.join(d, shard))), [shard],
                              f"{kind}: shard deleted")
        expect_verify_failure(ctx, variant(lambda d: os.remove(os.path.join(d, "program.ptg"))),
                              ["program.ptg"], f"{kind}: program deleted")
        expect_verify_failure(
            ctx, variant(lambda d: shutil.copy(os.path.join(d, shard),
                                               os.path.join(d, "extra.ptd"))),
            ["extra.ptd"], f"{kind}: stray file")

        def edit(path_in_manifest, value):
            def change(copy):
                data = load_json(os.path.join(copy, "manifest.json"))
                node = data
                for step in path_in_manifest[:-1]:
                    node = node[step]
                node[path_in_manifest[-1]] = value(node[path_in_manifest[-1]])
                with open(os.path.join(copy, "manifest.json"), "w") as handle:
                    json.dump(data, handle, indent=2)
            return change
        other_digit = lambda h: ("1" if h[0] == "0" else "0") + h[1:]
        some_key = manifest["shards"][0]["keys"][0]
        # A recorded tensor digest edited while its shard is the recorded file: only
        # --tensors hashes tensors on their own; by default the shard's digest proves them.
        tensor_digest = variant(edit(["tensors", some_key, "sha256"], other_digit))
        expect_verify_failure(ctx, tensor_digest, [some_key],
                              f"{kind}: manifest tensor digest edited, --tensors", "--tensors")
        ctx.code(ctx.run("verify", tensor_digest), 0,
                 f"{kind}: a tensor digest edited is not looked for without --tensors")
        for path, names in ((["shards", 0, "sha256"], [shard]),
                            (["program", "sha256"], ["program.ptg"])):
            expect_verify_failure(ctx, variant(edit(path, other_digit)), names,
                                  f"{kind}: manifest {'/'.join(map(str, path))} edited")
        expect_verify_failure(ctx, variant(edit(["shards", 0, "size"], lambda n: n + 1)), [shard],
                              f"{kind}: manifest shard size edited")
        expect_verify_failure(ctx, variant(edit(["tensors", some_key, "shape"],
                                                lambda s: s + [1])),
                              [some_key], f"{kind}: manifest shape edited")


@suite.test
def verify_finds_flipped_package_bytes(ctx):
    target = packed(ctx, "ptn")
    ptn = read_ptn(target)
    size = os.path.getsize(target)
    names = ptn["offsets"]
    offsets = [names["program.ptg"], names["program.ptg"] + 100,
               names["program.safetensors"] + 2, names["program.safetensors"] + 600,
               names["aliases.json"] + 5, 0, size - 10]
    for offset in offsets:
        copy = os.path.join(ctx.mkdir("flip"), "model.ptn")
        shutil.copy(target, copy)
        flip(copy, offset)
        expect_verify_failure(ctx, copy, ["model.ptn"], f"package byte {offset} flipped")
        ctx.run("dump", copy, "--json")  # any exit but a crash (checked by run)


@suite.test
def corrupted_package_never_crashes(ctx):
    """Flips one byte at a time over the whole package: every command must end with a
    documented exit code (70 means an internal error escaped); when verify or pack accepts the
    copy, the flipped byte must have been meaningless: repacking gives the original bytes."""
    target = packed(ctx, "ptn")
    original = read_file(target)
    work = ctx.mkdir("sweep")
    copy, out = os.path.join(work, "model.ptn"), os.path.join(work, "out.ptn")
    problems = []
    for offset in range(0, len(original), max(1, len(original) // 80)):
        shutil.copy(target, copy)
        flip(copy, offset)
        codes = {}
        for argv in (["verify", copy], ["verify", copy, "--json"], ["dump", copy, "--json"],
                     ["pack", copy, "-o", out]):
            result = ctx.run(*argv)
            codes[" ".join(argv[:1] + argv[2:3])] = result.code
            if result.code not in (0, 1, 2, 3, 4, 5):
                problems.append(f"byte {offset}: {' '.join(argv[:1] + argv[2:3])} -> exit "
                                f"{result.code}: {result.err.strip()[-100:]}")
        if codes["pack -o"] == 0 and read_file(out) != original:
            problems.append(f"byte {offset}: pack accepted the corrupted package and wrote "
                            f"different bytes (verify exit {codes['verify']})")
        if codes["verify"] == 0 and codes["pack -o"] != 0:
            problems.append(f"byte {offset}: verify passed but pack refused the package")
        if os.path.exists(out):
            os.remove(out)
    ctx.failures.extend(problems[:8] + ([f"... {len(problems) - 8} more"]
                                        if len(problems) > 8 else []))

@suite.test
def repacking_corrupted_artifacts_is_refused(ctx):
    package, folder = packed(ctx, "ptn"), packed(ctx, "ptd")
    member = read_ptn(package)["offsets"]["program.safetensors"]
    header = int.from_bytes(read_file(package)[member:member + 8], "little")
    tensor_data = member + 8 + header + 100
    shard = load_json(os.path.join(folder, "manifest.json"))["shards"][-1]["file"]
    last_segment = ptd_reader.parse(os.path.join(folder, shard))["segments"][-1]["file_offset"]
    for source, member, offset in ((package, None, tensor_data), (folder, shard, last_segment + 5)):
        work = ctx.mkdir("corrupt")
        copy = os.path.join(work, os.path.basename(source))
        (shutil.copytree if member else shutil.copy)(source, copy)
        flip(os.path.join(copy, member) if member else copy, offset)
        verified = ctx.run("verify", copy)
        ctx.code(verified, 1, f"verify of corrupted {os.path.basename(copy)}")
        for out in ("out.ptn", "out"):
            result = ctx.run("pack", copy, "-o", os.path.join(work, out))
            # A package is refused by its reader (its CRC-32s); a directory with verify's
            # own problem lines and its first problem's exit code (docs/problems.md).
            ctx.code(result, 3,
                     f"pack of corrupted {os.path.basename(copy)} -o {out}")
            if member:
                ctx.equal(result.err.splitlines(), verified.err.splitlines()[:1],
                          "pack's error line is verify's first")
            ctx.check(not os.path.exists(os.path.join(work, out)),
                      f"pack of corrupted {os.path.basename(copy)} wrote {out}")


def rename_everywhere(program, tensors, aliases, old, new):
    """Renames a data key in a flatc Program JSON, the tensors and the alias map."""
    text = json.dumps(program).replace(json.dumps(old), json.dumps(new))
    tensors = {(new if k == old else k): v for k, v in tensors.items()}
    aliases = {(new if k == old else k): (new if v == old else v) for k, v in aliases.items()}
    return json.loads(text), tensors, aliases


@suite.test
def verify_checks_the_rules_of_a_hand_made_package(ctx):
    source = packed(ctx, "ptn")
    ptn = read_ptn(source)
    program, tensors, aliases = ctx.flatc_json(ptn["program"]), ptn["tensors"], ptn["aliases"]
    work = ctx.mkdir("made")

    def case(name, program_json, data, alias_map, expected, names, align=64):
        path = os.path.join(work, name + ".ptn")
        ctx.write_ptn(path, program_json, data, alias_map, align)
        if align:
            ctx.check(all(o % align == 0 for o in read_ptn(path)["offsets"].values()),
                      f"{name}: the test's own writer did not align")
        result = ctx.run("verify", path)
        ctx.code(result, expected, f"verify {name}")
        text = result.out + result.err
        for needle in names:
            ctx.check(needle in text, f"{name}: verify output does not name {needle!r}: {text!r}")

    case("control", program, tensors, aliases, 0, [])
    ctx.code(ctx.run("pack", os.path.join(work, "control.ptn"), "-o", os.path.join(work, "re.ptn")),
             0, "pack of the hand-made package")
    ctx.equal(read_file(os.path.join(work, "re.ptn")), read_file(source),
              "hand-made package repacked by ptepack")
    case("unnamespaced_key",
         *rename_everywhere(program, tensors, aliases, "prefill/_lifted_tensor_constant0",
                            "_lifted_tensor_constant0"), 1, ["_lifted_tensor_constant0"])
    case("wrong_method_namespace",
         *rename_everywhere(program, tensors, aliases, "prefill/_lifted_tensor_constant0",
                            "decode/_lifted_tensor_constant1"), 1,
         ["decode/_lifted_tensor_constant1"])
    case("state_key_outside_state",
         *rename_everywhere(program, tensors, aliases, "state/pos", "pos"), 1, ["pos"])
    key = "tok_embeddings.weight"
    swapped = dict(tensors)
    swapped[f"prefill/{key}"] = swapped.pop(f"decode/{key}")
    flipped = {k: v for k, v in aliases.items() if k != f"prefill/{key}"}
    flipped[f"decode/{key}"] = f"prefill/{key}"
    case("owner_not_smallest", program, swapped, flipped, 1, [f"decode/{key}"])
    twice = dict(tensors, **{f"prefill/{key}": tensors[f"decode/{key}"]})
    case("duplicate_stored_twice", program, twice,
         {k: v for k, v in aliases.items() if k != f"prefill/{key}"}, 1, [key])
    case("state_key_aliased", program, {k: v for k, v in tensors.items() if k != "state/pos"},
         dict(aliases, **{"state/pos": "decode/_lifted_tensor_constant0"}), 1, ["state/pos"])
    case("missing_data", program,
         {k: v for k, v in tensors.items() if k != "decode/_lifted_tensor_constant0"}, aliases, 1,
         ["decode/_lifted_tensor_constant0"])
    case("unreferenced_data", program, dict(tensors, **{"decode/extra": tensor("U8", [8], 1)}),
         aliases, 1, ["decode/extra"])


@suite.test
def verify_notes_unaligned_package_entries(ctx):
    # Unaligned entries are valid ZIP (ExecuTorch's write_ptn writes them): a note, not a
    # problem; --strict makes it one.
    ptn = read_ptn(packed(ctx, "ptn"))
    path = os.path.join(ctx.mkdir("unaligned"), "unaligned.ptn")
    ctx.write_ptn(path, ctx.flatc_json(ptn["program"]), ptn["tensors"], ptn["aliases"], align=0)
    offsets = read_ptn(path)["offsets"]
    ctx.require(any(o % 64 for o in offsets.values()), f"test setup: {offsets} all aligned")
    result = ctx.run("verify", path)
    ctx.code(result, 0, "verify of an unaligned package")
    ctx.check("ptepack: note:" in result.err and "align" in result.err,
              f"verify does not note the alignment: {result.err!r}")
    result = ctx.run("verify", path, "--strict")
    ctx.code(result, 1, "verify --strict of an unaligned package")


@suite.test
def verify_of_a_missing_path_is_an_io_error(ctx):
    missing = os.path.join(ctx.mkdir("missing"), "absent.ptn")
    for argv in (["dump", missing], ["verify", missing], ["verify", missing, "--json"]):
        result = ctx.run(*argv)
        ctx.code(result, 5, " ".join(argv[:1] + argv[2:]))
        ctx.error_names(result, ["absent.ptn"], argv[0])


@suite.test
def corrupt_program_in_a_directory_input_is_refused(ctx):
    out = os.path.join(ctx.mkdir("dir"), "model")
    ctx.run_ok("pack", *fixtures(ctx), "-o", out, "-q")
    program = os.path.join(out, "program.ptg")
    data = bytearray(open(program, "rb").read())
    at = data.find(b"aten.linear")
    ctx.check(at > 0, "fixture program has an aten.linear target")
    data[at:at + 4] = b"XXXX"
    open(program, "wb").write(bytes(data))
    target = os.path.join(ctx.tmp, "again.ptn")
    result = ctx.run("pack", out, "-o", target)
    ctx.equal(result.code, 3, "exit code for a corrupt program.ptg (file_changed's)")
    ctx.check("program.ptg: SHA-256 differs from the manifest" in result.err,
              f"message: {result.err!r}")
    ctx.equal(result.err, ctx.run("verify", out).err, "the same lines as verify")
    ctx.check(not os.path.exists(target), "output written despite the error")


@suite.test
def data_option_on_a_packed_input_is_a_usage_error(ctx):
    package = os.path.join(ctx.mkdir("pkg"), "model.ptn")
    ctx.run_ok("pack", *fixtures(ctx), "-o", package, "-q")
    safetensors = os.path.join(ctx.data, "prefill.safetensors")
    result = ctx.run("pack", f"{package}@{safetensors}", "-o", os.path.join(ctx.tmp, "x.ptn"))
    ctx.equal(result.code, 2, "exit code for @DATA on a package")
    ctx.check("@DATA" in result.err, f"message: {result.err!r}")


if __name__ == "__main__":
    suite.main()
