#!/usr/bin/env python3
# One problem, one outcome (docs/problems.md, "Exit codes of damage"): each damage to a packed
# directory of the real ExecuTorch programs gives one exit code from dump, diff (either side)
# and pack (as input and as --base), the code of its problem identifier as verify --json
# names it (5 for a file that is not there, 3 for any other damage), and verify exits 1; diff,
# pack and verify print the same first line. Nothing is written by a refused pack, and with
# --json every failing call prints one error document carrying that code.
import json
import os
import shutil
import sys

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


# name: (damage, the problem identifier verify names first, whether dump sees it)
DAMAGES = {
    "missing_shard": (lambda d: os.remove(os.path.join(d, shard_of(d))), "file_missing", True),
    "missing_program": (lambda d: os.remove(os.path.join(d, PROGRAM)), "file_missing", True),
    "truncated_program": (lambda d: os.truncate(os.path.join(d, PROGRAM), 100), "file_changed",
                          True),
    "changed_shard_byte": (lambda d: flip(os.path.join(d, shard_of(d)), 1000), "file_changed",
                           False),
    "stray_file": (lambda d: write(os.path.join(d, "stray.bin"), "x"), "file_stray", False),
    "manifest_not_json": (lambda d: write(os.path.join(d, "manifest.json"), "{not json"),
                          "file_unreadable", True),
    "unknown_manifest_version": (edited_manifest(lambda m: m.update(version=9)),
                                 "file_unreadable", True),
}


@suite.test
def each_damage_gives_one_code_from_every_command(ctx):
    good = packed(ctx)
    for name, (damage, problem, dump_sees_it) in DAMAGES.items():
        d = os.path.join(ctx.mkdir(name), "damaged")
        shutil.copytree(good, d)
        damage(d)
        verified = ctx.run("verify", d, "--json")
        ctx.code(verified, 1, f"{name}: verify")
        ids = [p["id"] for p in verified.json()["problem_details"]]
        ctx.equal(ids[:1], [problem], f"{name}: verify's first problem")
        code = damage_exit_code(problem)
        line = ctx.run("verify", d).err.splitlines()[0]
        runs = {
            "diff A": ["diff", d, good],
            "diff B": ["diff", good, d],
            "pack": ["pack", d, "-o", os.path.join(ctx.mkdir(name + "-out"), "out")],
            "pack --base": ["pack", good, "-o", os.path.join(ctx.mkdir(name + "-new"), "new"),
                            "--base", d],
        }
        if dump_sees_it:
            runs["dump"] = ["dump", d]
        for what, argv in runs.items():
            result = ctx.run(*argv)
            ctx.code(result, code, f"{name}: {what}")
            first = (result.err.splitlines() or [""])[0]
            if what == "pack --base":  # verify's line, said to be about the base
                first = first.replace(" (the base is damaged); nothing written", " (file changed)")
            if what != "dump":
                ctx.equal(first, line, f"{name}: {what}'s first line is verify's")
            if argv[0] == "pack":
                ctx.equal(os.listdir(os.path.dirname(argv[3])), [], f"{name}: {what} wrote nothing")
            doc = ctx.run(*argv, "--json")
            ctx.code(doc, code, f"{name}: {what} --json")
            ctx.equal(doc.json()["error"]["code"], code, f"{name}: {what}: the error document")


if __name__ == "__main__":
    suite.main()
