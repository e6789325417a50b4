#!/usr/bin/env python3
# `dump --graph=dot`: every fixture program, program graph and packed directory as a Graphviz
# digraph that Debian's `dot -Tsvg` renders without a warning, with one cluster per method,
# every instruction or node, delegates named with their backend and blob size, constants with
# their key and shape; deterministic; refused where there is no program or with --json.
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite  # noqa: E402
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)

suite = Suite()
FIXTURES = ["external_pair", "portable_add_no_header", "portable_inline_constant_buffer",
            "portable_keyword_spotting", "portable_multi_method", "xnnpack_conv",
            "xnnpack_quantized", "xnnpack_stress_mlp"]


def render(ctx, text, what):
    dot = shutil.which("dot")
    ctx.require(dot, "Graphviz's dot is not installed (scripts/install_deps.sh installs it)")
    result = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True,
                            timeout=120)
    ctx.equal((result.returncode, result.stderr), (0, ""), f"{what}: dot -Tsvg")
    ctx.check("<svg" in result.stdout, f"{what}: no SVG")


def clusters(text):
    return re.findall(r'subgraph "cluster_[^"]*" \{\n\s*label="([^"]*)";', text)


@suite.test
def every_fixture_program_renders(ctx):
    for stem in FIXTURES:
        path = os.path.join(ctx.data, "pte", stem + ".pte")
        text = ctx.run_ok("dump", path, "--graph=dot").out
        render(ctx, text, stem)
        parsed, data = pte_reader.load(path)
        plans = parsed["program"]["execution_plan"]
        ctx.equal(clusters(text), [f"method {p['name']}" for p in plans], f"{stem}: clusters")
        for p, plan in enumerate(plans):
            for i, ins in enumerate(plan["chains"][0]["instructions"]):
                kind = ins["instr_args"]["type"]
                node = re.search(rf'"p0_m{p}_c0_i{i}" \[label="([^"]*)"', text)
                ctx.require(node, f"{stem}: instruction {i} of {plan['name']} is not a node")
                first = node.group(1).split("\\n")[0]
                if kind == "KernelCall":
                    op = plan["operators"][ins["instr_args"]["value"]["op_index"]]
                    name = op["name"] + ("." + op["overload"] if op["overload"] else "")
                    ctx.equal(first, name, f"{stem}: instruction {i} label")
                elif kind == "DelegateCall":
                    delegate = plan["delegates"][ins["instr_args"]["value"]["delegate_index"]]
                    blob = [b for n, d, _, _, b in pte_reader.delegate_blobs(parsed, data)
                            if n == plan["name"] and
                            d == ins["instr_args"]["value"]["delegate_index"]][0]
                    ctx.equal(node.group(1).split("\\n")[:2],
                              [f"delegate {delegate['id']}", f"blob {len(blob)} B"],
                              f"{stem}: delegate {i} label")
        for constant in pte_reader.stored_constants(parsed, data):
            name, shape = constant["layout"][0], list(constant["layout"][1])
            key = constant["fqn"] or f"constant v{constant['value_index']}"
            ctx.check(f'label="{key}\\n' in text,
                      f"{stem}: constant {key} is not labelled with its key")
        again = ctx.run_ok("dump", path, "--graph=dot").out
        ctx.equal(again, text, f"{stem}: the same text twice")


@suite.test
def program_graphs_and_packed_directories_render(ctx):
    d = ctx.mkdir()
    examples = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    ptn = os.path.join(d, "model.ptn")
    ctx.run_ok("pack", *examples, "-o", ptn, "-q")
    programs = os.path.join(d, "programs")
    ctx.run_ok("pack", *[os.path.join(ctx.data, "pte", s + ".pte") for s in FIXTURES],
               "-o", programs, "-q", "--max-shard-bytes", "300KB")
    cases = {"model.ptn": (ptn, ["method prefill", "method decode"]),
             "two_methods.json": (os.path.join(ctx.data, "two_methods.json"),
                                  ["method prefill", "method decode"]),
             "programs": (programs, None)}
    for name, (path, methods) in cases.items():
        text = ctx.run_ok("dump", path, "--graph=dot").out
        render(ctx, text, name)
        found = [c for c in clusters(text) if c.startswith("method") or ": method" in c]
        if methods:
            ctx.equal(found, methods, f"{name}: one cluster per method")
    text = ctx.run_ok("dump", ptn, "--graph=dot").out
    ctx.check('label="prefill/tok_embeddings.weight\\nFLOAT [32, 16]"' in text,
              "a constant placeholder labelled with its key and shape")
    ctx.check("subgraph true_graph_0 of cond" in text, "nested subgraphs drawn as clusters")
    programs_text = ctx.run_ok("dump", programs, "--graph=dot").out
    ctx.check('label="xnnpack_conv.pte: method forward"' in programs_text,
              "programs of a directory are named in their clusters")


@suite.test
def no_program_or_json_is_a_usage_error(ctx):
    d = ctx.mkdir()
    shard = os.path.join(ctx.data, "pte", "external_pair.ptd")
    result = ctx.run("dump", shard, "--graph=dot")
    ctx.code(result, 2, "a data file has no program")
    ctx.check("holds no program" in result.err, result.err)
    result = ctx.run("dump", os.path.join(ctx.data, "pte", "xnnpack_conv.pte"), "--graph=dot",
                     "--json")
    ctx.code(result, 2, "--graph=dot with --json")
    result = ctx.run("dump", os.path.join(ctx.data, "pte", "xnnpack_conv.pte"), "--graph=svg")
    ctx.code(result, 2, "an unknown graph form")
    text = ctx.run_ok("dump", os.path.join(ctx.data, "two_methods.json"), "--graph").out
    ctx.check("digraph" not in text and "placeholder" in text, "--graph alone is the text form")


if __name__ == "__main__":
    suite.main()
