#!/usr/bin/env python3
"""Mutation testing: plants each bug of scripts/mutants.txt, one at a time, in a scratch copy of
the tree, builds it incrementally and runs the test suite against it. A bug is killed when
some test fails. Prints killed/survived per bug and the ratio; exits 1 unless every bug is
killed (or a bug no longer applies: its `from` text must occur exactly once).

Run by hand before a release (it takes a while: one incremental build and one suite run per
bug); docs/testing.md has its latest result. Usage: scripts/mutate.sh [-k NAME] [--keep]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Tests that check packaging, installation or the harness itself: no planted bug in the
# library is theirs to find, and they take most of a suite run.
SKIPPED = ["package_deb", "install_consumer", "python_install", "python_wheel", "cli_harness",
           "layers", "layers_plant", "bench_gen_model"]


class Mutant:
    def __init__(self, name):
        self.name, self.file, self.before, self.after = name, None, None, None


def read_mutants(path):
    mutants = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            if line.startswith("== "):
                mutants.append(Mutant(line[3:].strip()))
            elif line.startswith(("file: ", "from: ", "to: ")):
                if not mutants:
                    raise SystemExit(f"{path}:{number}: field before the first '== NAME'")
                field, _, value = line.partition(": ")
                setattr(mutants[-1], {"file": "file", "from": "before", "to": "after"}[field],
                        value)
            elif line.strip() and not line.startswith("#"):
                raise SystemExit(f"{path}:{number}: unexpected line {line!r}")
    for m in mutants:
        if None in (m.file, m.before, m.after):
            raise SystemExit(f"{path}: mutant {m.name!r} lacks file, from or to")
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise SystemExit(f"{path}: duplicate mutant names")
    return mutants


def run(argv, cwd, log, timeout=None):
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode


def copy_tree(scratch):
    """The working tree's files (tracked and untracked, not ignored) into scratch/src; files
    already there with the same content are left alone so the build stays incremental."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    src = os.path.join(scratch, "src")
    for name in filter(None, listed):
        source, target = os.path.join(ROOT, name), os.path.join(src, name)
        if not os.path.isfile(source):
            continue
        with open(source, "rb") as handle:
            data = handle.read()
        if os.path.exists(target):
            with open(target, "rb") as handle:
                if handle.read() == data:
                    continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(source, target)  # a fresh mtime: the incremental build sees the change
    # A checkout of its own: tests that list the project's files ask git.
    subprocess.run(["git", "init", "-q"], cwd=src, check=True)
    subprocess.run(["git", "add", "-A"], cwd=src, check=True)
    return src


def failed_tests(build):
    log = os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log")
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8") as handle:
        return [line.strip().split(":", 1)[-1] for line in handle if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="only", action="append", default=[],
                        help="only bugs whose name has this (repeatable)")
    parser.add_argument("--scratch", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                          "ptepack-mutate"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--list", default=os.path.join(ROOT, "scripts", "mutants.txt"))
    args = parser.parse_args()
    mutants = [m for m in read_mutants(args.list)
               if not args.only or any(word in m.name for word in args.only)]
    os.makedirs(args.scratch, exist_ok=True)
    src, build = copy_tree(args.scratch), os.path.join(args.scratch, "build")
    logs = os.path.join(args.scratch, "logs")
    os.makedirs(logs, exist_ok=True)
    ctest = ["ctest", "--test-dir", build, "-j", str(args.jobs), "--stop-on-failure",
             "--timeout", "900", "-E", "^(" + "|".join(SKIPPED) + ")$"]

    print(f"mutate: {len(mutants)} bugs; scratch tree {args.scratch}", flush=True)
    if run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
           src, os.path.join(logs, "configure.log")) != 0 or \
            run(["cmake", "--build", build, "-j", str(args.jobs)], src,
                os.path.join(logs, "build.log")) != 0:
        print(f"mutate: the unmodified tree does not build (see {logs})")
        return 2
    if run(ctest, src, os.path.join(logs, "baseline.log")) != 0:
        print(f"mutate: the unmodified tree fails its tests: {failed_tests(build)} "
              f"(see {logs}/baseline.log)")
        return 2

    killed, survived, broken = [], [], []
    for m in mutants:
        path = os.path.join(src, m.file)
        with open(path, encoding="utf-8") as handle:
            original = handle.read()
        count = original.count(m.before)
        if count != 1:
            print(f"STALE     {m.name}: `from` occurs {count} times in {m.file}", flush=True)
            broken.append(m.name)
            continue
        started = time.monotonic()
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(original.replace(m.before, m.after))
            log = os.path.join(logs, m.name + ".log")
            if run(["cmake", "--build", build, "-j", str(args.jobs)], src, log) != 0:
                print(f"NO BUILD  {m.name} (see {log})", flush=True)
                broken.append(m.name)
                continue
            code = run(ctest, src, log)
        finally:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(original)
        seconds = time.monotonic() - started
        if code != 0:
            killed.append(m.name)
            print(f"killed    {m.name} ({seconds:.0f} s) by {', '.join(failed_tests(build))}",
                  flush=True)
        else:
            survived.append(m.name)
            print(f"SURVIVED  {m.name} ({seconds:.0f} s)", flush=True)
    # Leave the scratch build matching the unmodified tree for the next run.
    run(["cmake", "--build", build, "-j", str(args.jobs)], src, os.path.join(logs, "build.log"))
    total = len(killed) + len(survived)
    ratio = f"{100 * len(killed) / total:.0f} %" if total else "n/a"
    print(f"mutate: {len(killed)} killed, {len(survived)} survived of {total} ({ratio})"
          + (f"; {len(broken)} did not apply or build: {', '.join(broken)}" if broken else ""))
    return 0 if not survived and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
