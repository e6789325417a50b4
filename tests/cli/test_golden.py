#!/usr/bin/env python3
# CLI golden suite: stdout, stderr and exit code of ptepack commands on the bundled example and
# the ExecuTorch fixtures. Each case is a folder of tests/cli/golden (the layout of zstd's
# tests/cli-tests): `cmd`, the arguments one per line; optionally `prepare`, one line naming a
# preparation of the shared inputs (`copy_first PATTERN DEST`, `damaged_copy SOURCE DEST`);
# and the expected `exit`, `stdout` and `stderr` (paths as $WORK, pack's timing as $TIME).
# Adding a case is adding a folder with its `cmd`; `--update` writes the expected files.
# Each case runs in a scratch directory of its own, a fresh copy of the prepared inputs
# (made once, never written by a case): no case reads what another wrote.
import atexit
import glob
import os
import re
import shutil
import struct
import subprocess
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
        for case in CASES:
            if case.prepare:
                PREPARATIONS[case.prepare[0]](*case.prepare[1:])(base)
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
PREPARATIONS = {"copy_first": copy_first, "damaged_copy": damaged_copy}


class Case:
    """One folder of tests/cli/golden."""

    def __init__(self, name):
        self.name = name
        self.folder = os.path.join(GOLDEN, name)
        with open(os.path.join(self.folder, "cmd"), encoding="utf-8") as handle:
            self.argv = handle.read().splitlines()
        path = os.path.join(self.folder, "prepare")
        self.prepare = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                self.prepare = handle.read().split()
            if not self.prepare or self.prepare[0] not in PREPARATIONS:
                raise SystemExit(f"{path}: expected one of {sorted(PREPARATIONS)} and arguments")


CASES = [Case(name) for name in sorted(os.listdir(GOLDEN))
         if os.path.isfile(os.path.join(GOLDEN, name, "cmd"))]


def normalized(text, work, ptepack):
    text = text.replace(work, "$WORK").replace(ptepack, "ptepack")
    # pack's elapsed time and rate vary from run to run
    return re.sub(r" in \d+\.\d+ s \((.*?) read at [^)]*\)", r" in $TIME (\1 read at $RATE)", text)


def golden_case(case):
    def run_case(ctx):
        work = work_dir(ctx, case.name)  # the preparations ran on the prepared inputs
        result = ctx.run(*case.argv, cwd=work)
        actual = {"exit": f"{result.code}\n", "stdout": normalized(result.out, work, ctx.ptepack),
                  "stderr": normalized(result.err, work, ctx.ptepack)}
        for part, text in actual.items():
            path = os.path.join(case.folder, part)
            if ctx.update:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(text)
                continue
            ctx.require(os.path.exists(path), f"{path} missing: run with --update to create it")
            with open(path, encoding="utf-8") as handle:
                expected = handle.read()
            ctx.check(expected == text, f"{part} differs from {path} (refresh with --update if "
                      "the change is intended):\n" + unified_diff(expected, text, part))
    suite.add(case.name, run_case)


for each in CASES:
    golden_case(each)


@suite.test
def every_golden_folder_is_a_case(ctx):
    """Each entry of tests/cli/golden is a folder with `cmd` and only the files a case has."""
    known = {"cmd", "prepare", "exit", "stdout", "stderr"}
    for name in sorted(os.listdir(GOLDEN)):
        folder = os.path.join(GOLDEN, name)
        ctx.check(os.path.isdir(folder) and os.path.isfile(os.path.join(folder, "cmd")),
                  f"{folder}: not a case (a folder with `cmd`)")
        if os.path.isdir(folder):
            ctx.equal(sorted(set(os.listdir(folder)) - known), [], f"{folder}: unknown files")
    ctx.check(len(CASES) >= 70, f"only {len(CASES)} cases found")


@suite.test
def help_is_the_same_as_dash_dash_help(ctx):
    work = work_dir(ctx, "help")
    ctx.equal(ctx.run("help", cwd=work).out, ctx.run("--help", cwd=work).out,
              "`ptepack help` prints what `ptepack --help` prints")


@suite.test
def outputs_are_stable_across_jobs(ctx):
    """The goldens assume dump output does not depend on -j; check that directly."""
    work = work_dir(ctx, "jobs")
    for argv in (["dump", "model", "--json"], ["dump", "model.ptn"], ["verify", "model"]):
        outputs = {ctx.run(*argv, "-j", jobs, cwd=work).out for jobs in ("1", "3")}
        ctx.equal(len(outputs), 1, f"{argv} output differs between -j1 and -j3")


if __name__ == "__main__":
    suite.main()
