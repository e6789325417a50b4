#!/usr/bin/env python3
# One problem, one outcome (docs/problems.md, "Exit codes of damage"): each damage to a packed
# directory of the real ExecuTorch programs gives one exit code from dump, diff (either side)
# and pack (as input and as --base), the code of its problem identifier as verify --json
# names it (5 for a file that is not there, 3 for any other damage), and verify exits 1;
# every command prints verify's first line. A program of the directory (DIR/prog.pte) is read
# with its manifest record by every command, with the same outcome. Nothing is written by a
# refused pack, and with --json every failing call prints one error document carrying that
# code.
import json
import os
import shutil
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, damage_exit_code, flip, load_json  # noqa: E402

suite = Suite()
PROGRAM = "xnnpack_conv.pte"


def packed(ctx):
    out = os.path.join(ctx.mkdir("good"), "good")
    ctx.run_ok("pack", *(os.path.join(ctx.data, "pte", n) for n in
                         (PROGRAM, "portable_keyword_spotting.pte", "xnnpack_quantized.pte")),
               "-o", out, "--max-shard-bytes", "1MB", "-q")
    return out


def shard_of(out):
    manifest = load_json(os.path.join(out, "manifest.json"))
    return next(p for p in manifest["programs"] if p["file"] == PROGRAM)["shards"][0]


def write(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def edited_manifest(change):
    def damage(d):
        path = os.path.join(d, "manifest.json")
        manifest = load_json(path)
        change(manifest)
        write(path, json.dumps(manifest))
    return damage


def other_digest(text):
    return ("1" if text[0] == "0" else "0") + text[1:]


def program_record(change):
    def edit(manifest):
        change(next(p for p in manifest["programs"] if p["file"] == PROGRAM))
    return edited_manifest(edit)


# name: (damage, the problem identifier verify names first, whether it touches PROGRAM or a
# shard it loads, so that DIR/PROGRAM is refused too)
DAMAGES = {
    "missing_shard": (lambda d: os.remove(os.path.join(d, shard_of(d))), "file_missing", True),
    "missing_program": (lambda d: os.remove(os.path.join(d, PROGRAM)), "file_missing", False),
    "missing_manifest": (lambda d: os.remove(os.path.join(d, "manifest.json")), "file_missing",
                         False),
    "truncated_program": (lambda d: os.truncate(os.path.join(d, PROGRAM), 100), "file_changed",
                          True),
    "changed_shard_byte": (lambda d: flip(os.path.join(d, shard_of(d)), 1000), "file_changed",
                           True),
    "program_digest_mismatch": (program_record(lambda p: p.update(sha256=other_digest(
        p["sha256"]))), "file_changed", True),
    "stray_file": (lambda d: write(os.path.join(d, "stray.bin"), "x"), "file_stray", False),
    "manifest_not_json": (lambda d: write(os.path.join(d, "manifest.json"), "{not json"),
                          "file_unreadable", False),
    "unknown_manifest_version": (edited_manifest(lambda m: m.update(version=9)),
                                 "file_unreadable", True),
}


def first_line(result):
    return (result.err.splitlines() or [""])[0]


def damaged_copy(ctx, good, name):
    d = os.path.join(ctx.mkdir(name), "damaged")
    shutil.copytree(good, d)
    DAMAGES[name][0](d)
    return d


def expect_outcome(ctx, runs, problem, line, name):
    """Each command: the code, verify's first line, nothing written, one error document
    naming the problem."""
    code = damage_exit_code(problem)
    for what, argv in runs.items():
        result = ctx.run(*argv)
        ctx.code(result, code, f"{name}: {what}")
        first = first_line(result)
        if what == "pack --base":  # verify's line, said to be about the base
            first = first.replace(" (the base is damaged); nothing written", " (file changed)")
        ctx.equal(first, line, f"{name}: {what}'s first line is verify's")
        if argv[0] == "pack":
            ctx.equal(os.listdir(os.path.dirname(argv[3])), [], f"{name}: {what} wrote nothing")
        doc = ctx.run(*argv, "--json")
        ctx.code(doc, code, f"{name}: {what} --json")
        ctx.equal(doc.json()["error"]["code"], code, f"{name}: {what}: the error document")
        ctx.equal(doc.json()["error"]["problem"], problem, f"{name}: {what}: its problem")


def every_command(ctx, damaged, good, name, output):
    """dump, diff (the damaged input on either side) and pack of `damaged`."""
    return {
        "dump": ["dump", damaged],
        "diff A": ["diff", damaged, good],
        "diff B": ["diff", good, damaged],
        "pack": ["pack", damaged, "-o", os.path.join(ctx.mkdir(name + "-out"), output)],
    }


def expect_verify_outcome(ctx, damaged, problem, runs, name):
    """verify names `problem` first, and every run has its outcome (expect_outcome)."""
    verified = ctx.run("verify", damaged, "--json")
    ctx.code(verified, 1, f"{name}: verify")
    ids = [p["id"] for p in verified.json()["problem_details"]]
    ctx.equal(ids[:1], [problem], f"{name}: verify's first problem")
    expect_outcome(ctx, runs, problem, first_line(ctx.run("verify", damaged)), name)


@suite.test
def each_damage_gives_one_code_from_every_command(ctx):
    good = packed(ctx)
    for name, (_, problem, _) in DAMAGES.items():
        d = damaged_copy(ctx, good, name)
        runs = every_command(ctx, d, good, name, "out")
        runs["pack --base"] = ["pack", good, "-o", os.path.join(ctx.mkdir(name + "-new"), "new"),
                               "--base", d]
        expect_verify_outcome(ctx, d, problem, runs, name)
        if name == "program_digest_mismatch":  # --no-hash still hashes the programs
            ctx.code(ctx.run("dump", d, "--no-hash"), 3, f"{name}: dump --no-hash")
        if name in ("changed_shard_byte", "stray_file"):  # what only hashing sees
            loose = ctx.run("dump", d, "--no-hash")
            ctx.code(loose, 0 if name == "changed_shard_byte" else 3, f"{name}: dump --no-hash")
            if name == "changed_shard_byte":
                ctx.check("shard files not hashed (--no-hash)" in loose.out + loose.err,
                          f"{name}: dump --no-hash says what it did not check: {loose.err!r}")


@suite.test
def a_program_of_a_damaged_directory_gives_one_code_from_every_command(ctx):
    """DIR/prog.pte is read with the manifest entries that describe it, by every command."""
    good = packed(ctx)
    for name, (_, _, touches_program) in DAMAGES.items():
        if not touches_program:
            continue
        d = damaged_copy(ctx, good, name)
        program = os.path.join(d, PROGRAM)
        verified = ctx.run("verify", program, "--json")
        ctx.code(verified, 1, f"{name}: verify DIR/{PROGRAM}")
        problem = verified.json()["problem_details"][0]["id"]
        runs = every_command(ctx, program, os.path.join(good, PROGRAM), name, "one.pte")
        expect_outcome(ctx, runs, problem, first_line(ctx.run("verify", program)),
                       f"{name} DIR/{PROGRAM}")
        if name == "unknown_manifest_version":  # no record to check it against
            ctx.equal(problem, "manifest_inconsistent", f"{name}: verify DIR/{PROGRAM}")


@suite.test
def another_tools_manifest_beside_a_program_is_not_its_record(ctx):
    """Only a manifest naming ptepack's format records a program; any other is not read."""
    d = ctx.mkdir("app")
    shutil.copy(os.path.join(ctx.data, "pte", PROGRAM), d)
    write(os.path.join(d, "manifest.json"), '{"name": "my-app", "version": 3}')
    program = os.path.join(d, PROGRAM)
    for argv in (["dump", program], ["verify", program], ["diff", program, program]):
        ctx.code(ctx.run(*argv), 0, " ".join(argv[:1]) + " beside another tool's manifest")
    # Another tool's manifest naming its own format is not looked at either.
    write(os.path.join(d, "manifest.json"), '{"format": "other.manifest", "version": 3}')
    ctx.code(ctx.run("dump", program), 0, "dump beside a manifest of another format")
    # The same file naming ptepack's format is a record that cannot be read: refused.
    write(os.path.join(d, "manifest.json"), '{"format": "ptepack.manifest", "version": 3}')
    ctx.code(ctx.run("verify", program), 1, "verify beside a damaged ptepack manifest")
    refused = ctx.run("dump", program, "--json")
    ctx.code(refused, 3, "dump beside a damaged ptepack manifest")
    ctx.equal(refused.json()["error"]["problem"], "manifest_inconsistent", "its problem")


@suite.test
def a_shard_that_is_no_ptd_is_damage_not_a_usage_error(ctx):
    """A shard the manifest lists for a program, its magic overwritten (same size): read
    without hashing, it is the shard's file_unreadable (exit 3), never a usage error."""
    good = packed(ctx)
    d = damaged_copy(ctx, good, "changed_shard_byte")  # any copy; the magic is changed below
    shard = os.path.join(d, shard_of(d))
    with open(shard, "r+b") as handle:
        handle.seek(4)
        handle.write(b"XX01")
    result = ctx.run("dump", os.path.join(d, PROGRAM), "--no-hash", "--json")
    ctx.code(result, 3, "dump --no-hash of a program whose shard is no .ptd")
    error = result.json()["error"]
    ctx.equal(error["problem"], "file_unreadable", "its problem")
    ctx.equal(error["path"], shard, "the shard is named")


@suite.test
def a_file_that_does_not_read_as_its_format_is_its_problem(ctx):
    """A truncated program graph or data file given alone: verify's problem (file_unreadable)
    and first line, from dump and diff (either side)."""
    d = ctx.mkdir("truncated")
    for name, source in (("w.safetensors", os.path.join(ctx.examples, "prefill.safetensors")),
                         ("p.ptg", os.path.join(ctx.data, "two_methods.ptg"))):
        path = os.path.join(d, name)
        with open(source, "rb") as src, open(path, "wb") as dst:
            dst.write(src.read()[:100])
        verified = ctx.run("verify", path, "--json")
        ctx.code(verified, 1, f"verify {name}")
        problem = verified.json()["problem_details"][0]["id"]
        ctx.equal(problem, "file_unreadable", f"verify {name}: its problem")
        line = first_line(ctx.run("verify", path))
        for argv in (["dump", path], ["diff", path, source], ["diff", source, path]):
            result = ctx.run(*argv, "--json")
            ctx.code(result, 3, f"{argv[0]} {name}")
            ctx.equal(result.json()["error"]["problem"], problem, f"{argv[0]} {name}: problem")
            ctx.equal(first_line(ctx.run(*argv)), line, f"{argv[0]} {name}: verify's line")


@suite.test
def a_missing_input_is_the_commands_failure_not_a_problem(ctx):
    """A path the command was given that is not there (the input, or its @DATA) is the
    command's failure: exit 5, one line from every command, no problem identifier."""
    missing = os.path.join(ctx.mkdir("none"), "nothing.pte")
    graph = os.path.join(ctx.data, "two_methods.ptg")
    no_data = graph + "@" + os.path.join(ctx.mkdir("nodata"), "missing.safetensors")
    for path in (missing, no_data):
        lines = set()
        for argv in (["dump", path], ["verify", path], ["diff", path, path]):
            result = ctx.run(*argv, "--json")
            ctx.code(result, 5, f"{argv[0]} of a missing path")
            ctx.equal(result.json()["error"]["problem"], None, f"{argv[0]}: no problem identifier")
            lines.add(first_line(result))
        ctx.equal(len(lines), 1, f"one line from every command: {lines}")
        if path == no_data:
            ctx.check(any(line.endswith("missing.safetensors: no such data file")
                          for line in lines), f"the data file is named as missing: {lines}")


def rewritten_package(source, path, change):
    """A copy of the package `source` at `path` with its members changed by change(members)."""
    with zipfile.ZipFile(source) as z:
        members = {name: z.read(name) for name in z.namelist()}
    change(members)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def swapped_owner(members):
    aliases = json.loads(members["aliases.json"])
    alias, owner = next(iter(aliases.items()))
    del aliases[alias]
    aliases[owner] = alias  # the larger key made the owner: not the smallest of its group
    members["aliases.json"] = json.dumps(aliases).encode()


# One reader of packages: each rule broken gives verify's problem, and the same line and code
# from dump, diff and pack (the rules verify used to hold alone included).
PACKAGE_DAMAGES = {
    "empty_aliases": (lambda m: m.update({"aliases.json": b"{}"}), "file_unreadable"),
    "aliases_not_an_object": (lambda m: m.update({"aliases.json": b"[]"}), "file_unreadable"),
    "owner_not_smallest": (swapped_owner, "package_layout"),
    "unexpected_member": (lambda m: m.update({"extra.txt": b"x"}), "package_layout"),
    "no_program": (lambda m: m.pop("program.ptg"), "package_layout"),
    "state_key_owner": (lambda m: m.update({"aliases.json": json.dumps(
        {**json.loads(m["aliases.json"]), "state/zz": "state/pos"}).encode()}),
        "package_layout"),
}


@suite.test
def each_package_damage_gives_one_code_from_every_command(ctx):
    good = os.path.join(ctx.mkdir("package"), "good.ptn")
    ctx.run_ok("pack", os.path.join(ctx.examples, "prefill.json"),
               os.path.join(ctx.examples, "decode.json"), "-o", good, "-q")
    for name, (change, problem) in PACKAGE_DAMAGES.items():
        damaged = rewritten_package(good, os.path.join(ctx.mkdir(name), "damaged.ptn"), change)
        runs = every_command(ctx, damaged, good, name, "out.ptn")
        expect_verify_outcome(ctx, damaged, problem, runs, name)


if __name__ == "__main__":
    suite.main()
