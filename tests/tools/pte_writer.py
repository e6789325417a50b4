#!/usr/bin/env python3
"""Writes ExecuTorch .pte programs the way ExecuTorch's own serializer does, for tests.

A program is its flatc JSON form (a dict) plus a list of segment byte strings. `encode`
fills `segments` with the offsets, has flatc (a build dependency, independent of ptepack's
code) write the flatbuffer from the JSON, inserts the 32-byte `eh00` extended header after
byte 8 when any segment holds bytes, and appends the segments, each starting at a multiple
of the segment alignment from the segment base (docs/format-pte.md, "File layout").

`decode` reads a .pte back into (program dict, segments) through flatc, so a test can take a
real program from tests/data/pte, change one field the way an exporter would have written
it, and write it again: a field flatc writes is present, a default one is left out, exactly
as in files written by ExecuTorch's exporter.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "schema", "pte_program.fbs")
import pte_reader  # noqa: E402  (beside this file)

HEADER_LENGTH = 32  # eh00 as ExecuTorch writes it; padded to 16, the schema's force_align


def align(value, alignment):
    return (value + alignment - 1) // alignment * alignment


def _flatc():
    flatc = shutil.which("flatc")
    if flatc is None:
        raise RuntimeError("flatc (a build dependency) is not on PATH")
    return flatc


def _header(data):
    """(program_size, segment_base_offset, segment_data_size) of a .pte, or None."""
    if len(data) >= 40 and data[8:12] == b"eh00":
        return struct.unpack_from("<QQQ", data, 16)
    return None


def decode(path):
    """(program as flatc's JSON dict, [segment bytes]) of a .pte file."""
    with open(path, "rb") as handle:
        data = handle.read()
    with tempfile.TemporaryDirectory(prefix="pte_writer_") as work:
        copy = os.path.join(work, "program.pte")
        with open(copy, "wb") as handle:
            handle.write(data)
        subprocess.run([_flatc(), "--json", "--strict-json", "--raw-binary", "-o", work, SCHEMA,
                        "--", copy], check=True, capture_output=True)
        with open(os.path.join(work, "program.json"), encoding="utf-8") as handle:
            program = json.load(handle)
    _exact_doubles(program, path)
    header = _header(data)
    segments = []
    if header is not None and header[1] > 0:
        base = header[1]
        for entry in program.get("segments", []):
            start = base + entry.get("offset", 0)
            segments.append(data[start:start + entry.get("size", 0)])
    else:
        segments = [b"" for _ in program.get("segments", [])]
    return program, segments


def _exact_doubles(program, path):
    """flatc prints doubles with 12 significant digits: put back the exact values, read by
    tests/tools/pte_reader.py, so a decoded program encodes to the same numbers."""
    parsed, _ = pte_reader.load(path)
    for plan, parsed_plan in zip(program.get("execution_plan", []),
                                 parsed["program"]["execution_plan"]):
        for value, parsed_value in zip(plan.get("values", []), parsed_plan["values"]):
            union = (parsed_value.get("val") or {})
            if union.get("type") == "Double":
                value["val"]["double_val"] = union["value"]["double_val"]
            elif union.get("type") == "DoubleList":
                value["val"]["items"] = list(union["value"]["items"])


def constant_segment(buffers, alignment=16):
    """(segment bytes, offsets) of constants laid out as ExecuTorch's emitter does: offsets[0]
    is the reserved placeholder, each buffer starts at a multiple of `alignment`."""
    blob, offsets = bytearray(), [0]
    for buffer in buffers:
        at = align(len(blob), alignment) if blob else 0
        blob += bytes(at - len(blob))
        offsets.append(at)
        blob += buffer
    return bytes(blob), offsets


def encode(program, segments, segment_alignment=128):
    """The .pte bytes of `program` (flatc JSON dict; its `segments` are replaced) with
    `segments` appended."""
    program = json.loads(json.dumps(program))
    offsets, end = [], 0
    for blob in segments:
        at = align(end, segment_alignment) if blob else 0
        offsets.append(at)
        end = at + len(blob) if blob else end
    if segments or "segments" in program:
        program["segments"] = [{"offset": o, "size": len(b)} for o, b in zip(offsets, segments)]
    with tempfile.TemporaryDirectory(prefix="pte_writer_") as work:
        source = os.path.join(work, "program.json")
        with open(source, "w", encoding="utf-8") as handle:
            json.dump(program, handle)
        subprocess.run([_flatc(), "--binary", "-o", work, SCHEMA, source], check=True,
                       capture_output=True)
        with open(os.path.join(work, "program.pte"), "rb") as handle:
            flatbuffer = handle.read()
    if not any(segments):  # ExecuTorch writes no header when the segments hold no bytes
        return flatbuffer
    root = struct.unpack_from("<I", flatbuffer)[0] + HEADER_LENGTH
    program_size = len(flatbuffer) + HEADER_LENGTH
    base = align(program_size, segment_alignment)
    header = b"eh00" + struct.pack("<IQQQ", HEADER_LENGTH, program_size, base, end)
    assert len(header) == HEADER_LENGTH
    out = bytearray(struct.pack("<I", root) + flatbuffer[4:8] + header + flatbuffer[8:])
    out += bytes(base - len(out))
    for at, blob in zip(offsets, segments):
        if blob:
            out += bytes(base + at - len(out))
            out += blob
    return bytes(out)


def write(path, program, segments, segment_alignment=128):
    with open(path, "wb") as handle:
        handle.write(encode(program, segments, segment_alignment))
    return path
