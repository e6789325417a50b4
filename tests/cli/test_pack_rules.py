#!/usr/bin/env python3
# CLI suite for the transformation: issue-2 acceptance read back from the packed files,
# determinism and idempotence, METHOD= renames, and every rejection rule of docs/rename-rules.md.
import json
import os
import sys

from cli_common import (Suite, Tensor, add_constant, call, deep, load_json, meta, method, node,
                        placeholder, read_file, read_ptn, read_shard, snapshot, subgraph,
                        temp_leftovers, tensor, tensor_arg, tree_differences, walk_graphs,
                        write_safetensors)

suite = Suite()
STEMS = ("prefill", "decode")
# Keys whose dtype, shape and bytes are identical in prefill.safetensors and decode.safetensors.
SHARED = ["layers.0.attention.wq.scales", "layers.0.attention.wq.weight",
          "layers.0.attention.wq.zero_points", "tok_embeddings.weight"]


def fixtures(ctx):
    return [os.path.join(ctx.data, stem + ".json") for stem in STEMS]


def program_keys(program):
    """Every data key a Program (flatc JSON) names, with where it was found."""
    found = []
    for m in program["methods"]:
        name = m["name"]
        for constant in m.get("constants", []):
            found.append((constant["data_key"], f"{name} constant {constant['name']}"))
            found += [(k, f"{name} constant {constant['name']} quant") for k in
                      quant_keys_of(constant["meta"])]
        found += [(b["fqn"], f"{name} mutable buffer") for b in m.get("mutable_buffers", [])]
        found += [(s["target"], f"{name} output spec {s['name']}")
                  for s in m.get("output_specs", []) if s.get("kind") == "BUFFER_MUTATION"]
        for path, graph in walk_graphs(m["graph"]):
            for value in graph.get("tensor_values", []):
                found += [(k, f"{name}{path} tensor_value {value['name']}")
                          for k in quant_keys_of(value["meta"])]
    return found


def quant_keys_of(tensor_meta):
    quant = tensor_meta.get("quant") or {}
    if quant.get("scheme_type") != "AffineGroup":
        return []
    scheme = quant["scheme"]
    return [k for k in (scheme.get("scale_data_key"), scheme.get("zero_point_data_key")) if k]


# ---------------------------------------------------------------- A. issue-2 acceptance

@suite.test
def issue2_packed_ptn_reads_back(ctx):
    out = os.path.join(ctx.mkdir("ptn"), "model.ptn")
    ctx.run_ok("pack", *fixtures(ctx), "-o", out)
    inputs = {stem: ctx.fixture(stem)[1] for stem in STEMS}
    ptn = read_ptn(out)
    tensors, aliases = ptn["tensors"], ptn["aliases"]

    # Colliding lifted constants stay two tensors with their own dtype and bytes.
    for stem, dtype in (("prefill", "F32"), ("decode", "I64")):
        key = f"{stem}/_lifted_tensor_constant0"
        ctx.check(key in tensors and key not in aliases, f"{key} is not a stored entry")
        if key in tensors:
            ctx.equal(tensors[key], inputs[stem]["_lifted_tensor_constant0"], key)
            ctx.equal(tensors[key].dtype, dtype, f"{key} dtype")
    ctx.check("_lifted_tensor_constant0" not in tensors, "un-namespaced lifted constant stored")

    # Shared weights: stored once under the bytewise-smallest key, the other is an alias.
    for key in SHARED:
        owner, alias = f"decode/{key}", f"prefill/{key}"
        ctx.equal(aliases.get(alias), owner, f"aliases.json entry of {alias}")
        ctx.check(alias not in tensors, f"alias {alias} also stored in program.safetensors")
        ctx.check(owner in tensors and tensors[owner] == inputs["prefill"][key],
                  f"owner {owner} missing or not the input bytes")
    for alias, owner in aliases.items():
        ctx.check(owner in tensors and owner not in aliases, f"alias {alias} -> bad owner {owner}")
        ctx.check(owner.encode() < alias.encode(), f"owner {owner} not smaller than {alias}")

    # State: one pos with data, never deduplicated (decode's lifted constant has equal bytes).
    ctx.check("state/pos" in tensors and tensors["state/pos"] == inputs["decode"]["pos"],
              "state/pos missing or not the initial data")
    ctx.check("state/pos" not in aliases and "state/pos" not in aliases.values(),
              f"state/pos takes part in dedup: {aliases}")
    ctx.check("state/kv_cache" not in tensors, "kv_cache (no data) stored in safetensors")
    stray = [k for k in tensors if not k.startswith(("prefill/", "decode/", "state/"))]
    ctx.equal(stray, [], "keys outside method and state namespaces")
    ctx.equal(sorted(set(tensors) & set(aliases)), [], "keys both stored and aliased")

    # Package layout: stored, 64-byte aligned entries, CRCs right.
    ctx.check(ptn["stored"], "an entry is compressed")
    ctx.equal(ptn["testzip"], None, "zipfile.testzip()")
    for name, offset in ptn["offsets"].items():
        ctx.equal(offset % 64, 0, f"data offset of entry {name}")
    ctx.equal(sorted(ptn["names"]), ["aliases.json", "program.ptg", "program.safetensors"],
              "entries")
    check_program_keys(ctx, ctx.flatc_json(ptn["program"]), set(tensors) | set(aliases))


def check_program_keys(ctx, program, readable):
    """Issue-2 expectations on the packed Program: state names, namespaces, quant keys."""
    by_name = {m["name"]: m for m in program["methods"]}
    ctx.equal(list(by_name), list(STEMS), "method order")
    for stem, mutated in (("prefill", False), ("decode", True)):
        m = by_name[stem]
        pos = [c for c in m["constants"] if c["name"] == "b_pos"]
        ctx.equal([(c["data_key"], c.get("mutated", False)) for c in pos], [("state/pos", mutated)],
                  f"{stem} b_pos binding")
        ctx.equal([(b["name"], b["fqn"]) for b in m["mutable_buffers"]],
                  [("b_kv_cache", "state/kv_cache")], f"{stem} MutableBufferSpecs")
        mutations = sorted((s["name"], s["target"]) for s in m["output_specs"]
                           if s["kind"] == "BUFFER_MUTATION")
        expected = [("add", "state/pos")] if mutated else []
        ctx.equal(mutations, sorted(expected + [("index_put", "state/kv_cache")]),
                  f"{stem} BUFFER_MUTATION targets")
        wq = next(c for c in m["constants"] if c["name"] == "p_wq_weight")
        quant = [f"{stem}/layers.0.attention.wq.{part}" for part in ("scales", "zero_points")]
        ctx.equal(quant_keys_of(wq["meta"]), quant, f"{stem} p_wq_weight AffineGroup keys")
        for branch in ("true_graph_0", "false_graph_0"):
            values = subgraph(m["graph"], branch)["tensor_values"]
            w = next(v for v in values if v["name"] == "w")
            ctx.equal(quant_keys_of(w["meta"]), quant, f"{stem} {branch} tensor_values w keys")
    for key, where in program_keys(program):
        ctx.check(key in readable or key == "state/kv_cache", f"{where}: key {key} has no data")


@suite.test
def issue2_dump_json_agrees(ctx):
    out = os.path.join(ctx.mkdir("ptn"), "model.ptn")
    ctx.run_ok("pack", *fixtures(ctx), "-o", out)
    dump = ctx.run_ok("dump", out, "--json").json()
    tensors = dump["tensors"]
    ctx.equal((tensors["prefill/_lifted_tensor_constant0"]["dtype"],
               tensors["decode/_lifted_tensor_constant0"]["dtype"]), ("FLOAT", "LONG"),
              "lifted constant dtypes")
    for key in SHARED:
        ctx.equal(tensors[f"prefill/{key}"].get("alias_of"), f"decode/{key}", f"{key} alias_of")
        ctx.check("alias_of" not in tensors[f"decode/{key}"], f"decode/{key} is an alias")
    ctx.equal(dump["state"], ["state/kv_cache", "state/pos"], "state keys")
    ctx.check(tensors["state/pos"]["mutable"] and "alias_of" not in tensors["state/pos"],
              "state/pos flags")
    for m in dump["program"]["methods"]:
        binds = {c["name"]: (c["key"], c["mutated"]) for c in m["constants"]}
        ctx.equal(binds["b_pos"], ("state/pos", m["name"] == "decode"), f"{m['name']} b_pos")
        ctx.equal([b["key"] for b in m["mutable_buffers"]], ["state/kv_cache"], m["name"])


@suite.test
def issue2_directory_manifest(ctx):
    out = os.path.join(ctx.mkdir("dir"), "model")
    ctx.run_ok("pack", *fixtures(ctx), "-o", out)
    manifest = load_json(os.path.join(out, "manifest.json"))
    tensors = manifest["tensors"]
    ctx.equal(manifest["state"], ["state/kv_cache", "state/pos"], "manifest state")
    ctx.check("state/kv_cache" not in tensors, "kv_cache has data in the manifest")
    ctx.equal((tensors["state/pos"]["mutable"], "alias_of" in tensors["state/pos"]), (True, False),
              "state/pos flags")
    for key in SHARED:
        ctx.equal(tensors[f"prefill/{key}"].get("alias_of"), f"decode/{key}", f"{key} alias_of")
    ctx.equal((tensors["prefill/_lifted_tensor_constant0"]["dtype"],
               tensors["decode/_lifted_tensor_constant0"]["dtype"]), ("FLOAT", "LONG"), "dtypes")
    readable = {}
    for shard in manifest["shards"]:
        readable.update(read_shard(os.path.join(out, shard["file"])))
    program = ctx.flatc_json(read_file(os.path.join(out, manifest["program"]["file"])))
    check_program_keys(ctx, program, set(readable))
    for key, entry in tensors.items():
        ctx.check(key in readable and readable[key][2] == entry["sha256"],
                  f"{key}: not readable from its shard with the manifest's sha256")


# ---------------------------------------------------------------- B. determinism, idempotence

def pack_tree(ctx, name, *argv):
    out = os.path.join(ctx.mkdir(name), name)
    ctx.run_ok("pack", *argv, "-o", out)
    return out, snapshot(out)


def same_tree(ctx, first, second, what):
    differences = tree_differences(first, second)
    ctx.equal(differences, [], what)


@suite.test
def two_runs_and_every_jobs_count_are_identical(ctx):
    for suffix, extra in ((".ptn", []), ("", ["--max-shard-bytes", "3000"]),
                          ("", ["--shard-format", "safetensors", "--max-shard-bytes", "3000"])):
        trees = {}
        for label, jobs in (("a", "1"), ("b", "1"), ("j2", "2"), ("j4", "4")):
            _, trees[label] = pack_tree(ctx, "out" + suffix, *fixtures(ctx), "-j", jobs, *extra)
        # No host data either: relative paths from another working directory change nothing.
        cwd_out = os.path.join(ctx.mkdir("cwd"), "out" + suffix)
        ctx.run_ok("pack", "prefill.json", "decode.json", "-o", cwd_out, *extra, cwd=ctx.data)
        trees["cwd"] = snapshot(cwd_out)
        for label in ("b", "j2", "j4", "cwd"):
            same_tree(ctx, trees["a"], trees[label], f"{suffix or 'dir'} {extra} run {label}")


@suite.test
def repacking_a_package_reproduces_it(ctx):
    first, before = pack_tree(ctx, "one.ptn", *fixtures(ctx))
    again, after = pack_tree(ctx, "again.ptn", first)
    same_tree(ctx, before, after, "pack of a .ptn")
    summary = ctx.run_ok("pack", first, "-o", again, "--json").json()
    ctx.equal(summary["renames"], [], "renames when repacking a packed artifact")
    same_tree(ctx, before, snapshot(again), "second repack")


@suite.test
def directory_and_package_convert_both_ways(ctx):
    for options in (["--max-shard-bytes", "3000"],
                    ["--max-shard-bytes", "2100", "--cap-mode", "payload"],
                    ["--shard-format", "safetensors", "--max-shard-bytes", "2500"]):
        direct_dir, dir_tree = pack_tree(ctx, "direct", *fixtures(ctx), *options)
        ctx.check(len(load_json(os.path.join(direct_dir, "manifest.json"))["shards"]) >= 2,
                  f"{options}: cap chosen to force several shards gave one")
        direct_ptn, ptn_tree = pack_tree(ctx, "direct.ptn", *fixtures(ctx))
        _, from_dir = pack_tree(ctx, "from_dir.ptn", direct_dir)
        same_tree(ctx, ptn_tree, from_dir, f"{options}: pack DIR -o x.ptn vs direct .ptn")
        _, from_manifest = pack_tree(ctx, "from_manifest.ptn",
                                     os.path.join(direct_dir, "manifest.json"))
        same_tree(ctx, ptn_tree, from_manifest, f"{options}: pack DIR/manifest.json -o x.ptn")
        _, from_ptn = pack_tree(ctx, "from_ptn", direct_ptn, *options)
        same_tree(ctx, dir_tree, from_ptn, f"{options}: pack x.ptn -o DIR vs direct DIR")
        _, dir_again = pack_tree(ctx, "dir_again", direct_dir, *options)
        same_tree(ctx, dir_tree, dir_again, f"{options}: pack DIR -o DIR2")


@suite.test
def single_method_program_is_namespaced(ctx):
    out, _ = pack_tree(ctx, "one.ptn", os.path.join(ctx.data, "prefill.json"))
    ptn = read_ptn(out)
    keys = sorted(ptn["tensors"]) + sorted(ptn["aliases"])
    ctx.check(keys, "no tensors stored")
    # Alone, prefill only reads pos: it is immutable there and belongs to the method.
    ctx.equal([k for k in keys if not k.startswith("prefill/")], [], "keys outside prefill/")
    ctx.check("prefill/pos" in keys, f"pos of a read-only single method not prefill/pos: {keys}")
    program = ctx.flatc_json(ptn["program"])
    ctx.equal(method(program)["mutable_buffers"][0]["fqn"], "state/kv_cache", "kv_cache fqn")


@suite.test
def method_rename_applies_to_single_method_inputs(ctx):
    out, _ = pack_tree(ctx, "renamed.ptn", "first=" + os.path.join(ctx.data, "prefill.json"),
                       "second=" + os.path.join(ctx.data, "decode.json"))
    ptn = read_ptn(out)
    program = ctx.flatc_json(ptn["program"])
    ctx.equal([m["name"] for m in program["methods"]], ["first", "second"], "method names")
    keys = set(ptn["tensors"]) | set(ptn["aliases"])
    ctx.check({"first/_lifted_tensor_constant0", "second/_lifted_tensor_constant0",
               "state/pos"} <= keys, f"renamed namespaces missing: {sorted(keys)}")
    ctx.equal([k for k in keys if k.startswith(("prefill/", "decode/"))], [], "old names kept")
    _, again = pack_tree(ctx, "again.ptn", out)
    same_tree(ctx, snapshot(out), again, "repack of a renamed package")


@suite.test
def method_rename_of_a_multi_method_input_is_a_usage_error(ctx):
    directory = ctx.mkdir("out")
    out = os.path.join(directory, "x.ptn")
    result = ctx.run("pack", "x=" + os.path.join(ctx.data, "two_methods.json"), "-o", out)
    ctx.code(result, 2)
    ctx.error_names(result, ["two_methods.json"])
    ctx.check(not os.path.exists(out) and not temp_leftovers(directory), "output written")


@suite.test
def the_first_failing_input_is_reported_at_any_jobs_count(ctx):
    # Inputs load in parallel; the error shown must still be the first input's on the
    # command line, whichever thread failed first, and nothing is written.
    directory = ctx.mkdir("inputs")
    broken = os.path.join(directory, "broken.json")
    with open(broken, "w", encoding="utf-8") as handle:
        handle.write('{"version": "1", "methods": [')  # truncated JSON
    missing = os.path.join(directory, "missing.json")
    good = os.path.join(ctx.data, "two_methods.json")
    out_dir = ctx.mkdir("out")
    out = os.path.join(out_dir, "x.ptn")
    for jobs in ("1", "2", "4"):
        for first, second, code in ((broken, missing, 3), (missing, broken, 5),
                                    (good, broken, 3)):
            result = ctx.run("pack", "-j", jobs, first, second, "-o", out)
            what = f"-j {jobs}: {os.path.basename(first)} then {os.path.basename(second)}"
            ctx.code(result, code, what)
            failing = first if first != good else second
            other = second if failing == first else first
            ctx.check(os.path.basename(failing) in result.err and
                      os.path.basename(other) not in result.err,
                      f"{what}: error does not name only {os.path.basename(failing)}: "
                      f"{result.err!r}")
            ctx.check(not os.path.exists(out) and not temp_leftovers(out_dir),
                      f"{what}: output written")


def rename_keys(programs, datas, rename):
    """Applies rename(stem, key) to every data key of both fixtures, in graph and data."""
    for stem in STEMS:
        m = method(programs[stem])
        for constant in m["constants"]:
            constant["data_key"] = rename(stem, constant["data_key"])
        for buffer in m["mutable_buffers"]:
            buffer["fqn"] = rename(stem, buffer["fqn"])
        for spec in m["output_specs"]:
            if spec.get("kind") == "BUFFER_MUTATION":
                spec["target"] = rename(stem, spec["target"])
        metas = [c["meta"] for c in m["constants"]]
        metas += [v["meta"] for _, g in walk_graphs(m["graph"]) for v in g.get("tensor_values", [])]
        for value in metas:
            scheme = (value.get("quant") or {}).get("scheme", {})
            for field in ("scale_data_key", "zero_point_data_key"):
                if scheme.get(field):
                    scheme[field] = rename(stem, scheme[field])
        datas[stem] = {rename(stem, k): v for k, v in datas[stem].items()}


@suite.test
def keys_already_in_final_form_are_left_unchanged(ctx):
    _, reference = pack_tree(ctx, "reference.ptn", *fixtures(ctx))
    final = ctx.fixture_pair(ctx.mkdir("final"), lambda p, d: rename_keys(
        p, d, lambda stem, key: ("state/" if key in ("pos", "kv_cache") else stem + "/") + key))
    out, tree = pack_tree(ctx, "final.ptn", *final)
    same_tree(ctx, reference, tree, "inputs already in final form vs raw inputs")
    summary = ctx.run_ok("pack", *final, "-o", out, "--json").json()
    ctx.equal(summary["renames"], [], "renames of final-form keys")
    # Another method's prefix is not final for this method: it is namespaced again.
    foreign = ctx.fixture_pair(ctx.mkdir("foreign"), lambda p, d: rename_keys(
        p, d, lambda stem, key: key if key in ("pos", "kv_cache") else "other/" + key))
    out, _ = pack_tree(ctx, "foreign.ptn", *foreign)
    keys = set(read_ptn(out)["tensors"]) | set(read_ptn(out)["aliases"])
    ctx.check("prefill/other/tok_embeddings.weight" in keys and
              "decode/other/_lifted_tensor_constant0" in keys, f"foreign prefixes: {sorted(keys)}")


@suite.test
def data_can_be_named_explicitly(ctx):
    _, reference = pack_tree(ctx, "reference.ptn", *fixtures(ctx))
    directory = ctx.mkdir("split")
    program, data = ctx.fixture("prefill")
    source = ctx.write_model(directory, "graph", program, None)  # no same-stem data
    keys = sorted(data)
    parts = {"part-a.safetensors": keys[:3], "part-b.safetensors": keys[3:]}
    for name, part in parts.items():
        write_safetensors(os.path.join(directory, name), {k: data[k] for k in part})
    index = os.path.join(directory, "graph.safetensors.index.json")
    with open(index, "w") as handle:
        json.dump({"metadata": {"total_size": sum(len(t.data) for t in data.values())},
                   "weight_map": {k: n for n, part in parts.items() for k in part}}, handle)
    decode = os.path.join(ctx.data, "decode.json")
    listed = ",".join(os.path.join(directory, n) for n in parts)
    for label, spec in (("@a,b", f"{source}@{listed}"), ("@index", f"{source}@{index}"),
                        ("same-stem index", source)):
        _, tree = pack_tree(ctx, "x.ptn", "prefill=" + spec, decode)
        same_tree(ctx, reference, tree, f"data given as {label}")
    missing = ctx.run("pack", f"{source}@{directory}/absent.safetensors", decode,
                      "-o", os.path.join(directory, "y.ptn"))
    ctx.code(missing, 5, "missing DATA file")
    ctx.error_names(missing, ["absent.safetensors"])


# ---------------------------------------------------------------- C. rejections

def expect_rejection(ctx, inputs, code, names):
    """A failing pack leaves no output, no temp files, and a previous output untouched."""
    for suffix in (".ptn", ""):
        directory = ctx.mkdir("reject")
        out = os.path.join(directory, "out" + suffix)
        result = ctx.run("pack", *inputs, "-o", out)
        ctx.code(result, code, f"[fresh {suffix or 'dir'}]")
        ctx.error_names(result, names, f"[fresh {suffix or 'dir'}]")
        ctx.check(not os.path.lexists(out), f"[fresh {suffix or 'dir'}] output created")
        ctx.equal(temp_leftovers(directory), [], f"[fresh {suffix or 'dir'}] temp files")
        # An earlier good output at the same path must survive byte for byte.
        ctx.run_ok("pack", *fixtures(ctx), "-o", out)
        before = snapshot(out)
        result = ctx.run("pack", *inputs, "-o", out)
        ctx.code(result, code, f"[existing {suffix or 'dir'}]")
        ctx.equal(tree_differences(before, snapshot(out)), [],
                  f"[existing {suffix or 'dir'}] previous output changed")
        ctx.equal(temp_leftovers(directory), [], f"[existing {suffix or 'dir'}] temp files")
        ctx.equal(sorted(os.listdir(directory)), [os.path.basename(out)],
                  f"[existing {suffix or 'dir'}] files beside the output")


def rejection(name, mutate, code, names, known_bug=None, stems=STEMS):
    """Registers a test: mutate(programs, datas) the fixtures, pack them, expect refusal."""
    def run_case(ctx):
        programs, datas = {}, {}
        for stem in STEMS:
            programs[stem], datas[stem] = ctx.fixture(stem)
        mutate(programs, datas)
        directory = ctx.mkdir("inputs")
        inputs = [ctx.write_model(directory, stem, programs[stem], datas[stem]) for stem in stems]
        expect_rejection(ctx, inputs, code, names)
    suite.add("reject_" + name, run_case, known_bug)


def top(programs, stem="prefill"):
    return method(programs[stem])["graph"]


def branch(programs, stem="prefill"):
    return subgraph(top(programs, stem), "true_graph_0")


def insert_before_output(graph, new_node):
    index = next(i for i, n in enumerate(graph["nodes"]) if n.get("op_kind") == "OUTPUT")
    graph["nodes"].insert(index, new_node)


def final_name_collision(programs, datas):
    # `tok_embeddings.weight` becomes prefill/tok_embeddings.weight, which is already taken.
    add_constant(method(programs["prefill"]), "p_extra", "prefill/tok_embeddings.weight",
                 meta("FLOAT", [32, 16]))
    datas["prefill"]["prefill/tok_embeddings.weight"] = tensor("F32", [32, 16], "extra")


def state_data_conflict(programs, datas):
    datas["decode"]["pos"] = Tensor("I64", [1], (5).to_bytes(8, "little"))


def state_dtype_conflict(programs, datas):
    # Same 8 zero bytes, but INT [2] instead of LONG [1]: still a different initial value.
    next(c for c in method(programs["decode"])["constants"] if c["name"] == "b_pos")["meta"] = \
        meta("INT", [2])
    datas["decode"]["pos"] = Tensor("I32", [2], datas["decode"]["pos"].data)


def buffer_shape_conflict(programs, datas):
    value = next(v for v in top(programs, "decode")["tensor_values"] if v["name"] == "b_kv_cache")
    value["meta"]["sizes"][1] = {"min": 64, "max": 64}


def buffer_dtype_conflict(programs, datas):
    value = next(v for v in top(programs, "decode")["tensor_values"] if v["name"] == "b_kv_cache")
    value["meta"]["dtype"] = "HALF"


def constant_meta(programs, name, stem="prefill"):
    return next(c for c in method(programs[stem])["constants"] if c["name"] == name)["meta"]


def dtype_mismatch(programs, datas):
    constant_meta(programs, "p_tok_embeddings_weight")["dtype"] = "INT"  # same byte length


def shape_mismatch(programs, datas):
    constant_meta(programs, "p_tok_embeddings_weight")["sizes"] = meta("FLOAT", [16, 32])["sizes"]


def unresolved(graph, user, argument):
    next(a for a in node(graph, user)["inputs"] if a["name"] == argument)["arg"] = \
        tensor_arg("nowhere_defined")


def duplicate(graph, name):
    insert_before_output(graph, call("dup_node", "torch.ops.aten.clone.default",
                                     [("self", tensor_arg(graph["nodes"][0]["name"]))], [name]))


def unbound_placeholder(graph):
    last = max(i for i, n in enumerate(graph["nodes"]) if n.get("op_kind") == "PLACEHOLDER")
    graph["nodes"].insert(last + 1, placeholder("ghost_input"))


def forward_reference(graph, user, argument, source):
    insert_before_output(graph, call("late_value", "torch.ops.aten.clone.default",
                                     [("self", tensor_arg(source))]))
    next(a for a in node(graph, user)["inputs"] if a["name"] == argument)["arg"] = \
        tensor_arg("late_value")


def int_list_mismatch(graph, source):
    arg = {"value_type": "IntListArg", "value": {"values": [1, 2, 3], "refs": ["", ""]}}
    insert_before_output(graph, call("bad_view", "torch.ops.aten.view.default",
                                     [("self", tensor_arg(source)), ("size", arg)]))


def optional_list_mismatch(graph, source):
    arg = {"value_type": "OptionalTensorListArg",
           "value": {"names": ["", source], "has_value": [True]}}
    insert_before_output(graph, call("bad_index", "torch.ops.aten.index.Tensor",
                                     [("self", tensor_arg(source)), ("indices", arg)]))


def nested_cond(programs, datas):
    """Puts a cond inside true_graph_0 whose own branch uses an undefined name (depth 2)."""
    outer = branch(programs)
    inner = {"nodes": [placeholder("h2"),
                       call("neg", "torch.ops.aten.neg.default",
                            [("self", tensor_arg("deep_ghost"))]),
                       {"name": "output", "op_kind": "OUTPUT", "inputs": [{"arg": {
                           "value_type": "TensorListArg", "value": {"names": ["neg"]}}}]}],
             "inputs": ["h2"], "outputs": ["neg"]}
    insert_before_output(outer, call("inner_cond", "torch.ops.higher_order.cond", [
        ("pred", tensor_arg("h")),
        ("true_fn", {"value_type": "GraphArg", "value": {"name": "inner_true", "graph": inner}}),
        ("false_fn", {"value_type": "GraphArg", "value": {"name": "inner_false",
                                                          "graph": deep(inner)}}),
        ("operands", {"value_type": "TensorListArg", "value": {"names": ["h"]}})]))


def in_file_method_name(name):
    def mutate(programs, datas):
        method(programs["prefill"])["name"] = name
    return mutate


rejection("final_name_collision", final_name_collision, 4,
          ["prefill", "tok_embeddings.weight", "prefill/tok_embeddings.weight"])
rejection("state_initial_data_conflict", state_data_conflict, 4, ["pos", "prefill", "decode"])
rejection("state_dtype_and_shape_conflict", state_dtype_conflict, 4, ["pos", "prefill", "decode"])
rejection("mutable_buffer_shape_conflict", buffer_shape_conflict, 4, ["kv_cache"])
rejection("mutable_buffer_dtype_conflict", buffer_dtype_conflict, 4, ["kv_cache"])
rejection("referenced_key_without_data",
          lambda p, d: d["prefill"].pop("tok_embeddings.weight"), 3,
          ["prefill", "tok_embeddings.weight"])
rejection("quant_scale_key_without_data",
          lambda p, d: d["decode"].pop("layers.0.attention.wq.scales"), 3,
          ["decode", "layers.0.attention.wq.scales"])
rejection("persistent_state_without_data",
          lambda p, d: (d["prefill"].pop("pos"), d["decode"].pop("pos")), 3, ["pos"])
rejection("constant_dtype_mismatch", dtype_mismatch, 3, ["prefill", "tok_embeddings.weight"])
rejection("constant_static_shape_mismatch", shape_mismatch, 3,
          ["prefill", "tok_embeddings.weight"])
# Where structural damage goes: a node and argument to break, a defined value, an existing name.
SPOTS = {"top": {"graph": top, "user": "mul", "argument": "other", "value": "b_pos",
                 "existing": "embedding"},
         "cond": {"graph": branch, "user": "linear", "argument": "input", "value": "h",
                  "existing": "linear"}}


def structural(rule, where, change, names):
    spot = SPOTS[where]
    inside = ["true_graph_0"] if where == "cond" else []  # the message must say which subgraph
    rejection(f"{rule}_{where}", lambda p, d: change(spot["graph"](p), spot), 3,
              ["prefill", *inside, *names])


for where, spot in SPOTS.items():
    structural("unresolved_ssa_name", where,
               lambda g, s: unresolved(g, s["user"], s["argument"]), ["nowhere_defined"])
    structural("duplicate_ssa_name", where, lambda g, s: duplicate(g, s["existing"]),
               [spot["existing"]])
    structural("unbound_placeholder", where, lambda g, s: unbound_placeholder(g), ["ghost_input"])
    structural("forward_reference", where,
               lambda g, s: forward_reference(g, s["user"], s["argument"], s["value"]),
               ["late_value"])
    structural("int_list_refs_length", where, lambda g, s: int_list_mismatch(g, s["value"]),
               ["bad_view"])
    structural("optional_tensor_list_length", where,
               lambda g, s: optional_list_mismatch(g, s["value"]), ["bad_index"])
    structural("undefined_graph_output", where,
               lambda g, s: g["outputs"].__setitem__(-1, "ghost_output"),
               ["graph output 'ghost_output' is not defined"])
rejection("unresolved_ssa_name_depth2", nested_cond, 3, ["prefill", "deep_ghost"])
rejection("method_named_state_in_file", in_file_method_name("state"), 3, ["state"])
rejection("method_name_with_slash_in_file", in_file_method_name("pre/fill"), 3, ["pre/fill"])
rejection("method_name_empty_in_file", in_file_method_name(""), 3, ["method"])


def cli_method_rejection(name, make_inputs, code, names, known_bug=None):
    def run_case(ctx):
        prefill, decode = fixtures(ctx)
        expect_rejection(ctx, make_inputs(prefill, decode), code, names)
    suite.add("reject_" + name, run_case, known_bug)


cli_method_rejection("method_duplicated_same_input_twice", lambda p, d: [p, p], 4, ["prefill"])
cli_method_rejection("method_duplicated_by_rename", lambda p, d: ["prefill=" + d, p], 4,
                     ["prefill"])
cli_method_rejection("method_name_empty", lambda p, d: ["=" + p, d], 2, ["method name"])
cli_method_rejection("method_named_state", lambda p, d: ["state=" + p, d], 2, ["state"])
cli_method_rejection("method_name_with_slash", lambda p, d: ["pre/fill=" + p, d], 2,
                     ["pre/fill", "/"])


# Quantised data's length follows the scheme: only its presence is checked, and the stored
# tensor keeps the dtype and shape of its data source.
@suite.test
def quantised_constant_of_another_size_is_accepted(ctx):
    programs, datas = {}, {}
    for stem in STEMS:
        programs[stem], datas[stem] = ctx.fixture(stem)
    datas["prefill"]["layers.0.attention.wq.weight"] = tensor("U8", [16, 16], "repacked")
    directory = ctx.mkdir("inputs")
    inputs = [ctx.write_model(directory, stem, programs[stem], datas[stem]) for stem in STEMS]
    out = os.path.join(directory, "out")
    ctx.run_ok("pack", *inputs, "-o", out)
    tensors = load_json(os.path.join(out, "manifest.json"))["tensors"]
    entry = tensors.get("prefill/layers.0.attention.wq.weight", {})
    ctx.equal((entry.get("dtype"), entry.get("shape"), entry.get("nbytes")),
              ("BYTE", [16, 16], 256), "stored quantised tensor follows its data")
    ctx.check("alias_of" not in entry, "different quantised tensors deduplicated")
    ctx.equal(tensors["decode/layers.0.attention.wq.weight"]["shape"], [16, 8], "decode weight")
    ctx.code(ctx.run("verify", out), 0, "verify of the packed output")


@suite.test
def mutable_buffer_without_data_is_accepted(ctx):
    # kv_cache has no data in either input (MutableBufferSpec state is zero-initialised).
    for stem in STEMS:
        ctx.check("kv_cache" not in ctx.fixture(stem)[1], f"{stem} fixture carries kv_cache data")
    out = os.path.join(ctx.mkdir("out"), "out")
    ctx.run_ok("pack", *fixtures(ctx), "-o", out)
    ctx.check("state/kv_cache" in load_json(os.path.join(out, "manifest.json"))["state"],
              "state/kv_cache not listed as state")


if __name__ == "__main__":
    suite.main()
