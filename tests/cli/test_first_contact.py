#!/usr/bin/env python3
# What a new user meets in the first hour, each behaviour its own test: a directory of
# programs answers --method and --summary per method; dump --json names a program's shard
# list as the manifest does; the project cites its own documentation; a bare .pte reports
# its own constants and named data; a program inside a packed directory finds its shards,
# and the documented loader one-liner prints their paths; a repack keeps the recorded shard
# options; the pack summary fits the terminal; typos at the top level get a suggestion;
# --graph dot works as --graph=dot; EXTERNAL tensors show their size; two programs of one
# file name get the remedy; the README's example prints what the README shows.
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import ROOT, Suite, load_json, run_in_terminal, snapshot, tree_differences  # noqa: E402
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
    # Keyed by program and method: the two programs' `forward` are two methods.
    ctx.check(re.search(r"\n\s+portable_multi_method\.pte double\s+1 keys", section) and
              re.search(r"\n\s+portable_multi_method\.pte forward\s+", section) and
              re.search(r"\n\s+xnnpack_conv\.pte forward\s+2 keys", section),
              f"--summary by method: {summary}")
    doc = ctx.run_ok("dump", out, "--json", "--summary").json()
    names = {m["name"] for m in doc["breakdown"]["by_method"]}
    ctx.equal(names, {"portable_multi_method.pte double", "portable_multi_method.pte forward",
                      "xnnpack_conv.pte forward"}, "--json by_method")


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


@suite.test
def a_program_inside_a_packed_directory_finds_its_shards(ctx):
    """DIR/prog.pte without @DATA loads the shards the manifest lists for it."""
    out = two_programs(ctx)
    manifest = load_json(os.path.join(out, "manifest.json"))
    entry = next(p for p in manifest["programs"] if p["file"] == "xnnpack_conv.pte")
    ctx.require(entry["shards"], "xnnpack_conv.pte has shards in the manifest")
    program = os.path.join(out, "xnnpack_conv.pte")
    text = ctx.run_ok("dump", program).out
    ctx.check("data files listed for it in" in text and all(s in text for s in entry["shards"]),
              f"dump names where the data came from: {text[:400]}")
    ctx.check("in data files" in text and "\ntensors: 0\n" not in text, "dump reads the shards")
    result = ctx.run_ok("verify", program, "--json").json()
    ctx.equal(result["files_checked"], 1 + len(entry["shards"]), "verify reads the listed shards")
    diff = ctx.run("diff", program, fixture(ctx, "xnnpack_conv"))
    ctx.code(diff, 0, "the packed program computes what its source does")
    ctx.check("equivalent" in diff.out and "data files listed for it" in diff.out, diff.out)
    ctx.check(any("data files listed for it" in n for n in result["notes"]),
              f"verify --json says where the data came from: {result['notes']}")
    doc = ctx.run_ok("dump", program, "--json").json()
    ctx.check(any("data files listed for it" in n for n in doc.get("notes", [])),
              "dump --json says it too")
    # Another program under a listed name is not the one the manifest lists.
    other = ctx.mkdir("other")
    with open(os.path.join(out, "manifest.json"), "rb") as src, \
            open(os.path.join(other, "manifest.json"), "wb") as dst:
        dst.write(src.read())
    impostor = os.path.join(other, "xnnpack_conv.pte")
    with open(fixture(ctx, "portable_add_no_header"), "rb") as src, open(impostor, "wb") as dst:
        dst.write(src.read())
    # It is refused as verify refuses it: the program is read with its manifest's record.
    refused, verified = ctx.run("dump", impostor), ctx.run("verify", impostor)
    ctx.code(verified, 1, "verify of an impostor")
    # It is not the program its record lists, so the shards listed for that one are not its data.
    listed = ctx.run("verify", impostor, "--json").json()
    ctx.check(not any("data files listed for it" in n for n in listed["notes"]),
              f"an impostor is read alone: {listed['notes']}")
    ctx.check(refused.code in (3, 5) and
              refused.err.splitlines()[:1] == verified.err.splitlines()[:1],
              f"dump of an impostor: {refused!r} against {verified!r}")
    # A link to the program finds its directory's manifest.
    link = os.path.join(ctx.mkdir("link"), "conv.pte")
    os.symlink(program, link)
    ctx.check("data files listed for it" in ctx.run_ok("dump", link).out, "through a link")
    # A damaged manifest beside it: nothing to check the program against, so every command
    # refuses it as verify does (manifest_inconsistent, exit 3), with verify's line.
    manifest_path = os.path.join(out, "manifest.json")
    text = open(manifest_path, encoding="utf-8").read()
    with open(manifest_path, "w", encoding="utf-8") as handle:
        handle.write(text.replace('"cap_mode": "file"', '"cap_mode": "both"'))
    verified = ctx.run("verify", program)
    ctx.code(verified, 1, "verify beside a damaged manifest")
    for args in (["dump", program], ["diff", program, program]):
        alone = ctx.run(*args)
        ctx.check(alone.code == 3 and "cap_mode" in alone.err and
                  alone.err.splitlines()[:1] == verified.err.splitlines()[:1],
                  f"damaged manifest: {alone!r} against {verified!r}")
    with open(manifest_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    # The shards are what it is checked against: one missing is an error naming it.
    os.remove(os.path.join(out, entry["shards"][0]))
    broken = ctx.run("verify", program)
    ctx.check(broken.code not in (0, 134, 139), f"verify without its shard: {broken.code}")
    ctx.check(entry["shards"][0] in broken.err, f"the missing shard is named: {broken.err}")


@suite.test
def the_documented_loader_one_liner_prints_paths(ctx):
    text = open(os.path.join(ROOT, "docs", "format-pte.md"), encoding="utf-8").read()
    line = next((l for l in text.splitlines() if l.startswith("python3 -c ")), None)
    ctx.require(line and line.endswith(" DIR model.pte"), "docs/format-pte.md has the one-liner")
    out = two_programs(ctx)
    manifest = load_json(os.path.join(out, "manifest.json"))
    entry = next(p for p in manifest["programs"] if p["file"] == "xnnpack_conv.pte")
    command = line[:-len(" DIR model.pte")]
    found = subprocess.run(["sh", "-c", f"{command} \"$0\" \"$1\"", out, "xnnpack_conv.pte"],
                           capture_output=True, text=True)
    ctx.equal(found.returncode, 0, f"one-liner: {found.stderr}")
    ctx.equal(found.stdout.split(), [os.path.join(out, s) for s in entry["shards"]],
              "the shard paths, in the manifest's order")
    wrong = subprocess.run(["sh", "-c", f"{command} \"$0\" \"$1\"", out, "nosuch.pte"],
                           capture_output=True, text=True)
    ctx.equal(wrong.returncode, 1, "a wrong program name exits 1")
    ctx.check(len(wrong.stderr.strip().splitlines()) == 1 and "nosuch.pte" in wrong.stderr
              and "xnnpack_conv.pte" in wrong.stderr, f"one line naming the programs: {wrong.stderr}")


RECORDED = ("alignment", "shard_prefix", "placement", "max_shard_tensors", "max_shard_bytes",
            "cap_mode", "shard_format")


@suite.test
def a_repack_of_one_directory_keeps_its_recorded_shard_options(ctx):
    src = os.path.join(ctx.mkdir("rec"), "packed")
    ctx.run_ok("pack", fixture(ctx, "xnnpack_stress_mlp"), fixture(ctx, "portable_multi_method"),
               "-o", src, "-q", "--max-shard-bytes", "600KB", "--alignment", "64",
               "--shard-prefix", "w", "--placement", "single", "--max-shard-tensors", "9")
    recorded = load_json(os.path.join(src, "manifest.json"))
    ctx.equal([recorded.get(k) for k in RECORDED[:5]], [64, "w", "single", 9, 600000],
              "the manifest records the options that are not the defaults")
    again = os.path.join(ctx.mkdir("again"), "packed")
    result = ctx.run_ok("pack", src, "-o", again)
    ctx.check("shard options recorded in" in result.out and "--max-shard-bytes 600000" in result.out
              and "--shard-prefix w" in result.out, f"the summary says so: {result.out}")
    ctx.equal(tree_differences(snapshot(src), snapshot(again)), [], "the repack is byte-identical")
    # An option given overrides its value; the others stay.
    uncapped = os.path.join(ctx.mkdir("uncapped"), "packed")
    ctx.run_ok("pack", src, "-o", uncapped, "-q", "--max-shard-bytes", "none", "--shard-prefix", "x")
    m = load_json(os.path.join(uncapped, "manifest.json"))
    ctx.equal([m.get(k) for k in RECORDED[:5]], [64, "x", "single", 9, None],
              "--max-shard-bytes none and --shard-prefix x override, the rest is kept")
    # verify holds every shard to the recorded options.
    manifest_path = os.path.join(src, "manifest.json")
    text = open(manifest_path, encoding="utf-8").read()
    for field, value in (("shard_prefix", "z"), ("alignment", 65536)):
        m = json.loads(text)
        m[field] = value
        with open(manifest_path, "w", encoding="utf-8") as handle:
            json.dump(m, handle, indent=2)
        checked = ctx.run("verify", src)
        ctx.check(checked.code == 1 and f"manifest's {field}" in checked.err,
                  f"verify with {field}={value!r}: {checked!r}")
    with open(manifest_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    ctx.run_ok("verify", src)
    # An error a recorded option leads to says where the option came from.
    tight = os.path.join(ctx.mkdir("tight"), "packed")
    ctx.run_ok("pack", src, "-o", tight, "-q", "--max-shard-bytes", "300KB")
    failed = ctx.run("pack", tight, "-o", os.path.join(ctx.mkdir("f"), "o"), "--max-shard-tensors",
                     "1", "--alignment", "65536", "--max-shard-bytes", "262145")
    ctx.check(failed.code == 4 and "shard options recorded in" in failed.err, failed.err)
    ctx.check(len(failed.err.strip().splitlines()) == 1, "still one line")
    # none is a cap value of a directory output only, in any case.
    ptn = ctx.run("pack", src, "-o", os.path.join(ctx.mkdir("n"), "o.pte"), "--max-shard-bytes",
                  "NONE")
    ctx.code(ptn, 2, "--max-shard-bytes none with a .pte output")


@suite.test
def a_repack_of_a_program_graph_directory_keeps_its_format_and_cap(ctx):
    work = ctx.mkdir("graph")
    inputs = ctx.fixture_pair(work)
    src = os.path.join(work, "packed")
    ctx.run_ok("pack", *inputs, "-o", src, "-q", "--max-shard-bytes", "3000", "--cap-mode",
               "payload", "--shard-format", "safetensors")
    again = os.path.join(work, "again")
    result = ctx.run_ok("pack", src, "-o", again)
    ctx.check("--cap-mode payload --shard-format safetensors" in result.out, result.out)
    ctx.equal(tree_differences(snapshot(src), snapshot(again)), [], "the repack is byte-identical")
    # With safetensors given, a recorded .ptd alignment is not taken.
    aligned = os.path.join(work, "aligned")
    ctx.run_ok("pack", *inputs, "-o", aligned, "-q", "--alignment", "64")
    st = ctx.run_ok("pack", aligned, "-o", os.path.join(work, "st"), "--shard-format",
                    "safetensors")
    ctx.check("--alignment" not in st.out, f"no alignment for safetensors: {st.out}")
    defaults = os.path.join(work, "defaults")
    plain = ctx.run_ok("pack", *inputs, "-o", defaults)
    ctx.check("recorded" not in plain.out, "several inputs take nothing from a manifest")
    m = load_json(os.path.join(defaults, "manifest.json"))
    ctx.equal([k for k in RECORDED[:4] if k in m], [], "defaults are not written")


@suite.test
def a_recorded_option_out_of_range_is_refused(ctx):
    src = os.path.join(ctx.mkdir("bad"), "packed")
    ctx.run_ok("pack", fixture(ctx, "xnnpack_conv"), "-o", src, "-q")
    path = os.path.join(src, "manifest.json")
    original = open(path, encoding="utf-8").read()
    for field, value in (("alignment", 24), ("alignment", 1 << 40), ("placement", "sets"),
                         ("max_shard_tensors", 0), ("shard_prefix", "my weights")):
        m = load_json(path)
        m[field] = value
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(m, handle)
        out = os.path.join(ctx.mkdir("out"), "o")
        result = ctx.run("pack", src, "-o", out)
        ctx.check(result.code in (1, 3) and field in result.err and not os.path.exists(out),
                  f"{field}={value!r}: {result!r}")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(original)


@suite.test
def the_pack_summary_fits_the_terminal(ctx):
    def pack(out, terminal):
        argv = ["pack", fixture(ctx, "xnnpack_stress_mlp"), fixture(ctx, "portable_multi_method"),
                "-o", out, "--max-shard-bytes", "300KB", "--progress", "never"]
        if not terminal:
            return ctx.run_ok(*argv).out
        code, text = run_in_terminal([ctx.ptepack, *argv], columns=50)
        ctx.equal(code, 0, f"pack on a terminal: {text[-300:]}")
        return text.replace("\r\n", "\n")
    out = os.path.join(ctx.mkdir("fit"), "out")
    wide = pack(out, False)
    narrow = pack(out, True)
    ctx.require(any(len(l) > 50 for l in wide.splitlines()), "the summary has long lines to fit")
    over = [l for l in narrow.splitlines() if len(l) > 50]
    ctx.equal(over, [], "no line wider than the terminal's 50 columns")

    def text(summary):  # without spaces, line breaks and the timing
        return re.sub(r"in[0-9.]+s\([^)]*\)", "", "".join(summary.split()))
    ctx.equal(text(narrow), text(wide), "the same text, only the line breaks differ")


@suite.test
def a_top_level_typo_gets_a_suggestion(ctx):
    result = ctx.run("--verison")
    ctx.code(result, 2, "an unknown top-level option")
    ctx.check("unknown option '--verison'" in result.err and "did you mean '--version'?" in
              result.err, result.err)
    ctx.equal(ctx.run_ok("--version").out.split()[0], "ptepack", "the option itself still works")


@suite.test
def graph_dot_is_accepted_with_a_space_too(ctx):
    path = fixture(ctx, "portable_multi_method")
    joined = ctx.run_ok("dump", path, "--graph=dot").out
    ctx.check(joined.startswith("digraph"), f"--graph=dot draws a digraph: {joined[:80]!r}")
    ctx.equal(ctx.run_ok("dump", path, "--graph", "dot").out, joined, "--graph dot is the same")
    ctx.equal(ctx.run_ok("dump", "--graph", "dot", path).out, joined, "before the path too")
    ctx.equal(ctx.run_ok("dump", path, "--graph", "text").out,
              ctx.run_ok("dump", path, "--graph=text").out, "--graph text too")


@suite.test
def dump_shows_the_size_of_external_tensors(ctx):
    out = os.path.join(ctx.mkdir("ext"), "packed")
    ctx.run_ok("pack", fixture(ctx, "portable_multi_method"), "-o", out, "-q")
    manifest = load_json(os.path.join(out, "manifest.json"))
    for data in (True, False):  # with the shards it finds, and without any
        program = os.path.join(out, "portable_multi_method.pte")
        if not data:
            lonely = os.path.join(ctx.mkdir("lonely"), "portable_multi_method.pte")
            with open(program, "rb") as src, open(lonely, "wb") as dst:
                dst.write(src.read())
            program = lonely
        doc = ctx.run_ok("dump", program, "--json").json()
        external = [t for p in doc["programs"] for t in p["stored_tensors"]
                    if t["storage"] == "external"]
        ctx.require(external, "the packed program has EXTERNAL tensors")
        for t in external:
            ctx.equal(t["nbytes"], manifest["tensors"][t["key"]]["nbytes"],
                      f"{t['key']} (data files found: {data}): its size")
        text = ctx.run_ok("dump", program).out
        ctx.check(not re.search(r" 0 +EXTERNAL ", text) and "EXTERNAL" in text,
                  f"no EXTERNAL row shows 0 bytes: {text[:600]}")


@suite.test
def two_programs_of_one_file_name_get_the_remedy(ctx):
    a, b = ctx.mkdir("a"), ctx.mkdir("b")
    for folder, stem in ((a, "xnnpack_conv"), (b, "portable_multi_method")):
        with open(fixture(ctx, stem), "rb") as src, open(os.path.join(folder, "m.pte"), "wb") as dst:
            dst.write(src.read())
    out = os.path.join(ctx.mkdir("out"), "o")
    result = ctx.run("pack", os.path.join(a, "m.pte"), os.path.join(b, "m.pte"), "-o", out)
    ctx.code(result, 2, "two programs named m.pte")
    ctx.check(os.path.join(a, "m.pte") in result.err and os.path.join(b, "m.pte") in result.err
              and "ln -s" in result.err and "--merge" in result.err,
              f"both inputs and the remedies named: {result.err}")
    ctx.check(len(result.err.strip().splitlines()) == 1, "one line")
    ctx.check(not os.path.exists(out), "nothing written")


def readme_example():
    """[(command, [expected output lines])] of the README's "### Example" block."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = text[text.index("### Example"):]
    block = block[block.index("```sh\n") + 6:]
    block = block[:block.index("```")]
    steps = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and line:
            steps[-1][1].append(line)
    return steps


@suite.test
def the_readme_example_prints_what_the_readme_shows(ctx):
    """The README's example, run as written from a scratch folder: every command succeeds
    and prints exactly the lines shown (timings aside)."""
    work = ctx.mkdir("readme")
    os.makedirs(os.path.join(work, "build"))
    os.symlink(os.path.abspath(ctx.ptepack), os.path.join(work, "build", "ptepack"))
    os.symlink(os.path.abspath(ctx.examples), os.path.join(work, "examples"))
    os.makedirs(os.path.join(work, "out"))
    steps = readme_example()
    ctx.require(len(steps) >= 4 and any(expected for _, expected in steps),
                f"the README's example was found: {steps}")

    def timing(lines):
        return [re.sub(r"in [0-9.]+ s \([^)]*\)", "in T s (...)", l) for l in lines]
    for command, expected in steps:
        done = subprocess.run(["sh", "-c", command], cwd=work, capture_output=True, text=True,
                              env=dict(os.environ, COLUMNS="200"))
        ctx.equal(done.returncode, 0, f"$ {command}: {done.stderr}")
        if expected:
            ctx.equal(timing(done.stdout.splitlines()), timing(expected), f"$ {command}")


if __name__ == "__main__":
    suite.main()
