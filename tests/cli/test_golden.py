#!/usr/bin/env python3
# CLI golden suite: stdout, stderr and exit code of pack/dump/verify commands on the bundled
# example, compared with tests/cli/golden/<case>.txt; `--update` rewrites those files.
# Each case runs in a scratch directory of its own, a fresh copy of the prepared inputs
# (made once, never written by a case): no case reads what another wrote.
import atexit
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from cli_common import Suite, unified_diff
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)

suite = Suite()
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
EXAMPLE_FILES = ("prefill.json", "prefill.safetensors", "decode.json", "decode.safetensors")
PREPARED = {}  # the inputs every case starts from, made once


def prepared_dir(ctx):
    """The inputs of every case: copies of the example files (so every path printed is
    relative), the artifacts cases read (packed up front), and every case's preparation."""
    if "dir" not in PREPARED:
        PREPARED["dir"] = base = tempfile.mkdtemp(prefix="ptepack-golden-inputs-")
        atexit.register(shutil.rmtree, base, True)
        for name in EXAMPLE_FILES:
            shutil.copy(os.path.join(ctx.examples, name), base)
        shutil.copy(os.path.join(ctx.data, "two_methods.json"), base)
        for argv in (PACK_PTN, PACK_DIR, PACK_ST):
            ctx.run_ok(*argv, "-q", cwd=base)
        pte_pair(ctx.data, ctx.ptepack)(base)
        for _name, _argv, *prepare in CASES:
            if prepare and callable(prepare[0]):
                prepare[0](base)
    return PREPARED["dir"]


def work_dir(ctx, name):
    """A scratch directory of the case's own, holding a fresh copy of the prepared inputs."""
    work = os.path.join(ctx.mkdir(name), "work")
    shutil.copytree(prepared_dir(ctx), work, symlinks=True)
    return work


def copy_first(pattern, destination):
    def prepare(work):
        matches = sorted(glob.glob(os.path.join(work, pattern)))
        if not matches:
            raise FileNotFoundError(f"no file matches {pattern} (did the preparation fail?)")
        shutil.copy(matches[0], os.path.join(work, destination))
    return prepare


def damaged_copy(source, destination):
    def prepare(work):
        if os.path.exists(os.path.join(work, destination)):
            return
        shutil.copytree(os.path.join(work, source), os.path.join(work, destination))
        with open(os.path.join(work, destination, "stray.bin"), "wb") as handle:
            handle.write(b"not listed in the manifest")
        shards = sorted(glob.glob(os.path.join(work, destination, "weights-*")))
        with open(shards[0], "r+b") as handle:
            handle.seek(-1, os.SEEK_END)
            last = handle.read(1)
            handle.seek(-1, os.SEEK_END)
            handle.write(bytes([last[0] ^ 1]))
    return prepare


def pte_pair(ctx_data, ptepack):
    """conv.pte, add.pte and mlp.pte (fixtures), conv_dir packed from conv.pte, three_dir
    from all three, and two one-field changes made in place: add_out.pte (operator overload
    "out" -> "Out") and conv_blob.pte (one delegate blob byte), with conv_blob_dir packed
    from it."""
    def prepare(work):
        if os.path.exists(os.path.join(work, "conv_blob_dir")):
            return
        shutil.copy(os.path.join(ctx_data, "pte", "external_pair.ptd"),
                    os.path.join(work, "pair.ptd"))
        for stem, name in (("xnnpack_conv", "conv"), ("portable_add_no_header", "add"),
                           ("external_pair", "pair"), ("xnnpack_stress_mlp", "mlp")):
            shutil.copy(os.path.join(ctx_data, "pte", stem + ".pte"),
                        os.path.join(work, name + ".pte"))
        add = os.path.join(work, "add_out.pte")
        shutil.copy(os.path.join(work, "add.pte"), add)
        parsed, data = pte_reader.load(add)
        op = pte_reader.position(data, parsed, [("execution_plan", 0), ("operators", 0)])[0]
        where = pte_reader.field_position(data, op, "Operator", "overload")
        with open(add, "r+b") as handle:
            handle.seek(where + struct.unpack_from("<I", data, where)[0] + 4)
            handle.write(b"Out")
        blob = os.path.join(work, "conv_blob.pte")
        shutil.copy(os.path.join(work, "conv.pte"), blob)
        parsed, data = pte_reader.load(blob)
        start, size = pte_reader.segment_range(
            parsed, parsed["program"]["execution_plan"][0]["delegates"][0]["processed"]["index"])
        with open(blob, "r+b") as handle:
            handle.seek(start + size // 2)
            byte = handle.read(1)[0]
            handle.seek(start + size // 2)
            handle.write(bytes([byte ^ 1]))
        for source, out in (("conv.pte", "conv_dir"), ("conv_blob.pte", "conv_blob_dir")):
            subprocess.run([ptepack, "pack", source, "-o", out, "-q"], cwd=work, check=True)
        subprocess.run([ptepack, "pack", "conv.pte", "add.pte", "mlp.pte", "-o", "three_dir",
                        "-q", "--max-shard-bytes", "1MB"], cwd=work, check=True)
    return prepare


PACK = ["pack", "prefill.json", "decode.json"]
PACK_PTN = PACK + ["-o", "model.ptn"]
PACK_DIR = PACK + ["-o", "model", "--max-shard-bytes", "3000"]
PACK_ST = PACK + ["-o", "model_st", "--shard-format", "safetensors", "--max-shard-bytes", "2500"]
CASES = [
    # name, argv (run in the work directory), optional preparation
    ("pack_ptn", PACK_PTN),
    ("pack_dir_ptd", PACK_DIR),
    ("pack_dir_safetensors", PACK_ST),
    ("pack_dry_run_dir", PACK + ["-o", "planned", "--dry-run", "--max-shard-bytes", "3000"]),
    ("pack_dry_run_ptn", PACK + ["-o", "planned.ptn", "--dry-run"]),
    ("pack_json", PACK + ["-o", "model_json", "--json", "--max-shard-bytes", "3000"]),
    ("dump_ptn", ["dump", "model.ptn"]),
    ("dump_ptn_json", ["dump", "model.ptn", "--json"]),
    ("dump_ptn_graph", ["dump", "model.ptn", "--graph"]),
    ("dump_dir", ["dump", "model"]),
    ("dump_dir_json", ["dump", "model", "--json"]),
    ("dump_manifest", ["dump", "model/manifest.json"]),
    ("dump_dir_safetensors", ["dump", "model_st"]),
    ("dump_filter_key_glob", ["dump", "model.ptn", "--key", "decode/*", "--key", "state/*"]),
    ("dump_filter_method", ["dump", "model.ptn", "--method", "prefill", "--sort", "size"]),
    ("dump_filter_shard_json", ["dump", "model", "--json", "--no-tensors", "--summary"]),
    ("dump_summary", ["dump", "model", "--summary", "--top", "3"]),
    ("dump_filter_shard", ["dump", "model", "--shard", "weights-faceb90c0d193491.ptd"]),
    ("dump_offsets_no_hash", ["dump", "decode.safetensors", "--offsets", "--no-hash",
                              "--sort", "natural"]),
    ("dump_offsets_json", ["dump", "decode.safetensors", "--json", "--offsets", "--no-hash",
                           "--key", "*wq*"]),
    ("dump_narrow", ["dump", "model.ptn", "--width", "60", "--key", "*attention*"]),
    ("error_dump_unknown_method", ["dump", "model.ptn", "--method", "prefil"]),
    ("error_dump_shard_without_manifest", ["dump", "model.ptn", "--shard", "x.ptd"]),
    ("diff_ptn_dir", ["diff", "model.ptn", "model"]),
    ("diff_dir_formats_json", ["diff", "model", "model_st", "--json"]),
    ("diff_pte_packed", ["diff", "conv.pte", "conv_dir"], "pte"),
    ("diff_pte_operator", ["diff", "add.pte", "add_out.pte"], "pte"),
    ("diff_pte_operator_json", ["diff", "add.pte", "add_out.pte", "--json"], "pte"),
    ("diff_pte_dirs_json", ["diff", "conv_dir", "conv_blob_dir", "--json"], "pte"),
    ("diff_pte_other_program", ["diff", "add.pte", "conv.pte"], "pte"),
    ("dump_pte_graph_dot", ["dump", "pair.pte", "--graph=dot"], "pte"),
    ("dump_pte_summary", ["dump", "mlp.pte", "--summary", "--top", "3"], "pte"),
    ("dump_pte_no_tensors", ["dump", "mlp.pte", "--no-tensors"], "pte"),
    ("dump_pte_dir_summary", ["dump", "three_dir", "--summary", "--top", "3"], "pte"),
    ("dump_pte_dir_no_tensors", ["dump", "three_dir", "--no-tensors"], "pte"),
    ("dump_ptn_graph_dot", ["dump", "model.ptn", "--graph=dot"]),
    ("dump_program_json", ["dump", "prefill.json"]),
    ("dump_program_json_json", ["dump", "prefill.json", "--json"]),
    ("dump_ptd", ["dump", "shard.ptd"], copy_first("model/weights-*.ptd", "shard.ptd")),
    ("dump_ptd_json", ["dump", "shard.ptd", "--json"]),
    ("dump_safetensors_input", ["dump", "decode.safetensors"]),
    ("dump_safetensors_input_json", ["dump", "decode.safetensors", "--json"]),
    ("dump_safetensors_shard", ["dump", "shard.safetensors"],
     copy_first("model_st/weights-*.safetensors", "shard.safetensors")),
    ("verify_ptn", ["verify", "model.ptn"]),
    ("verify_dir", ["verify", "model"]),
    ("verify_dir_json", ["verify", "model_st", "--json"]),
    ("error_verify_damaged", ["verify", "model_bad"], damaged_copy("model", "model_bad")),
    ("error_verify_damaged_json", ["verify", "model_bad", "--json"],
     damaged_copy("model", "model_bad")),
    ("error_missing_input", ["pack", "missing.json", "-o", "x.ptn"]),
    ("error_no_inputs", ["pack", "-o", "x.ptn"]),
    ("error_rename_multi_method", ["pack", "x=two_methods.json", "-o", "x.ptn"]),
    ("error_missing_data", ["pack", "two_methods.json", "-o", "x.ptn"]),
    ("error_duplicate_method", ["pack", "prefill.json", "prefill.json", "-o", "x.ptn"]),
    ("error_reserved_method", ["pack", "state=prefill.json", "-o", "x.ptn"]),
    ("error_cap_too_small", PACK + ["-o", "capped", "--max-shard-bytes", "1000"]),
    ("error_bad_size", PACK + ["-o", "capped", "--max-shard-bytes", "12X"]),
    ("error_cap_on_package", PACK + ["-o", "capped.ptn", "--max-shard-bytes", "1M"]),
    ("error_output_is_input", ["pack", "model.ptn", "-o", "model.ptn"]),
    ("error_dump_missing", ["dump", "nothing.ptn"]),
    ("error_unknown_command", ["pak", "prefill.json"]),
    ("error_unknown_option", PACK + ["-o", "capped", "--max-shard-byte", "1M"]),
    ("error_unknown_option_equals", ["verify", "--jsn=1", "model.ptn"]),
    ("error_option_for_directories", PACK + ["-o", "capped.PTN", "--alignment", "64"]),
    ("error_output_stdout", PACK + ["-o", "-"]),
    ("error_help_unknown", ["help", "dumpp"]),
    ("error_progress_value", PACK + ["-o", "x", "--progress", "sometimes"]),
    ("usage_bare", []),
    ("help_pack", ["help", "pack"]),
    ("help_top", ["help"]),
    ("version", ["--version"]),
]


def render(argv, result, work, ptepack):
    """The stored form: command, exit code, then stdout and stderr verbatim (normalised)."""
    def section(title, text):
        text = text.replace(work, "$WORK").replace(ptepack, "ptepack")
        # pack's elapsed time and rate vary from run to run
        text = re.sub(r" in \d+\.\d+ s \((.*?) read at [^)]*\)", r" in $TIME (\1 read at $RATE)", text)
        if text and not text.endswith("\n"):
            text += "\n\\ no newline at end\n"
        return f"--- {title}\n{text}"
    return (f"$ ptepack {' '.join(argv)}\n--- exit {result.code}\n"
            + section("stdout", result.out) + section("stderr", result.err))


def golden_case(name, argv, _prepare=None):
    def run_case(ctx):
        work = work_dir(ctx, name)  # _prepare ran on the prepared inputs
        actual = render(argv, ctx.run(*argv, cwd=work), work, ctx.ptepack)
        path = os.path.join(GOLDEN, name + ".txt")
        if ctx.update:
            os.makedirs(GOLDEN, exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(actual)
            return
        ctx.require(os.path.exists(path), f"{path} missing: run with --update to create it")
        with open(path, encoding="utf-8") as handle:
            expected = handle.read()
        ctx.check(expected == actual, "output differs from the golden file (refresh with "
                  "--update if the change is intended):\n" + unified_diff(expected, actual, name))
    suite.add(name, run_case)


for case in CASES:
    golden_case(*case)


@suite.test
def no_stale_golden_files(ctx):
    known = {name + ".txt" for name, *_ in CASES}
    stale = sorted(set(os.listdir(GOLDEN)) - known) if os.path.isdir(GOLDEN) else []
    if ctx.update:
        for name in stale:
            os.remove(os.path.join(GOLDEN, name))
        return
    ctx.equal(stale, [], "golden files without a case (remove them or run --update)")


@suite.test
def outputs_are_stable_across_jobs(ctx):
    """The goldens assume dump output does not depend on -j; check that directly."""
    work = work_dir(ctx, "jobs")
    for argv in (["dump", "model", "--json"], ["dump", "model.ptn"], ["verify", "model"]):
        outputs = {ctx.run(*argv, "-j", jobs, cwd=work).out for jobs in ("1", "3")}
        ctx.equal(len(outputs), 1, f"{argv} output differs between -j1 and -j3")


if __name__ == "__main__":
    suite.main()
