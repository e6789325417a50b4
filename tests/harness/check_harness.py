#!/usr/bin/env python3
# Proves the CLI suites can fail: the shared harness (tests/cli/cli_common.py) exits non-zero
# when a case fails or none ran and zero when all pass, and every tests/cli/test_*.py exits
# non-zero when the binary it drives always fails (/bin/false). CTest `cli_harness`.
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(os.path.dirname(HERE), "cli")

SUITE = """
import sys
sys.path.insert(0, {cli!r})
import cli_common
suite = cli_common.Suite()

@suite.test
def passes(ctx):
    ctx.equal(1 + 1, 2, "arithmetic")

{extra}
if __name__ == "__main__":
    suite.main()
    print("AFTER MAIN")  # never reached: main() exits the process itself
"""

FAILING = """
@suite.test
def fails(ctx):
    ctx.equal(1 + 1, 3, "arithmetic")
"""

RAISING = """
@suite.test
def raises(ctx):
    raise KeyError("harness error")
"""


def run_suite(tmp, name, extra, *argv):
    path = os.path.join(tmp, name + ".py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(SUITE.format(cli=CLI, extra=extra))
    proc = subprocess.run([sys.executable, path, "--ptepack", "/bin/true", *argv],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout


def check_harness(failures):
    with tempfile.TemporaryDirectory(prefix="ptepack-harness-") as tmp:
        cases = [  # name, extra cases, argv, expected exit, text the summary must show
            ("all_pass", "", [], 0, "1 passed, 0 failed"),
            ("one_fails", FAILING, [], 1, "1 passed, 1 failed"),
            ("one_raises", RAISING, [], 1, "1 passed, 1 failed"),
            ("none_selected", "", ["-k", "no_such_case"], 1, "0 passed, 0 failed"),
        ]
        for name, extra, argv, expected, summary in cases:
            code, out = run_suite(tmp, name, extra, *argv)
            if code != expected:
                failures.append(f"harness: suite '{name}' exited {code}, expected {expected}:\n{out}")
            if summary not in out:
                failures.append(f"harness: suite '{name}' does not print {summary!r}:\n{out}")
            if "AFTER MAIN" in out:
                failures.append(f"harness: suite '{name}' returned from Suite.main()")


def run_against_false(script):
    try:
        proc = subprocess.run([sys.executable, script, "--ptepack", "/bin/false"],
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return script, None, "timed out"
    tail = proc.stdout.strip().splitlines()[-1:] or proc.stderr.strip().splitlines()[-1:]
    return script, proc.returncode, tail[0] if tail else ""


def check_every_suite(failures, jobs):
    scripts = sorted(glob.glob(os.path.join(CLI, "test_*.py")))
    if not scripts:
        failures.append(f"no tests/cli/test_*.py found under {CLI}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for script, code, tail in pool.map(run_against_false, scripts):
            name = os.path.basename(script)
            if code == 0 or code is None:
                failures.append(f"{name} against /bin/false: exit {code} ({tail})")
            else:
                print(f"ok   {name} against /bin/false: exit {code} ({tail})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--harness-only", action="store_true")
    args = parser.parse_args()
    failures = []
    check_harness(failures)
    if not failures:
        print("ok   the harness exits 0 when every case passes, 1 when one fails or none ran")
    if not args.harness_only:
        check_every_suite(failures, args.jobs)
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
