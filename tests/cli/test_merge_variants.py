#!/usr/bin/env python3
# Merges of real programs the fixtures do not cover as they are, written from the fixtures with
# tests/tools/pte_samples.py the way ExecuTorch's exporter writes them: delegate blobs inline in
# backend_delegate_data (extract_delegate_segments=False), a program with no stored tensors at
# all (an Ethos-U-like program whose blob holds its weights), and many values on a few constant
# buffers. Each merges with every fixture into one file and into a directory, and every method
# keeps what it computes with (tests/cli/merge_checks.py). A merge never grows: every pair of
# fixtures merged into one file is checked against a bound computed here from the inputs alone.
# Constant alignment comes from the padding the exporter left (docs/format-pte.md, "Alignment
# from evidence"), and --constant-alignment forces it.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, load_json, temp_leftovers  # noqa: E402
import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)
import pte_samples  # noqa: E402
import pte_writer  # noqa: E402
from merge_checks import JOBS, check_method, fixture, pack, sha  # noqa: E402

suite = Suite()

# (stem, its methods, data files) of every fixture program.
FIXTURES = [("xnnpack_stress_mlp", ["forward"]), ("xnnpack_conv", ["forward"]),
            ("xnnpack_quantized", ["forward"]), ("portable_multi_method", None),
            ("portable_keyword_spotting", ["forward"]), ("portable_add_no_header", ["forward"]),
            ("portable_inline_constant_buffer", ["forward"]), ("external_pair", ["forward"])]


def data_of(ctx, stem):
    return [os.path.join(ctx.data, "pte", "external_pair.ptd")] if stem == "external_pair" else []


def plans_of(path):
    parsed, _ = pte_reader.load(path)
    return [p["name"] for p in parsed["program"]["execution_plan"]]


def shared_buffers(source, path, buffers=3):
    """`source` with every constant value moved onto one of its `buffers` largest constant
    buffers (the smallest that holds it): many values, of several shapes, on a few buffers."""
    program, segments = pte_writer.decode(source)
    constants = [v["val"] for plan in program["execution_plan"] for v in plan["values"]
                 if v.get("val_type") == "Tensor" and v["val"].get("data_buffer_idx", 0)
                 and "allocation_info" not in v["val"]]
    size = {}
    for t in constants:
        nbytes = pte_reader.numel({"sizes": t.get("sizes", [])}) * \
            pte_reader.ELEMENT_SIZES[t.get("scalar_type", "BYTE")]
        size[t["data_buffer_idx"]] = max(size.get(t["data_buffer_idx"], 0), nbytes)
        t["_nbytes"] = nbytes
    largest = sorted(size, key=lambda b: (-size[b], b))[:buffers]
    for n, t in enumerate(constants):
        fits = [b for b in largest if size[b] >= t["_nbytes"]]
        t["data_buffer_idx"] = fits[n % len(fits)]
        del t["_nbytes"]
    return pte_writer.write(path, program, segments)


def variants(ctx, directory):
    """{name: path} of the programs no fixture provides, each with one method, `forward`."""
    conv, mlp, kws = (fixture(ctx, s) for s in
                      ("xnnpack_conv", "xnnpack_stress_mlp", "portable_keyword_spotting"))
    out = {"conv_inline": pte_samples.inline_delegates(
               conv, os.path.join(directory, "conv_inline.pte")),
           "ethos_like": pte_samples.inline_delegates(
               conv, os.path.join(directory, "ethos_like.pte"), backend="EthosUBackend",
               drop_stored=True),
           "mlp_inline": pte_samples.inline_delegates(
               mlp, os.path.join(directory, "mlp_inline.pte")),
           "kws_shared": shared_buffers(kws, os.path.join(directory, "kws_shared.pte"))}
    return out


@suite.test
def the_variants_are_what_they_claim(ctx):
    d = ctx.mkdir()
    made = variants(ctx, d)
    for name, path in made.items():
        parsed, blob = pte_reader.load(path)
        program = parsed["program"]
        blobs = pte_reader.delegate_blobs(parsed, blob)
        if name != "kws_shared":
            ctx.check(blobs and all(where == "INLINE" for *_, where, _ in blobs),
                      f"{name}: every delegate blob inline")
            ctx.check(program["backend_delegate_data"], f"{name}: backend_delegate_data present")
        stored = [t for *_, t in pte_reader.tensors(parsed) if pte_reader.classify(t) != "none"]
        if name == "ethos_like":
            ctx.equal(len(stored) + len(program["named_data"] or []), 0, "no stored tensors")
        if name == "kws_shared":
            buffers = {t["data_buffer_idx"] for t in stored}
            ctx.check(len(stored) > 40 and len(buffers) == 3,
                      f"kws_shared: {len(stored)} values on {len(buffers)} buffers")
        ctx.code(ctx.run("verify", path), 0, f"{name}: verify")
    # The unit tests and fuzz corpora read the small ones as committed files.
    for name in ("conv_inline", "ethos_like"):
        committed = os.path.join(ctx.data, "pte", "variants", f"{name}.pte")
        ctx.equal(sha(open(committed, "rb").read()), sha(open(made[name], "rb").read()),
                  f"tests/data/pte/variants/{name}.pte is what pte_samples.py writes")


def merge_inputs(ctx, variant_name, variant_path):
    """The variant (as `v`) and every fixture, renamed where a name would clash."""
    inputs = [f"v={variant_path}"]
    for stem, methods in FIXTURES:
        path = fixture(ctx, stem) + ("@" + ",".join(data_of(ctx, stem)) if data_of(ctx, stem)
                                     else "")
        inputs.append(path if methods is None else f"{stem}={path}")
    return inputs


def check_merged(ctx, merged, data, variant_path, what):
    check_method(ctx, merged, data, "v", variant_path, [], "forward", f"{what}: v")
    for stem, methods in FIXTURES:
        source = fixture(ctx, stem)
        for method in methods or plans_of(source):
            name = stem if methods else method
            check_method(ctx, merged, data, name, source, data_of(ctx, stem), method,
                         f"{what}: {name}")


@suite.test
def every_variant_merges_with_every_fixture_into_one_file_and_a_directory(ctx):
    d = ctx.mkdir()
    for name, path in variants(ctx, d).items():
        inputs = merge_inputs(ctx, name, path)
        one = os.path.join(d, f"{name}-all.pte")
        pack(ctx, *inputs, "-o", one)
        ctx.code(ctx.run("verify", one), 0, f"{name}: verify of the merged file")
        check_merged(ctx, one, [], path, f"{name} one file")
        out = os.path.join(d, f"{name}-dir")
        pack(ctx, *inputs, "-o", out, "--merge", "model.pte", "--max-shard-bytes", "64KB",
             "--oversize", "own-shard")
        ctx.code(ctx.run("verify", out), 0, f"{name}: verify of the merged directory")
        manifest = load_json(os.path.join(out, "manifest.json"))
        shards = [os.path.join(out, f) for f in manifest["programs"][0]["shards"]]
        check_merged(ctx, os.path.join(out, "model.pte"), shards, path, f"{name} directory")
        ctx.equal(temp_leftovers(d), [], f"{name}: temp files left")


@suite.test
def the_merge_of_one_variant_is_the_same_at_any_jobs_and_on_a_dry_run(ctx):
    d = ctx.mkdir()
    made = variants(ctx, d)
    for name in ("ethos_like", "mlp_inline"):
        argv = [f"a={made[name]}", fixture(ctx, "portable_multi_method")]
        one = os.path.join(d, f"{name}-1.pte")
        two = os.path.join(d, f"{name}-2.pte")
        ctx.run_ok("pack", "-q", "-j", "1", *argv, "-o", one)
        ctx.run_ok("pack", "-q", "-j", "2", *argv, "-o", two)
        ctx.equal(sha(open(one, "rb").read()), sha(open(two, "rb").read()), f"{name}: -j 1 = -j 2")
        dry = ctx.run("pack", "--dry-run", *JOBS, *argv, "-o", os.path.join(d, "dry.pte"))
        ctx.code(dry, 0, f"{name}: --dry-run")
        ctx.check(not os.path.exists(os.path.join(d, "dry.pte")), f"{name}: dry run wrote nothing")


@suite.test
def inline_blobs_of_one_size_and_other_bytes_are_both_kept(ctx):
    d = ctx.mkdir()
    conv = os.path.join(ctx.data, "pte", "variants", "conv_inline.pte")
    program, segments = pte_writer.decode(conv)
    blob = program["backend_delegate_data"][0]["data"]
    blob[len(blob) // 2] ^= 0x01  # same size, other bytes
    other = pte_writer.write(os.path.join(d, "other.pte"), program, segments)
    for out in (os.path.join(d, "m.pte"), os.path.join(d, "dir")):
        extra = ["--merge", "model.pte"] if out.endswith("dir") else []
        pack(ctx, f"a={conv}", f"b={other}", "-o", out, *extra)
        merged = out if out.endswith(".pte") else os.path.join(out, "model.pte")
        data = [] if out.endswith(".pte") else [
            os.path.join(out, f) for f in load_json(os.path.join(out, "manifest.json"))
            ["programs"][0]["shards"]]
        parsed, raw = pte_reader.load(merged)
        ctx.equal(len(parsed["program"]["backend_delegate_data"]), 2, f"{out}: two inline blobs")
        check_method(ctx, merged, data, "a", conv, [], "forward", f"{out}: a")
        check_method(ctx, merged, data, "b", other, [], "forward", f"{out}: b")
    # The same blob twice is stored once.
    same = os.path.join(d, "same.pte")
    pack(ctx, f"a={conv}", f"b={conv}", "-o", same)
    parsed, _ = pte_reader.load(same)
    ctx.equal(len(parsed["program"]["backend_delegate_data"]), 1, "one blob for two copies")


# ------------------------------------------------------------------ a merge never grows

def stored_pieces(path, data_files):
    """{sha: size} of what a program stores and a merge may store once: constant buffers,
    named data, delegate blobs (segment or inline), EXTERNAL data aside."""
    parsed, blob = pte_reader.load(path)
    pieces = {}
    for c in pte_reader.stored_constants(parsed, blob):
        pieces[sha(c["bytes"])] = len(c["bytes"])
    for _, data in pte_reader.named_data(parsed, blob):
        pieces[sha(data)] = len(data)
    for *_, data in pte_reader.delegate_blobs(parsed, blob):
        if data:
            pieces[sha(bytes(data))] = len(data)
    return pieces


def merge_bound(paths, data_files):
    """What a merge of `paths` may write at most: the inputs' sizes, less each piece stored
    in several inputs counted once, plus one pad (16 B constants, 128 B segments) for each
    piece the merged program stores."""
    total = sum(os.path.getsize(p) for p in paths)
    seen = {}
    for path in paths:
        for digest, size in stored_pieces(path, data_files).items():
            if digest in seen:
                total -= size
            seen[digest] = size
    return total + 128 * len(seen) + 128


@suite.test
def a_merge_is_never_larger_than_its_inputs(ctx):
    d = ctx.mkdir()
    stems = [stem for stem, _ in FIXTURES if stem != "external_pair"]
    count = 0
    for i, a in enumerate(stems):
        for b in stems[i:]:
            first = fixture(ctx, a)
            second = fixture(ctx, b)
            argv = [first if a == "portable_multi_method" else f"a={first}",
                    f"b={second}" if b != "portable_multi_method" or a == b else second]
            if a == b == "portable_multi_method":
                continue  # two programs whose every method name clashes
            out = os.path.join(d, f"{a}+{b}.pte")
            summary = ctx.run_ok("pack", *JOBS, *argv, "-o", out, "--json").json()
            size = os.path.getsize(out)
            inputs = os.path.getsize(first) + (os.path.getsize(second) if b != a else
                                               os.path.getsize(first))
            ctx.check(size <= inputs, f"{a} + {b}: {size} B merged from {inputs} B of inputs")
            bound = merge_bound([first, second], [])
            ctx.check(size <= bound, f"{a} + {b}: {size} B, more than the bound {bound} B")
            ctx.equal(summary["output_bytes"], size, f"{a} + {b}: output_bytes")
            ctx.equal(summary["input_bytes"], inputs if a != b else os.path.getsize(first),
                      f"{a} + {b}: input_bytes (each file once)")
            count += 1
    ctx.check(count >= 25, f"only {count} pairs merged")


def constant_offsets(path):
    parsed, _ = pte_reader.load(path)
    segment = parsed["program"]["constant_segment"]
    return (segment or {}).get("offsets") or []


def constant_sizes(path):
    """{data_buffer_idx: the largest value stored on it}."""
    parsed, _ = pte_reader.load(path)
    sizes = {}
    for *_, t in pte_reader.tensors(parsed):
        if pte_reader.classify(t) == "constant" and t["data_buffer_idx"]:
            sizes[t["data_buffer_idx"]] = max(sizes.get(t["data_buffer_idx"], 0),
                                              pte_reader.tensor_nbytes(t))
    return sizes


def laid_out_at(path, alignment):
    """Whether the constants are packed as an exporter padding to `alignment` lays them out:
    each next buffer at the previous end rounded up to it."""
    offsets = constant_offsets(path)
    sizes = constant_sizes(path)
    for k in range(1, len(offsets) - 1):
        if k not in sizes:
            return False
        if offsets[k + 1] != pte_writer.align(offsets[k] + sizes[k], alignment):
            return False
    return True


@suite.test
def the_kws_and_mlp_merge_pads_constants_to_16_as_their_exporter_did(ctx):
    d = ctx.mkdir()
    kws, mlp = fixture(ctx, "portable_keyword_spotting"), fixture(ctx, "xnnpack_stress_mlp")
    # The MLP's two constants sit at 0 and 65,536: a divisor, not an exporter's choice.
    ctx.equal(constant_offsets(mlp)[1:], [0, 65536], "the MLP's constant offsets")
    out = os.path.join(d, "km.pte")
    pack(ctx, f"kws={kws}", f"mlp={mlp}", "-o", out)
    size = os.path.getsize(out)
    ctx.check(size <= os.path.getsize(kws) + os.path.getsize(mlp),
              f"{size} B from {os.path.getsize(kws) + os.path.getsize(mlp)} B")
    ctx.check(laid_out_at(out, 16), "constants padded to 16")
    ctx.check(not laid_out_at(out, 4096), "constants not padded to 4096")
    check_method(ctx, out, [], "kws", kws, [], "forward", "kws")
    check_method(ctx, out, [], "mlp", mlp, [], "forward", "mlp")


def padded_constants(ctx, path, alignment):
    """portable_multi_method.pte with two more constants (12 B and 4 B, values the plans do
    not use) and its constant segment laid out at `alignment`, as constant_tensor_alignment
    does: the padding between sizes that are no multiple of 16 shows it."""
    program, segments = pte_writer.decode(fixture(ctx, "portable_multi_method"))
    values = program["execution_plan"][0]["values"]
    for buffer, sizes in ((2, [3]), (3, [1])):
        values.append({"val_type": "Tensor", "val": {"scalar_type": "FLOAT", "sizes": sizes,
                                                     "dim_order": [0], "data_buffer_idx": buffer}})
    index = program["constant_segment"].get("segment_index", 0)
    blob, offsets = pte_writer.constant_segment(
        [segments[index][:8], bytes(range(1, 13)), bytes([7, 7, 7, 7])], alignment=alignment)
    segments[index] = blob
    program["constant_segment"]["offsets"] = offsets
    return pte_writer.write(path, program, segments)


@suite.test
def an_exporter_alignment_above_16_is_kept(ctx):
    d = ctx.mkdir()
    wide = padded_constants(ctx, os.path.join(d, "multi64.pte"), 64)
    ctx.equal(constant_offsets(wide), [0, 0, 64, 128], "the input's offsets")
    ctx.check(laid_out_at(wide, 64) and not laid_out_at(wide, 16), "the input is padded to 64")
    out = os.path.join(d, "merged.pte")
    pack(ctx, wide, f"kws={fixture(ctx, 'portable_keyword_spotting')}", "-o", out)
    ctx.check(laid_out_at(out, 64) and not laid_out_at(out, 16), "the merge keeps 64")
    for method in ("forward", "double"):
        check_method(ctx, out, [], method, wide, [], method, f"at 64: {method}")
    # Without evidence of more (sizes padded to 16 need no padding), 16.
    narrow = padded_constants(ctx, os.path.join(d, "multi16.pte"), 16)
    out = os.path.join(d, "merged16.pte")
    pack(ctx, narrow, f"kws={fixture(ctx, 'portable_keyword_spotting')}", "-o", out)
    ctx.check(laid_out_at(out, 16), "the merge of a 16-padded input pads to 16")


@suite.test
def gaps_of_exactly_a_power_of_two_read_as_twice_that(ctx):
    """The keyword spotter laid out at 128: its 576-byte constants leave gaps of exactly 64,
    which padding to 64 would not leave; repacked alone it keeps every offset."""
    d = ctx.mkdir()
    kws = fixture(ctx, "portable_keyword_spotting")
    program, segments = pte_writer.decode(kws)
    sizes = constant_sizes(kws)
    index = program["constant_segment"].get("segment_index", 0)
    offsets = program["constant_segment"]["offsets"]
    buffers = [segments[index][offsets[k]:offsets[k] + sizes[k]] for k in range(1, len(offsets))]
    blob, wide = pte_writer.constant_segment(buffers, alignment=128)
    segments[index] = blob
    program["constant_segment"]["offsets"] = wide
    relaid = pte_writer.write(os.path.join(d, "kws128.pte"), program, segments)
    gaps = {wide[k + 1] - wide[k] - sizes[k] for k in range(1, len(wide) - 1)}
    ctx.check(64 in gaps, f"a gap of exactly 64: {sorted(gaps)}")
    out = os.path.join(d, "again.pte")
    pack(ctx, relaid, "-o", out)
    ctx.equal(constant_offsets(out), wide, "every constant where the exporter put it")
    check_method(ctx, out, [], "forward", relaid, [], "forward", "kws at 128")


@suite.test
def input_bytes_counts_every_file_of_the_inputs_once(ctx):
    d = ctx.mkdir()
    conv = fixture(ctx, "xnnpack_conv")
    pte_dir = os.path.join(d, "pte_dir")
    pack(ctx, conv, fixture(ctx, "portable_multi_method"), "-o", pte_dir)
    graph_dir = os.path.join(d, "graph_dir")
    pack(ctx, os.path.join(ctx.examples, "prefill.json"), os.path.join(ctx.examples, "decode.json"),
         "-o", graph_dir, "--max-shard-bytes", "3000")
    for directory in (pte_dir, graph_dir):
        files = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
        for spec in (directory, os.path.join(directory, "manifest.json")):
            doc = ctx.run_ok("pack", *JOBS, spec, "-o", os.path.join(d, "again"), "--dry-run",
                             "--json").json()
            ctx.equal(doc["input_bytes"], files, f"{spec}: every file of the directory")
    doc = ctx.run_ok("pack", *JOBS, conv, f"again={conv}", "-o", os.path.join(d, "twice.pte"),
                     "--dry-run", "--json").json()
    ctx.equal(doc["input_bytes"], os.path.getsize(conv), "one file given twice counts once")


@suite.test
def constant_alignment_forces_the_padding(ctx):
    d = ctx.mkdir()
    kws, mlp = fixture(ctx, "portable_keyword_spotting"), fixture(ctx, "xnnpack_stress_mlp")
    for alignment in ("32", "256"):
        out = os.path.join(d, f"km{alignment}.pte")
        pack(ctx, f"kws={kws}", f"mlp={mlp}", "-o", out, "--constant-alignment", alignment)
        ctx.check(laid_out_at(out, int(alignment)), f"--constant-alignment {alignment}")
        ctx.check(all(o % int(alignment) == 0 for o in constant_offsets(out)),
                  f"{alignment}: every offset a multiple")
        check_method(ctx, out, [], "kws", kws, [], "forward", f"{alignment}: kws")
    # One program repacked alone takes it too.
    one = os.path.join(d, "kws128.pte")
    pack(ctx, kws, "-o", one, "--constant-alignment", "128")
    ctx.check(laid_out_at(one, 128), "one program: --constant-alignment 128")
    for bad in ("48", "8", "131072", "0"):
        out = os.path.join(d, f"bad{bad}.pte")
        result = ctx.run("pack", f"kws={kws}", f"mlp={mlp}", "-o", out,
                         "--constant-alignment", bad)
        ctx.code(result, 2, f"--constant-alignment {bad}")
        ctx.error_names(result, ["--constant-alignment", bad, "power of two from 16 to 65536"],
                        f"--constant-alignment {bad}")
        ctx.check(not os.path.exists(out), f"--constant-alignment {bad}: nothing written")
    graph = os.path.join(ctx.data, "two_methods.ptg")
    result = ctx.run("pack", graph, "-o", os.path.join(d, "g.ptn"), "--constant-alignment", "64")
    ctx.code(result, 2, "--constant-alignment with a program graph")
    ctx.error_names(result, ["--constant-alignment", ".pte programs"], "with a program graph")


if __name__ == "__main__":
    suite.main()
