#!/usr/bin/env python3
# A device checks what it holds (docs/signing.md, "One program of a release"): a signed
# release of three programs (the real XNNPACK stress program, a fine-tuned variant of it and
# the portable keyword spotter with its EXTERNAL constants; capped shards in sharing sets), of
# which a device keeps only the files `ptepack files` lists for the program it runs.
# `verify --program` (and `verify DIR/prog.pte --public-key`) accepts each such subset with and
# without the key, with ptepack's signature and with one written in model_signing's shape by
# the independent verifier (tests/tools/oms_tool.py); each damage to a subset is refused with
# its own problem identifier.
import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, flip, load_json  # noqa: E402
import oms_tool  # noqa: E402  (tests/tools is on sys.path through cli_common)
from test_placement import variant  # noqa: E402

suite = Suite()
PROGRAMS = ("base.pte", "tuned.pte", "kws.pte")
RELEASE = {}  # made once: the release, its keys, an older release signed by the same key


def openssl(*argv):
    subprocess.run(["openssl", *argv], check=True, capture_output=True)


def keys(directory, name):
    private, public = os.path.join(directory, name + ".pem"), os.path.join(directory, name + ".pub")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", private)
    openssl("ec", "-in", private, "-pubout", "-out", public)
    return private, public


def release(ctx):
    """The signed release 2 of three programs, release 1 of the same programs, the keys."""
    if not RELEASE:  # kept for every test of the suite, removed at exit
        d = tempfile.mkdtemp(prefix="ptepack-device-")
        atexit.register(shutil.rmtree, d, True)
        sources = os.path.join(d, "sources")
        os.makedirs(sources)
        shutil.copy(os.path.join(ctx.data, "pte", "xnnpack_stress_mlp.pte"),
                    os.path.join(sources, PROGRAMS[0]))
        shutil.copy(os.path.join(ctx.data, "pte", "portable_keyword_spotting.pte"),
                    os.path.join(sources, PROGRAMS[2]))
        named = [os.path.join(sources, PROGRAMS[0]),
                 variant(ctx, sources, PROGRAMS[1], {0: 0x11, 1: 0x22}),
                 os.path.join(sources, PROGRAMS[2])]
        private, public = keys(d, "release")
        for number in ("1", "2"):
            out = os.path.join(d, "r" + number)
            ctx.run_ok("pack", *named, "-o", out, "--max-shard-bytes", "300KB", "--release",
                       number, "--sign", private, "-q")
        RELEASE.update(dir=d, out=os.path.join(d, "r2"), old=os.path.join(d, "r1"),
                       private=private, public=public, wrong=keys(d, "other")[1])
    return RELEASE


def device(ctx, program, name=None, source=None):
    """A directory holding exactly the files `ptepack files --program` lists."""
    source = source or release(ctx)["out"]
    listed = ctx.run_ok("files", source, "--program", program).out.split()
    target = os.path.join(ctx.mkdir(name or "device-" + program), "device")
    os.makedirs(target)
    for file_name in listed:
        shutil.copy(os.path.join(source, file_name), target)
    return target


def expected_files(out, program):
    """What a device running `program` needs, read from the manifest with json alone."""
    manifest = load_json(os.path.join(out, "manifest.json"))
    entry = next(p for p in manifest["programs"] if p["file"] == program)
    names = {program, "manifest.json", *entry["shards"]}
    if os.path.exists(os.path.join(out, "model.sig")):
        names.add("model.sig")
    return sorted(names), manifest


@suite.test
def files_lists_the_program_its_shards_the_manifest_and_the_signature(ctx):
    out = release(ctx)["out"]
    all_shards = set()
    for program in PROGRAMS:
        names, manifest = expected_files(out, program)
        ctx.equal(ctx.run_ok("files", out, "--program", program).out.split(), names,
                  f"files --program {program}")
        doc = ctx.run_ok("files", out, "--program", program[:-4], "--json").json()
        ctx.equal([f["file"] for f in doc["files"]], names, f"{program}: --json files, stem name")
        ctx.equal(doc["programs"], [program], f"{program}: --json programs")
        records = {p["file"]: p for p in manifest["programs"] + manifest["shards"]}
        for f in doc["files"]:
            with open(os.path.join(out, f["file"]), "rb") as handle:
                data = handle.read()
            ctx.equal((f["size"], f["sha256"]), (len(data), hashlib.sha256(data).hexdigest()),
                      f"{program}: {f['file']} size and digest")
            if f["file"] in records:
                ctx.equal(f["sha256"], records[f["file"]]["sha256"], f"{f['file']}: recorded")
        ctx.equal(doc["bytes"], sum(f["size"] for f in doc["files"]), f"{program}: bytes")
        all_shards |= set(n for n in names if n.startswith("weights-"))
    # Sharing sets: no program needs every shard, and together they need all of them.
    ctx.equal(all_shards, {s["file"] for s in manifest["shards"]}, "every shard is someone's")
    ctx.check(all(len(expected_files(out, p)[0]) - 3 < len(manifest["shards"])
                  for p in PROGRAMS), "a device holds fewer shards than the release")
    every = ctx.run_ok("files", out).out.split()
    ctx.equal(every, sorted(os.listdir(out)), "files without --program: the whole release")


@suite.test
def each_device_subset_passes_with_and_without_the_key(ctx):
    r = release(ctx)
    for program in PROGRAMS:
        target = device(ctx, program)
        plain = ctx.run("verify", target, "--program", program, "--json")
        ctx.code(plain, 0, f"{program}: verify --program without a key")
        signed = ctx.run("verify", target, "--program", program, "--public-key", r["public"],
                         "--newer-than", "1", "--json")
        ctx.code(signed, 0, f"{program}: verify --program --public-key")
        doc = signed.json()
        ctx.equal((doc["ok"], doc["signature"]["checked"], doc["signature"]["valid"],
                   doc["release"], doc["newer_than"]), (True, True, True, 2, 1),
                  f"{program}: the report")
        names, _ = expected_files(r["out"], program)
        program_files = [n for n in names if n not in ("manifest.json", "model.sig")]
        sizes = sum(os.path.getsize(os.path.join(target, n)) for n in program_files)
        ctx.equal(doc["programs"], [{"file": program, "files": len(program_files),
                                     "bytes": sizes}], f"{program}: programs checked")
        # Each file hashed once: the program, its shards and, for the signature, the manifest.
        manifest_size = os.path.getsize(os.path.join(target, "manifest.json"))
        ctx.equal(doc["bytes_hashed"], sizes + manifest_size, f"{program}: bytes hashed")
        ctx.equal(plain.json()["bytes_hashed"], sizes, f"{program}: bytes hashed without a key")
        alone = ctx.run_ok("verify", os.path.join(target, program), "--json").json()
        ctx.equal(alone["bytes_hashed"], sizes, f"{program}: DIR/prog.pte hashes it once")
        text = ctx.run_ok("verify", target, "--program", program, "--public-key", r["public"],
                          "--min-release", "2").out
        ctx.check("signature: valid" in text and "release 2, at least 2" in text, text)
        ctx.check(f"program: {program}: {len(program_files)} files" in text, text)
        twice = ctx.run_ok("verify", target, "--program", program, "--program",
                           program[:-4], "--json").json()
        ctx.equal(twice["programs"], doc["programs"], f"{program}: named twice, reported once")
        # The program's path with the key means the same check.
        same = ctx.run("verify", os.path.join(target, program), "--public-key", r["public"],
                       "--json")
        ctx.code(same, 0, f"{program}: verify DIR/{program} --public-key")
        ctx.equal(same.json()["programs"], doc["programs"], f"{program}: DIR/prog.pte report")
        # Without --program the absent programs' files are missing.
        ctx.code(ctx.run("verify", target), 1, f"{program}: the subset is not the release")


def refused(ctx, target, program, problem, needle, *extra, key="public"):
    r = release(ctx)
    argv = ["verify", target, "--program", program, "--public-key", r[key], *extra]
    result = ctx.run(*argv)
    ctx.code(result, 1, f"{problem}: exit")
    ctx.check(needle in result.err, f"{problem}: {needle!r} not in {result.err!r}")
    doc = ctx.run(*argv, "--json").json()
    ids = [p["id"] for p in doc["problem_details"]]
    ctx.check(problem in ids, f"{problem}: not in {ids}")
    ctx.equal(doc["ok"], False, f"{problem}: ok")
    return doc


@suite.test
def damage_to_a_subset_is_refused_each_with_its_problem(ctx):
    r = release(ctx)
    program = PROGRAMS[1]
    names, manifest = expected_files(r["out"], program)
    shard = next(n for n in names if n.startswith("weights-"))

    target = device(ctx, program, "shard-byte")
    flip(os.path.join(target, shard), 4096)
    refused(ctx, target, program, "file_changed", shard)

    target = device(ctx, program, "program-byte")
    flip(os.path.join(target, program), 200)
    refused(ctx, target, program, "file_changed", program)

    # The manifest's record of a file the device does not hold: only the signature sees it.
    target = device(ctx, program, "manifest-byte")
    other = next(s["sha256"] for s in manifest["shards"] if s["file"] not in names)
    path = os.path.join(target, "manifest.json")
    with open(path, "rb") as handle:
        text = handle.read()
    at = text.index(other.encode()) + 10
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(b"0" if text[at:at + 1] != b"0" else b"1")
    ctx.code(ctx.run("verify", target, "--program", program), 0,
             "an unsigned check cannot see a record of a file it does not hold")
    refused(ctx, target, program, "signature_invalid", "model.sig")

    target = device(ctx, program, "wrong-key")
    doc = refused(ctx, target, program, "signature_invalid", "model.sig", key="wrong")
    ctx.equal(doc["signature"]["valid"], False, "wrong key: valid")
    ctx.check(len(doc["signature"]["key_hint"]) == 64, "wrong key: the bundle's key hint")

    target = device(ctx, program, "replayed")
    refused(ctx, target, program, "release_rollback", "not newer than 2", "--newer-than", "2")

    target = device(ctx, program, "other-signature")
    shutil.copy(os.path.join(r["old"], "model.sig"), os.path.join(target, "model.sig"))
    refused(ctx, target, program, "signature_invalid", "model.sig")

    target = device(ctx, program, "stray")
    with open(os.path.join(target, "extra.bin"), "wb") as handle:
        handle.write(b"x")
    refused(ctx, target, program, "file_stray", "extra.bin")

    target = device(ctx, program, "missing")
    os.remove(os.path.join(target, shard))
    doc = refused(ctx, target, program, "file_missing", shard)
    ctx.check(all(shard in p["text"] or p["id"] != "file_missing"
                  for p in doc["problem_details"]), "the missing file is named")


@suite.test
def files_of_absent_programs_present_on_the_device_are_still_checked(ctx):
    r = release(ctx)
    target = device(ctx, PROGRAMS[0], "extra-program")
    shutil.copy(os.path.join(r["out"], PROGRAMS[2]), target)
    ctx.code(ctx.run("verify", target, "--program", PROGRAMS[0]), 0, "a whole extra program")
    flip(os.path.join(target, PROGRAMS[2]), 100)
    refused(ctx, target, PROGRAMS[0], "file_changed", PROGRAMS[2])


@suite.test
def model_signing_signatures_verify_per_program(ctx):
    r = release(ctx)
    d = ctx.mkdir("foreign")
    out = os.path.join(d, "rel")
    shutil.copytree(r["out"], out)
    with open(os.path.join(out, "model.sig"), "w", encoding="utf-8") as handle:
        handle.write(oms_tool.sign(out, r["private"]))
    ctx.equal(oms_tool.verify(out, r["public"], open(os.path.join(out, "model.sig")).read()), [],
              "the independent verifier accepts the whole release")
    for program in PROGRAMS:
        target = device(ctx, program, "foreign-" + program, source=out)
        ctx.code(ctx.run("verify", target, "--program", program, "--public-key", r["public"]),
                 0, f"{program}: a model_signing bundle, per program")
    # ptepack's own bundle of the full release still verifies with the independent verifier.
    with open(os.path.join(r["out"], "model.sig"), encoding="utf-8") as handle:
        ctx.equal(oms_tool.verify(r["out"], r["public"], handle.read()), [], "ptepack's bundle")


@suite.test
def a_repack_carries_the_signature_only_when_it_is_the_signed_release(ctx):
    r = release(ctx)
    d = ctx.mkdir("repack")
    same, other = os.path.join(d, "same"), os.path.join(d, "other")
    notes = ctx.run_ok("pack", r["out"], "-o", same, "--json").json()["notes"]
    ctx.check(any("carried over" in n for n in notes), f"a note says so: {notes}")
    for name in os.listdir(r["out"]):
        with open(os.path.join(r["out"], name), "rb") as a, \
                open(os.path.join(same, name), "rb") as b:
            ctx.equal(a.read(), b.read(), f"{name}: byte for byte")
    ctx.equal(sorted(os.listdir(same)), sorted(os.listdir(r["out"])), "the same files")
    ctx.code(ctx.run("verify", same, "--public-key", r["public"]), 0, "the carried signature")
    with open(os.path.join(same, "model.sig"), encoding="utf-8") as handle:
        ctx.equal(oms_tool.verify(same, r["public"], handle.read()), [], "independent verifier")
    result = ctx.run_ok("pack", r["out"], "-o", other, "--max-shard-bytes", "1MB")
    ctx.check("model.sig is not carried over" in result.out and "ptepack sign" in result.out,
              f"the summary's note: {result.out}")
    ctx.check(not os.path.exists(os.path.join(other, "model.sig")), "no stale signature")
    ctx.code(ctx.run("verify", other), 0, "the unsigned output is whole")
    # One program of the release, packed on its own: no signature to carry, no note about one.
    alone = ctx.run_ok("pack", os.path.join(r["out"], PROGRAMS[2]), "-o",
                       os.path.join(d, "alone"), "--json").json()
    ctx.check(not any("model.sig" in n for n in alone["notes"]), f"no note: {alone['notes']}")
    ctx.check(not os.path.exists(os.path.join(d, "alone", "model.sig")), "no signature")


@suite.test
def program_names_and_artifacts_are_usage_errors(ctx):
    r = release(ctx)
    result = ctx.run("verify", r["out"], "--program", "nosuch.pte")
    ctx.code(result, 2, "an unknown program")
    ctx.check("no such program" in result.err and PROGRAMS[0] in result.err, result.err)
    result = ctx.run("files", r["out"], "--program", "nosuch", "--json")
    ctx.code(result, 2, "files: an unknown program")
    ctx.equal(result.json()["error"]["code"], 2, "files --json error document")
    graph = os.path.join(ctx.mkdir("graph"), "g")
    ctx.run_ok("pack", os.path.join(ctx.examples, "prefill.json"),
               os.path.join(ctx.examples, "decode.json"), "-o", graph, "-q")
    for argv in (("verify", graph, "--program", "x"), ("files", graph),
                 ("verify", os.path.join(ctx.data, "pte", "xnnpack_conv.pte"), "--program",
                  "x")):
        result = ctx.run(*argv)
        ctx.code(result, 2, " ".join(argv[:2]))
        ctx.check("--program applies to a directory of .pte programs" in result.err,
                  result.err)
    ctx.check(not os.path.exists(os.path.join(r["out"], "nosuch.pte")), "nothing written")


if __name__ == "__main__":
    suite.main()
