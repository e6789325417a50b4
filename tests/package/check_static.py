#!/usr/bin/env python3
# The static binary: not a dynamic executable, and it packs the bundled example and a real
# ExecuTorch program to the same bytes as the dynamically linked build.
# Usage: check_static.py --static PATH --dynamic PATH --examples DIR --data DIR
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile


def tree(path):
    """{relative path: bytes} of a directory."""
    out = {}
    for base, _, files in os.walk(path):
        for name in files:
            full = os.path.join(base, name)
            with open(full, "rb") as handle:
                out[os.path.relpath(full, path)] = handle.read()
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--static", required=True)
    parser.add_argument("--dynamic", required=True)
    parser.add_argument("--examples", required=True)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    failures = []
    ldd = subprocess.run(["ldd", args.static], capture_output=True, text=True)
    if "not a dynamic executable" not in ldd.stdout + ldd.stderr:
        failures.append(f"ldd sees a dynamic executable: {ldd.stdout.strip()}")
    described = subprocess.run(["file", "-b", args.static], capture_output=True, text=True).stdout
    if "statically linked" not in described:
        failures.append(f"file: {described.strip()}")
    examples = [os.path.join(args.examples, n) for n in ("prefill.json", "decode.json")]
    program = os.path.join(args.data, "pte", "xnnpack_stress_mlp.pte")
    cases = (("example", examples + ["--max-shard-bytes", "4KiB"]),
             ("example.ptn", examples), ("pte", [program, "--max-shard-bytes", "300KB"]))
    with tempfile.TemporaryDirectory(prefix="ptepack-static-") as tmp:
        for name, argv in cases:
            outputs = []
            for binary in (args.static, args.dynamic):
                out = os.path.join(tmp, f"{os.path.basename(binary)}-{len(outputs)}-{name}")
                done = subprocess.run([binary, "pack", *argv, "-o", out, "-q"],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    failures.append(f"{binary} pack {name}: {done.stderr.strip()}")
                outputs.append(out)
            a, b = outputs
            same = (tree(a) == tree(b)) if os.path.isdir(a) else filecmp.cmp(a, b, shallow=False)
            if not same:
                failures.append(f"{name}: the static and dynamic builds wrote different bytes")
        version = subprocess.run([args.static, "--version"], capture_output=True, text=True)
        if version.returncode != 0:
            failures.append("static --version failed")
    for failure in failures:
        print("FAIL", failure, file=sys.stderr)
    print(f"{'ok' if not failures else 'FAILED'}: static binary "
          f"({os.path.getsize(args.static)} bytes) checked against the dynamic build")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
