#!/usr/bin/env python3
"""Independent .pte (ExecuTorch program) reader for cross-checking ptepack's rewriter.

Python standard library only, written from the schema facts in docs/format-pte.md (no
flatc output, no flatbuffers package, no code shared with the C++ side). The flatbuffer is
walked by vtable slot: the root offset at byte 0, each table's vtable at `table - soffset`,
field slot i at vtable offset 4 + 2*i, a union taking two slots (type, then value).

parse(data) returns plain dicts and lists: every table is a dict holding all its fields in
declaration order (absent scalars take their default, absent strings/vectors/tables/unions
are None, so `x is None` tells presence) plus "_present" (names of the fields whose vtable
entry is non-zero, scalars included) and "_extra_slots" (non-zero vtable slots beyond the
schema). Byte vectors ([ubyte] storage, inline delegate data, compile spec values) are bytes.
Unions are {"type": tag name, "tag": tag, "value": table dict or None}.

Helpers resolve what the runtime would read: constant bytes (constant segment or the
deprecated constant_buffer), named data, delegate blobs, mutable initial values; others find
file offsets of tables and fields (to make corrupt or patched inputs) and list layout problems.
Run as a script it prints a JSON summary of one file; exits 1 on a malformed file.

usage: pte_reader.py FILE.pte
"""

import hashlib
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptd_reader  # noqa: E402  (FlatTensor .ptd shards)

# docs/format-ptd.md: ScalarType ids and element sizes, shared with the .ptd reader.
SCALAR_TYPES = ptd_reader.SCALAR_TYPES
ELEMENT_SIZES = ptd_reader.ELEMENT_SIZES

SEGMENT, EXTERNAL = 0, 1          # TensorDataLocation
INLINE, DATA_SEGMENT = 0, 1       # DataLocation of BackendDelegateDataReference
KERNEL_TYPES = ["NONE", "Null", "Int", "Bool", "Double", "Tensor", "String", "IntList",
                "DoubleList", "BoolList", "TensorList", "OptionalTensorList"]
INSTRUCTION_ARGUMENTS = ["NONE", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall",
                         "FreeCall"]
UNIONS = {"KernelTypes": KERNEL_TYPES, "InstructionArguments": INSTRUCTION_ARGUMENTS}

# The schema of docs/format-pte.md, fields in declaration order. Kinds:
#   ("scalar", struct format, default) | ("string",) | ("table", T) | ("vector", fmt)
#   ("bytes",) = [ubyte] | ("tables", T) = [T] | ("union", U) (two slots)
S = lambda fmt, default=0: ("scalar", fmt, default)  # noqa: E731
SCHEMA = {
    "ContainerMetadata": [("encoded_inp_str", ("string",)), ("encoded_out_str", ("string",))],
    "Null": [],
    "AllocationDetails": [("memory_id", S("<I")), ("memory_offset_low", S("<I")),
                          ("memory_offset_high", S("<I"))],
    "ExtraTensorInfo": [("mutable_data_segments_idx", S("<Q")),
                        ("fully_qualified_name", ("string",)), ("location", S("<B")),
                        ("device_type", S("<B")), ("device_index", S("<b"))],
    "Tensor": [("scalar_type", S("<b")), ("storage_offset", S("<i")), ("sizes", ("vector", "<i")),
               ("dim_order", ("vector", "<B")), ("requires_grad", S("<?", False)),
               ("data_buffer_idx", S("<I")), ("allocation_info", ("table", "AllocationDetails")),
               ("layout", S("<b")), ("shape_dynamism", S("<B")),
               ("extra_tensor_info", ("table", "ExtraTensorInfo"))],
    "Int": [("int_val", S("<q"))],
    "Bool": [("bool_val", S("<?", False))],
    "Double": [("double_val", S("<d", 0.0))],
    "String": [("string_val", ("string",))],
    "IntList": [("items", ("vector", "<q"))],
    "DoubleList": [("items", ("vector", "<d"))],
    "BoolList": [("items", ("vector", "<?"))],
    "TensorList": [("items", ("vector", "<i"))],
    "OptionalTensorList": [("items", ("vector", "<i"))],
    "EValue": [("val", ("union", "KernelTypes"))],
    "Operator": [("name", ("string",)), ("overload", ("string",))],
    "KernelCall": [("op_index", S("<i")), ("args", ("vector", "<i"))],
    "DelegateCall": [("delegate_index", S("<i")), ("args", ("vector", "<i"))],
    "MoveCall": [("move_from", S("<i")), ("move_to", S("<i"))],
    "JumpFalseCall": [("cond_value_index", S("<i")), ("destination_instruction", S("<i"))],
    "FreeCall": [("value_index", S("<i"))],
    "Instruction": [("instr_args", ("union", "InstructionArguments"))],
    "Frame": [("filename", ("string",)), ("lineno", S("<i")), ("name", ("string",)),
              ("context", ("string",))],
    "FrameList": [("items", ("tables", "Frame"))],
    "BackendDelegateDataReference": [("location", S("<B")), ("index", S("<I"))],
    "CompileSpec": [("key", ("string",)), ("value", ("bytes",))],
    "BackendDelegate": [("id", ("string",)),
                        ("processed", ("table", "BackendDelegateDataReference")),
                        ("compile_specs", ("tables", "CompileSpec"))],
    "Chain": [("inputs", ("vector", "<i")), ("outputs", ("vector", "<i")),
              ("instructions", ("tables", "Instruction")), ("stacktrace", ("tables", "FrameList"))],
    "NonConstBufferDevice": [("buffer_idx", S("<i")), ("device_type", S("<B")),
                             ("device_index", S("<b"))],
    "ExecutionPlan": [("name", ("string",)),
                      ("container_meta_type", ("table", "ContainerMetadata")),
                      ("values", ("tables", "EValue")), ("inputs", ("vector", "<i")),
                      ("outputs", ("vector", "<i")), ("chains", ("tables", "Chain")),
                      ("operators", ("tables", "Operator")),
                      ("delegates", ("tables", "BackendDelegate")),
                      ("non_const_buffer_sizes", ("vector", "<q")),
                      ("non_const_buffer_device", ("tables", "NonConstBufferDevice"))],
    "Buffer": [("storage", ("bytes",))],
    "BackendDelegateInlineData": [("data", ("bytes",))],
    "DataSegment": [("offset", S("<Q")), ("size", S("<Q"))],
    "SubsegmentOffsets": [("segment_index", S("<I")), ("offsets", ("vector", "<Q"))],
    "NamedData": [("key", ("string",)), ("segment_index", S("<I"))],
    "Program": [("version", S("<I")), ("execution_plan", ("tables", "ExecutionPlan")),
                ("constant_buffer", ("tables", "Buffer")),
                ("backend_delegate_data", ("tables", "BackendDelegateInlineData")),
                ("segments", ("tables", "DataSegment")),
                ("constant_segment", ("table", "SubsegmentOffsets")),
                ("mutable_data_segments", ("tables", "SubsegmentOffsets")),
                ("named_data", ("tables", "NamedData"))],
}
MAX_DEPTH = 64


Malformed = ptd_reader.Malformed


class FlatBuffer(ptd_reader.Buffer):
    """ptd_reader's bounds-checked reads, plus vtable slots and field presence."""

    def vtable(self, table):
        """(vtable position, vtable size in bytes, table size) of the table at `table`."""
        vtable = table - self.read("<i", table)
        size = self.read("<H", vtable)
        if size < 4 or size % 2:
            raise Malformed(f"vtable at {vtable} has size {size}")
        self.read(f"<{size}s", vtable)
        return vtable, size, self.read("<H", vtable + 2)

    def slot(self, table, index):
        """The vtable entry of field slot `index` (0 = absent)."""
        vtable, size, _ = self.vtable(table)
        entry = 4 + 2 * index
        return self.read("<H", vtable + entry) if entry + 2 <= size else 0

    def field(self, table, index):
        offset = self.slot(table, index)
        return table + offset if offset else None

    def vector(self, pos, element_size):
        count = self.read("<I", pos)
        if pos + 4 + count * element_size > len(self.data):
            raise Malformed(f"vector of {count} x {element_size} B at {pos} runs past the end")
        return count, pos + 4


def _field_spec(type_name, field):
    fields, _ = _slots(SCHEMA[type_name])
    for name, kind, slot in fields:
        if name == field:
            return kind, slot
    raise KeyError(f"{type_name} has no field {field!r}")


def position(data, parsed, path):
    """(file offset, type name) of the table reached from the Program root by `path`: each
    step is a table or union field name, or (vector-of-tables field name, index)."""
    fb = FlatBuffer(data)
    pos, type_name = parsed["root"], "Program"
    for step in path:
        name, index = (step, None) if isinstance(step, str) else step
        kind, slot = _field_spec(type_name, name)
        if kind[0] == "union":
            tag = fb.read("<B", fb.field(pos, slot))
            pos, type_name = fb.deref(fb.field(pos, slot + 1)), UNIONS[kind[1]][tag]
            continue
        where = fb.field(pos, slot)
        if where is None:
            raise Malformed(f"{type_name}.{name} is absent")
        pos = fb.deref(where)
        if kind[0] == "tables":
            pos = fb.deref(pos + 4 + 4 * index)
        type_name = kind[1]
    return pos, type_name


def field_position(data, table, type_name, field):
    """File offset of a field's inline value (a scalar, a union's type byte, or the uoffset of
    a string/vector/table), or None when absent."""
    _, slot = _field_spec(type_name, field)
    return FlatBuffer(data).field(table, slot)


def vector_position(data, table, type_name, field):
    """(count, file offset of element 0) of a vector field."""
    fb = FlatBuffer(data)
    where = field_position(data, table, type_name, field)
    target = fb.deref(where)
    return fb.read("<I", target), target + 4


def present(table, field):
    """Whether a parsed table's field had a non-zero vtable entry (scalars included)."""
    return field in table["_present"]


def field_present(data, table, index):
    """Whether field slot `index` of the table at file offset `table` has a non-zero entry."""
    return FlatBuffer(data).slot(table, index) != 0


def _slots(fields):
    """[(name, kind, first slot)] with unions taking two slots."""
    out, slot = [], 0
    for name, kind in fields:
        out.append((name, kind, slot))
        slot += 2 if kind[0] == "union" else 1
    return out, slot


def _table(fb, pos, type_name, depth):
    if depth > MAX_DEPTH:
        raise Malformed("tables nested too deeply")
    fields, slot_count = _slots(SCHEMA[type_name])
    vtable, vsize, _ = fb.vtable(pos)
    out, present = {}, []
    for name, kind, slot in fields:
        where = fb.field(pos, slot)
        if kind[0] == "union":
            tag = fb.read("<B", where) if where is not None else 0
            value_pos = fb.field(pos, slot + 1)
            if where is not None or value_pos is not None:
                present.append(name)
            names = UNIONS[kind[1]]
            if tag >= len(names):
                raise Malformed(f"{type_name}.{name}: union tag {tag} outside {kind[1]}")
            if value_pos is None:
                out[name] = None if tag == 0 else {"type": names[tag], "tag": tag, "value": None}
                continue
            member = None
            if tag != 0:
                member = _table(fb, fb.deref(value_pos), names[tag], depth + 1)
            out[name] = {"type": names[tag], "tag": tag, "value": member}
            continue
        if where is None:
            out[name] = kind[2] if kind[0] == "scalar" else None
            continue
        present.append(name)
        if kind[0] == "scalar":
            out[name] = fb.read(kind[1], where)
            continue
        target = fb.deref(where)
        if kind[0] == "string":
            count, start = fb.vector(target, 1)
            out[name] = fb.data[start:start + count].decode("utf-8", "surrogateescape")
        elif kind[0] == "bytes":
            count, start = fb.vector(target, 1)
            out[name] = bytes(fb.data[start:start + count])
        elif kind[0] == "vector":
            size = struct.calcsize(kind[1])
            count, start = fb.vector(target, size)
            out[name] = list(struct.unpack_from(f"<{count}{kind[1][1:]}", fb.data, start))
        elif kind[0] == "table":
            out[name] = _table(fb, target, kind[1], depth + 1)
        elif kind[0] == "tables":
            count, start = fb.vector(target, 4)
            out[name] = [_table(fb, fb.deref(start + 4 * i), kind[1], depth + 1)
                         for i in range(count)]
    out["_present"] = present
    extra = [i for i in range(slot_count, (vsize - 4) // 2) if fb.slot(pos, i)]
    out["_extra_slots"] = extra
    return out


def parse(data):
    """The Program of .pte bytes: {"header", "file_size", "root", "program", "segment_base"}."""
    data = bytes(data)
    if len(data) < 8:
        raise Malformed(f"{len(data)} bytes is too small")
    if data[4:8] != b"ET12":
        raise Malformed(f"identifier {data[4:8]!r} is not ET12")
    header = None
    flatbuffer_end = len(data)
    if data[8:12] == b"eh00":
        if len(data) < 16:
            raise Malformed("eh00 header truncated")
        length = struct.unpack_from("<I", data, 12)[0]
        if length < 24 or len(data) < 8 + length:
            raise Malformed(f"eh00 header length {length} invalid")
        program_size, base = struct.unpack_from("<QQ", data, 16)
        data_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 else None
        header = {"magic": "eh00", "length": length, "program_size": program_size,
                  "segment_base_offset": base, "segment_data_size": data_size}
        if program_size > len(data):
            raise Malformed(f"program_size {program_size} exceeds the file ({len(data)} B)")
        if base and base < program_size:
            raise Malformed(f"segment_base_offset {base} inside the flatbuffer region")
        if data_size is not None and base + data_size > len(data):
            raise Malformed(f"segments end at {base + data_size}, file has {len(data)} B")
        flatbuffer_end = program_size
    fb = FlatBuffer(data[:flatbuffer_end])
    root = fb.deref(0)
    program = _table(fb, root, "Program", 0)
    base = header["segment_base_offset"] if header else 0
    for i, segment in enumerate(program["segments"] or []):
        if segment["size"] and (header is None or base == 0):
            raise Malformed(f"segment {i} has {segment['size']} B but the file has no segments")
        end = base + segment["offset"] + segment["size"]
        if segment["size"] and end > len(data):
            raise Malformed(f"segment {i} ends at {end}, file has {len(data)} B")
    return {"file_size": len(data), "identifier": "ET12", "header": header, "root": root,
            "segment_base": base, "program": program}


def load(path):
    """(parsed, file bytes) of a .pte file."""
    with open(path, "rb") as handle:
        data = handle.read()
    return parse(data), data


# ----- what the runtime would read -----

def numel(tensor):
    count = 1
    for dim in tensor["sizes"] or []:
        count *= dim
    return count


def scalar_type_name(scalar_type):
    return SCALAR_TYPES.get(scalar_type, f"?{scalar_type}")


def tensor_nbytes(tensor):
    """Element count times element size of the tensor's ScalarType."""
    name = scalar_type_name(tensor["scalar_type"])
    if name not in ELEMENT_SIZES:
        raise Malformed(f"scalar type {tensor['scalar_type']} has no element size")
    return numel(tensor) * ELEMENT_SIZES[name]


def layout(tensor):
    """(scalar type name, (sizes), (dim_order)) as a .ptd TensorLayout would state them."""
    return (scalar_type_name(tensor["scalar_type"]), tuple(tensor["sizes"] or []),
            tuple(tensor["dim_order"] or []))


def location(tensor):
    info = tensor["extra_tensor_info"]
    return info["location"] if info else SEGMENT


def fqn(tensor):
    info = tensor["extra_tensor_info"]
    return info["fully_qualified_name"] if info else None


def classify(tensor):
    """'external', 'constant', 'mutable' or 'none' (docs/format-pte.md, runtime rules 1-4)."""
    if location(tensor) == EXTERNAL:
        return "external"
    if tensor["data_buffer_idx"] > 0:
        return "mutable" if tensor["allocation_info"] is not None else "constant"
    return "none"


def uses_constant_buffer(parsed):
    """The runtime takes the deprecated constant_buffer path when constant_segment is null or
    its offsets are empty."""
    segment = parsed["program"]["constant_segment"]
    return segment is None or not segment["offsets"]


def segment_bytes(parsed, data, index):
    segments = parsed["program"]["segments"] or []
    if index >= len(segments):
        raise Malformed(f"segment {index} out of range ({len(segments)} segments)")
    segment = segments[index]
    start = parsed["segment_base"] + segment["offset"]
    return data[start:start + segment["size"]]


def segment_range(parsed, index):
    """(file offset, size) of segment `index`."""
    segment = parsed["program"]["segments"][index]
    return parsed["segment_base"] + segment["offset"], segment["size"]


def constant_location(parsed, tensor):
    """(file offset, nbytes) of a constant stored in the program (constant segment), or
    None when it comes from the deprecated constant_buffer."""
    if uses_constant_buffer(parsed):
        return None
    table = parsed["program"]["constant_segment"]
    index = tensor["data_buffer_idx"]
    if index >= len(table["offsets"]):
        raise Malformed(f"data_buffer_idx {index} beyond {len(table['offsets'])} offsets")
    start, size = segment_range(parsed, table["segment_index"])
    offset, nbytes = table["offsets"][index], tensor_nbytes(tensor)
    if offset + nbytes > size:
        raise Malformed(f"constant {index}: {offset}+{nbytes} past its segment ({size} B)")
    return start + offset, nbytes


def constant_bytes(parsed, data, tensor):
    """The bytes of a constant stored in the program (constant segment or constant_buffer)."""
    nbytes = tensor_nbytes(tensor)
    where = constant_location(parsed, tensor)
    if where is not None:
        return data[where[0]:where[0] + nbytes]
    buffers = parsed["program"]["constant_buffer"] or []
    index = tensor["data_buffer_idx"]
    if index >= len(buffers):
        raise Malformed(f"data_buffer_idx {index} beyond {len(buffers)} constant buffers")
    storage = buffers[index]["storage"] or b""
    if len(storage) < nbytes:
        raise Malformed(f"constant_buffer[{index}] has {len(storage)} B, tensor needs {nbytes}")
    return storage[:nbytes]


def constant_buffer_bytes(parsed, index):
    buffers = parsed["program"]["constant_buffer"] or []
    return buffers[index]["storage"] or b""


def mutable_bytes(parsed, data, tensor):
    """Initial value of mutable state from mutable_data_segments[0]."""
    tables = parsed["program"]["mutable_data_segments"] or []
    if not tables:
        return None
    table = tables[0]
    start, size = segment_range(parsed, table["segment_index"])
    offset = table["offsets"][tensor["data_buffer_idx"]]
    return data[start + offset:start + offset + tensor_nbytes(tensor)]


def named_data(parsed, data):
    """[(key, bytes)] of the program's named_data, in program order."""
    return [(entry["key"], segment_bytes(parsed, data, entry["segment_index"]))
            for entry in parsed["program"]["named_data"] or []]


def tensors(parsed):
    """[(plan index, plan name, value index, tensor)] of every Tensor EValue."""
    out = []
    for p, plan in enumerate(parsed["program"]["execution_plan"] or []):
        for v, value in enumerate(plan["values"] or []):
            val = value["val"]
            if val and val["type"] == "Tensor" and val["value"] is not None:
                out.append((p, plan["name"], v, val["value"]))
    return out


def stored_constants(parsed, data):
    """Every constant stored in the program with its bytes: [{plan, plan_index, value_index,
    tensor, fqn, data_buffer_idx, layout, bytes}] (classification 'constant')."""
    out = []
    for p, name, v, tensor in tensors(parsed):
        if classify(tensor) != "constant":
            continue
        out.append({"plan": name, "plan_index": p, "value_index": v, "tensor": tensor,
                    "fqn": fqn(tensor), "data_buffer_idx": tensor["data_buffer_idx"],
                    "layout": layout(tensor), "bytes": constant_bytes(parsed, data, tensor)})
    return out


def delegate_blobs(parsed, data):
    """[(plan name, delegate index, id, location, bytes)] of every BackendDelegate."""
    out = []
    program = parsed["program"]
    for plan in program["execution_plan"] or []:
        for d, delegate in enumerate(plan["delegates"] or []):
            ref = delegate["processed"]
            if ref is None:
                out.append((plan["name"], d, delegate["id"], None, None))
            elif ref["location"] == DATA_SEGMENT:
                out.append((plan["name"], d, delegate["id"], "SEGMENT",
                            segment_bytes(parsed, data, ref["index"])))
            else:
                inline = program["backend_delegate_data"] or []
                blob = inline[ref["index"]]["data"] if ref["index"] < len(inline) else None
                out.append((plan["name"], d, delegate["id"], "INLINE", blob))
    return out


def layout_problems(parsed, data):
    """What a runtime or docs/format-pte.md's layout rules would object to, as strings."""
    problems = []
    program, header = parsed["program"], parsed["header"]
    segments = program["segments"] or []
    segment_bytes_total = sum(s["size"] for s in segments)
    if (header is not None) != (segment_bytes_total > 0):
        problems.append(f"eh00 header present={header is not None} but segments hold "
                        f"{segment_bytes_total} B")
    if header is not None:
        base, size = header["segment_base_offset"], header["segment_data_size"]
        if header["length"] != 32:
            problems.append(f"eh00 length {header['length']} (writers put 32)")
        if base % 128:
            problems.append(f"segment_base_offset {base} not a multiple of 128")
        if size is not None and base + size != len(data):
            problems.append(f"file has {len(data)} B, base+segment_data_size = {base + size}")
        if any(data[header["program_size"]:base]):
            problems.append("non-zero bytes between the flatbuffer and the segments")
        for i, s in enumerate(segments):
            if s["size"] and s["offset"] % 128:
                problems.append(f"segment {i} at offset {s['offset']} not 128-aligned")
            if size is not None and s["offset"] + s["size"] > size:
                problems.append(f"segment {i} ends past segment_data_size")
        spans = sorted((s["offset"], s["offset"] + s["size"], i) for i, s in enumerate(segments)
                       if s["size"])
        for (a0, a1, i), (b0, b1, j) in zip(spans, spans[1:]):
            if b0 < a1:
                problems.append(f"segments {i} and {j} overlap")
    table = program["constant_segment"]
    if table is not None:
        if table["offsets"] and table["offsets"][0] != 0:
            problems.append(f"constant_segment.offsets[0] = {table['offsets'][0]}, not 0")
        if table["segment_index"] >= len(segments) and table["offsets"]:
            problems.append(f"constant_segment.segment_index {table['segment_index']} out of range")
        elif table["offsets"]:
            size = segments[table["segment_index"]]["size"]
            for i, off in enumerate(table["offsets"]):
                if off > size:
                    problems.append(f"constant_segment.offsets[{i}] = {off} > segment size {size}")
    if program["named_data"] is not None and program["segments"] is None:
        problems.append("named_data present with a null segments vector")
    for name, obj in walk_tables(program):
        if obj["_extra_slots"]:
            problems.append(f"{name}: fields beyond the schema in slots {obj['_extra_slots']}")
    return problems


def walk_tables(obj, path="Program"):
    """(path, table dict) of obj and every table below it."""
    if isinstance(obj, dict):
        if "_present" in obj:
            yield path, obj
        for key, value in obj.items():
            if not key.startswith("_"):
                yield from walk_tables(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from walk_tables(value, f"{path}[{i}]")


def strip(obj, scalar_presence=False):
    """A copy without "_present"/"_extra_slots" (kept when scalar_presence: then presence of
    default-valued scalars counts as a difference too). Presence of strings, vectors, tables
    and unions is still visible as None vs a value."""
    if isinstance(obj, dict):
        return {k: strip(v, scalar_presence) for k, v in obj.items()
                if scalar_presence or not k.startswith("_")}
    if isinstance(obj, list):
        return [strip(v, scalar_presence) for v in obj]
    return obj


# ----- .ptd shards (through ptd_reader) -----

def read_ptd(path):
    """{key: {"segment_index", "layout": (type name, (sizes), (dim_order)) or None, "bytes",
    "sha256"}} of a .ptd, plus the parsed table under "__parsed__"."""
    parsed = ptd_reader.parse(path)
    with open(path, "rb") as handle:
        data = handle.read()
    out = {}
    for entry in parsed["named_data"]:
        segment = parsed["segments"][entry["segment_index"]]
        blob = data[segment["file_offset"]:segment["file_offset"] + segment["size"]]
        tl = entry.get("tensor_layout")
        out[entry["key"]] = {
            "segment_index": entry["segment_index"],
            "layout": (tl["scalar_type_name"], tuple(tl["sizes"]), tuple(tl["dim_order"]))
            if tl else None,
            "bytes": blob, "sha256": entry["sha256"]}
    return out, parsed


def summary(parsed, data):
    program = parsed["program"]
    kinds = {}
    for _, _, _, tensor in tensors(parsed):
        kinds[classify(tensor)] = kinds.get(classify(tensor), 0) + 1
    return {
        "file_size": parsed["file_size"], "header": parsed["header"],
        "version": program["version"],
        "plans": [p["name"] for p in program["execution_plan"] or []],
        "segments": program["segments"] and [strip(s) for s in program["segments"]],
        "constant_segment": program["constant_segment"] and strip(program["constant_segment"]),
        "constant_buffer": None if program["constant_buffer"] is None else
        [len(b["storage"] or b"") for b in program["constant_buffer"]],
        "named_data": None if program["named_data"] is None else
        [{"key": k, "nbytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
         for k, b in named_data(parsed, data)],
        "tensors": kinds,
        "constants": [{"plan": c["plan"], "value": c["value_index"], "fqn": c["fqn"],
                       "data_buffer_idx": c["data_buffer_idx"], "layout": c["layout"],
                       "sha256": hashlib.sha256(c["bytes"]).hexdigest()}
                      for c in stored_constants(parsed, data)],
        "external": [{"plan": n, "value": v, "fqn": fqn(t), "layout": layout(t)}
                     for _, n, v, t in tensors(parsed) if classify(t) == "external"],
        "delegates": [{"plan": p, "index": d, "id": i, "location": loc,
                       "nbytes": None if b is None else len(b)}
                      for p, d, i, loc, b in delegate_blobs(parsed, data)],
        "problems": layout_problems(parsed, data),
    }


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        parsed, data = load(sys.argv[1])
        result = summary(parsed, data)
    except (Malformed, KeyError, IndexError) as e:
        print(f"{sys.argv[1]}: {e!r}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
