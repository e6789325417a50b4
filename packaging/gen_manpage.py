#!/usr/bin/env python3
# Writes ptepack(1) from the CLI's own --help texts, so the page says what the binary does.
# Usage: gen_manpage.py PTEPACK OUT.1.gz  (gzip with no name or time: the same bytes each run)
import gzip
import re
import subprocess
import sys

COMMANDS = ("pack", "dump", "verify", "diff")
EXIT_CODES = (
    ("0", "success (verify: the artifact is whole; diff: nothing a runtime computes differs)"),
    ("1", "verify found problems; pack was given a damaged packed directory; diff: the "
          "artifacts differ"),
    ("2", "usage: a bad option or INPUT, an output that would overwrite an input"),
    ("3", "invalid input: a malformed, truncated or corrupt file, a graph or data rule broken"),
    ("4", "conflict: two keys with one final name, state disagreeing across methods, a tensor "
          "larger than the shard cap"),
    ("5", "I/O: a missing file, a read or write failure"),
    ("70", "internal error (a bug)"),
    ("130, 143", "interrupted by SIGINT or SIGTERM (the temporary output removed)"),
)


def roff(text):
    """Plain text safe in a roff line: backslashes, leading dots and quotes escaped."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.M)


def help_of(ptepack, *argv):
    done = subprocess.run([ptepack, *argv, "--help"], capture_output=True, text=True,
                          check=True, env={"COLUMNS": "80", "LC_ALL": "C"})
    return done.stdout.rstrip("\n")


def page(ptepack):
    version = subprocess.run([ptepack, "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0].split()[-1]
    lines = [
        f'.TH PTEPACK 1 "" "ptepack {version}" "User Commands"',
        ".SH NAME",
        "ptepack \\- pack, inspect, verify and compare ExecuTorch model artifacts",
        ".SH SYNOPSIS",
        ".B ptepack",
        "\\fICOMMAND\\fR [\\fIOPTIONS\\fR] \\fIARGS\\fR...",
        ".SH DESCRIPTION",
        roff("ptepack merges program graphs and ExecuTorch .pte programs with their weights "
             "into deduplicated, size-capped artifacts (.ptn packages, .pte programs, or "
             "directories of content-named .ptd or safetensors shards), shows any artifact, "
             "proves it whole, and tells whether anything a runtime computes changed between "
             "two. The same inputs and options give the same bytes."),
        ".PP",
        ".nf",
        roff(help_of(ptepack)),
        ".fi",
    ]
    for command in COMMANDS:
        lines += [f".SH {command.upper()}", ".nf", roff(help_of(ptepack, command)), ".fi"]
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_CODES:
        lines += [".TP", f".B {code}", roff(meaning)]
    lines += [
        ".SH FILES",
        ".TP",
        ".I /usr/share/ptepack/schema/",
        roff("JSON Schemas of the --json reports (pack, dump, verify, diff) and of "
             "manifest.json, and the FlatBuffers schemas of the formats ptepack writes."),
        ".SH SEE ALSO",
        roff("The project's README and docs/ (formats, shard planner, rename rules)."),
    ]
    return "\n".join(lines) + "\n"


def main():
    ptepack, out = sys.argv[1], sys.argv[2]
    text = page(ptepack).encode("utf-8")
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                               compresslevel=9, mtime=0) as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
