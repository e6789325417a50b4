#!/usr/bin/env python3
"""Writes the ptepack wheel: the Python module (python/ptepack/) and the CLI binary, which pip
installs into the environment's bin/ (ptepack-<v>.data/scripts/ptepack).

    make_wheel.py --binary PATH --out DIR [--plat-tag TAG]

The wheel is a zip written here, not by a build backend (docs/packaging.md): no build tools
or network needed, and the same inputs give the same bytes (fixed timestamps and modes,
sorted entries). The version is python/pyproject.toml's, and must be the binary's
(`ptepack --version`) and the module's `__version__`. A manylinux tag is refused for a binary
with any dynamic dependency: only a fully static executable (no NEEDED entry, no versioned
glibc symbol) runs on every manylinux system. Nothing is written into the source tree.
"""
from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "python")
DATE = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest: no build time in the bytes
FILE_MODE = 0o100644
EXEC_MODE = 0o100755
ARCHES = {"x86_64": "X86-64", "aarch64": "AArch64", "i686": "80386"}


class Refused(Exception):
    """The inputs cannot make this wheel (the reason)."""


def project_metadata(source: str) -> dict:
    """pyproject.toml's [project] table."""
    path = os.path.join(source, "pyproject.toml")
    with open(path, "rb") as handle:
        try:
            import tomllib
        except ImportError:  # Python < 3.11: the few fields read with a pattern
            text = handle.read().decode()
            section = text.split("[project]", 1)[1].split("\n[", 1)[0]
            return {k: v for k, v in re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', section, re.M)}
        return tomllib.load(handle)["project"]


def cli_version(binary: str) -> str:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    first = done.stdout.splitlines()[0].split() if done.stdout else []
    if done.returncode != 0 or len(first) != 2 or first[0] != "ptepack":
        raise Refused(f"{binary}: not a ptepack binary (--version printed {done.stdout!r}, "
                      f"exit {done.returncode})")
    return first[1]


def module_version(source: str) -> str:
    with open(os.path.join(source, "ptepack", "__init__.py"), encoding="utf-8") as handle:
        found = re.search(r'^__version__ = "([^"]+)"', handle.read(), re.M)
    if not found:
        raise Refused("python/ptepack/__init__.py: no __version__")
    return found.group(1)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise Refused(f"{name} not found (binutils): needed to check a manylinux binary")
    return path


def check_platform(binary: str, tag: str) -> None:
    """Refuses a binary that is not an ELF executable for the tag's architecture, and, for a
    manylinux or musllinux tag, one with dynamic dependencies."""
    with open(binary, "rb") as handle:
        if handle.read(4) != b"\x7fELF":
            raise Refused(f"{binary}: not an ELF executable")
    arch = next((a for a in ARCHES if tag.endswith("_" + a)), None)
    if arch is None:
        raise Refused(f"{tag}: a platform tag of an architecture this script knows "
                      f"({', '.join(ARCHES)}) is needed")
    header = subprocess.run([tool("readelf"), "-h", binary], capture_output=True, text=True,
                            check=True).stdout
    machine = re.search(r"Machine:\s*(.*)", header)
    if not machine or ARCHES[arch] not in machine.group(1):
        raise Refused(f"{binary}: built for {machine.group(1) if machine else '?'}, "
                      f"not {arch} ({tag})")
    if not any(t.startswith(("manylinux", "musllinux")) for t in tag.split(".")):
        return
    dynamic = subprocess.run([tool("readelf"), "-d", binary], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    if needed:
        raise Refused(f"{binary}: needs {', '.join(needed)}; a {tag} wheel takes only a fully "
                      "static binary (scripts/package.sh builds one)")
    interp = subprocess.run([tool("readelf"), "-l", binary], capture_output=True, text=True,
                            check=True).stdout
    if "Requesting program interpreter" in interp:
        raise Refused(f"{binary}: has a program interpreter (dynamically linked); a {tag} "
                      "wheel takes only a fully static binary")
    symbols = subprocess.run([tool("objdump"), "-T", binary], capture_output=True, text=True,
                             check=False).stdout
    versioned = sorted(set(re.findall(r"\b(GLIBC_[0-9.]+)\b", symbols)))
    if versioned:
        raise Refused(f"{binary}: imports versioned glibc symbols ({', '.join(versioned)}); a "
                      f"{tag} wheel takes only a fully static binary")


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def metadata_text(project: dict, source: str) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {project['version']}"]
    if project.get("description"):
        lines.append(f"Summary: {project['description']}")
    license_ = project.get("license")
    if isinstance(license_, dict) and license_.get("text"):
        lines.append(f"License: {license_['text']}")
    elif isinstance(license_, str):
        lines.append(f"License: {license_}")
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    readme = os.path.join(source, "README.md")
    body = ""
    if os.path.isfile(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as handle:
            body = handle.read()
    return "\n".join(lines) + "\n\n" + body


def package_files(source: str) -> list:
    """(archive name, bytes) of every file of the package: sources and py.typed, sorted."""
    package = os.path.join(source, "ptepack")
    files = []
    for directory, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in names:
            if name.endswith((".pyc", ".pyo")) or name == "_bundled.py":
                continue
            path = os.path.join(directory, name)
            arcname = "ptepack/" + os.path.relpath(path, package).replace(os.sep, "/")
            with open(path, "rb") as handle:
                files.append((arcname, handle.read()))
    return sorted(files)


BUNDLED = '''"""Written by scripts/make_wheel.py into the wheel only: the ptepack binary was installed
with this module (pip puts the wheel's ptepack-<v>.data/scripts/ptepack into the environment's
scripts directory), so find_cli() runs that one before any ptepack on PATH."""
SCRIPT = "ptepack"
'''


def build(binary: str, out: str, plat_tag: str, source: str = SOURCE) -> str:
    """Writes the wheel into `out`; its path."""
    project = project_metadata(source)
    version = project["version"]
    cli = cli_version(binary)
    if cli != version:
        raise Refused(f"{binary} is version {cli}, python/pyproject.toml says {version}: "
                      "build the CLI of this tree, or bring the versions together")
    module = module_version(source)
    if module != version:
        raise Refused(f"ptepack.__version__ is {module}, python/pyproject.toml says {version}")
    if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)*", plat_tag):
        raise Refused(f"{plat_tag}: not a platform tag")
    check_platform(binary, plat_tag)

    name = project["name"]
    dist_info = f"{name}-{version}.dist-info"
    data = f"{name}-{version}.data"
    with open(binary, "rb") as handle:
        executable = handle.read()
    license_path = os.path.join(ROOT, "LICENSE")
    entries = package_files(source) + [("ptepack/_bundled.py", BUNDLED.encode())]
    entries.sort()
    entries.append((f"{data}/scripts/ptepack", executable))
    wheel = ["Wheel-Version: 1.0", "Generator: ptepack scripts/make_wheel.py",
             "Root-Is-Purelib: false"]
    wheel += [f"Tag: py3-none-{t}" for t in plat_tag.split(".")]
    info = [(f"{dist_info}/METADATA", metadata_text(project, source).encode()),
            (f"{dist_info}/WHEEL", ("\n".join(wheel) + "\n").encode())]
    if os.path.isfile(license_path):
        with open(license_path, "rb") as handle:
            info.append((f"{dist_info}/LICENSE", handle.read()))
    entries += sorted(info)

    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for arcname, content in entries:
        writer.writerow([arcname, record_hash(content), len(content)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    entries.append((f"{dist_info}/RECORD", record.getvalue().encode()))

    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{name}-{version}-py3-none-{plat_tag}.whl")
    handle_fd, temporary = tempfile.mkstemp(prefix=".ptepack-wheel-", dir=out)
    try:
        with os.fdopen(handle_fd, "wb") as raw, zipfile.ZipFile(raw, "w") as archive:
            for arcname, content in entries:
                entry = zipfile.ZipInfo(arcname, date_time=DATE)
                entry.create_system = 3  # Unix: the mode below is read
                mode = EXEC_MODE if arcname.startswith(f"{data}/scripts/") else FILE_MODE
                entry.external_attr = mode << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, content, compresslevel=9)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="the ptepack executable to ship")
    parser.add_argument("--out", required=True, help="directory to write the wheel into")
    parser.add_argument("--plat-tag", default="linux_x86_64",
                        help="platform tag (default linux_x86_64; a manylinux tag needs a "
                             "fully static binary)")
    parser.add_argument("--source", default=SOURCE, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        path = build(os.path.abspath(args.binary), args.out, args.plat_tag, args.source)
    except Refused as error:
        print(f"make_wheel.py: error: {error}", file=sys.stderr)
        return 1
    print(f"{path} ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
