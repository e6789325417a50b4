#!/usr/bin/env python3
# The documented install on Debian 12 (PEP 668, no package index): a venv over the system's
# site packages, pip from the source tree without build isolation or an index; then the
# installed module runs the CLI. Run with Debian's /usr/bin/python3 (needs python3-venv,
# python3-setuptools, python3-wheel).
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ptepack", required=True)
    parser.add_argument("--source", required=True, help="the python/ folder")
    parser.add_argument("--examples", required=True)
    args = parser.parse_args()
    args.ptepack = os.path.abspath(args.ptepack)
    args.examples = os.path.abspath(args.examples)
    with tempfile.TemporaryDirectory(prefix="ptepack-venv-") as tmp:
        source = os.path.join(tmp, "python")  # pip writes build files beside the sources
        shutil.copytree(args.source, source, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", "tests"))
        venv = os.path.join(tmp, "V")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                       check=True)
        pip = os.path.join(venv, "bin", "pip")
        subprocess.run([pip, "install", "--quiet", "--no-build-isolation", "--no-index", source],
                       check=True)
        out = os.path.join(tmp, "packed")
        examples = [os.path.join(args.examples, n) for n in ("prefill.json", "decode.json")]
        script = (
            "import sys, ptepack\n"
            "assert ptepack.__file__.startswith(sys.prefix), ptepack.__file__\n"
            f"r = ptepack.pack({examples!r}, {out!r}, ptepack={args.ptepack!r})\n"
            f"assert ptepack.verify({out!r}, ptepack={args.ptepack!r}).ok\n"
            "print(r.kind, len(r.shards))\n")
        done = subprocess.run([os.path.join(venv, "bin", "python"), "-c", script],
                              capture_output=True, text=True, cwd=tmp)
        if done.returncode != 0 or not done.stdout.startswith("packed directory"):
            print(done.stdout, done.stderr, file=sys.stderr)
            return 1
        print("ok: installed into a venv, packed and verified:", done.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
