#!/usr/bin/env python3
# Merging .pte programs (docs/rename-rules.md, "Merging .pte programs"): several real programs
# become one multi-method program, as one file and as a directory with --merge, capped and
# uncapped; every method of the merged program is checked against the method of its source
# with the independent readers in tests/tools (plan field for field, stored bytes, delegate
# blobs, the named data its delegates name), and with `diff --method`; dedup across inputs;
# each rule's conflict or refusal with its exit code and one-line message, nothing written;
# --method selection; determinism for any -j. Programs no fixture provides (constant-only
# methods, training companions, name-bound delegates, other versions) are written with
# tests/tools/pte_writer.py as ExecuTorch's serializer writes them.
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, load_json, snapshot, temp_leftovers, tree_differences  # noqa: E402
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)
import pte_samples  # noqa: E402
import pte_writer  # noqa: E402
from merge_checks import JOBS, check_method, data_maps, fixture, pack, sha, shards_of  # noqa: E402
from pte_reader import classify  # noqa: E402

suite = Suite()


# The merge of most fixtures: (name in the merged program, fixture, its method, data files).
def plan_of_everything(ctx):
    pair = os.path.join(ctx.data, "pte", "external_pair.ptd")
    return [("stress", "xnnpack_stress_mlp", "forward", []),
            ("conv", "xnnpack_conv", "forward", []),
            ("quant", "xnnpack_quantized", "forward", []),
            ("double", "portable_multi_method", "double", []),
            ("forward", "portable_multi_method", "forward", []),
            ("ext", "external_pair", "forward", [pair]),
            ("inline", "portable_inline_constant_buffer", "forward", []),
            ("add", "portable_add_no_header", "forward", []),
            ("kws", "portable_keyword_spotting", "forward", [])]


def everything_inputs(ctx):
    inputs = []
    for name, stem, method, data in plan_of_everything(ctx):
        if stem == "portable_multi_method":
            if method == "double":
                inputs.append(fixture(ctx, stem))
            continue
        inputs.append(f"{name}={fixture(ctx, stem)}" + (f"@{','.join(data)}" if data else ""))
    return inputs


def check_everything(ctx, program, data, what):
    parsed, _ = pte_reader.load(program)
    expected = [name for name, *_ in plan_of_everything(ctx)]
    ctx.equal([p["name"] for p in parsed["program"]["execution_plan"]], expected,
              f"{what}: methods in input order")
    for name, stem, method, source_data in plan_of_everything(ctx):
        check_method(ctx, program, data, name, fixture(ctx, stem), source_data, method,
                     f"{what}: {name}")


@suite.test
def every_fixture_merged_into_one_file_keeps_every_method(ctx):
    d = ctx.mkdir()
    out = os.path.join(d, "all.pte")
    pack(ctx, *everything_inputs(ctx), "-o", out)
    ctx.code(ctx.run("verify", out), 0, "verify of the merged program")
    check_everything(ctx, out, [], "one file")
    again = os.path.join(d, "again.pte")
    ctx.run_ok("pack", "-j", "1", "-q", *everything_inputs(ctx), "-o", again)
    ctx.equal(sha(open(out, "rb").read()), sha(open(again, "rb").read()), "-j 1 against -j 2")


@suite.test
def every_fixture_merged_into_a_directory_capped_and_uncapped(ctx):
    for cap in (None, "64KB"):
        d = ctx.mkdir(f"cap{cap}")
        out = os.path.join(d, "dist")
        extra = ["--max-shard-bytes", cap, "--oversize", "own-shard"] if cap else []
        pack(ctx, *everything_inputs(ctx), "-o", out, "--merge", "model.pte", *extra)
        ctx.code(ctx.run("verify", out), 0, f"cap {cap}: verify")
        manifest = load_json(os.path.join(out, "manifest.json"))
        ctx.equal([p["file"] for p in manifest["programs"]], ["model.pte"], "one program")
        shards = [os.path.join(out, f) for f in manifest["programs"][0]["shards"]]
        check_everything(ctx, os.path.join(out, "model.pte"), shards, f"cap {cap}")
        # The directory as an input: repacked byte for byte, and back into one file.
        again = os.path.join(d, "again")
        pack(ctx, out, "-o", again, *extra)
        ctx.equal(tree_differences(snapshot(out), snapshot(again)), [], f"cap {cap}: repack")
        inlined = os.path.join(d, "inlined.pte")
        pack(ctx, out, "-o", inlined)
        check_everything(ctx, inlined, [], f"cap {cap}: pack DIR -o X.pte")


@suite.test
def a_program_merged_with_a_renamed_copy_stores_its_data_once(ctx):
    d = ctx.mkdir()
    stress = fixture(ctx, "xnnpack_stress_mlp")
    copy = shutil.copy(stress, os.path.join(d, "copy.pte"))
    out = os.path.join(d, "both.pte")
    summary = ctx.run_ok("pack", *JOBS, stress, f"again={copy}", "-o", out, "--json").json()
    size, source = os.path.getsize(out), os.path.getsize(stress)
    ctx.check(size < source * 1.01, f"merged {size} B, one input {source} B: not stored once")
    parsed, blob = pte_reader.load(out)
    ctx.equal(len(parsed["program"]["named_data"]), 20, "named data entries (20 in the input)")
    segments = [s for s in parsed["program"]["segments"] if s["size"]]
    original, _ = pte_reader.load(stress)
    ctx.equal(len(segments), len([s for s in original["program"]["segments"] if s["size"]]),
              "segments holding bytes: the input's, not twice as many")
    ctx.equal([(m["name"], m["source_method"]) for m in summary["methods"]],
              [("forward", "forward"), ("again", "forward")], "summary: methods and sources")
    ctx.check(any("20 named-data entries and 2 delegate blobs stored once" in n
                  for n in summary["notes"]), f"summary notes {summary['notes']}")
    for name in ("forward", "again"):
        check_method(ctx, out, [], name, stress, [], "forward", f"copy: {name}")


# ------------------------------------------------------------------ refusals, one rule each

def refused(ctx, argv, code, names, target, what):
    result = ctx.run("pack", *JOBS, *argv)
    ctx.code(result, code, what)
    lines = result.err.splitlines()
    ctx.check(len(lines) == 1 and lines[0].startswith("ptepack: error: "),
              f"{what}: not one error line: {result.err!r}")
    for name in names:
        ctx.check(name in result.err, f"{what}: message does not name {name!r}: {result.err!r}")
    ctx.check(not os.path.exists(target), f"{what}: {target} written")
    ctx.equal(temp_leftovers(os.path.dirname(target)), [], f"{what}: temporary files left")
    return result


@suite.test
def one_method_name_in_two_inputs_is_a_conflict(ctx):
    d = ctx.mkdir()
    conv, add = fixture(ctx, "xnnpack_conv"), fixture(ctx, "portable_add_no_header")
    target = os.path.join(d, "m.pte")
    refused(ctx, [conv, add, "-o", target], 4,
            ["portable_add_no_header.pte", "'forward'", "xnnpack_conv.pte", "NEWNAME=PATH"],
            target, "two 'forward' methods")
    target = os.path.join(d, "dir")
    refused(ctx, [conv, add, "-o", target, "--merge", "m.pte"], 4, ["'forward'"], target,
            "two 'forward' methods, --merge")
    # A multi-method input keeps its names; its methods clash with a renamed one's.
    multi = fixture(ctx, "portable_multi_method")
    refused(ctx, [multi, f"double={conv}", "-o", os.path.join(d, "x.pte")], 4,
            ["'double'", "--method M"], os.path.join(d, "x.pte"), "multi-method clash")


@suite.test
def renaming_needs_a_single_method_program(ctx):
    d = ctx.mkdir()
    target = os.path.join(d, "m.pte")
    refused(ctx, [f"x={fixture(ctx, 'portable_multi_method')}", "-o", target], 2,
            ["portable_multi_method.pte", "double, forward", "--method M"], target,
            "METHOD= on a two-method program")
    refused(ctx, [f"state={fixture(ctx, 'xnnpack_conv')}", "-o", target], 2, ["'state'"],
            target, "METHOD=state")


def with_constant_method(ctx, stem, name, value, directory, file_name=None):
    """The fixture with a method that only returns an Int (as LLM exports carry
    get_max_seq_len), written by pte_writer."""
    program, segments = pte_writer.decode(fixture(ctx, stem))
    program["execution_plan"].append({
        "name": name, "values": [{"val_type": "Int", "val": {"int_val": value}}],
        "inputs": [], "outputs": [0], "chains": [{"inputs": [], "outputs": [0],
                                                  "instructions": []}],
        "operators": [], "delegates": [], "non_const_buffer_sizes": [0]})
    path = os.path.join(directory, file_name or f"{stem}.pte")
    pte_writer.write(path, program, segments)
    ctx.run_ok("verify", path)
    return path


@suite.test
def constant_methods_are_kept_once_when_they_agree(ctx):
    d = ctx.mkdir()
    conv = with_constant_method(ctx, "xnnpack_conv", "get_max_seq_len", 128, d)
    add = with_constant_method(ctx, "portable_add_no_header", "get_max_seq_len", 128, d)
    out = os.path.join(d, "m.pte")
    summary = ctx.run_ok("pack", *JOBS, f"conv={conv}", f"add={add}", "-o", out, "--json").json()
    parsed, _ = pte_reader.load(out)
    ctx.equal([p["name"] for p in parsed["program"]["execution_plan"]],
              ["conv", "get_max_seq_len", "add"], "methods: the constant one once")
    ctx.check(any("get_max_seq_len" in n and "kept once" in n for n in summary["notes"]),
              f"notes {summary['notes']}")
    check_method(ctx, out, [], "get_max_seq_len", conv, [], "get_max_seq_len", "constant method")
    # Renaming a program renames its one method with instructions, never a constant one.
    ctx.equal([m["source_method"] for m in summary["methods"]],
              ["forward", "get_max_seq_len", "forward"], "sources")
    other = with_constant_method(ctx, "portable_add_no_header", "get_max_seq_len", 256,
                                 ctx.mkdir("other"))
    target = os.path.join(d, "x.pte")
    refused(ctx, [f"conv={conv}", f"add={other}", "-o", target], 4,
            ["'get_max_seq_len'", "returns other values"], target, "constant methods differ")


def with_training_companions(ctx, directory):
    """xnnpack_conv with the companions an on-device training export carries for `forward`."""
    program, segments = pte_writer.decode(fixture(ctx, "xnnpack_conv"))
    for i, kind in enumerate(("gradients_index", "parameters_index", "fqn")):
        program["execution_plan"].append({
            "name": f"__et_training_{kind}_forward",
            "values": [{"val_type": "Int", "val": {"int_val": i}}], "inputs": [],
            "outputs": [0], "chains": [{"inputs": [], "outputs": [0], "instructions": []}],
            "operators": [], "delegates": [], "non_const_buffer_sizes": [0]})
    return pte_writer.write(os.path.join(directory, "train.pte"), program, segments)


@suite.test
def training_companions_follow_their_method(ctx):
    d = ctx.mkdir()
    train = with_training_companions(ctx, d)
    out = os.path.join(d, "m.pte")
    pack(ctx, f"step={train}", fixture(ctx, "portable_multi_method"), "-o", out)
    parsed, _ = pte_reader.load(out)
    ctx.equal([p["name"] for p in parsed["program"]["execution_plan"]],
              ["step", "__et_training_gradients_index_step",
               "__et_training_parameters_index_step", "__et_training_fqn_step", "double",
               "forward"], "companions renamed with their method")
    # Keeping the method keeps its companions; keeping another drops them.
    kept = os.path.join(d, "kept.pte")
    pack(ctx, out, "--method", "step", "-o", kept)
    parsed, _ = pte_reader.load(kept)
    ctx.equal([p["name"] for p in parsed["program"]["execution_plan"]],
              ["step", "__et_training_gradients_index_step",
               "__et_training_parameters_index_step", "__et_training_fqn_step"],
              "--method step")
    other = os.path.join(d, "other.pte")
    pack(ctx, out, "--method", "double", "-o", other)
    parsed, _ = pte_reader.load(other)
    ctx.equal([p["name"] for p in parsed["program"]["execution_plan"]], ["double"],
              "--method double")


def with_delegate_id(ctx, stem, backend, directory):
    program, segments = pte_writer.decode(fixture(ctx, stem))
    program["execution_plan"][0]["delegates"][0]["id"] = backend
    return pte_writer.write(os.path.join(directory, f"{backend}.pte"), program, segments)


@suite.test
def methods_whose_delegate_finds_data_by_name_are_not_renamed(ctx):
    d = ctx.mkdir()
    for backend in ("QnnBackend", "CoreMLBackend"):
        path = with_delegate_id(ctx, "xnnpack_conv", backend, d)
        target = os.path.join(d, "m.pte")
        refused(ctx, [f"x={path}", "-o", target], 2, [backend, "'forward'"], target,
                f"rename of a {backend} method")
        # Its own name it may keep.
        pack(ctx, f"forward={path}", "-o", target)
        os.remove(target)
    # AOTI: named data keyed `<method>_so_blob`.
    program, segments = pte_writer.decode(fixture(ctx, "xnnpack_conv"))
    program["named_data"][0]["key"] = "forward_so_blob"
    aoti = pte_writer.write(os.path.join(d, "aoti.pte"), program, segments)
    target = os.path.join(d, "a.pte")
    refused(ctx, [f"x={aoti}", "-o", target], 2, ["'forward_so_blob'", "AOTI"], target,
            "rename of an AOTI method")


def with_named_byte_changed(ctx, stem, directory, name):
    """The fixture with one byte of its first named-data entry changed, the key kept."""
    parsed, blob = pte_reader.load(fixture(ctx, stem))
    data = bytearray(blob)
    start, _ = pte_reader.segment_range(parsed, parsed["program"]["named_data"][0]["segment_index"])
    data[start] ^= 1
    path = os.path.join(directory, name)
    with open(path, "wb") as handle:
        handle.write(bytes(data))
    return path, parsed["program"]["named_data"][0]["key"]


@suite.test
def one_named_data_key_with_other_bytes_is_a_conflict(ctx):
    d = ctx.mkdir()
    changed, key = with_named_byte_changed(ctx, "xnnpack_conv", d, "changed.pte")
    target = os.path.join(d, "m.pte")
    refused(ctx, [fixture(ctx, "xnnpack_conv"), f"b={changed}", "-o", target], 4,
            [key, "changed.pte", "xnnpack_conv.pte"], target, "named data conflict")


@suite.test
def diff_of_one_method_sees_its_named_data_and_plan(ctx):
    d = ctx.mkdir()
    conv = fixture(ctx, "xnnpack_conv")
    merged = os.path.join(d, "m.pte")
    pack(ctx, f"c={conv}", fixture(ctx, "portable_multi_method"), "-o", merged)
    ctx.code(ctx.run("diff", merged, conv, "--method", "c=forward"), 0, "c against its source")
    changed, key = with_named_byte_changed(ctx, "xnnpack_conv", d, "changed.pte")
    result = ctx.run("diff", merged, changed, "--method", "c=forward", "--json")
    ctx.code(result, 1, "c against a program whose named data changed")
    texts = [x["text"] for x in result.json()["differences"]] if result.code == 1 else []
    ctx.check(any(key in t and "bytes changed" in t for t in texts), f"differences {texts}")
    result = ctx.run("diff", merged, fixture(ctx, "portable_add_no_header"), "--method",
                     "double=forward")
    ctx.code(result, 1, "double against another program's forward")
    result = ctx.run("diff", merged, conv, "--method", "nosuch=forward")
    ctx.code(result, 2, "--method naming no method")
    ctx.check("'nosuch'" in result.err and "c, double, forward" in result.err, result.err)


@suite.test
def clashing_external_keys_are_qualified(ctx):
    d = ctx.mkdir()
    pair = fixture(ctx, "external_pair")
    ptd = os.path.join(ctx.data, "pte", "external_pair.ptd")
    # Another program with the same EXTERNAL names and other bytes for 'a'.
    other_dir = ctx.mkdir("other")
    other = shutil.copy(pair, os.path.join(other_dir, "tuned.pte"))
    entries, parsed = pte_reader.read_ptd(ptd)
    data = bytearray(open(ptd, "rb").read())
    data[parsed["segments"][entries["a"]["segment_index"]]["file_offset"]] ^= 1
    other_ptd = os.path.join(other_dir, "tuned.ptd")
    with open(other_ptd, "wb") as handle:
        handle.write(bytes(data))
    out = os.path.join(d, "m.pte")
    summary = ctx.run_ok("pack", *JOBS, pair, f"tuned={other}", "-o", out, "--json").json()
    ctx.check(any("'a@tuned'" in n for n in summary["notes"]), f"notes {summary['notes']}")
    check_method(ctx, out, [], "forward", pair, [ptd], "forward", "first input")
    check_method(ctx, out, [], "tuned", other, [other_ptd], "forward", "qualified input")
    d2 = os.path.join(d, "dir")
    pack(ctx, pair, f"tuned={other}", "-o", d2, "--merge", "m.pte")
    parsed, _ = pte_reader.load(os.path.join(d2, "m.pte"))
    names = sorted({pte_reader.fqn(t) for _, _, _, t in pte_reader.tensors(parsed)
                    if classify(t) == "external"})
    ctx.equal(names, ["a", "a@tuned", "b"], "EXTERNAL keys of the merged program")


@suite.test
def programs_of_other_versions_are_refused(ctx):
    d = ctx.mkdir()
    program, segments = pte_writer.decode(fixture(ctx, "portable_add_no_header"))
    program["version"] = 7
    newer = pte_writer.write(os.path.join(d, "newer.pte"), program, segments)
    target = os.path.join(d, "m.pte")
    refused(ctx, [fixture(ctx, "xnnpack_conv"), f"add={newer}", "-o", target], 3,
            ["newer.pte", "Program.version 7"], target, "version")


# ------------------------------------------------------------------ choosing methods

@suite.test
def method_selection_keeps_only_those_methods_and_their_data(ctx):
    d = ctx.mkdir()
    merged = os.path.join(d, "m.pte")
    pack(ctx, f"stress={fixture(ctx, 'xnnpack_stress_mlp')}", f"quant={fixture(ctx, 'xnnpack_quantized')}",
         fixture(ctx, "portable_multi_method"), "-o", merged)
    for keep, sources in ((["quant"], [("quant", "xnnpack_quantized", "forward")]),
                          (["stress", "double"], [("stress", "xnnpack_stress_mlp", "forward"),
                                                  ("double", "portable_multi_method", "double")])):
        what = "--method " + " ".join(keep)
        for kind in ("file", "dir"):
            out = os.path.join(d, f"{'-'.join(keep)}-{kind}" + (".pte" if kind == "file" else ""))
            pack(ctx, merged, *[a for m in keep for a in ("--method", m)], "-o", out)
            program = out if kind == "file" else os.path.join(out, "m.pte")
            data = [] if kind == "file" else shards_of(out)
            parsed, _ = pte_reader.load(program)
            ctx.equal([p["name"] for p in parsed["program"]["execution_plan"]],
                      [m for m, _, _ in sources], f"{what} ({kind}): methods")
            for name, stem, method in sources:
                check_method(ctx, program, data, name, fixture(ctx, stem), [], method,
                             f"{what} ({kind})")
            # Only the named data the kept methods' delegates name.
            wanted = set()
            for _, stem, _ in sources:
                p, _ = pte_reader.load(fixture(ctx, stem))
                wanted |= {e["key"] for e in p["program"]["named_data"] or []}
            have = {e["key"] for e in parsed["program"]["named_data"] or []}
            have |= set(data_maps(data)) - {pte_reader.fqn(t) for _, _, _, t in
                                            pte_reader.tensors(parsed) if classify(t) == "external"}
            ctx.equal(sorted(have - {k for k in have if "/" in k}), sorted(wanted),
                      f"{what} ({kind}): named data kept")
    target = os.path.join(d, "none.pte")
    refused(ctx, [merged, "--method", "nosuch", "-o", target], 2,
            ["--method 'nosuch'", "double, forward, quant, stress"], target, "unknown method")
    target = os.path.join(d, "graph")
    refused(ctx, [os.path.join(ctx.examples, "prefill.json"), "--method", "prefill", "-o", target],
            2, ["--method", "prefill.json"], target, "--method with a program graph")


@suite.test
def method_selection_keeps_keys_a_dropped_method_shares(ctx):
    """Both methods' delegates name the same 20 named-data keys: keeping one keeps them all."""
    d = ctx.mkdir()
    mlp = fixture(ctx, "xnnpack_stress_mlp")
    both = os.path.join(d, "both.pte")
    pack(ctx, mlp, f"again={mlp}", "-o", both)
    for kept, source in (("again", "forward"), ("forward", "forward")):
        one = os.path.join(d, f"{kept}.pte")
        pack(ctx, both, "--method", kept, "-o", one)
        ctx.code(ctx.run("verify", one), 0, f"--method {kept}: verify")
        parsed, blob = pte_reader.load(one)
        ctx.equal([p["name"] for p in parsed["program"]["execution_plan"]], [kept],
                  f"--method {kept}: methods")
        ctx.equal(len(pte_reader.named_data(parsed, blob)), 20, f"--method {kept}: named data")
        check_method(ctx, one, [], kept, mlp, [], source, f"--method {kept}")
        out = os.path.join(d, f"{kept}_dir")
        pack(ctx, both, "--method", kept, "-o", out)
        ctx.code(ctx.run("verify", out), 0, f"--method {kept} into a directory: verify")
        manifest = load_json(os.path.join(out, "manifest.json"))
        ctx.equal(len(manifest["programs"][0]["named_data"]), 20,
                  f"--method {kept} into a directory: named data listed")


@suite.test
def merge_options_are_checked(ctx):
    d = ctx.mkdir()
    conv, add = fixture(ctx, "xnnpack_conv"), f"add={fixture(ctx, 'portable_add_no_header')}"
    for name in ("a/b.pte", "model.bin", ".hidden.pte", ""):
        target = os.path.join(d, "dir")
        refused(ctx, [conv, add, "-o", target, "--merge", name], 2, ["--merge"], target,
                f"--merge {name!r}")
    target = os.path.join(d, "m.pte")
    refused(ctx, [conv, add, "-o", target, "--merge", "x.pte"], 2, ["--merge"], target,
            "--merge with a .pte output")
    target = os.path.join(d, "side")
    refused(ctx, [f"c={conv}", add, "-o", target], 2, ["--merge NAME.pte"], target,
            "renamed programs side by side")
    target = os.path.join(d, "g")
    refused(ctx, [os.path.join(ctx.examples, "prefill.json"), "-o", target, "--merge", "x.pte"],
            2, ["--merge"], target, "--merge with a program graph")


@suite.test
def dry_run_shows_the_merge_plan_and_writes_nothing(ctx):
    d = ctx.mkdir()
    stress = fixture(ctx, "xnnpack_stress_mlp")
    target = os.path.join(d, "dist")
    result = ctx.run_ok("pack", stress, f"again={stress}", "-o", target, "--merge", "m.pte",
                        "--dry-run")
    ctx.check("again" in result.out and "(forward)" in result.out and "stored once" in result.out,
              f"dry run plan: {result.out}")
    ctx.equal(sorted(os.listdir(d)), [], "nothing written")


# ------------------------------------------------------------------ shared state

def stateful(ctx, directory, name, kind, change=None, fqn="state", initial=(10.0, 20.0)):
    """A one-method program with a named mutable buffer (tests/tools/pte_samples.py);
    `change(plan)` edits its plan's JSON first."""
    plan = pte_samples.stateful_plan("forward", kind, fqn)
    if change:
        change(plan)
    program, segments = pte_samples.program([plan], initial)
    return pte_writer.write(os.path.join(directory, name), program, segments)


def allocations(path):
    """{method: {value: (memory_id, offset)}} and {method: non_const_buffer_sizes}."""
    parsed, _ = pte_reader.load(path)
    where, sizes = {}, {}
    for plan in parsed["program"]["execution_plan"]:
        sizes[plan["name"]] = plan["non_const_buffer_sizes"]
    for _, method, v, t in pte_reader.tensors(parsed):
        a = t["allocation_info"]
        if a:
            where.setdefault(method, {})[v] = (
                a["memory_id"], a["memory_offset_low"] | (a["memory_offset_high"] << 32))
    return where, sizes


@suite.test
def shared_state_is_laid_out_as_executorch_shares_it(ctx):
    d = ctx.mkdir()
    acc = stateful(ctx, d, "acc.pte", "accumulate")
    read = stateful(ctx, d, "read.pte", "read")
    out = os.path.join(d, "shared.pte")
    summary = ctx.run_ok("pack", *JOBS, f"accumulate={acc}", f"read={read}", "-o", out,
                         "--share-state", "--json").json()
    ctx.check(any("state shared: 'state' in a 16-byte arena" in n for n in summary["notes"]),
              f"notes {summary['notes']}")
    ctx.code(ctx.run("verify", out), 0, "verify")
    # ExecuTorch's own shared layout of the same two methods (share_mutable_buffers=True).
    reference = pte_samples.write_stateful(os.path.join(d, "reference.pte"),
                                           [("accumulate", "accumulate"), ("read", "read")],
                                           shared=True)
    got, got_sizes = allocations(out)
    want, want_sizes = allocations(reference)
    for method in ("accumulate", "read"):
        ctx.equal(got[method][1], want[method][1], f"{method}: the state's place")
        ctx.equal(got_sizes[method][2], want_sizes[method][2], f"{method}: the arena")
        ctx.equal(got_sizes[method][:2], [0, 32 if method == "accumulate" else 48],
                  f"{method}: its own memory id 1 unchanged")
        ctx.code(ctx.run("diff", out, acc if method == "accumulate" else read, "--method",
                         f"{method}=forward"), 0, f"{method}: diff --method (moves are notes)")
    again = os.path.join(d, "again.pte")
    ctx.run_ok("pack", "-j", "1", "-q", f"accumulate={acc}", f"read={read}", "-o", again,
               "--share-state")
    ctx.equal(sha(open(out, "rb").read()), sha(open(again, "rb").read()), "-j 1 against -j 2")
    # Without the flag every method keeps its own state, and a note says they could share.
    private = os.path.join(d, "private.pte")
    summary = ctx.run_ok("pack", *JOBS, f"accumulate={acc}", f"read={read}", "-o", private,
                         "--json").json()
    ctx.check(any("each keep their own mutable buffer 'state'" in n for n in summary["notes"]),
              f"notes {summary['notes']}")
    got, got_sizes = allocations(private)
    ctx.equal((got["accumulate"][1], got["read"][1]), ((1, 16), (1, 16)), "states apart")
    ctx.equal(got_sizes["read"], [0, 48], "no arena without the flag")
    result = ctx.run("diff", out, private)
    ctx.code(result, 1, "a whole-program diff counts sharing as a difference")


@suite.test
def several_buffers_get_one_range_per_name_in_input_then_value_order(ctx):
    d = ctx.mkdir()
    acc = stateful(ctx, d, "acc.pte", "accumulate", fqn="kv")
    both = pte_samples.write_stateful(os.path.join(d, "two.pte"),
                                      [("forward", "accumulate")], fqn="pos")
    read = stateful(ctx, d, "read.pte", "read", fqn="kv")
    out = os.path.join(d, "m.pte")
    pack(ctx, f"a={acc}", f"b={both}", f"c={read}", "-o", out, "--share-state")
    got, sizes = allocations(out)
    ctx.equal((got["a"][1], got["b"][1], got["c"][1]), ((2, 0), (2, 16), (2, 0)),
              "kv at 0 (first met), pos at 16")
    ctx.equal({m: s[2] for m, s in sizes.items()}, {"a": 32, "b": 32, "c": 32}, "arena 32 B")
    ctx.code(ctx.run("verify", out), 0, "verify")


@suite.test
def values_inside_a_buffer_move_with_it_and_partial_overlap_is_refused(ctx):
    d = ctx.mkdir()

    def alias(plan):  # the add's result planned inside the state (an in-place write-back)
        plan["values"][3]["val"]["allocation_info"]["memory_offset_low"] = 16
    read = stateful(ctx, d, "read.pte", "read", alias)
    acc = stateful(ctx, d, "acc.pte", "accumulate")
    out = os.path.join(d, "m.pte")
    pack(ctx, f"acc={acc}", f"read={read}", "-o", out, "--share-state")
    got, _ = allocations(out)
    ctx.equal((got["read"][1], got["read"][3]), ((2, 0), (2, 0)), "the alias moved along")

    # A view 4 bytes into the state (one float of the two): it keeps its offset inside it.
    def view(plan):
        plan["values"][3]["val"]["allocation_info"]["memory_offset_low"] = 20
        plan["values"][3]["val"]["sizes"] = [1]
    inside = stateful(ctx, ctx.mkdir("view"), "read.pte", "read", view)
    viewed = os.path.join(d, "view.pte")
    pack(ctx, f"acc={acc}", f"read={inside}", "-o", viewed, "--share-state")
    got, _ = allocations(viewed)
    ctx.equal((got["read"][1], got["read"][3]), ((2, 0), (2, 4)),
              "a view 4 bytes into the state stays 4 bytes in")

    def partial(plan):
        plan["values"][3]["val"]["allocation_info"]["memory_offset_low"] = 20
    bad = stateful(ctx, ctx.mkdir("bad"), "read.pte", "read", partial)
    target = os.path.join(d, "x.pte")
    refused(ctx, [f"acc={acc}", f"read={bad}", "-o", target, "--share-state"], 3,
            ["value 3 overlaps mutable buffer 'state' only in part"], target, "partial overlap")


@suite.test
def share_state_refusals(ctx):
    d = ctx.mkdir()
    acc = stateful(ctx, d, "acc.pte", "accumulate")
    target = os.path.join(d, "x.pte")

    def unnamed(plan):
        del plan["values"][1]["val"]["extra_tensor_info"]
    def other_id(plan):
        plan["values"][0]["val"]["allocation_info"]["memory_id"] = 3
        plan["non_const_buffer_sizes"] = [0, 32, 0, 16]
    def cuda(plan):
        plan["non_const_buffer_device"] = [{"buffer_idx": 1, "device_type": "CUDA"}]
    def wider(plan):
        for v in (0, 1):
            plan["values"][v]["val"]["sizes"] = [4]
        plan["non_const_buffer_sizes"] = [0, 64]
    cases = [(unnamed, 3, ["mutable buffer without a name", "emit_mutable_buffer_names=True"]),
             (other_id, 3, ["memory id 3", "--share-state"]),
             (cuda, 3, ["CUDA", "--share-state"]),
             (wider, 4, ["'state'", "FLOAT [4]", "FLOAT [2]"])]
    for change, code, names in cases:
        other = stateful(ctx, ctx.mkdir(change.__name__), "other.pte", "read", change)
        if change is wider:
            program, segments = pte_writer.decode(other)
            segments[1] = struct.pack("<4f", 10, 20, 30, 40)
            pte_writer.write(other, program, segments)
        refused(ctx, [f"acc={acc}", f"other={other}", "-o", target, "--share-state"], code, names,
                target, change.__name__)
    # One name with another initial value is another state.
    colder = stateful(ctx, ctx.mkdir("cold"), "read.pte", "read", initial=(0.0, 0.0))
    refused(ctx, [f"acc={acc}", f"cold={colder}", "-o", target, "--share-state"], 4,
            ["'state'", "initial value"], target, "other initial value")
    # Only with a merge, and only for .pte programs.
    refused(ctx, [acc, "-o", os.path.join(d, "dir"), "--share-state"], 2, ["--share-state"],
            os.path.join(d, "dir"), "without a merge")
    refused(ctx, [os.path.join(ctx.examples, "prefill.json"), "-o", os.path.join(d, "g"),
                  "--share-state"], 2, ["--share-state"], os.path.join(d, "g"), "program graph")


@suite.test
def verify_checks_a_shared_state_layout(ctx):
    d = ctx.mkdir()
    good = pte_samples.write_stateful(os.path.join(d, "good.pte"),
                                      [("accumulate", "accumulate"), ("read", "read")],
                                      shared=True)
    ctx.code(ctx.run("verify", good), 0, "the shared layout verifies")
    cases = {
        "moved": (lambda plans: plans[1]["values"][1]["val"]["allocation_info"].__setitem__(
            "memory_offset_low", 16), "shared buffer 'state' is at offset 16"),
        "small": (lambda plans: [p["non_const_buffer_sizes"].__setitem__(2, 4) for p in plans],
                  "memory id 2 is 4 bytes, but its shared buffers end at 8"),
        "unequal": (lambda plans: plans[1]["non_const_buffer_sizes"].__setitem__(2, 64),
                    "every method shares one arena"),
        # `state` at [0, 8) and `v` at [4, 12): the second starts inside the first, not at it.
        "overlapping": (lambda plans: plans.__setitem__(1, pte_samples.stateful_plan(
            "read", "read", fqn="v", shared_offset=4)),
            "shared buffers 'state' and 'v' overlap in memory id 2"),
    }
    for name, (change, message) in cases.items():
        plans = [pte_samples.stateful_plan("accumulate", "accumulate", shared_offset=0),
                 pte_samples.stateful_plan("read", "read", shared_offset=0)]
        change(plans)
        program, segments = pte_samples.program(plans)
        path = pte_writer.write(os.path.join(d, f"{name}.pte"), program, segments)
        result = ctx.run("verify", path)
        ctx.code(result, 1, f"verify of a layout {name}")
        ctx.check(message in result.err, f"{name}: {message!r} not in {result.err!r}")


if __name__ == "__main__":
    suite.main()
