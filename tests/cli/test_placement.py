#!/usr/bin/env python3
# Placement by sharing set: variants of the real XNNPACK program (three named-data weights
# with new bytes and new keys, as a fine-tune gives) packed together never share a shard
# across different sets of programs, so each program loads only what it uses; one program
# packs to the same bytes either way; --placement single keeps one first-fit; verify checks
# each shard's `programs`. Checked from the files with tests/tools readers.
import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import ROOT, Suite, load_json, read_file, snapshot  # noqa: E402
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)
import ptd_reader  # noqa: E402

suite = Suite()
STRESS = "xnnpack_stress_mlp"


def variant(ctx, directory, name, changes):
    """The stress program with the named-data entries `changes` ({index: seed}) given new
    bytes, and their keys (the SHA-256 hex XNNPACK names them by, inside its blobs too)
    replaced by the new digests everywhere in the file."""
    source = os.path.join(ctx.data, "pte", STRESS + ".pte")
    parsed, blob = pte_reader.load(source)
    data = bytearray(blob)
    entries = parsed["program"]["named_data"]
    for index, seed in changes.items():
        start, size = pte_reader.segment_range(parsed, entries[index]["segment_index"])
        for i in range(0, size, 97):
            data[start + i] ^= seed
        new_key = hashlib.sha256(bytes(data[start:start + size])).hexdigest().encode()
        data = bytearray(bytes(data).replace(entries[index]["key"].encode(), new_key))
    path = os.path.join(directory, name)
    with open(path, "wb") as handle:
        handle.write(bytes(data))
    ctx.run_ok("verify", path)
    return path


def needed_keys(out, entry):
    """Keys a slim program of the directory reads: its EXTERNAL tensors' names (read from the
    program itself) and the named data the manifest lists for it."""
    parsed, _ = pte_reader.load(os.path.join(out, entry["file"]))
    keys = {pte_reader.fqn(t) for _, _, _, t in pte_reader.tensors(parsed)
            if pte_reader.classify(t) == "external"}
    return keys | set(entry["named_data"])


def shard_contents(out, manifest):
    """{shard file: {key: (segment file offset, size)}} read from the .ptd files."""
    contents = {}
    for shard in manifest["shards"]:
        parsed = ptd_reader.parse(os.path.join(out, shard["file"]))
        contents[shard["file"]] = {
            e["key"]: (parsed["segments"][e["segment_index"]]["file_offset"],
                       parsed["segments"][e["segment_index"]]["size"])
            for e in parsed["named_data"]}
    return contents


def check_sets(ctx, out, what):
    """Every key of a shard is needed by exactly the programs the shard lists (its sharing
    set), and each program loads at most 5 % more than the distinct bytes it reads."""
    manifest = load_json(os.path.join(out, "manifest.json"))
    contents = shard_contents(out, manifest)
    needs = {p["file"]: needed_keys(out, p) for p in manifest["programs"]}
    for shard in manifest["shards"]:
        listed = shard.get("programs")
        ctx.check(listed, f"{what}: {shard['file']} names no programs")
        for key in contents[shard["file"]]:
            users = sorted(f for f, keys in needs.items() if key in keys)
            ctx.equal(users, sorted(listed or []),
                      f"{what}: key {key[:20]} of {shard['file']} is used by another set")
    # Sets in placement order (docs/shard-planner.md): each set's shards together, larger sets
    # first, sets of one size by the smallest key they store.
    order = []
    for shard in manifest["shards"]:
        listed = tuple(shard.get("programs") or [])
        if not order or order[-1] != listed:
            ctx.check(listed not in order, f"{what}: the shards of set {listed} are not together")
            order.append(listed)
    smallest = {listed: min(k for shard in manifest["shards"]
                            if tuple(shard.get("programs") or []) == listed
                            for k in contents[shard["file"]]) for listed in order}
    ctx.equal(order, sorted(order, key=lambda listed: (-len(listed), smallest[listed])),
              f"{what}: sets in placement order")
    waste = waste_of(out, manifest, contents, needs)
    for p in manifest["programs"]:
        ctx.check(waste[p["file"]] <= 0.05, f"{what}: {p['file']} loads {waste[p['file']]:.1%} "
                  "beyond what it uses")
        listing = [s["file"] for s in manifest["shards"] if p["file"] in s.get("programs", [])]
        ctx.equal(p["shards"], listing, f"{what}: {p['file']}'s shard list, in shard order")
    return waste


def waste_of(out, manifest=None, contents=None, needs=None):
    """{program: bytes of its data files / distinct bytes it reads of them - 1}."""
    manifest = manifest or load_json(os.path.join(out, "manifest.json"))
    contents = contents or shard_contents(out, manifest)
    needs = needs or {p["file"]: needed_keys(out, p) for p in manifest["programs"]}
    sizes = {s["file"]: s["size"] for s in manifest["shards"]}
    waste = {}
    for p in manifest["programs"]:
        ranges = {(shard, where) for shard in p["shards"]
                  for key, where in contents[shard].items() if key in needs[p["file"]]}
        used = sum(size for _, (_, size) in ranges)
        waste[p["file"]] = sum(sizes[s] for s in p["shards"]) / used - 1
    return waste


@suite.test
def variants_each_load_only_their_own_bytes(ctx):
    d = ctx.mkdir()
    base = shutil.copy(os.path.join(ctx.data, "pte", STRESS + ".pte"), os.path.join(d, "base.pte"))
    v1 = variant(ctx, d, "v1.pte", {0: 1, 1: 1, 2: 1})
    v2 = variant(ctx, d, "v2.pte", {5: 2, 6: 2, 7: 2})
    out = os.path.join(d, "sets")
    ctx.run_ok("pack", base, v1, v2, "-o", out, "--max-shard-bytes", "600KB", "-q")
    ctx.run_ok("verify", out)
    waste = check_sets(ctx, out, "base + 2 variants")
    # The same inputs in one first-fit: every program loads shards others need.
    single = os.path.join(d, "single")
    ctx.run_ok("pack", base, v1, v2, "-o", single, "--max-shard-bytes", "600KB", "--placement",
               "single", "-q")
    ctx.run_ok("verify", single)
    single_waste = waste_of(single)
    ctx.check(max(single_waste.values()) > 0.15,
              f"one first-fit over everything should load others' bytes: {single_waste}")
    ctx.check(max(waste.values()) <= 0.05, f"waste {waste}")
    # Deterministic for any -j, and a repack reproduces it.
    again = os.path.join(d, "again")
    ctx.run_ok("pack", base, v1, v2, "-o", again, "--max-shard-bytes", "600KB", "-q", "-j", "1")
    ctx.equal(snapshot(again), snapshot(out), "-j1 against all cores")
    repacked = os.path.join(d, "repacked")
    ctx.run_ok("pack", out, "-o", repacked, "--max-shard-bytes", "600KB", "-q")
    ctx.equal(snapshot(repacked), snapshot(out), "pack DIR reproduces DIR")
    text = ctx.run_ok("dump", out).out
    ctx.check(text.count("loads ") == 3 and "beyond" in text, "dump shows each program's load")


@suite.test
def three_programs_with_pairwise_overlaps(ctx):
    """P1 and P2 share new weights, P2 and P3 share others: every subset's bytes are in shards
    only that subset lists."""
    d = ctx.mkdir()
    p1 = variant(ctx, d, "p1.pte", {0: 1, 1: 1, 2: 1})
    p2 = variant(ctx, d, "p2.pte", {0: 1, 1: 1, 2: 1, 5: 2, 6: 2, 7: 2})
    p3 = variant(ctx, d, "p3.pte", {5: 2, 6: 2, 7: 2})
    for cap in ("600KB", None):
        out = os.path.join(d, f"out_{cap}")
        ctx.run_ok("pack", p1, p2, p3, "-o", out, "-q", *(["--max-shard-bytes", cap] if cap else []))
        ctx.run_ok("verify", out)
        check_sets(ctx, out, f"three programs, cap {cap}")
        sets = {tuple(s["programs"]) for s in load_json(os.path.join(out, "manifest.json"))["shards"]}
        ctx.check({("p1.pte", "p2.pte"), ("p2.pte", "p3.pte"), ("p1.pte",), ("p3.pte",),
                   ("p1.pte", "p2.pte", "p3.pte")} <= sets, f"cap {cap}: sharing sets {sets}")


@suite.test
def one_program_packs_the_same_bytes_either_way(ctx):
    d = ctx.mkdir()
    for stem in ("xnnpack_stress_mlp", "portable_keyword_spotting"):
        source = os.path.join(ctx.data, "pte", stem + ".pte")
        a, b = os.path.join(d, stem + "_sets"), os.path.join(d, stem + "_single")
        ctx.run_ok("pack", source, "-o", a, "--max-shard-bytes", "300KB", "-q")
        ctx.run_ok("pack", source, "-o", b, "--max-shard-bytes", "300KB", "--placement", "single",
                   "-q")
        ctx.equal(snapshot(a), snapshot(b), f"{stem}: one program, same files")
        ctx.check(all("programs" not in s for s in load_json(os.path.join(a, "manifest.json"))["shards"]),
                  f"{stem}: no per-shard programs with one program")


@suite.test
def verify_checks_each_shards_programs(ctx):
    d = ctx.mkdir()
    base = os.path.join(ctx.data, "pte", STRESS + ".pte")
    v1 = variant(ctx, d, "v1.pte", {0: 1, 1: 1, 2: 1})
    out = os.path.join(d, "out")
    ctx.run_ok("pack", base, v1, "-o", out, "--max-shard-bytes", "600KB", "-q")
    path = os.path.join(out, "manifest.json")
    manifest = load_json(path)
    manifest["shards"][-1]["programs"] = ["v1.pte", "xnnpack_stress_mlp.pte"]
    if manifest["shards"][-1]["programs"] == load_json(path)["shards"][-1]["programs"]:
        manifest["shards"][-1]["programs"] = ["v1.pte"]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
    result = ctx.run("verify", out)
    ctx.code(result, 1, "a shard naming the wrong programs")
    ctx.check("differ from the programs that list it" in result.err, result.err)
    result = ctx.run("pack", out, "-o", os.path.join(d, "again"))
    ctx.code(result, 3, "pack refuses it with verify's lines")
    # A directory written before shards named their programs (no such field) still verifies.
    older = os.path.join(d, "older")
    ctx.run_ok("pack", base, v1, "-o", older, "--max-shard-bytes", "600KB", "-q")
    manifest = load_json(os.path.join(older, "manifest.json"))
    for shard in manifest["shards"]:
        del shard["programs"]
    with open(os.path.join(older, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
    ctx.run_ok("verify", older)
    # A program listing a shard that holds none of its keys loads it for nothing.
    extra = os.path.join(d, "extra")
    ctx.run_ok("pack", base, v1, "-o", extra, "--max-shard-bytes", "600KB", "-q")
    manifest = load_json(os.path.join(extra, "manifest.json"))
    first, second = manifest["programs"]
    unneeded = next(s for s in second["shards"] if s not in first["shards"])
    first["shards"].append(unneeded)
    for shard in manifest["shards"]:
        if shard["file"] == unneeded:
            shard["programs"] = [first["file"], second["file"]]
    with open(os.path.join(extra, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
    result = ctx.run("verify", extra)
    ctx.code(result, 1, "a program listing a shard it does not need")
    ctx.check("holds none of its keys" in result.err, result.err)


@suite.test
def clashing_external_keys_are_qualified_not_a_conflict(ctx):
    """Two exports with the same parameter names and different values (LoRA adapters): each
    program's clashing EXTERNAL keys get its stem, equal ones stay shared, and every slim
    program reads back its own original bytes."""
    d = ctx.mkdir()
    pair = os.path.join(ctx.data, "pte", "external_pair")
    programs = {}
    for stem, change in (("external_pair", False), ("adapter", True)):
        shutil.copy(pair + ".pte", os.path.join(d, stem + ".pte"))
        ptd = os.path.join(d, stem + ".ptd")
        shutil.copy(pair + ".ptd", ptd)
        entries, parsed = pte_reader.read_ptd(ptd)
        if change:  # "a" gets other values; "b" stays as it is
            segment = parsed["segments"][entries["a"]["segment_index"]]
            blob = bytearray(read_file(ptd))
            blob[segment["file_offset"]] ^= 0x40
            with open(ptd, "wb") as handle:
                handle.write(bytes(blob))
        programs[stem] = {k: v["bytes"] for k, v in pte_reader.read_ptd(ptd)[0].items()}
    out = os.path.join(d, "out")
    result = ctx.run("pack", os.path.join(d, "external_pair.pte"), os.path.join(d, "adapter.pte"),
                     "-o", out, "-v")
    ctx.code(result, 0, "clashing EXTERNAL keys")
    ctx.run_ok("verify", out)
    manifest = load_json(os.path.join(out, "manifest.json"))
    ctx.equal(sorted(manifest["tensors"]), ["a@adapter", "a@external_pair", "b"], "keys")
    contents = shard_contents(out, manifest)
    for entry in manifest["programs"]:
        stem = entry["file"][:-4]
        parsed, _ = pte_reader.load(os.path.join(out, entry["file"]))
        for _, _, _, tensor in pte_reader.tensors(parsed):
            if pte_reader.classify(tensor) != "external":
                continue
            key = pte_reader.fqn(tensor)
            shard = next(s for s in entry["shards"] if key in contents[s])
            offset, size = contents[shard][key]
            data = read_file(os.path.join(out, shard))[offset:offset + size]
            original = key.split("@")[0]
            ctx.equal(data, programs[stem][original], f"{stem}: {key} holds its own bytes")
    ctx.check("a@adapter" in result.out, "the summary lists the qualified keys")


@suite.test
def the_one_data_file_recipe_gives_one_data_file(ctx):
    """Two programs sharing some weights, uncapped: the default placement gives each more
    than one shard, and the note's remedy, which the README and docs/format-pte.md give in
    the same words, gives each exactly one."""
    d = ctx.mkdir()
    base = shutil.copy(os.path.join(ctx.data, "pte", STRESS + ".pte"), os.path.join(d, "base.pte"))
    v1 = variant(ctx, d, "v1.pte", {0: 1})
    out = os.path.join(d, "sets")
    result = ctx.run_ok("pack", base, v1, "-o", out)
    manifest = load_json(os.path.join(out, "manifest.json"))
    ctx.check(all(len(p["shards"]) > 1 for p in manifest["programs"]),
              "the default placement: more than one shard per program")
    note = next((line for line in result.out.splitlines() if "needs 2 data files" in line), "")
    ctx.require("(" in note and " for one)" in note, f"the note: {result.out}")
    remedy = note[note.rindex("(") + 1:note.index(" for one)")]
    for doc in ("README.md", os.path.join("docs", "format-pte.md")):
        with open(os.path.join(ROOT, doc), encoding="utf-8") as handle:
            text = " ".join(handle.read().split())
        ctx.check(remedy in text, f"{doc} does not give the note's remedy {remedy!r}")
    one = os.path.join(d, "one")
    ctx.run_ok("pack", base, v1, "-o", one, *remedy.replace("pack with ", "").replace(
        " and without --max-shard-bytes", "").split(), "-q")
    manifest = load_json(os.path.join(one, "manifest.json"))
    ctx.equal([len(p["shards"]) for p in manifest["programs"]], [1, 1], "the remedy")


@suite.test
def placement_is_a_directory_option(ctx):
    d = ctx.mkdir()
    base = os.path.join(ctx.data, "pte", STRESS + ".pte")
    result = ctx.run("pack", base, "-o", os.path.join(d, "x.pte"), "--placement", "single")
    ctx.code(result, 2, "--placement with a .pte output")
    result = ctx.run("pack", base, "-o", os.path.join(d, "x"), "--placement", "mixed")
    ctx.code(result, 2, "an unknown placement")


if __name__ == "__main__":
    suite.main()
