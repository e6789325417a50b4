#!/usr/bin/env python3
# `ptepack diff` on ExecuTorch programs: equivalent exactly when no computation could tell the
# two apart. Every fixture against its packed directory and its re-inlined program (exit 0);
# different programs and one-field changes made in place with tests/tools/pte_reader.py
# (a constant byte, a delegate blob byte, an instruction argument, an operator overload, an
# input shape, a named-data byte, an EXTERNAL constant's byte, an Int argument) and one made
# with tests/tools/pte_writer.py (an input's shape dynamism), each bare and packed (exit 1,
# naming what changed); the download over programs and shards; PATH@DATA; error exits.
import hashlib
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, flip, load_json  # noqa: E402
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)
import pte_writer  # noqa: E402

suite = Suite()
FIXTURES = ["external_pair", "portable_add_no_header", "portable_inline_constant_buffer",
            "portable_keyword_spotting", "portable_multi_method", "xnnpack_conv",
            "xnnpack_quantized", "xnnpack_stress_mlp"]


def fixture(ctx, stem):
    return os.path.join(ctx.data, "pte", stem + ".pte")


def copy_fixture(ctx, stem, directory, name=None):
    """The fixture (and its .ptd, if any) copied under `name`; returns the .pte path."""
    name = name or stem
    out = os.path.join(directory, name + ".pte")
    shutil.copy(fixture(ctx, stem), out)
    ptd = os.path.join(ctx.data, "pte", stem + ".ptd")
    if os.path.exists(ptd):
        shutil.copy(ptd, os.path.join(directory, name + ".ptd"))
    return out


def patch(path, offset, data):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def diff(ctx, a, b, code, what):
    result = ctx.run("diff", a, b, "--json")
    ctx.code(result, code, what)
    if result.code not in (0, 1):
        return None
    report = result.json()
    # The fields CI reads: the verdict agrees with the exit code and with the listing.
    ctx.equal(report["equivalent"], result.code == 0, f"{what}: --json equivalent")
    ctx.equal(bool(report["differences"] or report["methods"]), result.code == 1,
              f"{what}: --json differences")
    return report


def texts(report):
    return [d["text"] for d in report["differences"]] if report else []


def plan_table(data, parsed, plan=0):
    return pte_reader.position(data, parsed, [("execution_plan", plan)])[0]


# ------------------------------------------------------------------------ mutations in place
# Each takes (ctx, directory) and returns (stem, mutated .pte path, substring of the report).

def constant_byte(ctx, d):
    path = copy_fixture(ctx, "portable_keyword_spotting", d)
    parsed, data = pte_reader.load(path)
    constant = pte_reader.stored_constants(parsed, data)[5]
    offset, _ = pte_reader.constant_location(parsed, constant["tensor"])
    flip(path, offset)
    return "portable_keyword_spotting", path, f"value {constant['value_index']} "


def inline_constant_byte(ctx, d):
    """A deprecated inline constant_buffer entry."""
    path = copy_fixture(ctx, "portable_inline_constant_buffer", d)
    parsed, data = pte_reader.load(path)
    constant = pte_reader.stored_constants(parsed, data)[0]
    buffer = pte_reader.position(data, parsed, [("constant_buffer",
                                                 constant["data_buffer_idx"])])[0]
    _, start = pte_reader.vector_position(data, buffer, "Buffer", "storage")
    flip(path, start)
    return "portable_inline_constant_buffer", path, "bytes changed"


def delegate_blob_byte(ctx, d):
    path = copy_fixture(ctx, "xnnpack_conv", d)
    parsed, data = pte_reader.load(path)
    ref = parsed["program"]["execution_plan"][0]["delegates"][0]["processed"]
    start, size = pte_reader.segment_range(parsed, ref["index"])
    flip(path, start + size // 2)
    return "xnnpack_conv", path, f"delegate 0 XnnpackBackend blob changed, {size:,} B"


def named_data_byte(ctx, d):
    path = copy_fixture(ctx, "xnnpack_conv", d)
    parsed, data = pte_reader.load(path)
    entry = parsed["program"]["named_data"][0]
    start, _ = pte_reader.segment_range(parsed, entry["segment_index"])
    flip(path, start)
    return "xnnpack_conv", path, f"named data '{entry['key']}': bytes changed"


def kernel_call(data, parsed, index):
    instruction = pte_reader.position(data, parsed, [("execution_plan", 0), ("chains", 0),
                                                     ("instructions", index), "instr_args"])[0]
    return instruction


def instruction_argument(ctx, d):
    path = copy_fixture(ctx, "portable_keyword_spotting", d)
    parsed, data = pte_reader.load(path)
    call = kernel_call(data, parsed, 1)
    count, start = pte_reader.vector_position(data, call, "KernelCall", "args")
    first, second = struct.unpack_from("<ii", data, start)
    patch(path, start, struct.pack("<ii", second, first))  # two arguments swapped
    return "portable_keyword_spotting", path, "instruction 1 cortex_m::quantized_depthwise_conv2d.out: "


def operator_overload(ctx, d):
    path = copy_fixture(ctx, "portable_add_no_header", d)
    parsed, data = pte_reader.load(path)
    op = pte_reader.position(data, parsed, [("execution_plan", 0), ("operators", 0)])[0]
    where = pte_reader.field_position(data, op, "Operator", "overload")
    target = where + struct.unpack_from("<I", data, where)[0]
    patch(path, target + 4, b"Out")  # "out" -> "Out", same length
    return "portable_add_no_header", path, "instruction 0 aten::add.out -> aten::add.Out"


def input_shape(ctx, d):
    path = copy_fixture(ctx, "portable_multi_method", d)
    parsed, data = pte_reader.load(path)
    plan = parsed["program"]["execution_plan"][1]
    value = plan["inputs"][0]
    tensor = pte_reader.position(data, parsed, [("execution_plan", 1), ("values", value), "val"])[0]
    count, start = pte_reader.vector_position(data, tensor, "Tensor", "sizes")
    size = struct.unpack_from("<i", data, start)[0]
    patch(path, start, struct.pack("<i", size + 1))
    return "portable_multi_method", path, f"value {value} "


def external_constant_byte(ctx, d):
    """The program unchanged, one byte of its EXTERNAL constant changed in its .ptd."""
    path = copy_fixture(ctx, "external_pair", d)
    entries, parsed = pte_reader.read_ptd(os.path.join(d, "external_pair.ptd"))
    first = entries[sorted(entries)[0]]
    segment = parsed["segments"][first["segment_index"]]
    flip(os.path.join(d, "external_pair.ptd"), segment["file_offset"])
    return "external_pair", path, "bytes changed"


def int_argument(ctx, d):
    """The Int value an operator takes (add.out's alpha, 1) made 2, in place."""
    path = copy_fixture(ctx, "portable_add_no_header", d)
    parsed, data = pte_reader.load(path)
    plan = parsed["program"]["execution_plan"][0]
    value = next(i for i, v in enumerate(plan["values"]) if (v["val"] or {}).get("type") == "Int")
    table = pte_reader.position(data, parsed, [("execution_plan", 0), ("values", value), "val"])[0]
    where = pte_reader.field_position(data, table, "Int", "int_val")
    ctx.require(where is not None, "the Int value has no int_val field to change")
    patch(path, where, struct.pack("<q", struct.unpack_from("<q", data, where)[0] + 1))
    return "portable_add_no_header", path, f"value {value} Int: 1 -> 2"


def shape_dynamism(ctx, d):
    """An input declared DYNAMIC_BOUND instead of STATIC (the default, absent in every
    fixture): the program is written again by tests/tools/pte_writer.py, as ExecuTorch's
    serializer writes it, with only that field changed."""
    program, segments = pte_writer.decode(fixture(ctx, "portable_multi_method"))
    plan = program["execution_plan"][1]
    value = plan["inputs"][0]
    plan["values"][value]["val"]["shape_dynamism"] = "DYNAMIC_BOUND"
    path = pte_writer.write(os.path.join(d, "portable_multi_method.pte"), program, segments)
    return ("portable_multi_method", path,
            f"value {value} FLOAT [2]: shape_dynamism STATIC -> DYNAMIC_BOUND")


MUTATIONS = [constant_byte, inline_constant_byte, delegate_blob_byte, named_data_byte,
             instruction_argument, operator_overload, input_shape, external_constant_byte,
             shape_dynamism, int_argument]


@suite.test
def a_pair_that_differs_only_in_shape_dynamism_differs_by_that_alone(ctx):
    stem = "portable_multi_method"
    program, segments = pte_writer.decode(fixture(ctx, stem))
    same = pte_writer.write(os.path.join(ctx.mkdir("same"), stem + ".pte"), program, segments)
    report = diff(ctx, fixture(ctx, stem), same, 0, "the fixture written again unchanged")
    ctx.equal(texts(report), [], "the fixture written again: differences")
    _, changed, expected = shape_dynamism(ctx, ctx.mkdir("changed"))
    report = diff(ctx, same, changed, 1, "shape_dynamism alone")
    ctx.equal(len(texts(report)), 1, f"one difference: {texts(report)}")
    ctx.check(any(expected in t for t in texts(report)), f"{expected!r} in {texts(report)}")


@suite.test
def every_fixture_equals_its_packed_directory_and_its_inlined_program(ctx):
    for stem in FIXTURES:
        d = ctx.mkdir(stem)
        src = fixture(ctx, stem)
        out = os.path.join(d, "out")
        ctx.run_ok("pack", src, "-o", out, "-q", "--max-shard-bytes", "64KB", "--oversize",
                   "own-shard")
        inlined = os.path.join(d, "again.pte")
        ctx.run_ok("pack", out, "-o", inlined, "-q")
        for a, b in ((src, out), (out, src), (src, inlined), (out, inlined), (src, src)):
            report = diff(ctx, a, b, 0, f"{stem}: {os.path.basename(a)} vs {os.path.basename(b)}")
            if report:
                ctx.equal((report["equivalent"], report["differences"], report["methods"]),
                          (True, [], []), f"{stem}: {a} vs {b}")


@suite.test
def different_programs_differ(ctx):
    for a, b in (("portable_add_no_header", "xnnpack_conv"),
                 ("portable_keyword_spotting", "portable_add_no_header"),
                 ("xnnpack_conv", "xnnpack_quantized"),
                 ("portable_inline_constant_buffer", "external_pair")):
        report = diff(ctx, fixture(ctx, a), fixture(ctx, b), 1, f"{a} vs {b}")
        ctx.check(report and report["differences"], f"{a} vs {b}: no difference listed")
        d = ctx.mkdir(f"{a}-{b}")
        packed_a, packed_b = os.path.join(d, "a"), os.path.join(d, "b")
        ctx.run_ok("pack", fixture(ctx, a), "-o", packed_a, "-q")
        ctx.run_ok("pack", fixture(ctx, b), "-o", packed_b, "-q")
        for x, y, how in ((packed_a, packed_b, "packed"), (fixture(ctx, a), packed_b, "mixed")):
            report = diff(ctx, x, y, 1, f"{a} vs {b} ({how})")
            ctx.check(report and (report["differences"] or report["methods"]),
                      f"{a} vs {b} ({how}): nothing listed")


@suite.test
def one_change_a_computation_could_show_makes_them_differ_bare_and_packed(ctx):
    for mutate in MUTATIONS:
        d = ctx.mkdir(mutate.__name__)
        stem, path, expected = mutate(ctx, d)
        what = mutate.__name__
        ctx.run_ok("verify", path)  # still a valid program: only its content changed
        report = diff(ctx, fixture(ctx, stem), path, 1, what)
        ctx.check(any(expected in t for t in texts(report)),
                  f"{what}: no difference mentions {expected!r}: {texts(report)}")
        text = ctx.run("diff", fixture(ctx, stem), path)
        ctx.code(text, 1, f"{what} (text)")
        ctx.check(expected in text.out, f"{what}: text report lacks {expected!r}:\n{text.out}")
        # What changed leads the report, before the program and method summaries.
        lines = text.out.splitlines()
        ctx.check(len(lines) > 2 and lines[1].startswith("differences: ") and expected in
                  "\n".join(lines[2:2 + len(texts(report))]),
                  f"{what}: the report does not lead with what changed:\n{text.out}")
        original = os.path.join(d, "orig_dir")
        changed = os.path.join(d, "changed_dir")
        ctx.run_ok("pack", fixture(ctx, stem), "-o", original, "-q")
        ctx.run_ok("pack", path, "-o", changed, "-q")
        for a, b, name in ((fixture(ctx, stem), changed, "bare vs packed"),
                           (original, path, "packed vs bare"),
                           (original, changed, "packed vs packed")):
            report = diff(ctx, a, b, 1, f"{what}: {name}")
            ctx.check(any(expected in t for t in texts(report)),
                      f"{what} ({name}): no difference mentions {expected!r}: {texts(report)}")
        report = diff(ctx, original, changed, 1, f"{what}: directories")
        if report:
            files = report["files"]
            manifest = load_json(os.path.join(changed, "manifest.json"))
            sizes = {p["file"]: p["size"] for p in manifest["programs"] + manifest["shards"]}
            ctx.check(files["added"], f"{what}: nothing to download")
            ctx.equal(files["download_bytes"], sum(sizes[f["file"]] for f in files["added"]),
                      f"{what}: download = the sizes of the files that changed")


@suite.test
def a_slim_program_that_changed_is_downloaded_again(ctx):
    """Same shards, different program file: the download counts the program."""
    d = ctx.mkdir()
    stem, path, _ = operator_overload(ctx, ctx.mkdir("in"))
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    ctx.run_ok("pack", fixture(ctx, stem), "-o", a, "-q")
    ctx.run_ok("pack", path, "-o", b, "-q")
    report = diff(ctx, a, b, 1, "program changed")
    program = load_json(os.path.join(b, "manifest.json"))["programs"][0]
    ctx.equal([(f["file"], f["sha256"], f["size"]) for f in report["files"]["added"]],
              [(program["file"], program["sha256"], program["size"])], "only the program is new")
    ctx.equal(report["files"]["download_bytes"], program["size"], "download = the program")
    text = ctx.run("diff", a, b)
    ctx.check(f"+ {program['file']} ({program['size']} bytes)" in text.out, text.out)


@suite.test
def directories_pair_programs_by_file_name(ctx):
    d = ctx.mkdir()
    two = [fixture(ctx, "xnnpack_conv"), fixture(ctx, "portable_multi_method")]
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    ctx.run_ok("pack", *two, "-o", a, "-q")
    ctx.run_ok("pack", two[1], two[0], "-o", b, "-q")  # the same programs given in another order
    report = diff(ctx, a, b, 0, "same programs, other input order")
    ctx.equal(sorted((p["a"], p["b"]) for p in report["programs"]),
              [("portable_multi_method.pte", "portable_multi_method.pte"),
               ("xnnpack_conv.pte", "xnnpack_conv.pte")], "pairs")
    c = os.path.join(d, "c")
    ctx.run_ok("pack", two[0], "-o", c, "-q")
    report = diff(ctx, a, c, 1, "a program removed")
    ctx.equal([p for p in report["programs"] if p["b"] is None],
              [{"a": "portable_multi_method.pte", "b": None}], "removed program")
    ctx.equal(sorted((m["method"], m["change"]) for m in report["methods"]),
              [("double", "removed"), ("forward", "removed")], "its methods removed")


@suite.test
def data_files_are_given_as_path_at_data(ctx):
    d = ctx.mkdir()
    program = os.path.join(d, "model.pte")
    shutil.copy(fixture(ctx, "external_pair"), program)
    ptd = os.path.join(d, "weights.ptd")
    shutil.copy(os.path.join(ctx.data, "pte", "external_pair.ptd"), ptd)
    # No <stem>.ptd beside it: its EXTERNAL tensors cannot be resolved.
    result = ctx.run("diff", fixture(ctx, "external_pair"), program)
    ctx.code(result, 3, "unresolvable EXTERNAL key")
    ctx.equal(len(result.err.strip().splitlines()), 1, "one line")
    ctx.check("model.pte" in result.err and "EXTERNAL tensor" in result.err, result.err)
    ctx.equal(result.out, "", "nothing on stdout")
    report = diff(ctx, fixture(ctx, "external_pair"), f"{program}@{ptd}", 0, "with @DATA")
    ctx.check(report and report["equivalent"], "equivalent with its data file")
    # dump and verify resolve the same way.
    ctx.run_ok("verify", f"{program}@{ptd}")
    missing = ctx.run("verify", program)
    ctx.code(missing, 1, "verify without its data file")
    ctx.check("is in none of its data files" in missing.err, missing.err)
    twice = os.path.join(d, "copy.ptd")
    shutil.copy(ptd, twice)
    both = ctx.run("verify", f"{program}@{ptd},{twice}")
    ctx.code(both, 1, "a key in two data files")
    ctx.check("is in 2 of its data files" in both.err, both.err)
    dump = ctx.run_ok("dump", f"{program}@{ptd}", "--json").json()
    ctx.check(dump["programs"][0]["data_files"] == [ptd] if "data_files" in dump["programs"][0]
              else True, f"dump data files: {dump['programs'][0]}")
    # No METHOD= here: an '=' belongs to the path, exactly as written.
    odd = os.path.join(ctx.mkdir("v=1"), "x=y.pte")
    shutil.copy(program, odd)
    odd_ptd = os.path.join(os.path.dirname(odd), "w=z.ptd")
    shutil.copy(ptd, odd_ptd)
    ctx.run_ok("verify", f"{odd}@{odd_ptd}")
    ctx.run_ok("dump", f"{odd}@{odd_ptd}")
    ctx.code(ctx.run("diff", f"{odd}@{odd_ptd}", f"{program}@{ptd}"), 0, "paths with '='")
    for command in ("dump", "verify", "diff"):
        argv = [command, f"forward={program}@{ptd}"] + ([program] if command == "diff" else [])
        result = ctx.run(*argv)
        ctx.code(result, 5, f"{command}: 'forward=...' is a path, and there is none")
        ctx.check("forward=" in result.err, result.err)
    directory = os.path.join(d, "dir")
    ctx.run_ok("pack", f"{program}@{ptd}", "-o", directory, "-q")
    for command in ("dump", "verify"):
        result = ctx.run(command, f"{directory}@{ptd}")
        ctx.code(result, 2, f"{command}: @DATA on a directory")


@suite.test
def unreadable_sides_exit_with_their_own_code(ctx):
    d = ctx.mkdir()
    good = fixture(ctx, "xnnpack_conv")
    truncated = os.path.join(d, "cut.pte")
    with open(good, "rb") as handle:
        blob = handle.read()
    with open(truncated, "wb") as handle:
        handle.write(blob[:100])
    for a, b, code, name in ((good, os.path.join(d, "none.pte"), 5, "none.pte"),
                             (truncated, good, 3, "cut.pte"),
                             (good, truncated, 3, "cut.pte")):
        result = ctx.run("diff", a, b)
        ctx.code(result, code, f"diff {a} {b}")
        ctx.equal(result.out, "", "nothing on stdout")
        lines = result.err.strip().splitlines()
        ctx.check(len(lines) == 1 and name in lines[0], f"one line naming {name}: {result.err}")


@suite.test
def a_damaged_directory_is_an_error_not_a_verdict(ctx):
    """A packed directory is checked whole before it is compared on its manifest's digests."""
    d = ctx.mkdir()
    good, bad = os.path.join(d, "good"), os.path.join(d, "bad")
    ctx.run_ok("pack", fixture(ctx, "xnnpack_conv"), "-o", good, "-q")
    shutil.copytree(good, bad)
    shard = next(f for f in os.listdir(bad) if f.endswith(".ptd"))
    with open(os.path.join(bad, shard), "r+b") as handle:
        handle.seek(-1, os.SEEK_END)
        last = handle.read(1)[0]
        handle.seek(-1, os.SEEK_END)
        handle.write(bytes([last ^ 1]))
    verified = ctx.run("verify", bad)
    ctx.code(verified, 1, "verify of the damaged directory")
    for a, b in ((good, bad), (bad, good), (fixture(ctx, "xnnpack_conv"), bad)):
        result = ctx.run("diff", a, b)
        ctx.code(result, 3, f"diff {os.path.basename(a)} {os.path.basename(b)}")
        ctx.equal(result.out, "", "no verdict on stdout")
        ctx.equal(result.err.splitlines(), verified.err.splitlines()[:1],
                  "verify's first problem line")


@suite.test
def differences_are_capped_and_counted(ctx):
    """Two unrelated programs give many differences: --json lists them all, the text the
    first 40 and a line counting the rest."""
    a, b = fixture(ctx, "xnnpack_stress_mlp"), fixture(ctx, "portable_keyword_spotting")
    report = diff(ctx, a, b, 1, "unrelated programs")
    total = len(report["differences"])
    ctx.equal(report["differences_omitted"], 0, "nothing omitted from --json")
    ctx.check(total > 40, f"only {total} differences between unrelated programs")
    text = ctx.run("diff", a, b).out.splitlines()
    ctx.check(f"differences: {total}" in text, f"the text counts {total}")
    listed = [line for line in text if line.startswith("  portable_keyword_spotting.pte forward: ")]
    ctx.equal(len(listed), 40, "the text lists 40")
    ctx.check(f"  … {total - 40} more (--json lists them all)" in text, f"the rest counted: {text}")


if __name__ == "__main__":
    suite.main()
