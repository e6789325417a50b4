#!/usr/bin/env python3
# Synthetic ExecuTorch program (.pte) generator for the ptepack benchmark, standard library only.
"""Write a synthetic but valid ExecuTorch program (.pte, docs/format-pte.md) of a given size.

One execution plan `forward`: plain FLOAT constants in the constant segment (segment 0, each at
a 16-byte padded offset, data_buffer_idx 1..N, offsets[0] = 0 placeholder) and delegate-style
weights as named data (key = SHA-256 hex of the bytes, one segment each), one XnnpackBackend
delegate whose processed blob is a small segment naming those keys, a DelegateCall and a
KernelCall (aten::add.out) over planned input/output tensors. Part of the bytes (`--dup`) is
byte-identical to other tensors: constants repeating a constant or a named-data buffer (under
another data_buffer_idx, sometimes with another shape of the same element count) and named
entries repeating a constant, so a packer's dedup shows. The FlatBuffers encoding is done here
(little-endian, back-to-front like flatc's builders); tensor bytes are streamed to the file.
"""
import argparse
import hashlib
import json
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_model import parse_size, write_pattern  # noqa: E402  (sibling benchmark script)

HEADER_LENGTH = 32        # eh00 length; its padded length is what the root offset grows by
SEGMENT_ALIGNMENT = 128   # ExecuTorch's default segment alignment
TENSOR_ALIGNMENT = 16     # constants inside the constant segment
FLOAT = 6                 # ScalarType.FLOAT
ELEMENT = 4               # bytes per FLOAT element
DIM = 64                  # width of the planned input/output activations
# Union tags (member order, starting at 1).
KT_INT, KT_TENSOR = 2, 5                  # KernelTypes
IA_KERNEL_CALL, IA_DELEGATE_CALL = 1, 2   # InstructionArguments
LOCATION_SEGMENT = 1                      # DataLocation.SEGMENT
INP_SPEC = ('[1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": '
            '"builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": '
            'null, "children_spec": []}]}, {"type": "builtins.dict", "context": "[]", '
            '"children_spec": []}]}]')
OUT_SPEC = '[1, {"type": null, "context": null, "children_spec": []}]'
BLOB_MAGIC = b"ptepack-bench synthetic XnnpackBackend blob; named data keys:\n"


def align(value, alignment):
    return (value + alignment - 1) // alignment * alignment


# ---- FlatBuffers builder -----------------------------------------------------------------

class Builder:
    """Minimal FlatBuffers builder: the buffer grows towards the front, so an object's offset
    is its distance from the end until finish(). Children are built before their parents."""

    def __init__(self, capacity=1 << 16):
        self.buf = bytearray(capacity)
        self.head = capacity
        self.minalign = 1
        self.fields = None
        self.table_start = 0

    def offset(self):
        return len(self.buf) - self.head

    def _room(self, nbytes):
        while self.head < nbytes:
            grow = len(self.buf)
            self.buf = bytearray(grow) + self.buf
            self.head += grow

    def _put(self, fmt, value):
        size = struct.calcsize(fmt)
        self._room(size)
        self.head -= size
        struct.pack_into("<" + fmt, self.buf, self.head, value)

    def _prep(self, size, additional):
        """Pads so that `size` bytes written after `additional` more bytes are aligned."""
        self.minalign = max(self.minalign, size)
        pad = -(self.offset() + additional) % size
        self._room(pad)
        self.head -= pad  # the buffer is zero-filled and never reused

    def _uoffset(self, target):
        self._prep(4, 0)
        self._put("I", self.offset() + 4 - target)

    def string(self, text):
        data = text.encode()
        self._prep(4, len(data) + 1)
        self._room(len(data) + 1)
        self.head -= len(data) + 1
        self.buf[self.head:self.head + len(data)] = data
        self._put("I", len(data))
        return self.offset()

    def bytes_vector(self, data, alignment=1):
        self._prep(4, len(data))
        self._prep(alignment, len(data))
        self._room(len(data))
        self.head -= len(data)
        self.buf[self.head:self.head + len(data)] = data
        self._put("I", len(data))
        return self.offset()

    def vector(self, fmt, items):
        """A vector of scalars of struct format `fmt` ("i", "q", "Q", "B", ...)."""
        size = struct.calcsize(fmt)
        self._prep(4, size * len(items))
        self._prep(size, size * len(items))
        for item in reversed(items):
            self._put(fmt, item)
        self._put("I", len(items))
        return self.offset()

    def offsets(self, targets):
        """A vector of tables or strings."""
        self._prep(4, 4 * len(targets))
        for target in reversed(targets):
            self._put("I", self.offset() + 4 - target)
        self._put("I", len(targets))
        return self.offset()

    def table(self, fields):
        """fields: (slot, kind, value), kind a struct format for scalars or "offset" for a
        table, vector or string already built. A union is two fields: its type tag ("B") at
        slot k and the value ("offset") at slot k + 1. None values are left out."""
        self.fields, self.table_start = {}, self.offset()
        for slot, kind, value in fields:
            if value is None:
                continue
            if kind == "offset":
                self._uoffset(value)
            else:
                self._prep(struct.calcsize(kind), 0)
                self._put(kind, value)
            self.fields[slot] = self.offset()
        self._prep(4, 0)
        self._put("i", 0)  # soffset to the vtable, patched below
        table = self.offset()
        slots = max(self.fields) + 1 if self.fields else 0
        vtable = [4 + 2 * slots, table - self.table_start]
        vtable += [table - self.fields[s] if s in self.fields else 0 for s in range(slots)]
        for entry in reversed(vtable):
            self._put("H", entry)
        # The vtable sits just before the table: soffset = table address - vtable address.
        struct.pack_into("<i", self.buf, len(self.buf) - table, self.offset() - table)
        return table

    def finish(self, root, identifier):
        self._prep(self.minalign, 8)
        for byte in reversed(identifier):
            self._put("B", byte)
        self._uoffset(root)
        return bytes(self.buf[self.head:])


def nonzero(value):
    """Scalars equal to their default (0) are omitted, as flatc does."""
    return value if value else None


# ---- the program -------------------------------------------------------------------------

class Content:
    """Deterministic tensor bytes: SHAKE-256 keyed by seed and index (gen_model.write_pattern)."""

    def __init__(self, index, nbytes, shape, seed):
        self.index, self.nbytes, self.shape = index, nbytes, shape
        self.identity = f"{seed}\0pte\0{index}".encode()
        self.named = False  # some named-data entry holds these bytes (its key must be unique)
        self.digest = None  # SHA-256 hex, taken while the bytes are written


def draw_shape(rng, nbytes):
    """A FLOAT shape of about `nbytes`: [rows, cols], [out, in, k, k] or [n]."""
    numel = max(1, nbytes // ELEMENT)
    form = rng.random()
    if form < 0.6:
        cols = min(numel, rng.choice((64, 128, 256, 512, 1024, 2048, 4096)))
        return [max(1, numel // cols), cols]
    if form < 0.85:
        k = rng.choice((1, 3, 5))
        cin = min(max(1, numel // (k * k)), rng.choice((16, 32, 64, 128, 256, 512)))
        return [max(1, numel // (cin * k * k)), cin, k, k]
    return [numel]


def numel_of(shape):
    return math.prod(shape)


def plan(args):
    """Returns (constants, named): lists of (Content, shape) for the constant segment in
    data_buffer_idx order, and of Content for named data in segment order."""
    rng = random.Random(args.seed)
    contents, constants, named = [], [], []

    def new_content(shape):
        content = Content(len(contents), numel_of(shape) * ELEMENT, shape, args.seed)
        contents.append(content)
        return content

    # Small fixed constants: a scalar, an odd length (not a multiple of the 16-byte padding),
    # and the bias the add kernel reads.
    for shape in ([], [3], [DIM]):
        constants.append((new_content(shape), shape))
    unique_budget = round(args.size * (1.0 - args.dup))
    total = sum(c.nbytes for c, _ in constants)
    low = min(4096, args.max_tensor)
    while total < unique_budget:
        left = unique_budget - total
        target = math.exp(rng.uniform(math.log(low), math.log(args.max_tensor)))
        shape = draw_shape(rng, min(left, int(target)))
        if left < low or numel_of(shape) * ELEMENT > left:
            shape = [max(1, left // ELEMENT)]  # the last one takes what is left
        content = new_content(shape)
        total += content.nbytes
        if rng.random() < args.named:
            content.named = True
            named.append(content)
        else:
            constants.append((content, shape))
    # Duplicates: another data_buffer_idx with the bytes of a constant or named buffer, or a
    # named entry with the bytes of a constant that no named entry holds yet.
    dup_budget = args.size - total
    while dup_budget > 0:
        fits = [c for c in contents[3:] if low <= c.nbytes <= dup_budget]
        if not fits:
            break
        source = rng.choice(fits)
        if not source.named and rng.random() < args.named:
            source.named = True
            named.append(source)
        else:
            shape = source.shape
            if len(shape) > 1 and rng.random() < 0.5:
                shape = [numel_of(shape)]  # same bytes seen under another shape
            constants.append((source, shape))
        dup_budget -= source.nbytes
    # Keep the three fixed constants first (value indices the instructions use), shuffle the rest.
    rest = constants[3:]
    rng.shuffle(rest)
    rng.shuffle(named)
    return constants[:3] + rest, named


def layout(constants, named):
    """Segment table entries (offset from the base, size) and constant offsets."""
    constant_offsets, end = [0], 0
    for content, _ in constants:
        start = align(end, TENSOR_ALIGNMENT)
        constant_offsets.append(start)
        end = start + content.nbytes
    blob_size = len(BLOB_MAGIC) + 65 * len(named)  # 64 hex digits + newline per key
    segments = [(0, end)]
    for size in [blob_size] + [content.nbytes for content in named]:
        last_offset, last_size = segments[-1]
        segments.append((align(last_offset + last_size, SEGMENT_ALIGNMENT), size))
    return segments, constant_offsets, blob_size


def build_program(constants, named, segments, constant_offsets, keys):
    """The Program flatbuffer without the eh00 header."""
    b = Builder()

    def tensor(shape, buffer_index=0, planned_offset=None):
        allocation = None
        if planned_offset is not None:
            allocation = b.table([(0, "I", 1), (1, "I", nonzero(planned_offset))])
        sizes = b.vector("i", shape)
        dim_order = b.vector("B", list(range(len(shape))))
        return b.table([(0, "b", FLOAT), (2, "offset", sizes), (3, "offset", dim_order),
                        (5, "I", nonzero(buffer_index)), (6, "offset", allocation)])

    def evalue(tag, value):
        return b.table([(0, "B", tag), (1, "offset", value)])

    activation = align(DIM * ELEMENT, 16)
    values = [evalue(KT_TENSOR, tensor([1, DIM], planned_offset=0)),               # 0 x
              evalue(KT_TENSOR, tensor([1, DIM], planned_offset=activation)),      # 1 hidden
              evalue(KT_TENSOR, tensor([1, DIM], planned_offset=2 * activation)),  # 2 y
              evalue(KT_INT, b.table([(0, "q", 1)]))]                              # 3 alpha
    first_constant = len(values)
    for index, (_, shape) in enumerate(constants):
        values.append(evalue(KT_TENSOR, tensor(shape, buffer_index=index + 1)))
    # A second value on the first matrix constant's buffer, flattened (ExecuTorch does this
    # when two graph constants share bytes).
    for index, (_, shape) in enumerate(constants):
        if len(shape) > 1:
            values.append(evalue(KT_TENSOR, tensor([numel_of(shape)], buffer_index=index + 1)))
            break
    x, hidden, y, alpha, bias = 0, 1, 2, 3, first_constant + 2
    delegate_call = b.table([(1, "offset", b.vector("i", [x, hidden]))])
    kernel_call = b.table([(1, "offset", b.vector("i", [hidden, bias, alpha, y, y]))])
    instructions = [b.table([(0, "B", IA_DELEGATE_CALL), (1, "offset", delegate_call)]),
                    b.table([(0, "B", IA_KERNEL_CALL), (1, "offset", kernel_call)])]
    chain = b.table([(0, "offset", b.vector("i", [x])), (1, "offset", b.vector("i", [y])),
                     (2, "offset", b.offsets(instructions))])
    operator = b.table([(0, "offset", b.string("aten::add")), (1, "offset", b.string("out"))])
    processed = b.table([(0, "B", LOCATION_SEGMENT), (1, "I", 1)])  # segment 1: the blob
    delegate = b.table([(0, "offset", b.string("XnnpackBackend")), (1, "offset", processed),
                        (2, "offset", b.offsets([]))])
    meta = b.table([(0, "offset", b.string(INP_SPEC)), (1, "offset", b.string(OUT_SPEC))])
    plan_fields = [(0, "offset", b.string("forward")), (1, "offset", meta),
                   (2, "offset", b.offsets(values)), (3, "offset", b.vector("i", [x])),
                   (4, "offset", b.vector("i", [y])), (5, "offset", b.offsets([chain])),
                   (6, "offset", b.offsets([operator])), (7, "offset", b.offsets([delegate])),
                   (8, "offset", b.vector("q", [0, 3 * activation]))]
    execution_plan = b.table(plan_fields)
    segment_tables = [b.table([(0, "Q", nonzero(offset)), (1, "Q", nonzero(size))])
                      for offset, size in segments]
    constant_segment = b.table([(0, "I", None), (1, "offset", b.vector("Q", constant_offsets))])
    named_tables = [b.table([(0, "offset", b.string(key)), (1, "I", 2 + k)])
                    for k, key in enumerate(keys)]
    root = b.table([(1, "offset", b.offsets([execution_plan])), (2, "offset", b.offsets([])),
                    (3, "offset", b.offsets([])), (4, "offset", b.offsets(segment_tables)),
                    (5, "offset", constant_segment),
                    (7, "offset", b.offsets(named_tables) if named_tables else None)])
    return b.finish(root, b"ET12")


def with_header(program, segment_base, segment_data_size):
    """Inserts eh00 after byte 8 and moves the root offset past it (docs/format-pte.md)."""
    padded = align(HEADER_LENGTH, 16)
    program_size = len(program) + padded
    header = b"eh00" + struct.pack("<IQQQ", HEADER_LENGTH, program_size, segment_base,
                                   segment_data_size)
    header += bytes(padded - len(header))
    root = struct.unpack_from("<I", program)[0] + padded
    return struct.pack("<I", root) + program[4:8] + header + program[8:]


class HashingWriter:
    def __init__(self, out, digest):
        self.out, self.digest = out, digest

    def write(self, data):
        self.out.write(data)
        if self.digest is not None:
            self.digest.update(data)


def write_content(out, content):
    """Streams a tensor's bytes; the first time, also takes their SHA-256 when a named-data
    key needs it."""
    digest = hashlib.sha256() if content.named and content.digest is None else None
    write_pattern(HashingWriter(out, digest), content.identity, content.nbytes)
    if digest is not None:
        content.digest = digest.hexdigest()


def generate(args):
    constants, named = plan(args)
    segments, constant_offsets, blob_size = layout(constants, named)
    # Keys are 64 hex digits whatever the bytes, so a placeholder build has the final size.
    size = len(with_header(build_program(constants, named, segments, constant_offsets,
                                         ["0" * 64] * len(named)), 0, 0))
    base = align(size, SEGMENT_ALIGNMENT)
    data_size = segments[-1][0] + segments[-1][1]
    temporary = args.out + ".tmp"
    with open(temporary, "wb") as raw:
        out = HashingWriter(raw, None)  # buffered below by write_pattern's large writes
        raw.seek(base)
        for (content, _), offset in zip(constants, constant_offsets[1:]):
            raw.write(bytes(base + offset - raw.tell()))
            write_content(out, content)
        for content, (offset, _) in zip(named, segments[2:]):
            raw.write(bytes(base + offset - raw.tell()))
            write_content(out, content)
        keys = [content.digest for content in named]
        blob = BLOB_MAGIC + "".join(key + "\n" for key in keys).encode()
        assert len(blob) == blob_size
        raw.seek(base + segments[1][0])
        raw.write(blob)
        program = with_header(build_program(constants, named, segments, constant_offsets, keys),
                              base, data_size)
        assert len(program) == size, "placeholder and final programs differ in size"
        raw.seek(0)
        raw.write(program + bytes(base - size))
    os.replace(temporary, args.out)
    referenced = (sum(c.nbytes for c, _ in constants) + sum(c.nbytes for c in named))
    unique = {c.index: c.nbytes for c, _ in constants}
    unique.update({c.index: c.nbytes for c in named})
    report = {"format": "ptepack.bench.pte", "version": 1, "params": params_of(args),
              "file": os.path.basename(args.out), "file_bytes": os.path.getsize(args.out),
              "program_size": size, "segment_base_offset": base,
              "segment_data_size": data_size, "constants": len(constants),
              "named_data": len(named), "segments": len(segments),
              "delegate_blob_bytes": blob_size, "tensor_bytes": referenced,
              "unique_tensor_bytes": sum(unique.values()),
              "constant_bytes": sum(c.nbytes for c, _ in constants),
              "named_bytes": sum(c.nbytes for c in named)}
    if args.report:
        with open(args.report + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1, sort_keys=True)
            handle.write("\n")
        os.replace(args.report + ".tmp", args.report)
    return report


def params_of(args):
    """The options that determine the output (recorded in the report)."""
    return {"size": args.size, "named": args.named, "dup": args.dup,
            "max_tensor": args.max_tensor, "seed": args.seed}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output .pte file")
    parser.add_argument("--size", type=parse_size, default=parse_size("1GiB"),
                        help="tensor bytes, duplicates included (default 1GiB; K/M/G = 10^3.., "
                             "KiB/MiB/GiB = 2^10..)")
    parser.add_argument("--named", type=float, default=0.5,
                        help="share of tensors that are named data, not constants (default 0.5)")
    parser.add_argument("--dup", type=float, default=0.2,
                        help="fraction of the bytes that repeat another tensor (default 0.2)")
    parser.add_argument("--max-tensor", type=parse_size, default=None,
                        help="largest tensor (default size / 16, clamped to 64KiB..64MiB)")
    parser.add_argument("--seed", type=int, default=0, help="content seed (default 0)")
    parser.add_argument("--report", help="also write the generator's report (JSON) here")
    parser.add_argument("--quiet", action="store_true", help="print nothing")
    args = parser.parse_args(argv)
    if not 0.0 <= args.named <= 1.0 or not 0.0 <= args.dup < 1.0:
        parser.error("--named must be in [0, 1] and --dup in [0, 1)")
    if args.max_tensor is None:
        args.max_tensor = min(64 << 20, max(64 << 10, args.size // 16))
    if args.max_tensor < 16:
        parser.error("--max-tensor must be at least 16 bytes")
    return args


def main(argv=None):
    args = parse_args(argv)
    report = generate(args)
    if not args.quiet:
        print(f"{args.out}: {report['file_bytes']} bytes, {report['constants']} constants "
              f"({report['constant_bytes']} bytes), {report['named_data']} named data "
              f"({report['named_bytes']} bytes), {report['unique_tensor_bytes']} unique "
              f"tensor bytes of {report['tensor_bytes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
