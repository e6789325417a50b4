#!/usr/bin/env python3
"""Independent safetensors reader (Python stdlib only) that cross-checks ptepack's C++ reader.

Written from the format description (docs/format-safetensors.md), sharing no code with ptepack.
Parses one safetensors file (or a byte range of a larger file, e.g. a .ptn member), validates
it, and prints JSON:

  {"header_length": N, "data_start": ABS, "metadata": {...},
   "tensors": [{"key", "dtype", "shape", "data_offsets": [b, e], "offset": ABS, "nbytes",
                "sha256"}, ...]}   (tensors sorted by key; offsets absolute in the file)

Exit status 0 when valid; 1 with "st_reader: error: ..." on stderr otherwise.
"""

import argparse
import hashlib
import json
import struct
import sys

ELEMENT_SIZE = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
    "U8": 1, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8,
}
MAX_HEADER = 256 << 20
MAX_RANK = 32
INT64_MAX = (1 << 63) - 1


class Invalid(Exception):
    pass


def no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise Invalid(f"duplicate key {key!r}")
        out[key] = value
    return out


def reject_constant(name):
    raise Invalid(f"non-standard JSON constant {name}")


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def parse(blob, base):
    if len(blob) < 8:
        raise Invalid(f"{len(blob)} bytes is too short for the header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8 or n > MAX_HEADER:
        raise Invalid(f"header length {n} out of range")
    try:
        text = blob[8 : 8 + n].decode("utf-8")
        header = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Invalid(f"bad JSON header: {e}") from None
    if not isinstance(header, dict):
        raise Invalid("header is not an object")
    data_size = len(blob) - 8 - n
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise Invalid("__metadata__ is not an object of strings")
    tensors = []
    for key, entry in header.items():
        if not key:
            raise Invalid("empty key")
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise Invalid(f"{key!r}: entry must hold exactly dtype, shape, data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in ELEMENT_SIZE:
            raise Invalid(f"{key!r}: unsupported dtype {dtype!r}")
        if (not isinstance(shape, list) or len(shape) > MAX_RANK
                or not all(is_int(d) and 0 <= d <= INT64_MAX for d in shape)):
            raise Invalid(f"{key!r}: bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(is_int(o) and 0 <= o < (1 << 64) for o in offsets)):
            raise Invalid(f"{key!r}: bad data_offsets {offsets!r}")
        begin, end = offsets
        count = 1
        for d in shape:
            count *= d
        if begin > end or end - begin != count * ELEMENT_SIZE[dtype] or end > data_size:
            raise Invalid(f"{key!r}: data_offsets {offsets} do not fit {dtype} {shape}")
        tensors.append((key, dtype, shape, begin, end))
    cursor = 0
    for key, _, _, begin, end in sorted(tensors, key=lambda t: (t[3], t[4], t[0])):
        if begin != cursor:
            raise Invalid(f"{key!r}: starts at {begin}, expected {cursor} (gap or overlap)")
        cursor = end
    if cursor != data_size:
        raise Invalid(f"data section has {data_size} bytes, tensors cover {cursor}")
    data_start = base + 8 + n
    out = []
    for key, dtype, shape, begin, end in sorted(tensors):
        piece = blob[8 + n + begin : 8 + n + end]
        out.append({
            "key": key, "dtype": dtype, "shape": shape, "data_offsets": [begin, end],
            "offset": data_start + begin, "nbytes": end - begin,
            "sha256": hashlib.sha256(piece).hexdigest(),
        })
    return {"header_length": n, "data_start": data_start, "metadata": metadata, "tensors": out}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--offset", type=int, default=0, help="start of the safetensors bytes")
    parser.add_argument("--size", type=int, default=None, help="length (default: to the end)")
    args = parser.parse_args()
    with open(args.path, "rb") as f:
        f.seek(args.offset)
        blob = f.read() if args.size is None else f.read(args.size)
    if args.size is not None and len(blob) != args.size:
        print("st_reader: error: range extends past the end of the file", file=sys.stderr)
        return 1
    try:
        result = parse(blob, args.offset)
    except Invalid as e:
        print(f"st_reader: error: {args.path}: {e}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
