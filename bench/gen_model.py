#!/usr/bin/env python3
# Synthetic multi-method model generator for the ptepack benchmark: <method>.json + .safetensors.
"""Write one program JSON (docs/format-ptg.md) and one safetensors file per method.

Every method has the structure of tests/data/prefill.json: an embedding, per-layer float and
int4 weights (packed as U8, AffineGroup scale/zero-point keys referenced from the constant's
meta and from a `cond` subgraph), colliding `_lifted_tensor_constant<j>` keys whose dtype and
bytes differ per method, a persistent `pos` buffer mutated by one method and read by the
others, and a non-persistent `kv_cache` MutableBufferSpec. A fraction of each method's weight
bytes (`--shared`) is byte-identical across methods; the rest differs per method under the
same key names. Tensor bytes are streamed, so any size is generated in bounded memory.
"""
import argparse
import hashlib
import json
import os
import re
import struct
import sys
from dataclasses import dataclass

# ptepack's SIZE spellings (lib/src/pack/parse_size.cpp), in any case: K, M, G, T and KB..TB
# are powers of 1000; KiB..TiB powers of 1024.
SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
              "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
              "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
# Program ScalarType name -> (safetensors dtype code, element size, struct format).
DTYPES = {"FLOAT": ("F32", 4, "f"), "LONG": ("I64", 8, "q"), "INT": ("I32", 4, "i"),
          "HALF": ("F16", 2, "e"), "DOUBLE": ("F64", 8, "d"), "SHORT": ("I16", 2, "h"),
          "BYTE": ("U8", 1, "B"), "CHAR": ("I8", 1, "b")}
# Lifted constant j of method m gets LIFTED_DTYPES[(m + j) % 6], so neighbours always differ.
LIFTED_DTYPES = ("FLOAT", "LONG", "INT", "HALF", "DOUBLE", "SHORT")
PATTERN_BLOCK = 4 << 20   # bytes of SHAKE output per tensor; larger tensors repeat it rotated
ROTATION_STRIDE = 1048573  # prime, so consecutive blocks start at different offsets
SEQ = {"min": 1, "max": 128}  # the dynamic sequence dimension
KV_LEN = 128
MAX_METHODS = 100
MAX_LIFTED = 15


def parse_size(text):
    """Bytes from a SIZE as ptepack spells it: a number (decimals allowed) and an optional
    unit in any case, `B`, `K`/`KB`.. `T`/`TB` (10^3..) or `KiB`.. `TiB` (2^10..)."""
    match = re.fullmatch(r"\s*([0-9]+)(?:\.([0-9]+))?\s*([A-Za-z]*)\s*", text)
    unit = match.group(3).lower() if match else None
    if unit not in SIZE_UNITS:
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r} (e.g. 512MiB, 4GiB, 280MB, 100M, 1.5GB)")
    fraction = match.group(2) or ""
    exact = (int(match.group(1)) * 10**len(fraction) + int(fraction or 0)) * SIZE_UNITS[unit]
    return exact // 10**len(fraction)


@dataclass(frozen=True)
class Weight:
    """A constant bound by a NamedTensorRef: a [rows, cols] float or int4-quantised matrix."""
    name: str          # placeholder / NamedTensorRef.name
    key: str           # data key of the tensor (the packed bytes when quantised)
    rows: int
    cols: int
    quantised: bool
    shared: bool       # byte-identical across methods
    group_size: int = 0

    def aux_keys(self):
        stem = self.key.removesuffix(".weight")
        return f"{stem}.scales", f"{stem}.zero_points"

    def entries(self):
        """(key, safetensors dtype, shape, nbytes) of every tensor this weight stores."""
        if not self.quantised:
            return [(self.key, "F32", [self.rows, self.cols], 4 * self.rows * self.cols)]
        groups = self.cols // self.group_size
        scales, zero_points = self.aux_keys()
        return [(self.key, "U8", [self.rows, self.cols // 2], self.rows * self.cols // 2),
                (scales, "F32", [self.rows, groups], 4 * self.rows * groups),
                (zero_points, "I8", [self.rows, groups], self.rows * groups)]

    def nbytes(self):
        return sum(entry[3] for entry in self.entries())


def row_bytes(quantised, cols, group_size):
    return cols // 2 + 5 * (cols // group_size) if quantised else 4 * cols


def model_dim(budget):
    """Power-of-two width whose square matrices fill about a sixteenth of `budget`."""
    dim = 16
    while dim < 4096 and (2 * dim) ** 2 * 16 <= budget:
        dim *= 2
    return dim


def make_weight(key, rows, dim, quantised, shared):
    group = min(32, dim)
    return Weight("p_" + key.replace(".", "_"), key, rows, dim, quantised, shared, group)


def plan_layers(weight_bytes, layers, shared):
    """Embedding plus per-layer units sized so that `shared` of the bytes is common exactly
    (up to one row per tensor): wq/w1 hold the shared part, wo/w2 the per-method part."""
    dim = model_dim(weight_bytes // layers)
    group = min(32, dim)
    qrow, frow = row_bytes(True, dim, group), row_bytes(False, dim, group)
    budget = {True: round(shared * weight_bytes)}
    budget[False] = weight_bytes - budget[True]
    embedding_shared = budget[True] > 0
    vocab = max(1, min(weight_bytes // (2 * (layers + 1)),
                       budget[embedding_shared] // (layers + 1)) // frow)
    embedding = make_weight("tok_embeddings.weight", vocab, dim, False, embedding_shared)
    budget[embedding_shared] = max(0, budget[embedding_shared] - embedding.nbytes())
    rows = {}  # (is_shared, layer) -> (quantised rows, float rows)
    for is_shared, remaining in budget.items():
        for layer in range(layers):
            share = remaining // (layers - layer)  # spreads rounding losses over later layers
            qrows = share // 4 // qrow
            frows = (share - qrows * qrow) // frow
            rows[is_shared, layer] = qrows, frows
            remaining -= qrows * qrow + frows * frow
    units = []
    for layer in range(layers):
        (shared_q, shared_f), (own_q, own_f) = rows[True, layer], rows[False, layer]
        for name, count, quantised, is_shared in (("attention.wq", shared_q, True, True),
                                                  ("attention.wo", own_q, True, False),
                                                  ("feed_forward.w1", shared_f, False, True),
                                                  ("feed_forward.w2", own_f, False, False)):
            if count > 0:
                units.append(make_weight(f"layers.{layer}.{name}.weight", count, dim,
                                         quantised, is_shared))
    return embedding, units, dim


def plan_tensors(weight_bytes, entry_count, shared):
    """`entry_count` safetensors entries of about equal size: layers of one quantised unit
    (3 entries) and five float units; sharing is spread over units by error diffusion."""
    per_entry = max(1, weight_bytes // entry_count)
    dim = model_dim(per_entry * 4)
    group = min(32, dim)
    planned, left, shared_bytes, seen_bytes = [], entry_count, 0, 0
    while left > 0:
        index = len(planned)
        layer, slot = divmod(index - 1, 6)
        quantised = index > 0 and slot == 0 and left >= 3
        rows = max(1, per_entry * (3 if quantised else 1) // row_bytes(quantised, dim, group))
        size = rows * row_bytes(quantised, dim, group)
        is_shared = shared_bytes + size <= shared * (seen_bytes + size) + size / 2
        seen_bytes += size
        shared_bytes += size if is_shared else 0
        left -= 3 if quantised else 1
        if index == 0:
            key = "tok_embeddings.weight"
        elif quantised:
            key = f"layers.{layer}.attention.wq.weight"
        else:
            key = f"layers.{layer}.feed_forward.w{slot}.weight"
        planned.append(make_weight(key, rows, dim, quantised, is_shared))
    return planned[0], planned[1:], dim


def lifted_constants(method_index, count):
    """(key, program dtype, shape, bytes): same keys in every method, distinct dtype/bytes."""
    constants = []
    for j in range(count):
        dtype = LIFTED_DTYPES[(method_index + j) % len(LIFTED_DTYPES)]
        shape = [] if j == 0 else [2 * j]
        value = method_index * 16 + j + 1  # unique per (method, j); exact even in HALF
        data = struct.pack("<" + DTYPES[dtype][2], value) * max(1, 2 * j)
        constants.append((f"_lifted_tensor_constant{j}", dtype, shape, data))
    return constants


# ---- program JSON ------------------------------------------------------------------------

def static_dims(*sizes):
    return [{"min": size, "max": size} for size in sizes]


def tensor_meta(dtype, sizes):
    return {"dtype": dtype, "sizes": sizes}


def weight_meta(weight):
    if not weight.quantised:
        return tensor_meta("FLOAT", static_dims(weight.rows, weight.cols))
    scales, zero_points = weight.aux_keys()
    scheme = {"scale_data_key": scales, "scale_dtype": "FLOAT", "quant_min": -8,
              "quant_max": 7, "group_size": weight.group_size,
              "zero_point_data_key": zero_points, "zero_point_dtype": "CHAR"}
    meta = tensor_meta("BYTE", static_dims(weight.rows, weight.cols))
    meta["quant"] = {"scheme_type": "AffineGroup", "scheme": scheme}
    return meta


def named_arg(name, value_type, value, mutated=False):
    argument = {"arg": {"value_type": value_type, "value": value}, "name": name}
    if mutated:
        argument["mutated"] = True
    return argument


def tensor_arg(name, value, mutated=False):
    return named_arg(name, "TensorArg", {"name": value}, mutated)


def placeholder(name):
    return {"name": name, "op_kind": "PLACEHOLDER", "outputs": [{"name": name}]}


def call(name, target, inputs, alias_of=None, metadata=None):
    output = {"name": name}
    if alias_of:
        output["alias_of"] = alias_of
    node = {"name": name, "op_kind": "CALL_FUNCTION", "target": target, "inputs": inputs,
            "outputs": [output]}
    if metadata:
        node["metadata"] = [{"key": key, "value": value} for key, value in metadata.items()]
    return node


def output_node(names):
    return {"name": "output", "op_kind": "OUTPUT",
            "inputs": [{"arg": {"value_type": "TensorListArg", "value": {"names": names}}}]}


def linear_branch(name, weight):
    """One branch of a `cond` running linear(h, w); w's meta repeats the AffineGroup keys."""
    values = [{"name": "h", "meta": tensor_meta("FLOAT", [static_dims(1)[0], SEQ,
                                                          static_dims(weight.cols)[0]])},
              {"name": "w", "meta": weight_meta(weight)},
              {"name": "linear", "meta": tensor_meta("FLOAT", [static_dims(1)[0], SEQ,
                                                               static_dims(weight.rows)[0]])}]
    linear = call("linear", "torch.ops.aten.linear.default",
                  [tensor_arg("input", "h"), tensor_arg("weight", "w"),
                   named_arg("bias", "NoneArg", {})])
    graph = {"nodes": [placeholder("h"), placeholder("w"), linear, output_node(["linear"])],
             "inputs": ["h", "w"], "outputs": ["linear"], "tensor_values": values}
    return {"name": name, "graph": graph}


def constants_of(index, mutator, embedding, units, lifted):
    """The method's NamedTensorRefs in binding order: weights, lifted constants, `pos`."""
    for weight in [embedding] + units:
        yield {"name": weight.name, "data_key": weight.key, "meta": weight_meta(weight),
               "kind": "PARAMETER"}
    for key, dtype, shape, _ in lifted:
        yield {"name": "c" + key, "data_key": key, "meta": tensor_meta(dtype, static_dims(*shape)),
               "kind": "CONSTANT_TENSOR"}
    yield {"name": "b_pos", "data_key": "pos", "meta": tensor_meta("LONG", static_dims(1)),
           "kind": "BUFFER", "mutated": index == mutator}


def activation(width):
    return tensor_meta("FLOAT", [static_dims(1)[0], SEQ, static_dims(width)[0]])


def graph_items(constants, embedding, units, dim, lifted):
    """Yields ("node", Node) and ("value", TensorValue) of the top-level graph, in order.
    Regenerated per stream instead of stored, so 100,000-tensor graphs stay small in memory."""
    yield "node", placeholder("tokens")
    for constant in constants():
        yield "node", placeholder(constant["name"])
    yield "node", placeholder("b_kv_cache")
    yield "value", {"name": "tokens", "meta": tensor_meta("LONG", [static_dims(1)[0], SEQ])}
    yield "value", {"name": "b_kv_cache",
                    "meta": tensor_meta("FLOAT", static_dims(1, KV_LEN, dim))}
    yield "node", call("sym_size", "torch.ops.aten.sym_size.int",
                       [tensor_arg("self", "tokens"), named_arg("dim", "IntArg", {"value": 1})])
    yield "node", call("embedding", "torch.ops.aten.embedding.default",
                       [tensor_arg("weight", embedding.name), tensor_arg("indices", "tokens"),
                        named_arg("padding_idx", "IntArg", {"value": -1}),
                        named_arg("scale_grad_by_freq", "BoolArg", {"value": False})])
    size_list = {"values": [1, 0, dim], "refs": ["", "sym_size", ""]}
    yield "node", call("view", "torch.ops.aten.view.default",
                       [tensor_arg("self", "embedding", mutated=True),
                        named_arg("size", "IntListArg", size_list)], alias_of="b_kv_cache")
    yield "node", call("gt", "torch.ops.aten.gt.Scalar",
                       [tensor_arg("self", "b_pos"),
                        named_arg("other", "FloatArg", {"value": 0.0})])
    yield "value", {"name": "embedding", "meta": activation(dim)}
    yield "value", {"name": "view", "meta": activation(dim)}
    yield "value", {"name": "gt", "meta": tensor_meta("BOOL", static_dims(1))}
    current, width, counters = "view", dim, {}

    def fresh(base):  # fx-style unique names: cond, cond_1, cond_2, ...
        count = counters.get(base, 0)
        counters[base] = count + 1
        return (base if count == 0 else f"{base}_{count}"), count

    for weight in units:
        if weight.quantised:
            name, branch = fresh("cond")
            operands = {"names": [current, weight.name]}
            node = call(name, "torch.ops.higher_order.cond", [
                tensor_arg("pred", "gt"),
                named_arg("true_fn", "GraphArg", linear_branch(f"true_graph_{branch}", weight)),
                named_arg("false_fn", "GraphArg", linear_branch(f"false_graph_{branch}", weight)),
                named_arg("operands", "TensorListArg", operands)])
        else:
            name, _ = fresh("linear")
            node = call(name, "torch.ops.aten.linear.default",
                        [tensor_arg("input", current), tensor_arg("weight", weight.name),
                         named_arg("bias", "NoneArg", {})])
        yield "node", node
        yield "value", {"name": name, "meta": activation(weight.rows)}
        current, width = name, weight.rows
    for key, _, _, _ in lifted:
        name, _ = fresh("mul")
        yield "node", call(name, "torch.ops.aten.mul.Tensor",
                           [tensor_arg("self", current), tensor_arg("other", "c" + key)])
        yield "value", {"name": name, "meta": activation(width)}
        current = name
    indices = {"names": ["", "b_pos"], "has_value": [False, True]}
    yield "node", call("index_put", "torch.ops.aten.index_put_.default",
                       [tensor_arg("self", "b_kv_cache"),
                        named_arg("indices", "OptionalTensorListArg", indices),
                        tensor_arg("values", current)])
    yield "node", call("add", "torch.ops.aten.add.Tensor",
                       [tensor_arg("self", "b_pos"), named_arg("other", "IntArg", {"value": 1}),
                        named_arg("rounding_mode", "StringArg", {"value": "none"})])
    yield "node", call("to", "torch.ops.aten._to_copy.default",
                       [tensor_arg("self", current),
                        named_arg("dtype", "ScalarTypeArg", {"value": "HALF"})],
                       metadata={"stack_trace": "model.py:42"})
    yield "node", output_node(["to", "index_put", "add"])
    to_meta = tensor_meta("HALF", [static_dims(1)[0], SEQ, static_dims(width)[0]])
    to_meta["dim_order"] = [0, 1, 2]
    yield "value", {"name": "index_put",
                    "meta": tensor_meta("FLOAT", static_dims(1, KV_LEN, dim))}
    yield "value", {"name": "add", "meta": tensor_meta("LONG", static_dims(1))}
    yield "value", {"name": "to", "meta": to_meta}


def build_program(method, index, mutator, embedding, units, dim, lifted):
    """Returns (program skeleton with "@marker" strings, {marker: callable -> item iterator})."""
    def constants():
        return constants_of(index, mutator, embedding, units, lifted)

    def stream(kind):
        return lambda: (item for item_kind, item in
                        graph_items(constants, embedding, units, dim, lifted) if item_kind == kind)

    pos_output = {"name": "add", "kind": "BUFFER_MUTATION", "target": "pos"}
    if index != mutator:  # readers return the new position instead of writing the buffer
        pos_output = {"name": "add", "kind": "USER_OUTPUT"}
    graph = {"nodes": "@nodes", "inputs": ["tokens"], "outputs": ["to", "index_put", "add"],
             "tensor_values": "@values"}
    program = {"version": "1", "methods": [{
        "name": method, "graph": graph, "constants": "@constants",
        "output_specs": [{"name": "to", "kind": "USER_OUTPUT"},
                         {"name": "index_put", "kind": "BUFFER_MUTATION", "target": "kv_cache"},
                         pos_output],
        "mutable_buffers": [{"name": "b_kv_cache", "fqn": "kv_cache"}]}]}
    return program, {"@nodes": stream("node"), "@values": stream("value"),
                     "@constants": constants}


def write_program(path, program, streams):
    """Compact JSON with one list item per line, so 100,000-node graphs stay greppable."""
    text = json.dumps(program, separators=(",", ":"))
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as out:
        for piece in re.split(r'("@\w+")', text):
            stream = streams.get(piece.strip('"')) if piece.startswith('"@') else None
            if stream is None:
                out.write(piece)
                continue
            out.write("[\n")
            for position, item in enumerate(stream()):
                out.write((",\n" if position else "") + json.dumps(item, separators=(",", ":")))
            out.write("\n]")
        out.write("\n")
    os.replace(path + ".tmp", path)


# ---- safetensors -------------------------------------------------------------------------

def write_pattern(out, identity, nbytes):
    """Deterministic bytes for `identity`: SHAKE-256 output, repeated rotated past 4 MiB."""
    if nbytes <= PATTERN_BLOCK:
        out.write(hashlib.shake_256(identity).digest(nbytes))
        return
    block = memoryview(hashlib.shake_256(identity).digest(PATTERN_BLOCK))
    written, index = 0, 0
    while written < nbytes:
        take = min(PATTERN_BLOCK, nbytes - written)
        start = index * ROTATION_STRIDE % PATTERN_BLOCK
        head = block[start:start + take]
        out.write(head)
        if len(head) < take:
            out.write(block[:take - len(head)])
        written += take
        index += 1


def write_safetensors(path, entries):
    """entries: (key, dtype code, shape, nbytes, identity bytes or literal data) in any order;
    tensors tile the data section in sorted key order."""
    entries = sorted(entries, key=lambda entry: entry[0].encode())
    header, offset = {}, 0
    for key, code, shape, nbytes, _ in entries:
        header[key] = {"dtype": code, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb", buffering=1 << 20) as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for key, code, shape, nbytes, source in entries:
            if isinstance(source, tuple):   # ("literal", data)
                out.write(source[1])
            else:
                write_pattern(out, source, nbytes)
    os.replace(path + ".tmp", path)
    return offset


def method_names(count):
    return (["prefill", "decode"] + [f"m{i}" for i in range(2, count)])[:count]


def generate(args):
    names = method_names(args.methods)
    mutator = 1 if len(names) > 1 else 0
    small_bytes = 8 + max(sum(len(c[3]) for c in lifted_constants(index, args.lifted))
                          for index in range(len(names)))
    weight_bytes = max(0, args.size - small_bytes)
    if args.tensors:
        entry_count = args.tensors - 1 - args.lifted  # pos and lifted constants are entries
        if entry_count < 4:
            raise SystemExit(f"gen_model: --tensors {args.tensors} is below the minimum "
                             f"{args.lifted + 5}")
        embedding, units, dim = plan_tensors(weight_bytes, entry_count, args.shared)
    else:
        layers = args.layers or min(32, max(4, args.size // (64 << 20)))
        embedding, units, dim = plan_layers(weight_bytes, layers, args.shared)
    if not any(unit.quantised for unit in units):
        raise SystemExit(f"gen_model: --size {args.size} is too small for a quantised weight")
    os.makedirs(args.out, exist_ok=True)
    report = {"format": "ptepack.bench.model", "version": 1,
              "params": {"size": args.size, "methods": args.methods, "layers": args.layers,
                         "tensors": args.tensors, "shared": args.shared, "lifted": args.lifted,
                         "seed": args.seed},
              "dim": dim, "methods": []}
    for index, method in enumerate(names):
        lifted = lifted_constants(index, args.lifted)
        entries, shared_bytes = [], 0
        for weight in [embedding] + units:
            owner = f"{args.seed}\0" if weight.shared else f"{args.seed}\0{method}\0"
            for key, code, shape, nbytes in weight.entries():
                entries.append((key, code, shape, nbytes, (owner + key).encode()))
                shared_bytes += nbytes if weight.shared else 0
        for key, dtype, shape, data in lifted:
            entries.append((key, DTYPES[dtype][0], shape, len(data), ("literal", data)))
        entries.append(("pos", "I64", [1], 8, ("literal", struct.pack("<q", 0))))
        program, streams = build_program(method, index, mutator, embedding, units, dim, lifted)
        program_path = os.path.join(args.out, method + ".json")
        data_path = os.path.join(args.out, method + ".safetensors")
        write_program(program_path, program, streams)
        data_bytes = write_safetensors(data_path, entries)
        report["methods"].append({
            "name": method, "program": method + ".json", "data": method + ".safetensors",
            "tensors": len(entries), "data_bytes": data_bytes, "shared_bytes": shared_bytes,
            "file_bytes": os.path.getsize(data_path),
            "program_bytes": os.path.getsize(program_path)})
    weight_total = embedding.nbytes() + sum(unit.nbytes() for unit in units)
    shared_total = sum(w.nbytes() for w in [embedding] + units if w.shared)
    report["shared_fraction"] = shared_total / weight_total if weight_total else 0.0
    # Written last: its presence marks a complete model for run_bench.py.
    with open(os.path.join(args.out, "generator.json"), "w", encoding="utf-8") as out:
        json.dump(report, out, indent=1, sort_keys=True)
        out.write("\n")
    return report


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--size", type=parse_size, default=parse_size("64MiB"),
                        help="tensor bytes per method (K/M/G = 10^3.., KiB/MiB/GiB = 2^10..)")
    parser.add_argument("--methods", type=int, default=2,
                        help="number of methods: prefill, decode, m2, m3, ... (default 2)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--layers", type=int, default=0,
                       help="transformer layers (default: size / 64MiB, clamped to 4..32)")
    shape.add_argument("--tensors", type=int, default=0,
                       help="instead of layers: this many small safetensors entries per method")
    parser.add_argument("--shared", type=float, default=0.85,
                        help="fraction of weight bytes identical across methods (default 0.85)")
    parser.add_argument("--lifted", type=int, default=2,
                        help="colliding _lifted_tensor_constant<j> per method (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="content seed (default 0)")
    parser.add_argument("--quiet", action="store_true", help="print nothing")
    args = parser.parse_args(argv)
    if not 1 <= args.methods <= MAX_METHODS:
        parser.error(f"--methods must be in 1..{MAX_METHODS}")
    if not 0.0 <= args.shared <= 1.0:
        parser.error("--shared must be in [0, 1]")
    if not 0 <= args.lifted <= MAX_LIFTED:
        parser.error(f"--lifted must be in 0..{MAX_LIFTED}")
    if args.layers < 0 or args.tensors < 0:
        parser.error("--layers and --tensors must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    report = generate(args)
    if not args.quiet:
        for method in report["methods"]:
            print(f"{method['name']}: {method['tensors']} tensors, {method['data_bytes']} bytes "
                  f"({method['shared_bytes']} shared) -> {args.out}/{method['data']}")
        print(f"shared fraction of weight bytes: {report['shared_fraction']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
