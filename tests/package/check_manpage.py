#!/usr/bin/env python3
"""ptepack(1) against the binary and README.md, so the hand-written page cannot drift.

Checks, each failure printed as one FAIL line:
  groff     `groff -man -ww -z` on the uncompressed page prints nothing (no warning at all);
  render    `MANWIDTH=80 man -l PAGE | col -b` (LC_ALL=C.UTF-8) runs cleanly, no line of it
            is wider than 80 columns, and it is ASCII only;
  options   every option `ptepack CMD --help` lists for a command (its subcommands are read
            from `ptepack --help`) is a .TP entry in that command's section (PACK, DUMP, ...;
            -h/--help and --version, listed by `ptepack --help`, in OPTIONS), with its short
            form; no section documents an option its command's --help does not list, and
            the rendered page names no option that no --help lists;
  exit      the codes of the EXIT STATUS section are the codes of README.md's exit code table
            ("## Exit codes");
  version   .TH carries the version `ptepack --version` prints, and no @VARIABLE@ is left.
Usage: check_manpage.py --ptepack BIN --page PAGE[.gz] --readme README.md [--plant]
--plant runs the same checks on copies of the page with one fault planted in each (a
100-column line, a missing option, an option no --help lists, a typographic quote, a
changed exit code, an undefined macro) and exits 0 only when the real page passes and
each planted fault is reported by the check meant to catch it.
"""
import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata

WIDTH = 80
LONG = re.compile(r"(?<![\w-])--[A-Za-z0-9][\w-]*")
SHORT = re.compile(r"(?<![\w-])-[A-Za-z](?![\w-])")
DASHES = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-",
                        "\u2212": "-"})


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


def columns(line):
    """Display columns of a rendered line: tabs to 8, wide characters 2, combining 0."""
    width = 0
    for char in line.expandtabs(8):
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


# --- the binary's --help texts ------------------------------------------------------------

def help_text(ptepack, *argv):
    done = run([ptepack, *argv, "--help"], env=dict(os.environ, COLUMNS="80", LC_ALL="C"))
    if done.returncode != 0:
        sys.exit(f"FAIL `ptepack {' '.join(argv)} --help` exited {done.returncode}: "
                 f"{done.stderr.strip()}")
    return done.stdout


def help_block(text, title):
    """The lines of one block of a CLI11 help text ('Options:', 'Subcommands:')."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip() == title:
            inside = True
        elif inside and line and not line.startswith(" "):
            break
        elif inside:
            lines.append(line)
    return lines


def help_options(text):
    """{long option: short option or None} from the first column of 'Options:'."""
    options = {}
    for line in help_block(text, "Options:"):
        if not line.startswith("  -"):
            continue  # a description continued on its own line
        names = line.split()[0]  # -o,--output  --graph{text}  --cap-mode
        longs = [re.split(r"[{:=\[]", n, 1)[0] for n in names.split(",") if n.startswith("--")]
        shorts = [n for n in names.split(",") if re.fullmatch(r"-[A-Za-z]", n)]
        for name in longs:
            options[name] = shorts[0] if shorts else None
    return options


def cli_options(ptepack):
    """{command ('' for ptepack itself): {long: short}}; the commands from `ptepack --help`."""
    top = help_text(ptepack)
    commands = [line.split()[0] for line in help_block(top, "Subcommands:")
                if line.startswith("  ") and line.split()]
    result = {"": help_options(top)}
    for command in commands:
        if command != "help":  # `ptepack help [COMMAND]` prints the usage, like --help
            result[command] = help_options(help_text(ptepack, command))
    return result


# --- the page -----------------------------------------------------------------------------

def roff_text(line):
    """A roff source line as plain text: macro name, quotes and font escapes dropped."""
    if line.startswith((".", "'")):
        line = line[1:].lstrip()
        line = line.split(None, 1)[1] if " " in line else ""
    line = re.sub(r"\\f(\(..|\[[^]]*\]|.)", "", line)
    line = line.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "").replace('"', "")
    return line


def page_sections(source):
    """[(section title, [TP tag texts])] in page order, from the roff source."""
    sections, lines = [], source.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SH"):
            sections.append((line[3:].strip().strip('"'), []))
        elif line.startswith(".TP") and sections:
            j = i + 1
            while j < len(lines) and lines[j].startswith('.\\"'):
                j += 1
            if j < len(lines):
                sections[-1][1].append(roff_text(lines[j]))
    return sections


# Sections every manual page has: a command of the same name documents its options in
# "NAME COMMAND" (the files command in FILES COMMAND, beside the page's FILES).
STANDARD_SECTIONS = {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT",
                     "FILES", "EXAMPLES", "SEE ALSO"}


def section_title(command):
    """The section documenting `command`'s options ('' is ptepack's own: OPTIONS)."""
    if not command:
        return "OPTIONS"
    title = command.upper()
    return f"{title} COMMAND" if title in STANDARD_SECTIONS else title


def check_options(source, rendered, options, fail):
    sections = dict(page_sections(source))
    known = set()
    for command, listed in options.items():
        known |= set(listed)
        title = section_title(command)
        helped = f"`ptepack {command} --help`" if command else "`ptepack --help`"
        if title not in sections:
            fail("options", f"no section {title} for {helped}")
            continue
        tags = sections[title]
        documented = {}
        for tag in tags:
            for name in LONG.findall(tag):
                documented[name] = tag
        for name, short in sorted(listed.items()):
            if command and name == "--help":
                continue  # one -h, --help entry in OPTIONS covers every command
            if name not in documented:
                fail("options", f"{title}: {helped} lists {name}, which has no .TP entry "
                                f"in the section")
            elif short and short not in SHORT.findall(documented[name]):
                fail("options", f"{title}: the entry of {name} lacks its short form {short}")
        for name in sorted(set(documented) - set(listed)):
            fail("options", f"{title} documents {name}, which {helped} does not list")
    for name in sorted(set(LONG.findall(rendered.translate(DASHES))) - known):
        fail("options", f"the page names {name}, which no --help lists")


def readme_exit_codes(readme):
    text = open(readme, encoding="utf-8").read()
    if "\n## Exit codes" not in text:
        sys.exit(f"FAIL {readme}: no '## Exit codes' section")
    section = text.split("\n## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = []
    for row in re.findall(r"^\|([^|\n]*)\|", section, re.M):
        codes += [int(code) for code in re.findall(r"\d+", row)]
    if not codes:
        sys.exit(f"FAIL {readme}: no exit code table under '## Exit codes'")
    return codes


def check_exit_codes(source, readme_codes, fail):
    tags = dict(page_sections(source)).get("EXIT STATUS")
    if tags is None:
        fail("exit", "no EXIT STATUS section")
        return
    page = [int(code) for tag in tags for code in re.findall(r"\d+", tag)]
    for code in sorted(set(readme_codes) - set(page)):
        fail("exit", f"EXIT STATUS lacks code {code} of README.md's table")
    for code in sorted(set(page) - set(readme_codes)):
        fail("exit", f"EXIT STATUS lists code {code}, which README.md's table does not")
    for code in sorted({c for c in page if page.count(c) > 1}):
        fail("exit", f"EXIT STATUS lists code {code} twice")


def check_version(source, version, fail):
    title = re.search(r"^\.TH .*$", source, re.M)
    if not title or f'"ptepack {version}"' not in title.group(0):
        fail("version", f".TH does not carry 'ptepack {version}': "
                        f"{title.group(0) if title else 'no .TH'}")
    for name in sorted(set(re.findall(r"@[A-Za-z_][A-Za-z0-9_]*@", source))):
        fail("version", f"{name} was not substituted")


def check_groff(source, fail):
    done = run(["groff", "-man", "-ww", "-z"], input=source)
    for line in done.stderr.splitlines():
        fail("groff", line)
    if done.returncode != 0:
        fail("groff", f"groff exited {done.returncode}")


def render(source, fail):
    """The page as `MANWIDTH=80 man -l PAGE | col -b` shows it in a UTF-8 locale."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MAN", "GROFF", "LANG", "LC_")) and k != "PAGER"}
    env.update(LC_ALL="C.UTF-8", MANWIDTH=str(WIDTH), MANPAGER="cat", PAGER="cat")
    with tempfile.TemporaryDirectory(prefix="ptepack-man-") as tmp:
        path = os.path.join(tmp, "ptepack.1")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        man = subprocess.run(["man", "-l", path], capture_output=True, env=env)
    for line in man.stderr.decode("utf-8", "replace").splitlines():
        fail("render", f"man: {line}")
    if man.returncode != 0 or not man.stdout:
        fail("render", f"man -l exited {man.returncode} with {len(man.stdout)} bytes")
    col = subprocess.run(["col", "-b"], input=man.stdout, capture_output=True, env=env)
    if col.returncode != 0:
        fail("render", f"col -b exited {col.returncode}: {col.stderr.decode(errors='replace')}")
    return col.stdout.decode("utf-8", "replace")


def check_width(rendered, fail):
    for number, line in enumerate(rendered.splitlines(), 1):
        if columns(line) > WIDTH:
            fail("render", f"rendered line {number} is {columns(line)} columns wide "
                           f"(at most {WIDTH}): {line.strip()[:60]}...")
        # ASCII only: options and examples copy and paste as typed, and byte-counting tools
        # (mawk's length) agree with the column count.
        for char in sorted(set(line) - set(map(chr, range(128)))):
            fail("render", f"rendered line {number} has U+{ord(char):04X} {char} (write ASCII: "
                           f"\\-, \\(dq, \\(aq): {line.strip()[:60]}")


def check_page(source, options, version, readme_codes, quiet=False):
    """Every check on one page's roff source; returns [(check, message)]."""
    failures = []

    def fail(check, message):
        failures.append((check, message))
        if not quiet:
            print(f"FAIL [{check}] {message}", file=sys.stderr)

    check_groff(source, fail)
    rendered = render(source, fail)
    check_width(rendered, fail)
    check_options(source, rendered, options, fail)
    check_exit_codes(source, readme_codes, fail)
    check_version(source, version, fail)
    return failures


# --- the planted faults ---------------------------------------------------------------------

def drop_entry(source, section, option):
    """The page without the .TP entry of `option` in `section`."""
    lines = source.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.split()[:2] == [".SH", section]), None)
    if start is None:
        return source
    tag = next((i for i in range(start + 1, len(lines))
                if roff_text(lines[i]).split()[:1] == [option]
                and lines[i - 1].startswith(".TP")), None)
    if tag is None:
        return source
    end = next((i for i in range(tag + 1, len(lines))
                if lines[i].startswith((".TP", ".PP", ".SH"))), len(lines))
    return "".join(lines[:tag - 1] + lines[end:])


def plants(source):
    """(what, the check meant to catch it, a word of its message, the page with it planted)."""
    wide = ".nf\n" + "x" * (WIDTH + 20 - 7) + "\n.fi\n"  # 7 columns of indent: 100 in all
    description = ".SH DESCRIPTION\n"
    yield ("a 100-column line", "render", "100 columns",
           source.replace(description, description + wide, 1))
    yield ("--max-shard-tensors missing from PACK", "options", "--max-shard-tensors",
           drop_entry(source, "PACK", "--max-shard-tensors"))
    yield ("--no-such-option in DUMP", "options", "--no-such-option",
           source.replace(".SH DUMP\n", ".SH DUMP\n.TP\n.B \\-\\-no\\-such\\-option\nPlanted.\n",
                          1))
    yield ("a typographic quote", "render", "U+201C",
           source.replace(description, description + "\\(lqx\\(rq\n", 1))
    yield ("exit code 70 changed to 71", "exit", "code 70",
           re.sub(r"^\.B 70$", ".B 71", source, count=1, flags=re.M))
    yield ("an undefined macro", "groff", "'XX'",
           source.replace(".SH FILES\n", ".SH FILES\n.XX planted\n", 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ptepack", required=True)
    parser.add_argument("--page", required=True, help="ptepack.1 or ptepack.1.gz")
    parser.add_argument("--readme", required=True)
    parser.add_argument("--plant", action="store_true")
    args = parser.parse_args()
    for tool, package in (("groff", "groff-base"), ("man", "man-db"), ("col", "bsdextrautils")):
        if shutil.which(tool) is None:
            sys.exit(f"FAIL {tool} not found (Debian package {package})")
    opener = gzip.open if args.page.endswith(".gz") else open
    with opener(args.page, "rt", encoding="utf-8") as handle:
        source = handle.read()
    options = cli_options(args.ptepack)
    version = run([args.ptepack, "--version"]).stdout.split("\n", 1)[0].split()
    if len(version) != 2 or version[0] != "ptepack":
        sys.exit(f"FAIL `ptepack --version` printed {' '.join(version)!r}")
    version = version[1]
    readme_codes = readme_exit_codes(args.readme)
    failures = check_page(source, options, version, readme_codes)
    if not args.plant:
        print(f"{'ok' if not failures else 'FAILED'}: {args.page}: {len(failures)} failures "
              f"(the --help texts of ptepack and {len(options) - 1} commands, "
              f"exit codes {sorted(set(readme_codes))})")
        return 1 if failures else 0
    missed = 0
    for what, check, word, planted in plants(source):
        if planted == source:
            print(f"FAIL plant '{what}': could not be planted", file=sys.stderr)
            missed += 1
            continue
        caught = [message for name, message in check_page(planted, options, version,
                                                          readme_codes, quiet=True)
                  if name == check and word in message]
        print(f"{'caught' if caught else 'MISSED'} {what} [{check}]: "
              f"{caught[0] if caught else 'no such failure reported'}")
        missed += not caught
    if failures or missed:
        print(f"FAILED: {len(failures)} failures on the page, {missed} plants missed")
        return 1
    print("ok: the page passes and every planted fault is caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
