#!/usr/bin/env python3
# `pack DIR` never passes on damage: a packed directory given as input is checked exactly as
# `verify` checks it. Each kind of tampering (manifest lists edited, entries removed with their
# bytes changed, shards swapped, keys moved, digests, sizes, dtypes and shapes edited, a
# program's shard list emptied or pointed at unknown files) on capped directories of .pte
# programs and of program graphs: `verify` exits 1, and `pack DIR -o X.pte` / `-o DIR2` exit
# with the code of the first problem (3; 5 for a missing file: docs/problems.md) and verify's
# very lines on stderr, and write nothing.
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import (Suite, damage_exit_code, edit_manifest, load_json,  # noqa: E402
                        temp_leftovers)
import ptd_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)

suite = Suite()


def fixture(ctx, stem):
    return os.path.join(ctx.data, "pte", stem + ".pte")


def with_named_data(manifest):
    return next(p for p in manifest["programs"] if p["named_data"])


def stored_key(manifest):
    """A key stored under its own name (not an alias), in the largest shard."""
    shard = max(manifest["shards"], key=lambda s: s["payload_bytes"])
    return next(k for k in shard["keys"] if not manifest["tensors"][k].get("alias_of")), shard


def flip_key_bytes(out, manifest, key):
    shard = manifest["tensors"][key]["shard"]
    path = os.path.join(out, shard)
    parsed = ptd_reader.parse(path) if path.endswith(".ptd") else None
    if parsed:
        entry = next(e for e in parsed["named_data"] if e["key"] == key)
        offset = parsed["segments"][entry["segment_index"]]["file_offset"]
    else:
        header = int.from_bytes(open(path, "rb").read(8), "little")
        info = json.loads(open(path, "rb").read()[8:8 + header])[key]
        offset = 8 + header + info["data_offsets"][0]
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ 1]))


# Each damage takes (out, manifest) and tampers with the directory `out`.

def named_key_removed(out, manifest):
    def change(m):
        with_named_data(m)["named_data"].pop(0)
    edit_manifest(out, change)


def tensor_entry_removed_and_bytes_changed(out, manifest):
    key, _ = stored_key(manifest)
    flip_key_bytes(out, manifest, key)

    def change(m):
        del m["tensors"][key]
    edit_manifest(out, change)


def shards_swapped(out, manifest):
    a, b = manifest["shards"][0]["file"], manifest["shards"][1]["file"]
    os.rename(os.path.join(out, a), os.path.join(out, "swap"))
    os.rename(os.path.join(out, b), os.path.join(out, a))
    os.rename(os.path.join(out, "swap"), os.path.join(out, b))


def key_moved_between_shards(out, manifest):
    key, shard = stored_key(manifest)
    other = next(s["file"] for s in manifest["shards"] if s["file"] != shard["file"])

    def change(m):
        for s in m["shards"]:
            if s["file"] == shard["file"]:
                s["keys"].remove(key)
            elif s["file"] == other:
                s["keys"] = sorted(s["keys"] + [key])
        m["tensors"][key]["shard"] = other
        if "weight_map" in m.get("metadata", {}):
            m["metadata"]["weight_map"][key] = other
    edit_manifest(out, change)


def shard_digest_edited(out, manifest):
    def change(m):
        m["shards"][0]["sha256"] = "0" * 64
    edit_manifest(out, change)


def shard_size_edited(out, manifest):
    def change(m):
        m["shards"][0]["size"] += 1
    edit_manifest(out, change)


def program_shards_emptied(out, manifest):
    def change(m):
        with_named_data(m)["shards"] = []
    edit_manifest(out, change)


def program_shards_unknown(out, manifest):
    def change(m):
        with_named_data(m)["shards"] = ["weights-0123456789abcdef.ptd"]
    edit_manifest(out, change)


def dtype_edited(out, manifest):
    key, _ = stored_key(manifest)

    def change(m):
        m["tensors"][key]["dtype"] = "HALF" if m["tensors"][key]["dtype"] != "HALF" else "FLOAT"
    edit_manifest(out, change)


def shape_edited(out, manifest):
    key, _ = stored_key(manifest)

    def change(m):
        m["tensors"][key]["shape"] = m["tensors"][key]["shape"] + [1]  # as many elements
    edit_manifest(out, change)


PROGRAM_DAMAGE = [named_key_removed, tensor_entry_removed_and_bytes_changed, shards_swapped,
                  key_moved_between_shards, shard_digest_edited, shard_size_edited,
                  program_shards_emptied, program_shards_unknown, dtype_edited, shape_edited]
GRAPH_DAMAGE = [tensor_entry_removed_and_bytes_changed, shards_swapped, key_moved_between_shards,
                shard_digest_edited, shard_size_edited, dtype_edited, shape_edited]


def refused_like_verify(ctx, source, outputs, what):
    verified = ctx.run("verify", source)
    ctx.code(verified, 1, f"{what}: verify")
    first = ctx.run("verify", source, "--json").json()["problem_details"][0]["id"]
    for out in outputs:
        before = sorted(os.listdir(os.path.dirname(out)))
        result = ctx.run("pack", source, "-o", out)
        ctx.code(result, damage_exit_code(first), f"{what}: pack -o {os.path.basename(out)}")
        # The strict reader stops at the first problem: verify's first line, alone.
        ctx.equal(result.err.splitlines(), verified.err.splitlines()[:1],
                  f"{what}: pack -o {os.path.basename(out)} gives verify's first line")
        ctx.equal(result.out, "", f"{what}: nothing on stdout")
        ctx.equal(sorted(os.listdir(os.path.dirname(out))), before, f"{what}: nothing written")
        ctx.equal(temp_leftovers(os.path.dirname(out)), [], f"{what}: no temporary left")


@suite.test
def every_damage_to_a_directory_of_programs_is_refused(ctx):
    programs = [fixture(ctx, s) for s in ("xnnpack_stress_mlp", "xnnpack_conv",
                                          "portable_keyword_spotting")]
    for damage in PROGRAM_DAMAGE:
        work = ctx.mkdir(damage.__name__)
        many = os.path.join(work, "many")
        one = os.path.join(work, "one")
        ctx.run_ok("pack", *programs, "-o", many, "-q", "--max-shard-bytes", "300KB")
        ctx.run_ok("pack", programs[0], "-o", one, "-q", "--max-shard-bytes", "300KB")
        for directory in (many, one):
            ctx.run_ok("verify", directory)
            damage(directory, load_json(os.path.join(directory, "manifest.json")))
        outs = ctx.mkdir(damage.__name__ + "_out")
        refused_like_verify(ctx, many, [os.path.join(outs, "again")], f"{damage.__name__} (many)")
        refused_like_verify(ctx, one, [os.path.join(outs, "again.pte"),
                                       os.path.join(outs, "again_dir")],
                            f"{damage.__name__} (one)")


@suite.test
def every_damage_to_a_program_graph_directory_is_refused(ctx):
    inputs = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    for shard_format in ("ptd", "safetensors"):
        for damage in GRAPH_DAMAGE:
            name = f"{damage.__name__}_{shard_format}"
            work = ctx.mkdir(name)
            out = os.path.join(work, "model")
            ctx.run_ok("pack", *inputs, "-o", out, "-q", "--max-shard-bytes", "2500",
                       "--shard-format", shard_format)
            ctx.run_ok("verify", out)
            damage(out, load_json(os.path.join(out, "manifest.json")))
            outs = ctx.mkdir(name + "_out")
            refused_like_verify(ctx, out, [os.path.join(outs, "again.ptn"),
                                           os.path.join(outs, "again")], name)


@suite.test
def a_whole_directory_repacks_and_a_stray_temporary_is_only_a_note(ctx):
    """What verify only notes (a temporary left by an interrupted pack) does not stop pack."""
    work = ctx.mkdir()
    out = os.path.join(work, "many")
    ctx.run_ok("pack", fixture(ctx, "xnnpack_conv"), fixture(ctx, "portable_multi_method"),
               "-o", out, "-q", "--max-shard-bytes", "2KB")
    pid = next(p for p in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{p}"))
    with open(os.path.join(work, f".many.ptepack-tmp-{pid}-1"), "wb") as handle:
        handle.write(b"left over by a pack that was killed")
    verified = ctx.run("verify", out)
    ctx.code(verified, 0, "a stale temporary is a note")
    ctx.check("ptepack: note:" in verified.err, verified.err)
    ctx.run_ok("pack", out, "-o", os.path.join(work, "again"), "-q")
    result = ctx.run("diff", out, os.path.join(work, "again"))
    ctx.code(result, 0, "the repacked directory is equivalent")


if __name__ == "__main__":
    suite.main()
