#!/usr/bin/env python3
"""Small ExecuTorch programs no fixture provides, written with pte_writer.py the way
ExecuTorch's serializer writes them: methods with named mutable buffers (state), as
exported with ExecutorchBackendConfig(emit_mutable_buffer_names=True), alone or laid out
as MemoryPlanningPass(share_mutable_buffers=True) shares them (memory id 2).

Each stateful method works on a FLOAT [2] buffer named by `fqn` whose initial value is
`initial` (in mutable_data_segments[0]), with the portable aten::add.out kernel:
- "accumulate": state += x, returns the state;
- "read": returns state + x, leaves the state alone.
"""
import struct

import pte_writer

FLOAT = "FLOAT"


def _tensor(offset, memory_id=1, fqn=None, buffer=0):
    value = {"scalar_type": FLOAT, "sizes": [2], "dim_order": [0],
             "allocation_info": {"memory_id": memory_id, "memory_offset_low": offset}}
    if fqn is not None:
        value["extra_tensor_info"] = {"fully_qualified_name": fqn, "location": "SEGMENT"}
    if buffer:
        value["data_buffer_idx"] = buffer
    return {"val_type": "Tensor", "val": value}


def stateful_plan(name, kind, fqn="state", shared_offset=None, buffer=1):
    """One method. Without `shared_offset` every planned tensor is in memory id 1 (input x
    at 0, the state at 16, a result at 32); with it the state is at that offset of id 2 and
    id 1 holds the rest, as ExecuTorch's shared layout plans it."""
    state = (_tensor(16, fqn=fqn, buffer=buffer) if shared_offset is None
             else _tensor(shared_offset, memory_id=2, fqn=fqn, buffer=buffer))
    values = [_tensor(0), state, {"val_type": "Int", "val": {"int_val": 1}}]
    if kind == "accumulate":
        args, outputs = [1, 0, 2, 1, 1], [1]  # add.out(self=state, other=x, out=state)
        own = 32 if shared_offset is None else 16
    else:
        values.append(_tensor(32 if shared_offset is None else 16))
        args, outputs = [1, 0, 2, 3, 3], [3]  # add.out(self=state, other=x, out=result)
        own = 48 if shared_offset is None else 32
    sizes = [0, own] if shared_offset is None else [0, own, shared_offset + 16]
    return {"name": name,
            "container_meta_type": {"encoded_inp_str": "T2#1#0(T1#1($),D0())",
                                    "encoded_out_str": "$"},
            "values": values, "inputs": [0], "outputs": outputs,
            "chains": [{"inputs": [], "outputs": [], "instructions": [
                {"instr_args_type": "KernelCall", "instr_args": {"op_index": 0, "args": args}}]}],
            "operators": [{"name": "aten::add", "overload": "out"}], "delegates": [],
            "non_const_buffer_sizes": sizes}


def program(plans, initial=(10.0, 20.0)):
    """(program JSON, segments) of the plans, every state buffer starting at `initial`."""
    state = struct.pack("<2f", *initial)
    constants, offsets = pte_writer.constant_segment([])
    program = {"version": 0, "execution_plan": plans,
               "constant_segment": {"segment_index": 0, "offsets": offsets},
               "mutable_data_segments": [{"segment_index": 1, "offsets": [0, 0]}]}
    return program, [constants, state]


def write_stateful(path, methods, fqn="state", initial=(10.0, 20.0), shared=False):
    """A program of `methods` ([(name, kind)]); with `shared`, laid out as ExecuTorch's
    share_mutable_buffers does: the state once, at offset 0 of memory id 2 in every method."""
    plans = [stateful_plan(name, kind, fqn, 0 if shared else None) for name, kind in methods]
    program_json, segments = program(plans, initial)
    return pte_writer.write(path, program_json, segments)


# ------------------------------------------------------------------ variants of real programs

def _reindex_segments(program, segments, drop):
    """(program, segments) without the segments whose indices are in `drop`, every
    reference to a later segment renumbered, as an exporter that never wrote them would."""
    keep = [i for i in range(len(segments)) if i not in drop]
    new_index = {old: new for new, old in enumerate(keep)}
    constant = program.get("constant_segment")
    if constant is not None:
        constant["segment_index"] = new_index[constant.get("segment_index", 0)]
    for entry in program.get("mutable_data_segments", []):
        entry["segment_index"] = new_index[entry.get("segment_index", 0)]
    for entry in program.get("named_data", []):
        entry["segment_index"] = new_index[entry.get("segment_index", 0)]
    for plan in program.get("execution_plan", []):
        for delegate in plan.get("delegates", []):
            ref = delegate["processed"]
            if ref.get("location", "INLINE") == "SEGMENT":
                ref["index"] = new_index[ref.get("index", 0)]
    return program, [segments[i] for i in keep]


def inline_delegates(source, path, backend=None, drop_stored=False):
    """`source` written as ExecuTorch's exporter writes it with
    extract_delegate_segments=False: every delegate blob inline in backend_delegate_data,
    in delegate order, its segment gone. `backend` renames every delegate (an Ethos-U or
    Core ML program's id); `drop_stored` also drops the named data and every constant, so
    the program has no stored tensors at all (as Ethos-U programs, whose blobs hold their
    weights)."""
    program, segments = pte_writer.decode(source)
    inline = program.setdefault("backend_delegate_data", [])
    moved = set()
    for plan in program.get("execution_plan", []):
        for delegate in plan.get("delegates", []):
            ref = delegate["processed"]
            if backend is not None:
                delegate["id"] = backend
            if ref.get("location", "INLINE") != "SEGMENT":
                continue
            index = ref.get("index", 0)
            moved.add(index)
            inline.append({"data": list(segments[index])})
            ref["location"] = "INLINE"
            ref["index"] = len(inline) - 1
    if drop_stored:
        dropped = program.pop("named_data", [])
        moved.update(entry.get("segment_index", 0) for entry in dropped)
        for entry in inline:  # the blobs name no data they could be served
            blob = bytes(entry["data"])
            for named in dropped:
                blob = blob.replace(named["key"].encode(), named["key"][::-1].encode())
            entry["data"] = list(blob)
        for plan in program.get("execution_plan", []):
            for value in plan.get("values", []):
                tensor = value.get("val") if value.get("val_type") == "Tensor" else None
                if tensor and tensor.get("data_buffer_idx", 0) and "allocation_info" not in tensor:
                    tensor.pop("data_buffer_idx")
        constant = program.get("constant_segment")
        if constant is not None:
            segments[constant.get("segment_index", 0)] = b""
            constant["offsets"] = [0]
    program, segments = _reindex_segments(program, segments, moved)
    return pte_writer.write(path, program, segments)
