#!/usr/bin/env python3
# Process-level corruption sample: truncated and byte-flipped artifacts through the real binary
# end in exit 1/3/4/5 with `ptepack: error:` lines, never a signal, exit 70 or a hang.
# The exhaustive every-byte sweep runs in-process: tests/unit/verify/test_corruption.cpp.
import atexit
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import ROOT, Suite, read_file  # noqa: E402

suite = Suite()
TIMEOUT = 10  # seconds per run: a hang is a failure
CLEAN_FAILURES = (1, 3, 4, 5)
SHOWN = 10  # failures listed per test; the rest are counted
# PTEPACK_TEST_SAMPLE=F runs about F of the cuts and flips (deterministically: every
# round(1/F)-th cut, F of the flips of each seed); scripts/test.sh's sanitizer pass uses a
# quarter, where each run of the instrumented debug binary costs 40 times more. The
# exhaustive in-process sweep (tests/unit/verify/test_corruption.cpp) runs whole in both passes.
SAMPLE = min(1.0, max(0.01, float(os.environ.get("PTEPACK_TEST_SAMPLE", "1"))))


class Originals:
    """Valid artifacts packed once from the examples, shared (read-only) by every test."""

    def __init__(self, ctx):
        self.root = tempfile.mkdtemp(prefix="ptepack-corruption-originals-")
        atexit.register(shutil.rmtree, self.root, True)
        self.prefill = os.path.join(ctx.examples, "prefill.json")
        self.decode = os.path.join(ctx.examples, "decode.json")
        self.ptn = self.pack(ctx, "model.ptn")
        self.ptd_dir = self.pack(ctx, "dir_ptd", "--max-shard-bytes", "3KiB")
        self.ptg = os.path.join(self.ptd_dir, "program.ptg")
        self.safetensors = os.path.join(ctx.examples, "prefill.safetensors")

    def pack(self, ctx, name, *options):
        out = os.path.join(self.root, name)
        ctx.run_ok("pack", self.prefill, self.decode, "-o", out, "-q", "-j", "1", *options)
        return out

    def ptd_shards(self, directory=None):
        directory = directory or self.ptd_dir
        return sorted(os.path.join(directory, f) for f in os.listdir(directory)
                      if f.endswith(".ptd"))


_originals = None


def originals(ctx):
    global _originals
    if _originals is None:
        _originals = Originals(ctx)
    return _originals


class Problems:
    """Collects a sweep's failures; reports the first few and the count as one check each."""

    def __init__(self, ctx, what):
        self.ctx, self.what, self.items, self.cases = ctx, what, [], 0

    def add(self, text):
        self.items.append(text)

    def report(self):
        for text in self.items[:SHOWN]:
            self.ctx.check(False, text)
        self.ctx.check(len(self.items) <= SHOWN,
                       f"{len(self.items) - SHOWN} more problems in {self.what}")
        self.ctx.check(self.cases > 0, f"{self.what}: no cases ran")


def expect_clean_failure(problems, result, what):
    """Exit 1/3/4/5 with only `ptepack: error:` lines (the harness flags signals and 70)."""
    lines = result.err.splitlines()
    if result.code not in CLEAN_FAILURES:
        problems.add(f"{what}: exit {result.code}, expected one of {CLEAN_FAILURES}: "
                     f"{lines[:2]}")
    elif not lines or not all(line.startswith("ptepack: error: ") for line in lines):
        problems.add(f"{what}: stderr is not `ptepack: error:` lines: {lines[:3]}")


def cut_points(size):
    """Dense at both ends, where headers and end records live, and spread in between (the C++
    sweep in tests/unit/verify/test_corruption.cpp does every byte)."""
    points = set(range(min(size, 48))) | set(range(max(0, size - 48), size))
    points |= {size * i // 24 for i in range(1, 24)}
    return sorted(p for p in points if p < size)[::max(1, round(1 / SAMPLE))]


def sweep_truncations(ctx, what, damaged, artifact, original):
    """Every cut must fail dump (one error line: a reader stops at its first problem) and
    verify (one or more error lines)."""
    problems = Problems(ctx, what)
    try:
        for n in cut_points(len(original)):
            with open(damaged, "wb") as handle:
                handle.write(original[:n])
            problems.cases += 1
            where = f"{what} cut to {n} bytes"
            args = ["--json", "--graph"] if n % 2 else []
            result = ctx.run("dump", artifact, *args, timeout=TIMEOUT)
            expect_clean_failure(problems, result, f"dump of {where}")
            if result.code != 0 and len(result.err.splitlines()) != 1:
                problems.add(f"dump of {where}: {len(result.err.splitlines())} error lines")
            expect_clean_failure(problems, ctx.run("verify", artifact, timeout=TIMEOUT),
                                 f"verify of {where}")
    finally:
        with open(damaged, "wb") as handle:
            handle.write(original)
    problems.report()


@suite.test
def truncated_package(ctx):
    damaged = os.path.join(ctx.tmp, "model.ptn")
    sweep_truncations(ctx, "model.ptn", damaged, damaged, read_file(originals(ctx).ptn))


@suite.test
def truncated_ptd_shard_in_directory(ctx):
    directory = os.path.join(ctx.tmp, "out")
    shutil.copytree(originals(ctx).ptd_dir, directory)
    for shard in originals(ctx).ptd_shards(directory):
        sweep_truncations(ctx, os.path.basename(shard), shard, directory, read_file(shard))


@suite.test
def truncated_program(ctx):
    damaged = os.path.join(ctx.tmp, "model.ptg")
    sweep_truncations(ctx, "model.ptg", damaged, damaged, read_file(originals(ctx).ptg))


@suite.test
def truncated_safetensors(ctx):
    damaged = os.path.join(ctx.tmp, "weights.safetensors")
    sweep_truncations(ctx, "weights.safetensors", damaged, damaged,
                      read_file(originals(ctx).safetensors))


def flip(original, rng):
    data = bytearray(original)
    while data == original:
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    return bytes(data)


def sweep_flips(ctx, what, damaged, artifact, pack_inputs, seed, verify_must_fail, count=24):
    """dump and verify fail cleanly or succeed (verify must fail when a CRC or digest covers
    every byte); pack fails cleanly, or writes an output that verify accepts."""
    rng = random.Random(seed)
    original = read_file(damaged)
    problems = Problems(ctx, what)
    try:
        for i in range(max(2, round(count * SAMPLE))):
            with open(damaged, "wb") as handle:
                handle.write(flip(original, rng))
            problems.cases += 1
            where = f"{what} flip {i}"
            result = ctx.run("dump", artifact, *(["--json"] if i % 2 else []), timeout=TIMEOUT)
            if result.code != 0:
                expect_clean_failure(problems, result, f"dump of {where}")
            result = ctx.run("verify", artifact, timeout=TIMEOUT)
            if result.code != 0:
                expect_clean_failure(problems, result, f"verify of {where}")
            elif verify_must_fail:
                problems.add(f"verify of {where}: exit 0 for a damaged artifact")
            out = os.path.join(ctx.tmp, f"packed-{i}" + (".ptn" if i % 2 == 0 else ""))
            result = ctx.run("pack", *pack_inputs, "-o", out, "-q", "-j", "1", timeout=TIMEOUT)
            if result.code != 0:
                expect_clean_failure(problems, result, f"pack of {where}")
            else:
                check = ctx.run("verify", out, timeout=TIMEOUT)
                if check.code != 0:
                    problems.add(f"pack of {where} succeeded but verify of its output fails: "
                                 f"{check.err.splitlines()[:2]}")
    finally:
        with open(damaged, "wb") as handle:
            handle.write(original)
    problems.report()


@suite.test
def flipped_package(ctx):
    damaged = os.path.join(ctx.tmp, "model.ptn")
    shutil.copyfile(originals(ctx).ptn, damaged)
    # Header fields such as a member's DOS date are outside every CRC: verify may accept those.
    sweep_flips(ctx, "model.ptn", damaged, damaged, [damaged], seed=1, verify_must_fail=False)


@suite.test
def flipped_ptd_shard(ctx):
    directory = os.path.join(ctx.tmp, "in")
    shutil.copytree(originals(ctx).ptd_dir, directory)
    shard = originals(ctx).ptd_shards(directory)[-1]
    sweep_flips(ctx, os.path.basename(shard), shard, directory, [directory], seed=2,
                verify_must_fail=True)


@suite.test
def flipped_program(ctx):
    damaged = os.path.join(ctx.tmp, "model.ptg")
    shutil.copyfile(originals(ctx).ptg, damaged)
    data = ",".join(originals(ctx).ptd_shards())
    sweep_flips(ctx, "model.ptg", damaged, damaged, [f"{damaged}@{data}"], seed=3,
                verify_must_fail=False)


@suite.test
def flipped_safetensors(ctx):
    damaged = os.path.join(ctx.tmp, "weights.safetensors")
    shutil.copyfile(originals(ctx).safetensors, damaged)
    o = originals(ctx)
    sweep_flips(ctx, "weights.safetensors", damaged, damaged, [f"{o.prefill}@{damaged}", o.decode],
                seed=4, verify_must_fail=False)


def ptd_from_executorch_06(ctx, path):
    """A .ptd in ExecuTorch 0.6's FlatTensor layout (schema/flat_tensor_v06.fbs, tensors apart
    from named data): the flatbuffer built by flatc from JSON, the FH01 header inserted after
    byte 8 and one segment appended, as that release's serializer laid files out."""
    work = ctx.mkdir("v06")
    source = os.path.join(work, "old.json")
    with open(source, "w", encoding="utf-8") as handle:
        json.dump({"version": 0, "tensor_alignment": 16,
                   "tensors": [{"fully_qualified_name": "a", "scalar_type": "FLOAT",
                                "sizes": [2, 2], "dim_order": [0, 1], "segment_index": 0,
                                "offset": 0}],
                   "segments": [{"offset": 0, "size": 16}], "named_data": []}, handle)
    schema = os.path.join(ROOT, "schema")
    subprocess.run([shutil.which("flatc"), "-b", "-I", schema, "-o", work,
                    os.path.join(schema, "flat_tensor_v06.fbs"), source], check=True)
    with open(os.path.join(work, "old.ptd"), "rb") as handle:  # flatc names it by file_extension
        flatbuffer = handle.read()
    base = (len(flatbuffer) + 48 + 127) // 128 * 128
    segment = bytes(range(16))
    header = (b"FH01" + struct.pack("<IQQQQ", 40, 48, len(flatbuffer), base, len(segment)))
    root = struct.unpack_from("<I", flatbuffer, 0)[0] + 48
    blob = struct.pack("<I", root) + flatbuffer[4:8] + header.ljust(48, b"\0") + flatbuffer[8:]
    with open(path, "wb") as handle:
        handle.write(blob.ljust(base, b"\0") + segment)


@suite.test
def a_ptd_from_executorch_06_is_named_for_what_it_is(ctx):
    d = ctx.mkdir()
    old = os.path.join(d, "old.ptd")
    ptd_from_executorch_06(ctx, old)
    program = os.path.join(ctx.data, "pte", "external_pair.pte")
    for argv, code in ((["dump", old], 3), (["verify", old], 1),
                       (["pack", f"{program}@{old}", "-o", os.path.join(d, "out")], 3),
                       (["verify", f"{program}@{old}"], 1)):
        result = ctx.run(*argv)
        ctx.equal(result.code, code, " ".join(argv[:1]) + " exit code")
        ctx.check("ExecuTorch 0.6" in result.err and "re-export it with ExecuTorch 0.7" in result.err
                  and "old.ptd" in result.err, f"{argv[0]}: {result.err!r}")
    ctx.check(not os.path.exists(os.path.join(d, "out")), "pack wrote an output")


if __name__ == "__main__":
    suite.main()
