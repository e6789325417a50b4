#!/usr/bin/env python3
"""No function in lib/ or apps/ longer than 80 lines.

A function's length is the number of lines from its opening brace to its closing
brace, both included; lambda bodies and local classes count toward the function
that holds them (clang-tidy's readability-function-size counts the same way).
The C++ is read with a small scanner that drops comments, string and character
literals and preprocessor lines, then follows braces: a brace opened at
namespace or class scope whose head (the text since the previous `;`, `{` or
`}`) ends in a parameter list, possibly followed by qualifiers, a trailing
return type or a constructor's initializer list, opens a function body.

Usage: check_function_size.py ROOT [--limit N] [--plant]
--plant checks a planted 81-line function (and a short one beside it) and exits 0
only if the long one alone is reported.
"""
import pathlib
import re
import sys
import tempfile

LIMIT = 80
SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def strip(text):
    """Comments, literals and preprocessor lines replaced by spaces; newlines kept."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            end = text.find(close, i + len(m.group(0)))
            end = n if end < 0 else end + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j, n - 1) + 1 - i))
            i = j + 1
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def is_function_head(head):
    head = head.strip()
    if not head or SCOPE_WORDS.search(head.split("(")[0]):
        return False
    if head.startswith("extern"):
        return False
    # A constructor's initializer list: drop it, keep the declarator.
    depth = 0
    for k, ch in enumerate(head):
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        elif ch == ":" and depth == 0 and head[k - 1:k + 1] != "::" and head[k:k + 2] != "::":
            head = head[:k].strip()
            break
    head = re.sub(r"->.*$", "", head).strip()
    head = re.sub(r"\b(const|noexcept|override|final|mutable|volatile|&|&&)\s*$", "", head).strip()
    while True:
        shorter = re.sub(r"(\b(const|noexcept|override|final|volatile)|&&|&)\s*$", "", head).strip()
        if shorter == head:
            break
        head = shorter
    head = re.sub(r"noexcept\s*\([^)]*\)\s*$", "", head).strip()
    if "=" in head.split("(")[0]:
        return False  # an initializer: `auto x = f(...) {` does not occur; `T x = {`
    return head.endswith(")")


def functions(text):
    """(name, first line, line count) of every function body at namespace or class scope."""
    clean = strip(text)
    stack = []  # kinds of open braces: "scope", "function", "other"
    head_start = 0
    body_start = None
    line = 1
    body_line = 0
    name = ""
    for i, ch in enumerate(clean):
        if ch == "\n":
            line += 1
        elif ch == "{":
            if stack and stack[-1] in ("function", "other", "inner"):
                stack.append("inner")
            elif clean.count("(", head_start, i) > clean.count(")", head_start, i):
                stack.append("argument")  # `= {}` in a parameter list: part of the head
                continue
            else:
                head = clean[head_start:i]
                if is_function_head(head):
                    stack.append("function")
                    body_line = line
                    before = head.split("(")[0].split()
                    name = before[-1] if before else "?"
                elif SCOPE_WORDS.search(head) or head.strip().startswith("extern"):
                    stack.append("scope")
                else:
                    stack.append("other")
            head_start = i + 1
        elif ch == "}":
            kind = stack.pop() if stack else "scope"
            if kind == "function":
                yield name, body_line, line - body_line + 1
            if kind != "argument":
                head_start = i + 1
        elif ch == ";" and (not stack or stack[-1] == "scope"):
            head_start = i + 1


def check(paths, limit):
    found = []
    for path in paths:
        for name, first, count in functions(path.read_text(encoding="utf-8")):
            if count > limit:
                found.append(f"{path}:{first}: function '{name}' is {count} lines (limit {limit})")
    return found


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    limit = LIMIT
    if "--limit" in argv:
        limit = int(argv[argv.index("--limit") + 1])
    if "--plant" in argv:
        body = "\n".join(f"  x += {k};" for k in range(79))
        with tempfile.TemporaryDirectory() as scratch:
            planted = pathlib.Path(scratch) / "planted.cpp"
            planted.write_text("namespace p {\nint f(int x,\n      int y = {}) {\n" + body +
                               "\n}\nint g() { return [] { return 1; }(); }\n}\n")
            problems = check([planted], limit)
        ok = len(problems) == 1 and "'f' is 81 lines" in problems[0]
        print("\n".join(problems) if problems else "planted function not reported")
        return 0 if ok else 1
    paths = sorted(p for d in ("lib", "apps") for p in (root / d).rglob("*")
                   if p.suffix in (".cpp", ".h") and "generated" not in p.name)
    problems = check(paths, limit)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} function(s) over {limit} lines: split them along their phases",
              file=sys.stderr)
        return 1
    print(f"{len(paths)} files: every function at most {limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
