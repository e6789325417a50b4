#!/usr/bin/env python3
# Hardening rules: special files refused without blocking, outputs that would destroy inputs,
# names escaped in text output, verify's notes and problems, bare-program naming rules.
import json
import os
import shutil
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite  # noqa: E402

suite = Suite()
TIMEOUT = 20  # a regression that blocks on a FIFO fails here instead of hanging CI


def examples(ctx):
    return os.path.join(ctx.examples, "prefill.json"), os.path.join(ctx.examples, "decode.json")


def copy_example(ctx, directory):
    prefill, _ = examples(ctx)
    shutil.copy(prefill, os.path.join(directory, "p.json"))
    shutil.copy(os.path.join(ctx.examples, "prefill.safetensors"),
                os.path.join(directory, "p.safetensors"))
    return os.path.join(directory, "p.json")


def check_refused(ctx, result, name, what):
    ctx.code(result, 5, what)
    ctx.check(name in result.err and "not a regular file" in result.err,
              f"{what}: message does not name {name!r} as not a regular file: {result.err!r}")


@suite.test
def fifo_as_data_file_is_refused_at_once(ctx):
    d = ctx.mkdir()
    program = copy_example(ctx, d)
    fifo = os.path.join(d, "w.safetensors")
    os.mkfifo(fifo)
    for argv in (["pack", f"{program}@{fifo}", "-o", os.path.join(d, "o.ptn")],
                 ["dump", fifo], ["verify", fifo]):
        r = ctx.run(*argv, timeout=TIMEOUT)
        check_refused(ctx, r, fifo, " ".join(argv[:1]))
    ctx.check(not os.path.exists(os.path.join(d, "o.ptn")), "output written despite the error")


@suite.test
def fifo_as_default_data_or_manifest_is_refused(ctx):
    d = ctx.mkdir()
    program = copy_example(ctx, d)
    os.remove(os.path.join(d, "p.safetensors"))
    os.mkfifo(os.path.join(d, "p.safetensors"))
    check_refused(ctx, ctx.run("pack", program, "-o", os.path.join(d, "o.ptn"), timeout=TIMEOUT),
                  "p.safetensors", "default same-stem data")
    packed = os.path.join(ctx.mkdir(), "m")
    prefill, decode = examples(ctx)
    ctx.run_ok("pack", prefill, decode, "-o", packed)
    os.remove(os.path.join(packed, "manifest.json"))
    os.mkfifo(os.path.join(packed, "manifest.json"))
    # The manifest is read before any check: one that is not a regular file is refused as I/O
    # (exit 5), as a FIFO data file is; verify lists it as the directory's one problem (exit 1).
    manifest = os.path.join(packed, "manifest.json")
    for argv in (["dump", packed], ["pack", packed, "-o", packed + ".ptn"], ["diff", packed, packed]):
        r = ctx.run(*argv, timeout=TIMEOUT)
        check_refused(ctx, r, manifest, f"{argv[0]} of a directory whose manifest is a FIFO")
    r = ctx.run("verify", packed, timeout=TIMEOUT)
    ctx.code(r, 1, "verify of a directory whose manifest is a FIFO")
    ctx.check(f"{manifest} is not a regular file" in r.err, f"verify's problem line: {r.err!r}")
    ctx.check(not os.path.exists(packed + ".ptn"), "pack wrote an output from a FIFO manifest")


@suite.test
def devices_sockets_and_directories_are_refused(ctx):
    d = ctx.mkdir()
    program = copy_example(ctx, d)
    r = ctx.run("pack", f"{program}@/dev/zero", "-o", os.path.join(d, "o.ptn"), timeout=TIMEOUT)
    ctx.code(r, (2, 5), "a device as @DATA")
    sock_path = os.path.join(d, "s.safetensors")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(sock_path)
        r = ctx.run("dump", sock_path, timeout=TIMEOUT)
        check_refused(ctx, r, sock_path, "a socket")
    finally:
        server.close()
    r = ctx.run("pack", f"{program}@{d}", "-o", os.path.join(d, "o2.ptn"), timeout=TIMEOUT)
    ctx.code(r, (2, 5), "a directory as @DATA")


@suite.test
def output_inside_or_over_an_input_is_refused(ctx):
    prefill, decode = examples(ctx)
    packed = os.path.join(ctx.mkdir(), "m")
    ctx.run_ok("pack", prefill, decode, "-o", packed)
    before = sorted(os.listdir(packed))
    for out in (os.path.join(packed, "x.ptn"), os.path.join(packed, "sub"), packed):
        r = ctx.run("pack", packed, "-o", out)
        ctx.code(r, 2, f"output {out} inside the input directory")
        ctx.check(packed in r.err, f"message does not name the input: {r.err!r}")
    ctx.equal(sorted(os.listdir(packed)), before, "input directory changed")
    ctx.run_ok("verify", packed)
    # A directory output containing an input file would replace it with its whole tree.
    d = ctx.mkdir()
    program = copy_example(ctx, d)
    r = ctx.run("pack", program, "-o", d, "--force")
    ctx.code(r, 2, "directory output containing its input")
    ctx.check(os.path.exists(program), "input destroyed")


@suite.test
def output_over_a_shard_named_by_an_index_is_refused(ctx):
    d = ctx.mkdir()
    prefill, _ = examples(ctx)
    packed = os.path.join(ctx.mkdir(), "st")
    ctx.run_ok("pack", prefill, "-o", packed, "--shard-format", "safetensors")
    index = os.path.join(packed, "model.safetensors.index.json")
    shard = json.load(open(os.path.join(packed, "manifest.json")))["shards"][0]["file"]
    # The program graph of the packed directory, with its data given through the index.
    program = os.path.join(d, "p.json")
    shutil.copy(prefill, program)
    shard_path = os.path.join(packed, shard)
    before = open(shard_path, "rb").read()
    r = ctx.run("pack", f"{program}@{index}", "-o", shard_path[:-len(".safetensors")] + ".ptn")
    ctx.code(r, (0, 3), "unrelated output beside an index shard")
    target = os.path.join(packed, "shard.ptn")
    os.rename(shard_path, shard_path)  # unchanged
    r = ctx.run("pack", f"{program}@{index}", "-o", shard_path)
    ctx.code(r, 2, "output equal to a shard the index points to")
    ctx.equal(open(shard_path, "rb").read(), before, "index shard bytes")
    ctx.check(not os.path.exists(target), "unexpected output")


@suite.test
def control_bytes_in_names_are_escaped_in_text_output(ctx):
    prefill, _ = examples(ctx)
    program = json.load(open(prefill))
    forged = "w\nptepack: error: fake"
    for c in program["methods"][0]["constants"]:
        if c["data_key"] == "tok_embeddings.weight":
            c["data_key"] = forged
    d = ctx.mkdir()
    path = os.path.join(d, "p.json")
    json.dump(program, open(path, "w"))
    # The data: the example's safetensors with that key renamed.
    raw = open(os.path.join(ctx.examples, "prefill.safetensors"), "rb").read()
    n = struct.unpack_from("<Q", raw)[0]
    header = json.loads(raw[8:8 + n])
    header[forged] = header.pop("tok_embeddings.weight")
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    open(os.path.join(d, "p.safetensors"), "wb").write(struct.pack("<Q", len(text)) + text +
                                                        raw[8 + n:])
    for argv in (["pack", path, "-o", os.path.join(d, "o.ptn"), "-v"], ["dump", path]):
        r = ctx.run_ok(*argv)
        ctx.check("\nptepack: error: fake" not in r.out,
                  f"{argv[0]}: a key forged a line: {r.out!r}")
        ctx.check("\\x0aptepack: error: fake" in r.out, f"{argv[0]}: key not shown escaped")


@suite.test
def verify_notes_foreign_alignment_and_strict_turns_notes_into_problems(ctx):
    import zipfile
    prefill, decode = examples(ctx)
    d = ctx.mkdir()
    ours = os.path.join(d, "m.ptn")
    ctx.run_ok("pack", prefill, decode, "-o", ours)
    # Laid out as ExecuTorch's write_ptn lays it out: entries right after their headers.
    foreign = os.path.join(d, "foreign.ptn")
    with zipfile.ZipFile(ours) as src, zipfile.ZipFile(foreign, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    r = ctx.run("verify", foreign)
    ctx.code(r, 0, "verify of a write_ptn-style package")
    ctx.check("ptepack: note:" in r.err and "not 64-byte aligned" in r.err,
              f"alignment not reported as a note: {r.err!r}")
    r = ctx.run("verify", foreign, "--strict")
    ctx.code(r, 1, "verify --strict of a write_ptn-style package")
    j = json.loads(ctx.run("verify", foreign, "--json").out)
    ctx.check(j["ok"] and j["notes"] and not j["problems"], f"verify --json: {j}")
    ctx.run_ok("pack", foreign, "-o", os.path.join(d, "again.ptn"))
    ctx.equal(open(os.path.join(d, "again.ptn"), "rb").read(), open(ours, "rb").read(),
              "repack of the foreign package")


@suite.test
def verify_reports_a_key_in_two_shards(ctx):
    prefill, decode = examples(ctx)
    packed = os.path.join(ctx.mkdir(), "m")
    ctx.run_ok("pack", prefill, decode, "-o", packed, "--max-shard-bytes", "3000")
    path = os.path.join(packed, "manifest.json")
    m = json.load(open(path))
    ctx.require(len(m["shards"]) >= 2, "need two shards")
    m["shards"][1]["keys"] = sorted(m["shards"][1]["keys"] + [m["shards"][0]["keys"][0]])
    json.dump(m, open(path, "w"), indent=2, sort_keys=True)
    r = ctx.run("verify", packed)
    ctx.code(r, 1, "verify with a key in two shards")
    ctx.check("is in two shards" in r.err, f"not reported: {r.err!r}")


@suite.test
def verify_checks_method_names_of_bare_programs(ctx):
    prefill, _ = examples(ctx)
    d = ctx.mkdir()
    for name, expect in (("", "method name is empty"), ("a/b", "contains '/'"),
                         ("state", "reserved")):
        program = json.load(open(prefill))
        program["methods"][0]["name"] = name
        path = os.path.join(d, f"p{len(expect)}.json")
        json.dump(program, open(path, "w"))
        r = ctx.run("verify", path)
        ctx.code(r, 1, f"verify of method name {name!r}")
        ctx.check(expect in r.err, f"{name!r}: {r.err!r}")
    program = json.load(open(prefill))
    program["methods"].append(program["methods"][0])
    path = os.path.join(d, "dup.json")
    json.dump(program, open(path, "w"))
    r = ctx.run("verify", path)
    ctx.code(r, 1, "verify of a duplicated method")
    ctx.check("duplicate method" in r.err, r.err)


@suite.test
def written_programs_keep_empty_vectors(ctx):
    # A 0-d constant has an empty TensorMeta.sizes; readers built from the
    # reference schema require the field, so the writer must not drop it.
    prefill, decode = examples(ctx)
    out = os.path.join(ctx.mkdir(), "m")
    ctx.run_ok("pack", prefill, decode, "-o", out)
    program = ctx.flatc_json(open(os.path.join(out, "program.ptg"), "rb").read())
    scalars = [c for m in program["methods"] for c in m.get("constants", [])
               if c["data_key"].endswith("_lifted_tensor_constant0")]
    ctx.require(scalars, "test setup: no _lifted_tensor_constant0 constant")
    for c in scalars:
        ctx.check("sizes" in c["meta"], f"{c['data_key']}: TensorMeta.sizes dropped: {c['meta']}")
        ctx.check("dim_order" in c["meta"], f"{c['data_key']}: TensorMeta.dim_order dropped")


@suite.test
def nul_bytes_in_names_are_refused_on_input(ctx):
    # One rule for every format: a key with a NUL is refused where it is read.
    d = ctx.mkdir()
    program = copy_example(ctx, d)
    raw = open(os.path.join(d, "p.safetensors"), "rb").read()
    n = struct.unpack_from("<Q", raw)[0]
    header = json.loads(raw[8:8 + n])
    header["a\u0000b"] = header.pop("tok_embeddings.weight")
    text = json.dumps(header).encode()  # the key's NUL as the escape \u0000
    text += b" " * ((8 - len(text) % 8) % 8)
    path = os.path.join(d, "nul.safetensors")
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
    for argv in (["dump", path], ["pack", f"{program}@{path}", "-o", os.path.join(d, "o.ptn")]):
        r = ctx.run(*argv)
        ctx.code(r, 3, f"{argv[0]} of a key with a NUL")
        ctx.check("contains a NUL byte" in r.err and "\\x00" in r.err,
                  f"{argv[0]}: NUL not named escaped: {r.err!r}")
    ctx.check(not os.path.exists(os.path.join(d, "o.ptn")), "output written")


if __name__ == "__main__":
    suite.main()
