#!/usr/bin/env python3
# Checks bench/gen_model.py's output with an independent parser: files, keys, sharing, state
# (it runs no ptepack, so it lives outside tests/cli).
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = os.path.join(ROOT, "bench", "gen_model.py")
SCHEMA = os.path.join(ROOT, "schema", "program.fbs")
ELEMENT_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
                "U8": 1, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8}
PROGRAM_TO_SAFETENSORS = {"FLOAT": "F32", "LONG": "I64", "INT": "I32", "HALF": "F16",
                          "DOUBLE": "F64", "SHORT": "I16", "BYTE": "U8", "CHAR": "I8",
                          "BOOL": "BOOL", "BFLOAT16": "BF16"}
TESTS = []


def test(function):
    TESTS.append(function)
    return function


def generate(out, *extra):
    subprocess.run([sys.executable, GENERATOR, "--out", out, "--quiet", *extra], check=True)
    return out


def read_safetensors(path):
    """{key: (dtype, shape, bytes)} after checking the file layout docs/format-safetensors.md asks."""
    with open(path, "rb") as handle:
        blob = handle.read()
    assert len(blob) >= 8, f"{path}: shorter than the length prefix"
    header_len = struct.unpack_from("<Q", blob)[0]
    assert header_len % 8 == 0, f"{path}: header length {header_len} not a multiple of 8"
    assert 8 + header_len <= len(blob), f"{path}: header runs past the end"
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = blob[8 + header_len:]
    header.pop("__metadata__", None)
    tensors, cursor = {}, 0
    spans = sorted(header.items(), key=lambda item: item[1]["data_offsets"])
    for key, entry in spans:
        begin, end = entry["data_offsets"]
        assert begin == cursor, f"{path}: {key} starts at {begin}, expected {cursor} (gap/overlap)"
        expected = math.prod(entry["shape"]) * ELEMENT_SIZE[entry["dtype"]]
        assert end - begin == expected, f"{path}: {key} spans {end - begin} bytes, not {expected}"
        tensors[key] = (entry["dtype"], entry["shape"], data[begin:end])
        cursor = end
    assert cursor == len(data), f"{path}: tensors cover {cursor} of {len(data)} data bytes"
    assert [k for k, _ in spans] == sorted(header, key=str.encode), f"{path}: not in key order"
    return tensors


def load_model(directory):
    """{method: (Method JSON, tensors)} for every <method>.json beside its safetensors."""
    with open(os.path.join(directory, "generator.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    model = {}
    for entry in report["methods"]:
        with open(os.path.join(directory, entry["program"]), encoding="utf-8") as handle:
            program = json.load(handle)
        assert len(program["methods"]) == 1 and program["methods"][0]["name"] == entry["name"]
        model[entry["name"]] = (program["methods"][0],
                                read_safetensors(os.path.join(directory, entry["data"])))
    return model


def walk_graphs(graph):
    yield graph
    for node in graph["nodes"]:
        for argument in node.get("inputs", []):
            if argument["arg"]["value_type"] == "GraphArg":
                yield from walk_graphs(argument["arg"]["value"]["graph"])


def quant_keys(meta):
    quant = meta.get("quant")
    if not quant or quant.get("scheme_type") != "AffineGroup":
        return []
    scheme = quant["scheme"]
    return [key for key in (scheme["scale_data_key"], scheme.get("zero_point_data_key")) if key]


def referenced_names(argument):
    kind, value = argument["value_type"], argument["value"]
    if kind == "TensorArg":
        return [value["name"]]
    if kind == "TensorListArg":
        return value["names"]
    if kind == "OptionalTensorListArg":
        assert len(value["names"]) == len(value["has_value"]), "OptionalTensorListArg lengths"
        return [name for name, has in zip(value["names"], value["has_value"]) if has]
    if kind in ("IntArg", "FloatArg", "BoolArg"):
        return [value["ref"]] if value.get("ref") else []
    if kind == "IntListArg":
        refs = value.get("refs", [])
        assert not refs or len(refs) == len(value["values"]), "IntListArg.refs length"
        return [ref for ref in refs if ref]
    return []


def check_graph(graph, bindings, where):
    """SSA rules of docs/format-ptg.md: placeholders restate inputs or bindings, no
    duplicate or forward names, exactly one OUTPUT, Graph.outputs and tensor_values defined."""
    defined, outputs = set(), 0
    for node in graph["nodes"]:
        kind = node.get("op_kind", "CALL_FUNCTION")
        if kind == "PLACEHOLDER":
            assert node["name"] in graph.get("inputs", []) or node["name"] in bindings, \
                f"{where}: placeholder {node['name']} is not an input or binding"
        for argument in node.get("inputs", []):
            if argument["arg"]["value_type"] == "GraphArg":
                sub = argument["arg"]["value"]
                check_graph(sub["graph"], set(), f"{where}/{sub['name']}")
            for name in referenced_names(argument["arg"]):
                assert name in defined, f"{where}: {node['name']} uses undefined {name}"
        for output in node.get("outputs", []):
            assert output["name"] not in defined, f"{where}: duplicate name {output['name']}"
            if output.get("alias_of"):
                assert output["alias_of"] in defined, f"{where}: alias_of {output['alias_of']}"
            defined.add(output["name"])
        outputs += kind == "OUTPUT"
    assert outputs == 1, f"{where}: {outputs} OUTPUT nodes"
    for name in graph.get("outputs", []) + [v["name"] for v in graph.get("tensor_values", [])]:
        assert name in defined, f"{where}: {name} is not defined by any node"


def weight_keys(method):
    """Data keys of the weights (everything but lifted constants and state)."""
    keys = []
    for constant in method["constants"]:
        if constant["kind"] == "PARAMETER":
            keys += [constant["data_key"]] + quant_keys(constant["meta"])
    return keys


@test
def safetensors_files_tile_their_data(ctx):
    for name, (_, tensors) in ctx["model"].items():
        assert tensors, f"{name}: no tensors"


@test
def every_referenced_key_has_matching_data(ctx):
    for name, (method, tensors) in ctx["model"].items():
        for constant in method["constants"]:
            key, meta = constant["data_key"], constant["meta"]
            assert key in tensors, f"{name}: constant key {key} missing from safetensors"
            dtype, shape, _ = tensors[key]
            sizes = [dim["max"] for dim in meta["sizes"]]
            assert all(dim["min"] == dim["max"] for dim in meta["sizes"]), f"{key}: dynamic"
            if quant_keys(meta):
                rows, cols = sizes
                group = meta["quant"]["scheme"]["group_size"]
                scales, zero_points = quant_keys(meta)
                assert meta["dtype"] == "BYTE" and (dtype, shape) == ("U8", [rows, cols // 2])
                assert tensors[scales][:2] == ("F32", [rows, cols // group]), scales
                assert tensors[zero_points][:2] == ("I8", [rows, cols // group]), zero_points
            else:
                assert (PROGRAM_TO_SAFETENSORS[meta["dtype"]], sizes) == (dtype, shape), \
                    f"{name}: {key} meta {meta['dtype']} {sizes} vs data {dtype} {shape}"
        for graph in walk_graphs(method["graph"]):
            for value in graph.get("tensor_values", []):
                for key in quant_keys(value["meta"]):
                    assert key in tensors, f"{name}: tensor_values key {key} missing"


@test
def quantised_constants_are_also_used_in_cond_subgraphs(ctx):
    for name, (method, _) in ctx["model"].items():
        in_subgraphs = {key for graph in list(walk_graphs(method["graph"]))[1:]
                        for value in graph.get("tensor_values", [])
                        for key in quant_keys(value["meta"])}
        quantised = [c for c in method["constants"] if quant_keys(c["meta"])]
        assert quantised, f"{name}: no quantised constant"
        for constant in quantised:
            assert set(quant_keys(constant["meta"])) <= in_subgraphs, constant["data_key"]


@test
def graphs_are_structurally_valid(ctx):
    for name, (method, _) in ctx["model"].items():
        bindings = {c["name"] for c in method["constants"]}
        bindings |= {b["name"] for b in method.get("mutable_buffers", [])}
        check_graph(method["graph"], bindings, name)
        placeholders = [n["name"] for n in method["graph"]["nodes"]
                        if n["op_kind"] == "PLACEHOLDER"]
        expected = (method["graph"]["inputs"] + [c["name"] for c in method["constants"]]
                    + [b["name"] for b in method["mutable_buffers"]])
        assert placeholders == expected, f"{name}: placeholders {placeholders[:5]}..."


@test
def state_buffers_are_declared_like_the_fixture(ctx):
    mutators, pos_bytes = [], set()
    for name, (method, tensors) in ctx["model"].items():
        pos = [c for c in method["constants"] if c["data_key"] == "pos"]
        assert len(pos) == 1 and pos[0]["meta"]["dtype"] == "LONG", f"{name}: pos constant"
        targets = {s["target"] for s in method["output_specs"] if s["kind"] == "BUFFER_MUTATION"}
        assert pos[0]["mutated"] == ("pos" in targets), f"{name}: pos mutated flag vs specs"
        if pos[0]["mutated"]:
            mutators.append(name)
        pos_bytes.add(tensors["pos"][2])
        assert "kv_cache" in targets, f"{name}: no BUFFER_MUTATION of kv_cache"
        buffers = method["mutable_buffers"]
        assert [b["fqn"] for b in buffers] == ["kv_cache"], f"{name}: mutable_buffers"
        values = {v["name"] for v in method["graph"]["tensor_values"]}
        assert buffers[0]["name"] in values, f"{name}: kv cache has no tensor_values entry"
        assert "kv_cache" not in tensors, f"{name}: kv_cache must have no data"
    assert len(mutators) == 1, f"methods mutating pos: {mutators}"
    assert len(pos_bytes) == 1, "pos initial data differs between methods"


@test
def lifted_constants_collide_by_name_but_differ(ctx):
    methods = list(ctx["model"].values())
    names = [sorted(k for k in tensors if k.startswith("_lifted_tensor_constant"))
             for _, tensors in methods]
    assert names[0] and all(n == names[0] for n in names), f"lifted keys differ: {names}"
    for key in names[0]:
        variants = [tensors[key] for _, tensors in methods]
        for i, first in enumerate(variants):
            for second in variants[i + 1:]:
                assert first[0] != second[0] and first[2] != second[2], f"{key} collides"


def shared_fraction(model):
    """Fraction of weight bytes that are byte-identical in every method."""
    methods = list(model.values())
    first_method, first_tensors = methods[0]
    shared = total = 0
    for key in weight_keys(first_method):
        data = first_tensors[key][2]
        total += len(data)
        if all(tensors.get(key, (None, None, None))[2] == data for _, tensors in methods[1:]):
            shared += len(data)
    return shared / total


@test
def shared_fraction_is_honoured(ctx):
    fraction = shared_fraction(ctx["model"])
    assert abs(fraction - 0.85) < 0.03, f"shared fraction {fraction:.3f}, asked 0.85"
    for asked in ("0", "0.5", "1"):
        model = load_model(generate(os.path.join(ctx["tmp"], f"shared{asked}"), "--size",
                                    "64KiB", "--shared", asked))
        fraction = shared_fraction(model)
        assert abs(fraction - float(asked)) < 0.03, f"shared {fraction:.3f}, asked {asked}"


@test
def size_is_honoured(ctx):
    for name, (_, tensors) in ctx["model"].items():
        total = sum(len(data) for _, _, data in tensors.values())
        assert 0.9 * 65536 <= total <= 65536, f"{name}: {total} tensor bytes for 64KiB"


@test
def generator_is_deterministic(ctx):
    again = generate(os.path.join(ctx["tmp"], "again"), *ctx["args"])
    for file_name in sorted(os.listdir(ctx["dir"])):
        with open(os.path.join(ctx["dir"], file_name), "rb") as first, \
                open(os.path.join(again, file_name), "rb") as second:
            assert first.read() == second.read(), f"{file_name} differs between runs"


@test
def tensors_mode_writes_exactly_that_many_entries(ctx):
    directory = generate(os.path.join(ctx["tmp"], "tensors"), "--size", "64KiB", "--tensors",
                         "300", "--methods", "3")
    model = load_model(directory)
    assert list(model) == ["prefill", "decode", "m2"], list(model)
    for name, (method, tensors) in model.items():
        assert len(tensors) == 300, f"{name}: {len(tensors)} entries"
        check_graph(method["graph"], {c["name"] for c in method["constants"]} | {"b_kv_cache"},
                    name)
    assert abs(shared_fraction(model) - 0.85) < 0.05
    state_buffers_are_declared_like_the_fixture({"model": model})
    lifted_constants_collide_by_name_but_differ({"model": model})


@test
def sizes_are_spelt_as_ptepack_spells_them(ctx):
    # lib/src/pack/parse_size.cpp's forms: any case, KB..TB and K..T powers of 1000.
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import gen_model  # noqa: E402
    expected = {"280MB": 280 * 10**6, "280M": 280 * 10**6, "280mb": 280 * 10**6,
                "3 kb": 3000, "1.5GiB": 3 * 2**29, "64MiB": 2**26, "2TB": 2 * 10**12,
                "1TiB": 2**40, "0.5K": 500, "12": 12, "12B": 12, "1.25GB": 1_250_000_000,
                "0.125KiB": 128, "2.005MB": 2_005_000, "1.000001 M": 1_000_001}
    for text, value in expected.items():
        assert gen_model.parse_size(text) == value, f"{text}: {gen_model.parse_size(text)}"
    for text in ("12X", "MB", "-1M", "1..5G"):
        try:
            gen_model.parse_size(text)
        except Exception:  # argparse.ArgumentTypeError, as --size reports it
            continue
        raise AssertionError(f"{text!r} was accepted")
    generate(os.path.join(ctx["tmp"], "sized"), "--size", "280KB", "--methods", "1")


@test
def programs_parse_with_the_project_schema(ctx):
    assert shutil.which("flatc"), "flatc (a build dependency) is not on PATH"
    out = os.path.join(ctx["tmp"], "flatc")
    programs = [os.path.join(ctx["dir"], name + ".json") for name in ctx["model"]]
    subprocess.run(["flatc", "--binary", "--strict-json", "-o", out, SCHEMA, *programs],
                   check=True, capture_output=True)
    assert len(os.listdir(out)) == len(programs)


def main():
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="bench_gen_") as tmp:
        args = ["--size", "64KiB", "--methods", "2", "--seed", "7"]
        try:
            directory = generate(os.path.join(tmp, "model"), *args)
            ctx = {"tmp": tmp, "dir": directory, "args": args, "model": load_model(directory)}
        except Exception as error:  # without a model no check can run
            print(f"FAIL generating the model: {type(error).__name__}: {error}")
            print("0 passed, 1 failed")
            return 1
        for function in TESTS:
            try:
                function(ctx)
                passed += 1
                print(f"ok   {function.__name__}")
            except Exception as error:  # report every failing check, then keep going
                failed += 1
                print(f"FAIL {function.__name__}: {type(error).__name__}: {error}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
