#!/usr/bin/env python3
# The wheel (scripts/make_wheel.py) from the built CLI: written twice to the same bytes, every
# RECORD hash and size true, the binary's mode 0755; then installed with pip, without an index,
# into a fresh venv of Debian's own Python (no system site packages), and used with a PATH that
# holds no other ptepack and no $PTEPACK: venv/bin/ptepack is the CLI (version, exit codes),
# the installed module finds it and packs, verifies and diffs, `python -m ptepack` runs it.
# Run with Debian's /usr/bin/python3; exits 77 (skipped) without python3-venv/ensurepip.
import argparse
import base64
import csv
import hashlib
import io
import os
import stat
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_WHEEL = os.path.join(ROOT, "scripts", "make_wheel.py")
SKIP = 77

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def make_wheel(binary, out, *extra):
    return subprocess.run([sys.executable, MAKE_WHEEL, "--binary", binary, "--out", out, *extra],
                          capture_output=True, text=True)


def check_record(path):
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(f"{dist_info}/RECORD").decode())))
        listed = {row[0] for row in rows}
        check(listed == set(names) and len(rows) == len(names),
              "RECORD lists every entry of the zip once")
        bad = []
        for name, digest, size in rows:
            if name == f"{dist_info}/RECORD":
                bad += [name] if (digest, size) != ("", "") else []
                continue
            data = archive.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(
                hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if digest != want or int(size) != len(data):
                bad.append(name)
        check(not bad, f"every RECORD hash and size matches the zip ({len(rows)} rows)" +
              (f": wrong for {bad}" if bad else ""))
        script = next(i for i in archive.infolist() if i.filename.endswith(".data/scripts/ptepack"))
        check(stat.S_IMODE(script.external_attr >> 16) == 0o755 and script.create_system == 3,
              "the binary is data/scripts/ptepack with mode 0755")
        check(all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in archive.infolist()),
              "every entry has the fixed timestamp")
        check("ptepack/_bundled.py" in names and "ptepack/py.typed" in names,
              "the package carries _bundled.py and py.typed")
        check(names[-1] == f"{dist_info}/RECORD", "RECORD is the last entry")


def clean_path(venv_bin):
    """PATH without any directory holding a ptepack (nor the venv's bin)."""
    keep = [d for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if d and os.path.realpath(d) != os.path.realpath(venv_bin)
            and not os.path.exists(os.path.join(d, "ptepack"))]
    return os.pathsep.join(keep)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ptepack", required=True, help="the built CLI")
    parser.add_argument("--examples", required=True)
    args = parser.parse_args()
    cli = os.path.abspath(args.ptepack)
    examples = [os.path.join(os.path.abspath(args.examples), n)
                for n in ("prefill.json", "decode.json")]

    with tempfile.TemporaryDirectory(prefix="ptepack-wheel-") as tmp:
        venv = os.path.join(tmp, "V")
        made = subprocess.run(["/usr/bin/python3", "-m", "venv", venv], capture_output=True,
                              text=True)
        if made.returncode != 0:
            if "ensurepip" in made.stderr or "venv" in made.stderr:
                print("skipped: python3 -m venv cannot make a venv with pip here "
                      "(apt-get install python3-venv):", made.stderr.strip().splitlines()[-1])
                return SKIP
            print(made.stderr, file=sys.stderr)
            return 1

        # The wheel, twice: the same bytes.
        first, second = make_wheel(cli, os.path.join(tmp, "w1")), make_wheel(cli, os.path.join(tmp, "w2"))
        check(first.returncode == 0 and second.returncode == 0,
              "make_wheel.py writes a wheel" + (first.stderr or second.stderr))
        if failures:
            return 1
        wheels = [os.path.join(tmp, d, n) for d in ("w1", "w2")
                  for n in os.listdir(os.path.join(tmp, d))]
        wheel = wheels[0]
        check(len(wheels) == 2 and os.path.basename(wheel) == os.path.basename(wheels[1]),
              f"one wheel in each directory: {os.path.basename(wheel)}")
        with open(wheels[0], "rb") as a, open(wheels[1], "rb") as b:
            check(a.read() == b.read(), "the same inputs give the same bytes")
        print(f"wheel size: {os.path.getsize(wheel)} bytes")
        check_record(wheel)

        # Refusals: a manylinux tag for a dynamically linked CLI; a version not pyproject's.
        many = make_wheel(cli, os.path.join(tmp, "many"), "--plat-tag",
                          "manylinux_2_17_x86_64.manylinux2014_x86_64")
        dynamic = "NEEDED" in subprocess.run(["readelf", "-d", cli], capture_output=True,
                                             text=True).stdout
        if dynamic:
            check(many.returncode != 0 and "static" in many.stderr
                  and not os.path.exists(os.path.join(tmp, "many")),
                  "a manylinux tag is refused for a dynamically linked binary")
        for tags in ("linux_x86_64.manylinux2014_x86_64", "musllinux_1_2_x86_64"):
            mixed = make_wheel(cli, os.path.join(tmp, "mixed"), "--plat-tag", tags)
            if dynamic:
                check(mixed.returncode != 0 and "static" in mixed.stderr
                      and not os.path.exists(os.path.join(tmp, "mixed")),
                      f"--plat-tag {tags} is refused for a dynamically linked binary")
        fake = os.path.join(tmp, "fake-ptepack")
        with open(fake, "w") as handle:
            handle.write("#!/bin/sh\necho 'ptepack 999.0.0'\n")
        os.chmod(fake, 0o755)
        other = make_wheel(fake, os.path.join(tmp, "other"))
        check(other.returncode != 0 and "999.0.0" in other.stderr,
              "a binary of another version is refused")

        # Installed into a fresh venv, without an index.
        vbin = os.path.join(venv, "bin")
        pip = subprocess.run([os.path.join(vbin, "python"), "-m", "pip", "install", "--quiet",
                              "--no-index", "--disable-pip-version-check", wheel],
                             capture_output=True, text=True)
        check(pip.returncode == 0, "pip install --no-index WHEEL into a fresh venv" + pip.stderr)
        if failures:
            return 1
        env = {k: v for k, v in os.environ.items()
               if k not in ("PTEPACK", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = clean_path(vbin)
        env["HOME"] = tmp

        def run(argv, env=env, **kw):
            return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp, **kw)

        installed = os.path.join(vbin, "ptepack")
        check(os.access(installed, os.X_OK), "venv/bin/ptepack is installed, executable")
        built = run([cli, "--version"])
        got = run([installed, "--version"])
        check(got.returncode == 0 and got.stdout == built.stdout,
              f"venv/bin/ptepack --version is the built CLI's: {got.stdout.splitlines()[:1]}")
        missing = os.path.join(tmp, "nonexistent")
        want = run([cli, "verify", missing])
        got = run([installed, "verify", missing])
        check(want.returncode != 0 and (got.returncode, got.stderr) == (want.returncode, want.stderr),
              f"venv/bin/ptepack verify MISSING exits {got.returncode}, as the CLI ({want.returncode})")
        python = os.path.join(vbin, "python")
        module = run([python, "-m", "ptepack", "--version"])
        check(module.returncode == 0 and module.stdout == built.stdout,
              "python -m ptepack --version is the CLI's")
        module = run([python, "-m", "ptepack", "verify", missing])
        check(module.returncode == want.returncode,
              f"python -m ptepack verify MISSING exits {module.returncode}")

        out = os.path.join(tmp, "packed")
        script = (
            "import os, sys, ptepack\n"
            "assert ptepack.__file__.startswith(sys.prefix), ptepack.__file__\n"
            f"assert os.path.samefile(ptepack.find_cli(), {installed!r}), ptepack.find_cli()\n"
            "assert ptepack.version().cli == ptepack.__version__\n"
            f"r = ptepack.pack({examples!r}, {out!r})\n"
            f"v = ptepack.verify({out!r})\n"
            "assert v.ok, v.problems\n"
            f"again = ptepack.pack({examples!r}, {out + '2'!r})\n"
            f"assert ptepack.diff({out!r}, {out + '2'!r}).equivalent\n"
            f"assert not ptepack.diff({examples[0]!r}, {examples[1]!r}).equivalent\n"
            "try:\n"
            f"    ptepack.verify({missing!r})\n"
            "except FileNotFoundError as e:\n"
            "    assert e.filename is not None\n"
            "print(r.kind, len(r.shards), v.files_checked)\n")
        done = run([python, "-c", script])
        check(done.returncode == 0 and done.stdout.startswith("packed directory"),
              "the installed module finds the bundled CLI; pack, verify, diff: " +
              (done.stdout.strip() or done.stderr.strip()))
        # Another ptepack first on PATH: the wheel's own CLI still wins (only $PTEPACK and
        # ptepack= come before it).
        decoy_dir = os.path.join(tmp, "decoy")
        os.makedirs(decoy_dir)
        decoy = os.path.join(decoy_dir, "ptepack")
        with open(decoy, "w") as handle:
            handle.write("#!/bin/sh\necho 'ptepack 0.0.1-decoy'\n")
        os.chmod(decoy, 0o755)
        first = run([python, "-c", "import ptepack; print(ptepack.find_cli()); "
                     "print(ptepack.version().cli)"],
                    env=dict(env, PATH=decoy_dir + os.pathsep + env["PATH"]))
        check(first.returncode == 0 and first.stdout.split() == [installed,
                                                                 built.stdout.split()[1]],
              f"the bundled CLI before another ptepack on PATH: {first.stdout!r} {first.stderr!r}")
        check(not any(n.endswith((".egg-info", "build"))
                      for n in os.listdir(os.path.join(ROOT, "python"))),
              "nothing written into python/")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
