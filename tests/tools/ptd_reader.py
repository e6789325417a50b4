#!/usr/bin/env python3
"""Independent .ptd (ExecuTorch FlatTensor) reader for cross-checking ptepack's writer.

Python standard library only: the flatbuffer tables and vtables are parsed by hand from the
schema facts in docs/format-ptd.md, so it shares no code with the C++ side (no flatc output,
no flatbuffers package). Prints one JSON object; exits 1 with a message on a malformed file.

usage: ptd_reader.py FILE
"""

import hashlib
import json
import struct
import sys

SCALAR_TYPES = {
    0: "BYTE", 1: "CHAR", 2: "SHORT", 3: "INT", 4: "LONG", 5: "HALF", 6: "FLOAT", 7: "DOUBLE",
    11: "BOOL", 12: "QINT8", 13: "QUINT8", 14: "QINT32", 15: "BFLOAT16", 16: "QUINT4X2",
    17: "QUINT2X4", 22: "BITS16", 23: "FLOAT8E5M2", 24: "FLOAT8E4M3FN", 25: "FLOAT8E5M2FNUZ",
    26: "FLOAT8E4M3FNUZ", 27: "UINT16", 28: "UINT32", 29: "UINT64",
}
# docs/format-ptd.md: element sizes (packed sub-byte types count 1).
ELEMENT_SIZES = {
    "BYTE": 1, "CHAR": 1, "BOOL": 1, "QINT8": 1, "QUINT8": 1, "QUINT4X2": 1, "QUINT2X4": 1,
    "FLOAT8E5M2": 1, "FLOAT8E4M3FN": 1, "FLOAT8E5M2FNUZ": 1, "FLOAT8E4M3FNUZ": 1,
    "SHORT": 2, "HALF": 2, "BFLOAT16": 2, "BITS16": 2, "UINT16": 2,
    "INT": 4, "FLOAT": 4, "QINT32": 4, "UINT32": 4,
    "LONG": 8, "DOUBLE": 8, "UINT64": 8,
}


class Malformed(Exception):
    pass


class Buffer:
    """Bounds-checked little-endian reads of flatbuffer tables, vectors and strings."""

    def __init__(self, data):
        self.data = data

    def read(self, fmt, pos):
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > len(self.data):
            raise Malformed(f"read of {size} bytes at offset {pos} is outside the flatbuffer")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def deref(self, pos):
        """Follows a uoffset stored at pos (offsets are relative to their own position)."""
        return pos + self.read("<I", pos)

    def field(self, table, index):
        """Position of field `index` of the table at `table`, or None when absent."""
        vtable = table - self.read("<i", table)
        vtable_size = self.read("<H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > vtable_size:
            return None
        offset = self.read("<H", vtable + slot)
        return table + offset if offset else None

    def scalar(self, table, index, fmt, default=0):
        pos = self.field(table, index)
        return default if pos is None else self.read(fmt, pos)

    def ref(self, table, index):
        pos = self.field(table, index)
        return None if pos is None else self.deref(pos)

    def required_ref(self, table, index, what):
        pos = self.ref(table, index)
        if pos is None:
            raise Malformed(f"{what} is missing")
        return pos

    def vector(self, pos):
        """(count, position of the first element) of the vector at pos."""
        count = self.read("<I", pos)
        return count, pos + 4

    def string(self, pos):
        count, start = self.vector(pos)
        if start + count > len(self.data):
            raise Malformed(f"string at offset {pos} runs past the flatbuffer")
        return self.data[start:start + count]


def parse(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 48:
        raise Malformed(f"{len(data)} bytes is too small")
    if data[4:8] != b"FT01":
        raise Malformed(f"identifier {data[4:8]!r} is not FT01")
    if data[8:12] != b"FH01":
        raise Malformed(f"magic {data[8:12]!r} at offset 8 is not FH01")
    length, fb_offset, fb_size, base, data_size = struct.unpack_from("<IQQQQ", data, 12)
    header = {"magic": "FH01", "length": length, "flatbuffer_offset": fb_offset,
              "flatbuffer_size": fb_size, "segment_base_offset": base,
              "segment_data_size": data_size}
    if length < 40:
        raise Malformed(f"header length {length} < 40")
    if fb_offset + fb_size > len(data) or base < fb_offset + fb_size:
        raise Malformed("flatbuffer region inconsistent with the header")
    if base + data_size > len(data):
        raise Malformed("segment data runs past the end of the file")

    fb = Buffer(data[:fb_offset + fb_size])
    root = fb.deref(0)
    version = fb.scalar(root, 0, "<I")
    segments_pos = fb.ref(root, 1)
    named_pos = fb.ref(root, 2)
    if segments_pos is None or named_pos is None:
        raise Malformed("root table lacks segments or named_data")

    segments = []
    count, first = fb.vector(segments_pos)
    for i in range(count):
        table = fb.deref(first + 4 * i)
        offset = fb.scalar(table, 0, "<Q")
        size = fb.scalar(table, 1, "<Q")
        if offset + size > data_size:
            raise Malformed(f"segment {i} is outside the segment data")
        segments.append({"offset": offset, "size": size, "file_offset": base + offset})

    named_data = []
    count, first = fb.vector(named_pos)
    for i in range(count):
        table = fb.deref(first + 4 * i)
        key_pos = fb.ref(table, 0)
        if key_pos is None:
            raise Malformed(f"named_data[{i}] has no key")
        key = fb.string(key_pos).decode("utf-8", errors="backslashreplace")
        index = fb.scalar(table, 1, "<I")
        if index >= len(segments):
            raise Malformed(f"key {key!r}: segment_index {index} out of range")
        segment = segments[index]
        entry = {"key": key, "segment_index": index}
        layout_pos = fb.ref(table, 2)
        if layout_pos is not None:
            scalar_type = fb.scalar(layout_pos, 0, "<b")
            sizes_count, sizes_first = fb.vector(fb.required_ref(layout_pos, 1, f"{key!r} sizes"))
            order_count, order_first = fb.vector(
                fb.required_ref(layout_pos, 2, f"{key!r} dim_order"))
            sizes = [fb.read("<i", sizes_first + 4 * d) for d in range(sizes_count)]
            dim_order = [fb.read("<B", order_first + d) for d in range(order_count)]
            name = SCALAR_TYPES.get(scalar_type, "")
            entry["tensor_layout"] = {"scalar_type": scalar_type, "scalar_type_name": name,
                                      "sizes": sizes, "dim_order": dim_order}
            nbytes = ELEMENT_SIZES.get(name, 0)
            for dim in sizes:
                nbytes *= dim
            if nbytes != segment["size"]:
                raise Malformed(f"key {key!r}: layout needs {nbytes} bytes, segment has "
                                f"{segment['size']}")
        start = segment["file_offset"]
        entry["sha256"] = hashlib.sha256(data[start:start + segment["size"]]).hexdigest()
        named_data.append(entry)

    return {"file_size": len(data), "identifier": "FT01", "header": header, "version": version,
            "segments": segments, "named_data": named_data}


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        result = parse(sys.argv[1])
    except Malformed as e:
        print(f"{sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
