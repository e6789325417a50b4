#!/usr/bin/env python3
# `verify DIR/prog.pte`: the check a device makes on the one program it runs. A program its
# directory's manifest lists is read with the shards listed for it, and the program file and
# each of those shards are checked against the size and SHA-256 the manifest records. Three
# real programs packed with a cap (several shards); each damage is refused with its problem
# identifier, on the whole directory and on a device copy holding only the program's files.
import hashlib
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, edit_manifest, flip, load_json  # noqa: E402

suite = Suite()
PROGRAMS = ("xnnpack_conv", "portable_multi_method", "xnnpack_stress_mlp")


def release(ctx):
    out = os.path.join(ctx.mkdir("release"), "r")
    ctx.run_ok("pack", "-q", *[os.path.join(ctx.data, "pte", p + ".pte") for p in PROGRAMS],
               "-o", out, "--max-shard-bytes", "1MB")
    return out


def copy_of(ctx, out, name):
    copy = os.path.join(ctx.mkdir(name), "r")
    shutil.copytree(out, copy)
    return copy


def device_copy(ctx, out, program, name):
    """Only what a device running `program` holds: the manifest, the program, its shards."""
    device = os.path.join(ctx.mkdir(name), "device")
    os.makedirs(device)
    entry = next(p for p in load_json(os.path.join(out, "manifest.json"))["programs"]
                 if p["file"] == program)
    for file in ["manifest.json", program] + entry["shards"]:
        shutil.copy(os.path.join(out, file), device)
    return device, entry


def refused(ctx, path, problem, names, what):
    result = ctx.run("verify", path)
    ctx.code(result, 1, what)
    for name in names:
        ctx.check(name in result.err, f"{what}: {name!r} not in {result.err!r}")
    doc = ctx.run("verify", path, "--json").json()
    ctx.equal(doc["ok"], False, f"{what}: --json ok")
    ctx.check(problem in {p["id"] for p in doc["problem_details"]},
              f"{what}: {problem} not in {doc['problem_details']}")


@suite.test
def an_untouched_program_passes_and_says_what_was_checked(ctx):
    out = release(ctx)
    for program in (p + ".pte" for p in PROGRAMS):
        entry = next(p for p in load_json(os.path.join(out, "manifest.json"))["programs"]
                     if p["file"] == program)
        doc = ctx.run("verify", os.path.join(out, program), "--json").json()
        ctx.equal((doc["ok"], doc["problems"]), (True, []), f"{program}: verify")
        size = os.path.getsize(os.path.join(out, program)) + sum(
            os.path.getsize(os.path.join(out, s)) for s in entry["shards"])
        ctx.check(doc["bytes_hashed"] >= size, f"{program}: {doc['bytes_hashed']} bytes hashed, "
                  f"its files hold {size}")
        ctx.check(any("checked against" in n and f"{len(entry['shards'])} data files" in n
                      for n in doc["notes"]), f"{program}: the note says what was checked")
        device, _ = device_copy(ctx, out, program, "device-" + program)
        ctx.code(ctx.run("verify", os.path.join(device, program)), 0, f"{program}: device copy")


@suite.test
def a_changed_shard_byte_is_refused(ctx):
    out = release(ctx)
    for program in (p + ".pte" for p in PROGRAMS):
        device, entry = device_copy(ctx, out, program, "shard-" + program)
        shard = os.path.join(device, entry["shards"][0])
        flip(shard, os.path.getsize(shard) - 1)
        refused(ctx, os.path.join(device, program), "file_changed",
                [entry["shards"][0], "SHA-256 differs from the manifest"], f"{program}: shard")


@suite.test
def a_missing_shard_is_refused_by_name(ctx):
    out = release(ctx)
    device, entry = device_copy(ctx, out, "xnnpack_stress_mlp.pte", "missing")
    gone = entry["shards"][-1]
    os.remove(os.path.join(device, gone))
    refused(ctx, os.path.join(device, "xnnpack_stress_mlp.pte"), "file_missing", [gone, "missing"],
            "a missing shard")


@suite.test
def a_manifest_that_cannot_be_read_is_refused(ctx):
    """Damaging the manifest must not turn the device check off."""
    out = release(ctx)
    device, _ = device_copy(ctx, out, "xnnpack_conv.pte", "bad-manifest")
    path = os.path.join(device, "manifest.json")
    with open(path, "r+b") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace(b'"shards"', b'"shardz"', 1))
    refused(ctx, os.path.join(device, "xnnpack_conv.pte"), "manifest_inconsistent",
            ["manifest.json"], "a manifest that cannot be read")


@suite.test
def a_program_that_is_not_the_recorded_one_is_refused(ctx):
    out = release(ctx)
    same_size = copy_of(ctx, out, "same-size")
    program = os.path.join(same_size, "xnnpack_conv.pte")
    flip(program, os.path.getsize(program) - 200)  # inside its delegate blob: still a program
    refused(ctx, program, "file_changed", ["xnnpack_conv.pte", "SHA-256 differs"],
            "a program byte changed")
    other = copy_of(ctx, out, "other-size")
    shutil.copy(os.path.join(ctx.data, "pte", "xnnpack_quantized.pte"),
                os.path.join(other, "xnnpack_conv.pte"))
    refused(ctx, os.path.join(other, "xnnpack_conv.pte"), "file_changed",
            ["xnnpack_conv.pte", "differs from the manifest's"], "another program in its place")
    # The manifest's record changed instead of the file: the same refusal.
    edited = copy_of(ctx, out, "edited-record")

    def other_digest(manifest):
        entry = next(p for p in manifest["programs"] if p["file"] == "xnnpack_conv.pte")
        entry["sha256"] = hashlib.sha256(b"another program").hexdigest()
    edit_manifest(edited, other_digest)
    refused(ctx, os.path.join(edited, "xnnpack_conv.pte"), "file_changed", ["SHA-256 differs"],
            "a record of other bytes")


if __name__ == "__main__":
    suite.main()
