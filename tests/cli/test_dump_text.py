#!/usr/bin/env python3
# What reaches a terminal: text dumps fitted to a width (no line wider, no shape or key cut,
# every character of the untruncated dump still there), and names from input files escaped
# (invalid UTF-8 in operator names and delegate ids, a ZIP member name in an error message).
import os
import re
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite  # noqa: E402
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)

suite = Suite()


def artifacts(ctx):
    d = ctx.mkdir("artifacts")
    examples = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    ptn = os.path.join(d, "model.ptn")
    ctx.run_ok("pack", *examples, "-o", ptn, "-q")
    programs = os.path.join(d, "programs")
    ctx.run_ok("pack", *[os.path.join(ctx.data, "pte", f) for f in
                         ("xnnpack_stress_mlp.pte", "portable_keyword_spotting.pte")],
               "-o", programs, "-q", "--max-shard-bytes", "300KB")
    return [ptn, programs, os.path.join(ctx.data, "pte", "portable_multi_method.pte"),
            os.path.join(ctx.data, "two_methods.json")]


def keys_of(ctx, path):
    document = ctx.run_ok("dump", path, "--json").json()
    keys = set(document.get("tensors", {}))
    for program in document.get("programs", []):
        keys.update(t.get("key", "") for t in program.get("tensors", []) if isinstance(t, dict))
    return {k for k in keys if k}


@suite.test
def a_narrow_dump_wraps_at_word_ends_and_loses_nothing(ctx):
    for path in artifacts(ctx):
        whole = ctx.run_ok("dump", path, "--graph", "--width", "0").out
        keys = keys_of(ctx, path)
        for width in (24, 40, 50, 60, 100):
            text = ctx.run_ok("dump", path, "--graph", "--width", str(width)).out
            name = f"{os.path.basename(path)} at {width}"
            lines = text.splitlines()
            ctx.equal([line for line in lines if len(line) > width], [],
                      f"{name}: lines wider than the width")
            ctx.check("\u2026" not in text, f"{name}: a cell cut with '…'")
            cut = [line for line in lines if re.search(r"\[[\d., ]*$", line)]
            ctx.equal(cut, [], f"{name}: a shape broken across lines")
            # Nothing lost or changed: the same characters in the same order.
            ctx.equal("".join(text.split()), "".join(whole.split()), f"{name}: text changed")
            fitting = {k for k in keys if len(k) <= width - 6}
            whole_keys = {k for k in fitting if any(k in line for line in lines)}
            ctx.equal(sorted(fitting - whole_keys), [], f"{name}: keys broken across lines")


def patched_copy(ctx, stem, path_of, old, new):
    d = ctx.mkdir(stem)
    out = os.path.join(d, stem + ".pte")
    shutil.copy(os.path.join(ctx.data, "pte", stem + ".pte"), out)
    parsed, data = pte_reader.load(out)
    table, type_name, field = path_of(data, parsed)
    where = pte_reader.field_position(data, table, type_name, field)
    start = where + struct.unpack_from("<I", data, where)[0] + 4
    at = data.index(old, start)
    with open(out, "r+b") as handle:
        handle.seek(at)
        handle.write(new)
    return out


@suite.test
def invalid_utf8_in_operator_names_and_delegate_ids_is_escaped(ctx):
    operator = patched_copy(
        ctx, "portable_add_no_header",
        lambda data, parsed: (pte_reader.position(data, parsed, [("execution_plan", 0),
                                                                 ("operators", 0)])[0],
                              "Operator", "name"), b"add", b"\xffdd")
    delegate = patched_copy(
        ctx, "xnnpack_conv",
        lambda data, parsed: (pte_reader.position(data, parsed, [("execution_plan", 0),
                                                                 ("delegates", 0)])[0],
                              "BackendDelegate", "id"), b"pack", b"\x9bpac")
    for path, shown in ((operator, "aten::\\xffdd"), (delegate, "Xnn\\x9bpacBackend")):
        result = ctx.run("dump", path)
        ctx.code(result, 0, f"dump {path}")
        raw = result.out.encode("utf-8", "surrogateescape")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as error:
            ctx.check(False, f"{path}: dump prints invalid UTF-8: {error}")
        ctx.check(shown in result.out, f"{path}: {shown!r} not in the dump:\n{result.out}")


@suite.test
def a_member_name_in_an_error_is_escaped(ctx):
    d = ctx.mkdir()
    examples = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    ptn = os.path.join(d, "model.ptn")
    ctx.run_ok("pack", *examples, "-o", ptn, "-q")
    with open(ptn, "rb") as handle:
        blob = bytearray(handle.read())
    # "program.ptg" in the local header and the central directory: one byte made invalid.
    for at in [m.start() for m in re.finditer(b"program.ptg", bytes(blob))]:
        blob[at + 5] = 0xF7
    with open(ptn, "wb") as handle:
        handle.write(bytes(blob))
    for argv in (["dump", ptn], ["pack", ptn, "-o", os.path.join(d, "out.ptn")]):
        result = ctx.run(*argv)
        ctx.code(result, 3, " ".join(argv))
        raw = result.err.encode("utf-8", "surrogateescape")
        ctx.check(b"\xf7" not in raw, f"{argv[0]}: a raw non-UTF-8 byte on stderr: {raw!r}")
        ctx.check("progr\\xf7m.ptg" in result.err, f"{argv[0]}: {result.err!r}")


if __name__ == "__main__":
    suite.main()
