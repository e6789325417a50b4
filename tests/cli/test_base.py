#!/usr/bin/env python3
# pack --base OLD: a new release keeps the previous release's shard files whole where they
# still hold the right bytes, so a device holding OLD downloads about what changed. Variants
# of the real XNNPACK program (named-data weights with new bytes and new keys, a constant
# changed in place) and of the program-graph example; the download, the changed bytes, the
# files and every key are read from the directories with tests/tools readers.
import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, load_json, read_file, snapshot  # noqa: E402
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)
import ptd_reader  # noqa: E402
from test_placement import STRESS, variant  # noqa: E402

suite = Suite()
CAP = "600KB"


def files_of(out):
    """{file name: SHA-256 hex} of a packed directory, manifest aside."""
    return {name: hashlib.sha256(read_file(os.path.join(out, name))).hexdigest()
            for name in os.listdir(out) if name != "manifest.json"}


def download(old, new):
    """Bytes of NEW's files whose name and SHA-256 OLD lacks (the issue's definition)."""
    before = files_of(old)
    return sum(os.path.getsize(os.path.join(new, name))
               for name, digest in files_of(new).items() if before.get(name) != digest)


def stored_keys(out):
    """{shard file: {key: SHA-256 hex of its bytes}} read from the .ptd files."""
    out_keys = {}
    for name in os.listdir(out):
        if not name.endswith(".ptd"):
            continue
        path = os.path.join(out, name)
        parsed = ptd_reader.parse(path)
        data = read_file(path)
        keys = {}
        for entry in parsed["named_data"]:
            segment = parsed["segments"][entry["segment_index"]]
            start = segment["file_offset"]
            keys[entry["key"]] = (hashlib.sha256(data[start:start + segment["size"]]).hexdigest(),
                                  segment["size"])
        out_keys[name] = keys
    return out_keys


def live_keys(out):
    """{key: (sha, size)} of the keys NEW's programs read (stale keys of reused shards aside)."""
    manifest = load_json(os.path.join(out, "manifest.json"))
    keys = {}
    for shard, entries in stored_keys(out).items():
        entry = next(s for s in manifest["shards"] if s["file"] == shard)
        for key, value in entries.items():
            if key not in entry.get("stale", []):
                keys[key] = value
    return keys


def changed(old, new):
    """Payload of NEW's keys whose (key, SHA-256) OLD lacks (distinct bytes), plus NEW's
    program files OLD lacks."""
    before = {(k, v[0]) for keys in stored_keys(old).values() for k, v in keys.items()}
    contents = {}
    for key, (sha, size) in live_keys(new).items():
        if (key, sha) not in before:
            contents[sha] = size
    old_files = files_of(old)
    programs = sum(os.path.getsize(os.path.join(new, name))
                   for name, digest in files_of(new).items()
                   if name.endswith((".pte", ".ptg")) and old_files.get(name) != digest)
    return sum(contents.values()) + programs


def check_release(ctx, old, new, what, bound=1.10):
    """verify passes; no program meets a key in two of its files; the download stays within
    `bound` of the changed bytes; the summary's figures are the independent ones."""
    ctx.run_ok("verify", new)
    manifest = load_json(os.path.join(new, "manifest.json"))
    contents = stored_keys(new)
    for program in manifest.get("programs", []):
        seen = {}
        for shard in program["shards"]:
            for key in contents[shard]:
                ctx.check(key not in seen, f"{what}: {program['file']} meets {key[:24]} in "
                          f"{seen.get(key)} and {shard}")
                seen[key] = shard
    moved, delta = download(old, new), changed(old, new)
    ctx.check(moved <= bound * delta, f"{what}: download {moved} against {delta} changed")
    return moved, delta


def pack_json(ctx, *argv):
    return ctx.run_ok("pack", *argv, "--json").json()


def write_json(path, document):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2)


def xor_byte(path, offset, mask):
    """Changes one byte of a file in place."""
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ mask]))


def with_constant_changed(ctx, directory, name, xor):
    """The stress program with its first stored constant's first byte changed (same key)."""
    path = shutil.copy(os.path.join(ctx.data, "pte", STRESS + ".pte"), os.path.join(directory, name))
    parsed, data = pte_reader.load(path)
    constant = pte_reader.stored_constants(parsed, data)[0]
    offset, _ = pte_reader.constant_location(parsed, constant["tensor"])
    xor_byte(path, offset, xor)
    return path


@suite.test
def a_release_downloads_only_what_changed(ctx):
    d = ctx.mkdir()
    r1, r2 = os.path.join(d, "r1"), os.path.join(d, "r2")
    os.makedirs(r1)
    os.makedirs(r2)
    shutil.copy(os.path.join(ctx.data, "pte", STRESS + ".pte"), os.path.join(r1, "model.pte"))
    variant(ctx, r2, "model.pte", {0: 5, 7: 9, 13: 3})
    old, new = os.path.join(d, "old"), os.path.join(d, "new")
    ctx.run_ok("pack", os.path.join(r1, "model.pte"), "-o", old, "--max-shard-bytes", CAP, "-q")
    summary = pack_json(ctx, os.path.join(r2, "model.pte"), "-o", new, "--max-shard-bytes", CAP,
                        "--base", old)
    moved, delta = check_release(ctx, old, new, "release 2")
    base = summary["base"]
    ctx.equal(base["download_bytes"], moved, "the summary's download")
    ctx.equal(base["changed_bytes"], delta, "the summary's changed bytes")
    ctx.check(base["shards_reused"] >= 1 and base["shards_new"] >= 1, f"summary {base}")
    ctx.check(all(s["reused"] == (i < base["shards_reused"]) for i, s in
                  enumerate(summary["shards"])), "reused shards come first")
    # Without --base the same release re-sends several times what changed.
    fresh = os.path.join(d, "fresh")
    ctx.run_ok("pack", os.path.join(r2, "model.pte"), "-o", fresh, "--max-shard-bytes", CAP, "-q")
    ctx.check(download(old, fresh) > 1.5 * delta, "the measure tells the two apart")
    # Stale keys are listed, and every reused shard keeps OLD's name and bytes.
    manifest = load_json(os.path.join(new, "manifest.json"))
    stale = [k for s in manifest["shards"] for k in s.get("stale", [])]
    ctx.check(len(stale) >= 1, "the changed weights' old keys are stale")
    for key in stale:
        ctx.check(key not in manifest["tensors"], f"stale {key[:24]} is not a tensor")
    for shard in manifest["shards"]:
        before = os.path.join(old, shard["file"])
        if os.path.exists(before):
            ctx.equal(read_file(os.path.join(new, shard["file"])), read_file(before),
                      f"{shard['file']} copied whole")
    # Deterministic for any -j.
    again = os.path.join(d, "again")
    ctx.run_ok("pack", os.path.join(r2, "model.pte"), "-o", again, "--max-shard-bytes", CAP,
               "--base", old, "-q", "-j", "1")
    ctx.equal(snapshot(again), snapshot(new), "-j1 against all cores")
    # A repack of NEW, and the next release on top of NEW, read stale keys as nothing.
    repacked = os.path.join(d, "repacked")
    ctx.run_ok("pack", new, "-o", repacked, "--max-shard-bytes", CAP, "-q")
    ctx.run_ok("verify", repacked)
    ctx.check(all("stale" not in s for s in load_json(os.path.join(repacked, "manifest.json"))[
        "shards"]), "a fresh repack carries nothing stale")
    third = os.path.join(d, "third")
    ctx.run_ok("pack", os.path.join(r2, "model.pte"), "-o", third, "--max-shard-bytes", CAP,
               "--base", new, "-q")
    ctx.equal(snapshot(third), snapshot(new), "the same content on top of NEW gives NEW")


@suite.test
def a_third_program_leaves_the_pair_untouched(ctx):
    d = ctx.mkdir()
    base = shutil.copy(os.path.join(ctx.data, "pte", STRESS + ".pte"), os.path.join(d, "base.pte"))
    lora_a = variant(ctx, d, "lora_a.pte", {0: 5, 7: 9, 13: 3})
    lora_b = variant(ctx, d, "lora_b.pte", {2: 7, 9: 11, 15: 13})
    pair, three = os.path.join(d, "pair"), os.path.join(d, "three")
    ctx.run_ok("pack", base, lora_a, "-o", pair, "--max-shard-bytes", CAP, "-q")
    ctx.run_ok("pack", base, lora_a, lora_b, "-o", three, "--max-shard-bytes", CAP, "--base", pair,
               "-q")
    check_release(ctx, pair, three, "third program")
    for name in ("base.pte", "lora_a.pte"):
        ctx.equal(read_file(os.path.join(three, name)), read_file(os.path.join(pair, name)),
                  f"{name} unchanged")
    # OLD's own content packed on OLD gives OLD, byte for byte.
    same = os.path.join(d, "same")
    ctx.run_ok("pack", base, lora_a, "-o", same, "--max-shard-bytes", CAP, "--base", pair, "-q")
    ctx.equal(snapshot(same), snapshot(pair), "OLD's content with --base OLD")
    # Dropping a program: its exclusive shards go, nothing else changes.
    dropped = os.path.join(d, "dropped")
    ctx.run_ok("pack", base, lora_a, "-o", dropped, "--max-shard-bytes", CAP, "--base", three,
               "-q")
    ctx.run_ok("verify", dropped)
    manifest = load_json(os.path.join(three, "manifest.json"))
    only_b = {s["file"] for s in manifest["shards"] if s["programs"] == ["lora_b.pte"]}
    ctx.check(only_b, "lora_b has shards of its own")
    kept = set(files_of(dropped))
    ctx.equal(kept, set(files_of(three)) - only_b - {"lora_b.pte"}, "the files left")
    for name in kept:
        ctx.equal(read_file(os.path.join(dropped, name)), read_file(os.path.join(three, name)),
                  f"{name} unchanged by the drop")


@suite.test
def a_constant_changed_in_place_replaces_only_its_shard(ctx):
    d = ctx.mkdir()
    source = os.path.join(ctx.data, "pte", STRESS + ".pte")
    r1, r2 = os.path.join(d, "r1"), os.path.join(d, "r2")
    os.makedirs(r1)
    os.makedirs(r2)
    shutil.copy(source, os.path.join(r1, "model.pte"))
    path = with_constant_changed(ctx, r2, "model.pte", 0x5A)
    old, new = os.path.join(d, "old"), os.path.join(d, "new")
    ctx.run_ok("pack", os.path.join(r1, "model.pte"), "-o", old, "--max-shard-bytes", CAP, "-q")
    ctx.run_ok("pack", path, "-o", new, "--max-shard-bytes", CAP, "--base", old, "-q")
    ctx.run_ok("verify", new)
    added = [n for n, digest in files_of(new).items()
             if n.endswith(".ptd") and files_of(old).get(n) != digest]
    ctx.equal(len(added), 1, f"one shard replaced: {added}")
    ctx.check(not any("stale" in s for s in load_json(os.path.join(new, "manifest.json"))["shards"]),
              "nothing stale: the shard holding the constant is not kept")


def external_keys(path):
    parsed, _ = pte_reader.load(path)
    return sorted(pte_reader.fqn(t) for _, _, _, t in pte_reader.tensors(parsed)
                  if pte_reader.classify(t) == "external")


@suite.test
def keys_stay_across_releases(ctx):
    """A program packed again on a base keeps the keys the base gave it: a newcomer whose
    constant clashes is the one qualified, and a program left alone keeps its qualified key."""
    d = ctx.mkdir()
    a = shutil.copy(os.path.join(ctx.data, "pte", STRESS + ".pte"), os.path.join(d, "a.pte"))
    b = with_constant_changed(ctx, d, "b.pte", 0x11)
    c = with_constant_changed(ctx, d, "c.pte", 0x22)
    alone, pair, fresh_pair = (os.path.join(d, n) for n in ("alone", "pair", "fresh_pair"))
    ctx.run_ok("pack", a, "-o", alone, "--max-shard-bytes", CAP, "-q")
    ctx.run_ok("pack", a, b, "-o", pair, "--max-shard-bytes", CAP, "--base", alone, "-q")
    ctx.run_ok("pack", a, b, "-o", fresh_pair, "--max-shard-bytes", CAP, "-q")
    ctx.run_ok("verify", pair)
    ctx.equal(read_file(os.path.join(pair, "a.pte")), read_file(os.path.join(alone, "a.pte")),
              "a.pte keeps its keys and bytes")
    qualified = [k for k in external_keys(os.path.join(pair, "b.pte")) if "@" in k]
    ctx.check(qualified and all(k.endswith("@b") for k in qualified), f"b qualified: {qualified}")
    ctx.check(not any("@" in k for k in external_keys(os.path.join(pair, "a.pte"))),
              "a keeps the unqualified key")
    # Without --base both clashing programs are qualified (the rule of one pack).
    ctx.check(any(k.endswith("@a") for k in external_keys(os.path.join(fresh_pair, "a.pte"))),
              "a fresh pair qualifies both")
    check_release(ctx, alone, pair, "a clashing program added", bound=1.10)
    # A third clashing program: the pair's files stay as they were.
    three = os.path.join(d, "three")
    ctx.run_ok("pack", a, b, c, "-o", three, "--max-shard-bytes", CAP, "--base", pair, "-q")
    for name in ("a.pte", "b.pte"):
        ctx.equal(read_file(os.path.join(three, name)), read_file(os.path.join(pair, name)),
                  f"{name} unchanged by a third program")
    # Dropping b: a keeps the key it has, qualified or not.
    back = os.path.join(d, "back")
    ctx.run_ok("pack", a, "-o", back, "--max-shard-bytes", CAP, "--base", fresh_pair, "-q")
    ctx.equal(read_file(os.path.join(back, "a.pte")), read_file(os.path.join(fresh_pair, "a.pte")),
              "a keeps its qualified key when b is dropped")
    ctx.run_ok("verify", back)


@suite.test
def another_cap_places_fresh_with_a_note(ctx):
    d = ctx.mkdir()
    source = os.path.join(ctx.data, "pte", STRESS + ".pte")
    old, new = os.path.join(d, "old"), os.path.join(d, "new")
    ctx.run_ok("pack", source, "-o", old, "--max-shard-bytes", CAP, "-q")
    summary = pack_json(ctx, source, "-o", new, "--max-shard-bytes", "300KB", "--base", old)
    ctx.equal(summary["base"]["shards_reused"], 0, "nothing reused")
    ctx.check("over --max-shard-bytes 300000" in (summary["base"]["fresh_reason"] or ""),
              f"the reason: {summary['base']}")
    ctx.check(any("no shard is reused" in n for n in summary["notes"]), "one note says so")
    ctx.run_ok("verify", new)
    plain = os.path.join(d, "plain")
    ctx.run_ok("pack", source, "-o", plain, "--max-shard-bytes", "300KB", "-q")
    ctx.equal(snapshot(new), snapshot(plain), "fresh placement is the placement without --base")
    # Another prefix or format: fresh too.
    summary = pack_json(ctx, source, "-o", os.path.join(d, "prefix"), "--max-shard-bytes", CAP,
                        "--shard-prefix", "w", "--base", old)
    ctx.check("--shard-prefix" in (summary["base"]["fresh_reason"] or ""), f"{summary['base']}")


@suite.test
def a_damaged_base_writes_nothing(ctx):
    d = ctx.mkdir()
    source = os.path.join(ctx.data, "pte", STRESS + ".pte")
    old, new = os.path.join(d, "old"), os.path.join(d, "new")
    ctx.run_ok("pack", source, "-o", old, "--max-shard-bytes", CAP, "-q")
    shard = load_json(os.path.join(old, "manifest.json"))["shards"][-1]["file"]
    path = os.path.join(old, shard)
    xor_byte(path, os.path.getsize(path) - 1, 0x01)  # a payload byte: same size, same header
    result = ctx.run("pack", source, "-o", new, "--max-shard-bytes", CAP, "--base", old)
    ctx.code(result, 3, "a reused shard whose bytes are not OLD's (invalid input)")
    ctx.error_names(result, [shard, "SHA-256"])
    ctx.check(not os.path.exists(new), "nothing written")
    ctx.equal(os.listdir(d), ["old"], "no temporary left")
    # A missing base, a base of the other kind, a single-file output: usage errors.
    result = ctx.run("pack", source, "-o", new, "--base", os.path.join(d, "missing"))
    ctx.code(result, 2, "missing base")
    graphs = os.path.join(d, "graphs")
    ctx.run_ok("pack", os.path.join(ctx.data, "prefill.json"), "-o", graphs, "-q")
    result = ctx.run("pack", source, "-o", new, "--base", graphs)
    ctx.code(result, 2, "a program-graph base for .pte programs")
    ctx.check("program graph" in result.err, result.err)
    result = ctx.run("pack", source, "-o", os.path.join(d, "x.pte"), "--base", old)
    ctx.code(result, 2, "--base with a .pte output")
    result = ctx.run("pack", source, "-o", old, "--base", old)
    ctx.code(result, 2, "the output may not be the base")


@suite.test
def program_graphs_keep_their_shards(ctx):
    d = ctx.mkdir()
    old_dir, new_dir = os.path.join(d, "v1"), os.path.join(d, "v2")
    os.makedirs(old_dir)
    os.makedirs(new_dir)
    v1 = ctx.fixture_pair(old_dir)

    def change_one(programs, datas):
        key = sorted(datas["decode"])[0]
        t = datas["decode"][key]
        raw = bytearray(t.data)
        raw[0] ^= 0x01
        t.data = bytes(raw)

    v2 = ctx.fixture_pair(new_dir, change_one)
    for fmt in ("ptd", "safetensors"):
        old, new = os.path.join(d, f"old_{fmt}"), os.path.join(d, f"new_{fmt}")
        opts = ["--max-shard-tensors", "1", "--shard-format", fmt, "-q"]
        ctx.run_ok("pack", *v1, "-o", old, *opts)
        ctx.run_ok("pack", *v2, "-o", new, *opts, "--base", old)
        ctx.run_ok("verify", new)
        manifest = load_json(os.path.join(new, "manifest.json"))
        before = load_json(os.path.join(old, "manifest.json"))
        old_names = {s["file"] for s in before["shards"]}
        reused = [s["file"] for s in manifest["shards"] if s["file"] in old_names]
        ctx.equal(len(reused), len(old_names) - 1, f"{fmt}: all but the changed tensor's shard")
        ctx.equal(reused, [s["file"] for s in manifest["shards"]][:len(reused)],
                  f"{fmt}: reused shards first")
        changed_key = next(k for k, t in manifest["tensors"].items()
                           if k.startswith("decode/") and t["sha256"] != before["tensors"][k]["sha256"])
        ctx.check(manifest["tensors"][changed_key]["shard"] not in old_names,
                  f"{fmt}: the changed tensor is in a new shard")
        # One method added: its keys share bytes with prefill's, and reused files never
        # change, so they are stored again (reported) and verify notes it.
        added = os.path.join(d, f"added_{fmt}")
        summary = pack_json(ctx, *v1, f"extra={v1[0]}", "-o", added,
                            *[o for o in opts if o != "-q"], "--base", old)
        ctx.check(summary["base"]["stored_again_keys"] > 0, f"{fmt}: {summary['base']}")
        ctx.equal(summary["base"]["shards_reused"], len(before["shards"]), f"{fmt}: all reused")
        result = ctx.run_ok("verify", added)
        ctx.check("hold the same bytes in two shards" in result.out + result.err,
                  f"{fmt}: verify notes the copy")


@suite.test
def releases_on_releases_reproduce_themselves(ctx):
    """The same content on its own release gives that release, byte for byte, whatever the
    options: aliases of safetensors shards, a tensor limit, over-cap shards of their own."""
    d = ctx.mkdir()
    examples = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    decode = examples[1:]
    cases = [
        ("safetensors", examples, ["--shard-format", "safetensors", "--max-shard-bytes", "3000"]),
        ("tensors", decode, ["--max-shard-tensors", "6"]),
        ("oversize", decode, ["--max-shard-bytes", "1500", "--oversize", "own-shard"]),
        ("pte_oversize", [os.path.join(ctx.data, "pte", STRESS + ".pte")],
         ["--max-shard-bytes", "200KB", "--oversize", "own-shard"]),
    ]
    for name, inputs, opts in cases:
        # r1 from everything, r2 from its inputs on r1, then r2's content on r2 itself.
        r1, r2, r3 = (os.path.join(d, f"{name}_r{i}") for i in (1, 2, 3))
        ctx.run_ok("pack", *examples if name != "pte_oversize" else inputs, "-o", r1, *opts, "-q")
        ctx.run_ok("pack", *inputs, "-o", r2, *opts, "--base", r1, "-q")
        ctx.run_ok("verify", r2)
        summary = pack_json(ctx, *inputs, "-o", r3, *opts, "--base", r2)
        ctx.run_ok("verify", r3)
        ctx.equal(summary["base"]["fresh_reason"], None, f"{name}: nothing forces a fresh plan")
        ctx.equal(snapshot(r3), snapshot(r2), f"{name}: a release on itself")
        again = os.path.join(d, f"{name}_again")
        ctx.run_ok("pack", *inputs, "-o", again, *opts, "--base", r1, "-q")
        ctx.equal(snapshot(again), snapshot(r2), f"{name}: the same release twice")


def digests_of(path):
    """{relative path: SHA-256 hex} of a directory tree: a short form of its snapshot."""
    return {name: hashlib.sha256(data).hexdigest()[:16] for name, data in snapshot(path).items()}


@suite.test
def a_repack_of_a_capped_release_on_a_base_is_byte_identical(ctx):
    """A release packed on a base keeps the base's shards, stale bytes and all, beside new
    ones: a fresh plan of its content lays it out otherwise. Repacked alone with no shard
    option, it keeps its own layout (its own base): the same files, names and order; any
    shard option given, even the recorded value, plans afresh."""
    d = ctx.mkdir()
    stress = os.path.join(ctx.data, "pte", STRESS + ".pte")
    conv = os.path.join(ctx.data, "pte", "xnnpack_conv.pte")
    kws = os.path.join(ctx.data, "pte", "portable_keyword_spotting.pte")
    r1, r2 = ctx.mkdir("r1"), ctx.mkdir("r2")
    old = [shutil.copy(p, os.path.join(r1, os.path.basename(p))) for p in (stress, conv, kws)]
    new = [variant(ctx, r2, os.path.basename(stress), {0: 5, 1: 9, 3: 3}),
           shutil.copy(conv, r2), shutil.copy(kws, r2)]
    cap = ["--max-shard-bytes", "300KB"]
    rel1, rel2 = os.path.join(d, "rel1"), os.path.join(d, "rel2")
    ctx.run_ok("pack", *old, "-o", rel1, *cap, "-q")
    summary = pack_json(ctx, *new, "-o", rel2, *cap, "--base", rel1)
    ctx.require(summary["base"]["stale_bytes"] > 0 and summary["base"]["shards_new"] > 0,
                f"release 2 keeps stale bytes and adds shards: {summary['base']}")
    fresh = os.path.join(d, "fresh")
    ctx.run_ok("pack", *new, "-o", fresh, *cap, "-q")
    ctx.check(digests_of(fresh) != digests_of(rel2), "a fresh plan lays release 2 out otherwise")
    for jobs in ("1", "2"):
        again = os.path.join(d, f"repacked_j{jobs}")
        repack = pack_json(ctx, rel2, "-o", again, "-j", jobs)
        ctx.equal(digests_of(again), digests_of(rel2), f"-j {jobs}: the repack is release 2")
        ctx.check("base" not in repack or repack["base"] is None,
                  f"-j {jobs}: a repack reports no base: {repack.get('base')}")
        ctx.check(any("layout kept" in n for n in repack["notes"]),
                  f"-j {jobs}: the kept stale bytes are noted: {repack['notes']}")
        ctx.check(not any(s.get("reused") for s in repack["shards"]),
                  f"-j {jobs}: a repack's shards are its own, not reused from a base")
    ctx.run_ok("verify", again)
    planned = os.path.join(d, "planned")
    ctx.run_ok("pack", rel2, "-o", planned, *cap, "-q")
    ctx.equal(digests_of(planned), digests_of(fresh), "a shard option given plans afresh")


@suite.test
def a_packed_directory_with_other_inputs_is_planned_afresh(ctx):
    """Only a lone packed directory keeps its layout: packed together with another input it
    is planned afresh (none of its shards kept, none reported reused)."""
    d = ctx.mkdir()
    prefill, decode = (os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json"))
    packed = os.path.join(d, "a")
    ctx.run_ok("pack", prefill, "-o", packed, "--max-shard-bytes", "1KiB", "--oversize",
               "own-shard", "-q")
    own = {s["file"] for s in load_json(os.path.join(packed, "manifest.json"))["shards"]}
    ctx.require(len(own) > 1, f"the directory has several shards: {own}")
    for first in (True, False):
        out = os.path.join(d, f"out_{first}")
        inputs = [packed, decode] if first else [decode, packed]
        summary = pack_json(ctx, *inputs, "-o", out)
        written = {s["file"] for s in load_json(os.path.join(out, "manifest.json"))["shards"]}
        ctx.equal(sorted(written & own), [], f"directory first={first}: none of its shards kept")
        ctx.check(not any(s.get("reused") for s in summary["shards"]),
                  f"directory first={first}: no shard reported reused")


@suite.test
def a_layout_change_keeps_no_key_and_packs(ctx):
    """A constant with the same bytes in another shape gets a fresh key, not OLD's."""
    import struct
    d = ctx.mkdir()
    a = shutil.copy(os.path.join(ctx.data, "pte", STRESS + ".pte"), os.path.join(d, "a.pte"))
    b = with_constant_changed(ctx, d, "b.pte", 0x11)
    shaped = os.path.join(d, "shaped")
    os.makedirs(shaped)
    data = bytearray(read_file(b))
    parsed = pte_reader.parse(bytes(data))
    position, kind = pte_reader.position(bytes(data), parsed,
                                         [("execution_plan", 0), ("values", 0), "val"])
    ctx.require(kind == "Tensor", f"value 0 is a tensor: {kind}")
    count, at = pte_reader.vector_position(bytes(data), position, "Tensor", "sizes")
    dims = [struct.unpack_from("<i", data, at + 4 * i)[0] for i in range(count)]
    ctx.require(len(set(dims)) > 1, f"a shape that changes when reversed: {dims}")
    for i, dim in enumerate(reversed(dims)):
        struct.pack_into("<i", data, at + 4 * i, dim)
    with open(os.path.join(shaped, "b.pte"), "wb") as handle:
        handle.write(bytes(data))
    old, new, fresh = (os.path.join(d, n) for n in ("old", "new", "fresh"))
    ctx.run_ok("pack", a, b, "-o", old, "--max-shard-bytes", CAP, "-q")
    ctx.run_ok("pack", a, os.path.join(shaped, "b.pte"), "-o", fresh, "--max-shard-bytes", CAP,
               "-q")
    ctx.run_ok("pack", a, os.path.join(shaped, "b.pte"), "-o", new, "--max-shard-bytes", CAP,
               "--base", old, "-q")
    ctx.run_ok("verify", new)


@suite.test
def a_base_that_lies_is_refused(ctx):
    d = ctx.mkdir()
    examples = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    old = os.path.join(d, "old")
    ctx.run_ok("pack", *examples, "-o", old, "-q")
    path = os.path.join(old, "manifest.json")
    original = load_json(path)

    def attempt(what, edit, code, words):
        manifest = json.loads(json.dumps(original))
        edit(manifest)
        write_json(path, manifest)
        new = os.path.join(d, "new")
        result = ctx.run("pack", *examples, "-o", new, "--base", old)
        ctx.code(result, code, what)
        ctx.error_names(result, words, what)
        ctx.check(not os.path.exists(new), f"{what}: nothing written")

    def payload(m):
        m["shards"][0]["payload_bytes"] += 10
    # OLD is checked whole by verify's directory check before anything is read: a lie
    # about any shard refuses the pack with verify's lines (exit 3), reused or not.
    attempt("payload_bytes that the file does not hold", payload, 3,
            ["payload", "differs from the manifest", "--base", "damaged"])

    def huge(m):
        m["shards"][0]["payload_bytes"] = 2 ** 64 - 1
    attempt("payload_bytes near 2^64", huge, 3, ["payload", "damaged"])

    def stray_key(m):
        m["shards"][0]["keys"] = m["shards"][0]["keys"][1:]
    attempt("a key dropped from a shard's list", stray_key, 3, ["weight_map", "damaged"])

    def renamed(m):
        m["shards"][0]["sha256"] = "0" * 64
    attempt("a digest the name does not carry", renamed, 3, ["name", "damaged"])
    # Unsorted key lists come out sorted.
    manifest = json.loads(json.dumps(original))
    manifest["shards"][0]["keys"] = list(reversed(manifest["shards"][0]["keys"]))
    write_json(path, manifest)
    new = os.path.join(d, "sorted")
    ctx.run_ok("pack", *examples, "-o", new, "--base", old, "-q")
    for shard in load_json(os.path.join(new, "manifest.json"))["shards"]:
        ctx.equal(shard["keys"], sorted(shard["keys"]), "keys sorted")
    # A --base that is no packed directory: usage errors naming it, before anything else.
    write_json(path, original)
    for base, words in ((os.path.join(d, "typo"), ["typo", "no such directory"]),
                        (examples[0], ["prefill.json", "not a packed directory"]),
                        ("", ["--base"])):
        result = ctx.run("pack", *examples, "-o", os.path.join(d, "out"), "--base", base)
        ctx.code(result, 2, f"--base {base!r}")
        ctx.error_names(result, words, f"--base {base!r}")


def release_with_stale_keys(ctx):
    """A capped release of the stress MLP with three constants changed, on the release
    before it: a kept shard carries the old constants as stale keys. Its directory."""
    d = ctx.mkdir()
    r2 = os.path.join(d, "r2")
    os.makedirs(r2)
    source = os.path.join(ctx.data, "pte", STRESS + ".pte")
    changed_program = variant(ctx, r2, "xnnpack_stress_mlp.pte", {0: 5, 7: 9, 13: 3})
    old, new = os.path.join(d, "old"), os.path.join(d, "new")
    ctx.run_ok("pack", source, "-o", old, "--max-shard-bytes", CAP, "-q")
    ctx.run_ok("pack", changed_program, "-o", new, "--max-shard-bytes", CAP, "--base", old, "-q")
    return new


@suite.test
def stale_keys_are_not_part_of_the_release(ctx):
    """A kept shard's stale keys are bytes of an earlier release: no command reads them."""
    new = release_with_stale_keys(ctx)
    manifest = load_json(os.path.join(new, "manifest.json"))
    stale = {k for s in manifest["shards"] for k in s.get("stale", [])}
    ctx.check(bool(stale), "the release carries stale keys")
    dumped = json.loads(ctx.run_ok("dump", new, "--json").out)
    ctx.equal(sorted(dumped["tensors"]), sorted(manifest["tensors"]),
              "dump lists the release's keys, and no stale one")


@suite.test
def verify_checks_stale_lists(ctx):
    new = release_with_stale_keys(ctx)
    path = os.path.join(new, "manifest.json")
    original = load_json(path)
    shard = next(s for s in original["shards"] if s.get("stale"))
    # A stale key dropped from the list: the file holds a key the manifest does not know.
    manifest = json.loads(json.dumps(original))
    entry = next(s for s in manifest["shards"] if s["file"] == shard["file"])
    entry["stale"] = entry["stale"][1:] or None
    if entry["stale"] is None:
        del entry["stale"]
    write_json(path, manifest)
    result = ctx.run("verify", new)
    ctx.code(result, 1, "a stale key missing from the list")
    ctx.check("keys in the file differ" in result.err, result.err)
    # An unsorted list is refused by the manifest reader.
    manifest = json.loads(json.dumps(original))
    entry = next(s for s in manifest["shards"] if s["file"] == shard["file"])
    entry["stale"] = list(reversed(entry["stale"])) + entry["stale"][:1]
    write_json(path, manifest)
    result = ctx.run("verify", new)
    ctx.code(result, 1, "an unsorted stale list")
    ctx.check("stale" in result.err, result.err)


if __name__ == "__main__":
    suite.main()
