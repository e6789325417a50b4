#!/usr/bin/env python3
# The Debian packages from files only: each .deb unpacked with dpkg-deb -x into a scratch
# folder (never installed), its Depends: read with dpkg-deb -f and checked, then the unpacked
# ptepack runs --version, packs the bundled example and a real ExecuTorch program, and
# verifies them; man finds its page; the schemas and Debian's doc files (and the CLI's README,
# which its page names) are where they belong.
# Usage: check_deb.py --cpack-config BUILD/CPackConfig.cmake --examples DIR --data DIR
#        (builds the packages with cpack into a scratch folder) or --debs DIR (already built).
import argparse
import glob
import os
import subprocess
import sys
import tempfile

FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print(f"FAIL {what}", file=sys.stderr)


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpack-config")
    parser.add_argument("--debs")
    parser.add_argument("--examples", required=True)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ptepack-deb-") as tmp:
        debs = args.debs
        if args.cpack_config:
            debs = os.path.join(tmp, "debs")
            done = run(["cpack", "--config", args.cpack_config, "-G", "DEB", "-B", debs])
            if done.returncode != 0:
                print(done.stdout, done.stderr, file=sys.stderr)
                return 1
        cli = glob.glob(os.path.join(debs, "ptepack_*_*.deb"))
        dev = glob.glob(os.path.join(debs, "ptepack-dev_*_*.deb"))
        check(len(cli) == 1 and len(dev) == 1, f"one ptepack and one ptepack-dev .deb: {cli} {dev}")
        if FAILURES:
            return 1
        cli, dev = cli[0], dev[0]
        # Depends: computed from the CLI's shared libraries; the -dev one pins FlatBuffers.
        depends = run(["dpkg-deb", "-f", cli, "Depends"]).stdout
        for library in ("libc6", "libssl3", "libstdc++6", "zlib1g"):
            check(library in depends, f"ptepack Depends names {library}: {depends!r}")
        dev_depends = run(["dpkg-deb", "-f", dev, "Depends"]).stdout
        check("libflatbuffers-dev (>=" in dev_depends and "libflatbuffers-dev (<<" in dev_depends,
              f"ptepack-dev pins FlatBuffers: {dev_depends!r}")
        for package in ("libfmt-dev", "nlohmann-json3-dev", "libssl-dev", "zlib1g-dev"):
            check(package in dev_depends, f"ptepack-dev Depends names {package}")
        root = os.path.join(tmp, "root")
        for deb in (cli, dev):
            check(run(["dpkg-deb", "-x", deb, root]).returncode == 0, f"dpkg-deb -x {deb}")
        binary = os.path.join(root, "usr", "bin", "ptepack")
        version = run([binary, "--version"])
        check(version.returncode == 0 and version.stdout.startswith("ptepack "),
              f"unpacked ptepack --version: {version!r}")
        check("not stripped" not in run(["file", binary]).stdout, "the binary is stripped")
        out = os.path.join(tmp, "out")
        examples = [os.path.join(args.examples, n) for n in ("prefill.json", "decode.json")]
        for inputs, target in ((examples, out),
                               ([os.path.join(args.data, "pte", "xnnpack_stress_mlp.pte")],
                                out + "_pte")):
            packed = run([binary, "pack", *inputs, "-o", target, "-q"])
            check(packed.returncode == 0, f"unpacked ptepack packs {inputs[0]}: {packed.stderr}")
            verified = run([binary, "verify", target])
            check(verified.returncode == 0 and verified.stdout.startswith("ok:"),
                  f"unpacked ptepack verifies {target}: {verified.stdout} {verified.stderr}")
        page = run(["man", "-l", os.path.join(root, "usr", "share", "man", "man1", "ptepack.1.gz")],
                   env=dict(os.environ, MANPAGER="cat", PAGER="cat", COLUMNS="80"))
        check(page.returncode == 0 and "EXIT STATUS" in page.stdout and "--max-shard-bytes" in
              page.stdout.replace("\u2010", "-"), "man ptepack shows the page")
        schemas = os.path.join(root, "usr", "share", "ptepack", "schema")
        for name in ("pack.schema.json", "manifest.schema.json", "flat_tensor.fbs"):
            check(os.path.isfile(os.path.join(schemas, name)), f"schema {name} installed")
        for package, names in (("ptepack", ("copyright", "changelog.Debian.gz", "README.md.gz")),
                               ("ptepack-dev", ("copyright", "changelog.Debian.gz"))):
            doc = os.path.join(root, "usr", "share", "doc", package)
            for name in names:
                check(os.path.isfile(os.path.join(doc, name)), f"{package}: {name}")
        for header in ("ptepack/pack/pack.h", "ptepack/schema/program_generated.h"):
            check(os.path.isfile(os.path.join(root, "usr", "include", header)),
                  f"ptepack-dev holds {header}")
        # /usr/lib/<multiarch>/ when configured with the /usr prefix (scripts/package.sh).
        check(glob.glob(os.path.join(root, "usr", "lib", "**", "cmake", "ptepack",
                                     "ptepackConfig.cmake"), recursive=True),
              "ptepack-dev holds the CMake package")
    print(f"{'ok' if not FAILURES else 'FAILED'}: Debian packages checked from their files "
          f"({len(FAILURES)} failures)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
