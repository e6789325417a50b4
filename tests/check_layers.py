#!/usr/bin/env python3
"""The layer check: every include under lib/ and apps/ against docs/architecture.md's table.

Each file belongs to the layer of its folder (lib/src/<layer>/, lib/include/ptepack/<layer>/,
apps/ -> cli); a generated schema header to the layer the table names for it. An include is
allowed when it stays in its layer or names a layer that layer's row lists under "may include".
Exit 0 when every include is allowed, 1 listing each one that is not (or a folder the table
does not know, or a source over 500 lines). `--plant` runs the same check with one upward include added in memory
(base/error.h including pack/pack.h) and exits 0 only if that include is reported.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<(ptepack/[^>]+)>)', re.M)
MAX_LINES = 500  # no source under lib/ or apps/ is longer
ROW = re.compile(r"^\|\s*`([a-z_]+)`\s*\|\s*([^|]*)\|\s*([^|]*)\|", re.M)


def read_table(root):
    """{layer: set of layers it may include} and {generated header stem: layer}."""
    path = os.path.join(root, "docs", "architecture.md")
    text = open(path, encoding="utf-8").read()
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    allowed, schema = {}, {}
    for layer, may, headers in ROW.findall(section):
        names = re.findall(r"`([a-z_]+)`", may)
        allowed[layer] = set(names)
        for stem in re.findall(r"`([a-z_0-9]+)_generated\.h`", headers):
            schema[stem] = layer
    if not allowed:
        sys.exit(f"{path}: no layer table found under '## The layers'")
    return allowed, schema


UMBRELLA = "ptepack/ptepack.h"  # the public API in one header: at the top, with the CLI


def layer_of(root, path):
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    if rel == "lib/include/" + UMBRELLA:
        return "cli"
    for prefix in ("lib/src/", "lib/include/ptepack/"):
        if rel.startswith(prefix):
            return rel[len(prefix):].split("/", 1)[0]
    if rel.startswith("apps/"):
        return "cli"
    return None


def target_layer(root, path, include, schema, source_layer, internal_layers):
    if include.startswith("."):  # relative: resolve it against the including file's folder
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), include))
        return layer_of(root, resolved) or "?outside lib/ and apps/"
    if include.startswith("ptepack/schema/"):
        stem = os.path.basename(include)[: -len("_generated.h")]
        return schema.get(stem, "?schema:" + stem)
    if include == UMBRELLA:
        return "cli"
    if include.startswith("ptepack/"):
        return include.split("/")[1]
    first = include.split("/", 1)[0]
    if "/" in include and first in internal_layers:
        return first  # an internal header, named from lib/src
    return source_layer  # a header beside the file (apps/ptepack/commands.h)


def files_of(root):
    for top in ("lib", "apps"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith((".h", ".cpp")):
                    yield os.path.join(dirpath, name)


def check(root, planted=None):
    allowed, schema = read_table(root)
    internal_layers = set(os.listdir(os.path.join(root, "lib", "src")))
    problems = []
    for path in files_of(root):
        layer = layer_of(root, path)
        rel = os.path.relpath(path, root)
        if layer not in allowed:
            problems.append(f"{rel}: folder '{layer}' is not a layer of docs/architecture.md")
            continue
        text = open(path, encoding="utf-8").read()
        lines = text.count("\n")
        if lines > MAX_LINES:
            problems.append(f"{rel}: {lines} lines, over {MAX_LINES}: split it along a seam")
        if planted and rel.replace(os.sep, "/") == planted[0]:
            text += f'\n#include {planted[1]}\n'
        public = rel.replace(os.sep, "/").startswith("lib/include/")
        for match in INCLUDE.finditer(text):
            include = match.group(1) or match.group(2)
            line = text.count("\n", 0, match.start()) + 1
            if public and not include.startswith("ptepack/"):
                # An installed header can only reach installed headers.
                problems.append(f"{rel}:{line}: includes {include}: an installed header may "
                                "include only ptepack/... headers")
                continue
            target = target_layer(root, path, include, schema, layer, internal_layers)
            if target == layer or target in allowed[layer]:
                continue
            problems.append(f"{rel}:{line}: includes {include}: {layer} may not include {target}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--plant", action="store_true",
                        help="check that an upward include planted in base/ is caught")
    args = parser.parse_args()
    if args.plant:
        # Each planted include, in each form, must be reported.
        plants = [("lib/include/ptepack/base/error.h", '"ptepack/pack/pack.h"'),
                  ("lib/include/ptepack/base/error.h", "<ptepack/pack/pack.h>"),
                  ("lib/src/base/parallel.cpp", '"../pack/pack_internal.h"'),
                  ("lib/src/base/parallel.cpp", '"pack/pack_internal.h"'),
                  ("lib/include/ptepack/pack/pack.h", '"pack/pack_internal.h"')]
        missed = []
        for where, include in plants:
            problems = check(args.root, (where, include))
            caught = [p for p in problems if where.split("/", 1)[1] in p
                      and include.strip('"<>').split("/")[-1] in p]
            print(f"{where} + {include}: {caught[0] if caught else 'NOT REPORTED'}")
            if not caught:
                missed.append((where, include))
        if missed:
            return 1
        print(f"ok: all {len(plants)} planted includes are reported")
        return 0
    problems = check(args.root)
    for p in problems:
        print(p)
    if problems:
        return 1
    print("ok: every include under lib/ and apps/ follows docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
