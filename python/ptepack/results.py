"""Typed results: the documented fields of each command's --json report (schema/*.json).

Every result is a frozen dataclass, and so is every object nested in it; lists are tuples
and key -> object tables read-only mappings, so a result cannot be changed once made. A
field the schema marks optional is None (or empty) when the document leaves it out. The
whole parsed document stays in each top-level result's `raw`, for fields this module does
not name.
"""
from __future__ import annotations

import dataclasses
import sys
import types
from dataclasses import dataclass, field
from typing import (Any, Dict, Mapping, Optional, Tuple, Type, TypeVar, Union, cast, get_args,
                    get_origin, get_type_hints)

T = TypeVar("T")


class SchemaError(ValueError):
    """A --json document lacks a field its schema requires (a CLI older or newer than the
    module): the field's dotted name."""


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return _HINTS[cls]


def _convert(hint: Any, value: Any, where: str) -> Any:
    """`value` (parsed JSON) as the type `hint` names: dataclasses built, lists made tuples,
    objects read-only mappings."""
    if value is None:
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    origin, args = get_origin(hint), get_args(hint)
    if origin is tuple:
        return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is Union:  # the option that fits: an object's dataclass, a list's tuple
        for option in args:
            if isinstance(option, type) and dataclasses.is_dataclass(option):
                fits = isinstance(value, Mapping)
            elif get_origin(option) is tuple:
                fits = isinstance(value, list)
            else:
                fits = option is not type(None) and not isinstance(value, (Mapping, list))
            if fits:
                return _convert(option, value, where)
        return value
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        return types.MappingProxyType(
            {k: _convert(args[1], v, f"{where}.{k}") for k, v in value.items()})
    return value


def _build(cls: Type[T], doc: Mapping[str, Any], where: str = "") -> T:
    """An instance of the dataclass `cls` from a JSON object: each field from the member of
    its name (or of `metadata["json"]`), converted to the field's type."""
    values: Dict[str, Any] = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cast(Any, cls)):
        name = f.metadata.get("json", f.name)
        if f.name == "raw":
            values["raw"] = doc
        elif name in doc:
            values[f.name] = _convert(hints[f.name], doc[name], f"{where}.{name}".lstrip("."))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SchemaError(f"{cls.__name__}: the document has no '{where}.{name}'"
                              .replace("'.", "'"))
    return cls(**values)


def _empty() -> Mapping[str, Any]:
    return types.MappingProxyType({})


# -- shared -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dim:
    """A dynamic dimension of a shape: its bounds (`max` None when unbounded)."""
    min: int
    max: Optional[int]


Shape = Tuple[Union[int, Dim], ...]
"""Sizes outer to inner; a dynamic dimension (program graphs' metadata) is a Dim."""


# -- pack -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PackedMethod:
    """A method of the output: its name, the input it came from, and its name there."""
    name: str
    input: str
    source_method: Optional[str] = None  # its name in the input (METHOD= renamed it)


@dataclass(frozen=True)
class Rename:
    """A key a rename rule changed in a method (`from_` is the JSON's `from`)."""
    method: str
    from_: str = field(metadata={"json": "from"})
    to: str


@dataclass(frozen=True)
class Shard:
    """A data file pack wrote (or would write, in a dry run)."""
    file: Optional[str]  # None in a dry run (names come from the written bytes)
    size: int
    payload_bytes: int
    keys: Tuple[str, ...]
    reused: bool = False  # kept whole from the --base release
    stale_bytes: int = 0


@dataclass(frozen=True)
class Program:
    """A .pte program pack wrote: its file, input, methods, size and the shards it loads."""
    file: str
    input: str
    methods: Tuple[str, ...]
    size: int
    shards: Tuple[str, ...]


@dataclass(frozen=True)
class BaseRelease:
    """What pack --base kept, and what a device holding the base downloads."""
    path: str
    fresh_reason: Optional[str]
    shards_reused: int
    shards_new: int
    stale_bytes: int
    stored_again_keys: int
    stored_again_bytes: int
    changed_bytes: int
    download_bytes: Optional[int]  # None in a dry run
    release_bytes: int


@dataclass(frozen=True)
class PackResult:
    """`ptepack pack --json` (schema/pack.schema.json)."""
    output: str
    kind: str
    dry_run: bool
    methods: Tuple[PackedMethod, ...]
    tensor_count: int
    stored_tensor_count: int
    referenced_bytes: int
    stored_bytes: int
    dedup_saved_bytes: int
    output_bytes: int
    input_bytes: int  # the inputs' files, each once (--base's aside)
    raw: Mapping[str, Any] = field(repr=False)
    renames: Tuple[Rename, ...] = ()
    state: Tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=_empty)  # alias -> owner key
    dropped_keys: int = 0
    dropped_bytes: int = 0
    shards: Tuple[Shard, ...] = ()
    programs: Tuple[Program, ...] = ()
    notes: Tuple[str, ...] = ()
    base: Optional[BaseRelease] = None  # with base= only
    shard_format: Optional[str] = None
    max_shard_bytes: Optional[int] = None
    cap_mode: Optional[str] = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "PackResult":
        """The result from the parsed --json document."""
        return _build(cls, doc)


# -- verify -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    """One problem `verify` found: its stable identifier (docs/problems.md; never renamed
    or reused), the file it is in, and the line of text the CLI prints."""
    id: str
    file: str
    text: str


@dataclass(frozen=True)
class Signature:
    """A signed release's signature: the bundle, whether public keys were given, whether
    one of them verified every file as signed, the key's hint and the key file that did."""
    file: str
    checked: bool
    valid: bool
    key_hint: str
    key: str


@dataclass(frozen=True)
class ProgramCheck:
    """A program `verify --program` checked: its file, and the files it loads with it (the
    program and its shards) with their bytes."""
    file: str
    files: int
    bytes: int


@dataclass(frozen=True)
class VerifyResult:
    """`ptepack verify --json` (schema/verify.schema.json)."""
    artifact: str
    kind: str
    ok: bool
    problems: Tuple[str, ...]
    notes: Tuple[str, ...]
    files_checked: int
    tensors_checked: int
    bytes_hashed: int
    raw: Mapping[str, Any] = field(repr=False)
    signature: Optional[Signature] = None
    release: Optional[int] = None
    problem_details: Tuple[Problem, ...] = ()  # `problems`, with ids
    newer_than: Optional[int] = None  # the bounds the release number passed
    min_release: Optional[int] = None
    programs: Tuple[ProgramCheck, ...] = ()  # verify --program

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "VerifyResult":
        """The result from the parsed --json document."""
        return _build(cls, doc)


# -- files ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReleaseFile:
    """One file of a packed directory: its name in the directory, size and SHA-256."""
    file: str
    size: int
    sha256: str


@dataclass(frozen=True)
class FilesResult:
    """`ptepack files --json` (schema/files.schema.json): what a device running `programs`
    downloads, and the bytes of it."""
    directory: str
    programs: Tuple[str, ...]
    files: Tuple[ReleaseFile, ...]
    bytes: int
    raw: Mapping[str, Any] = field(repr=False, default_factory=_empty)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "FilesResult":
        """The result from the parsed --json document."""
        return _build(cls, doc)


# -- sign -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignResult:
    """`ptepack sign --json`: the bundle written, the key's hint, files signed, release."""
    signature: str
    key_hint: str
    files: int
    release: Optional[int]
    raw: Mapping[str, Any] = field(repr=False, default_factory=_empty)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "SignResult":
        """The result from the parsed --json document."""
        return _build(cls, doc)


# -- dump -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """An artifact's key and byte totals."""
    key_count: int
    referenced_bytes: int
    stored_bytes: int
    dedup_saved_bytes: int
    alias_count: int
    unreferenced_keys: int
    unreferenced_bytes: int


@dataclass(frozen=True)
class DumpShard:
    """A data file of a packed directory: sizes, key count, fill of the cap."""
    file: str
    size: int
    payload_bytes: int
    key_count: int
    fill: Optional[float]
    stale_key_count: int = 0  # kept from a --base release: keys this release does not read


@dataclass(frozen=True)
class Tensor:
    """A key's tensor: dtype, shape, bytes, digest (None without hashing), and where it is."""
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int
    sha256: Optional[str]
    mutable: bool
    referenced: bool
    shard: Optional[str] = None
    alias_of: Optional[str] = None
    file: Optional[str] = None  # offsets=True
    offset: Optional[int] = None  # offsets=True


@dataclass(frozen=True)
class Value:
    """A graph method's input or output: name, dtype and shape (None when not a tensor)."""
    name: str
    dtype: Optional[str]
    shape: Optional[Shape]


@dataclass(frozen=True)
class OutputSpec:
    """What a graph method's output is (a user output, a buffer mutation, ...)."""
    name: str
    kind: str
    target: str


@dataclass(frozen=True)
class Constant:
    """A graph method's constant (parameter, buffer or lifted tensor) and its key."""
    name: str
    key: str
    kind: str
    mutated: bool
    quantized: bool
    dtype: str
    shape: Shape


@dataclass(frozen=True)
class MutableBuffer:
    """A graph method's mutable buffer and its key."""
    name: str
    key: str


@dataclass(frozen=True)
class NodeArg:
    """An argument of a graph node, as text."""
    name: str
    value: str
    mutated: bool = False


@dataclass(frozen=True)
class Subgraph:
    """A subgraph a graph node calls: its inputs, outputs and nodes."""
    name: str
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    nodes: Tuple["Node", ...]


@dataclass(frozen=True)
class Node:
    """A node of a graph method (dump(graph=True))."""
    name: str
    op: str
    target: str = ""
    args: Tuple[NodeArg, ...] = ()
    outputs: Tuple[str, ...] = ()
    subgraphs: Tuple[Subgraph, ...] = ()


@dataclass(frozen=True)
class GraphMethod:
    """A method of a program graph: its signature, constants and size."""
    name: str
    inputs: Tuple[Value, ...]
    outputs: Tuple[Value, ...]
    output_specs: Tuple[OutputSpec, ...]
    constants: Tuple[Constant, ...]
    mutable_buffers: Tuple[MutableBuffer, ...]
    nodes: int
    subgraphs: int
    graph: Optional[Tuple[Node, ...]] = None  # dump(graph=True)


@dataclass(frozen=True)
class GraphProgram:
    """A program graph's version and methods."""
    version: str
    methods: Tuple[GraphMethod, ...]


@dataclass(frozen=True)
class Header:
    """A .pte program's `eh00` extended header."""
    program_size: int
    segment_base_offset: int
    segment_data_size: int


@dataclass(frozen=True)
class Delegate:
    """A delegate of a .pte method: backend id, blob size, inline or segment, index."""
    id: str
    bytes: int
    location: str
    index: int


@dataclass(frozen=True)
class PteMethod:
    """A method (execution plan) of a .pte program: its inputs and outputs as text,
    operators, value count, delegates, and its instructions with dump(graph=True)."""
    name: str
    inputs: Tuple[str, ...] = ()
    outputs: Tuple[str, ...] = ()
    operators: Tuple[str, ...] = ()
    values: int = 0
    delegates: Tuple[Delegate, ...] = ()
    instructions: Optional[Tuple[str, ...]] = None


@dataclass(frozen=True)
class StoredTensor:
    """A tensor with stored bytes in a .pte program, and where they live (`storage`;
    `key` is the data file key of an EXTERNAL tensor, else empty)."""
    method: str
    value: int
    dtype: Optional[str]
    shape: Tuple[int, ...]
    nbytes: int
    storage: str
    dim_order: Tuple[int, ...] = ()
    sha256: str = ""
    key: str = ""


@dataclass(frozen=True)
class NamedData:
    """A .pte program's named data entry: key, bytes, segment, keys sharing the bytes."""
    key: str
    nbytes: int
    segment: Optional[int] = None
    sha256: str = ""
    shares_bytes_with: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Segment:
    """A segment of a .pte program: offset and size in bytes."""
    offset: int
    size: int


@dataclass(frozen=True)
class ProgramFile:
    """One .pte program (docs/dump-and-verify.md); `shards`, `data_bytes_loaded` and
    `data_bytes_used` for a program of a directory only."""
    file: str
    size: int
    methods: Tuple[PteMethod, ...]
    stored_tensors: Tuple[StoredTensor, ...]
    named_data: Tuple[NamedData, ...]
    segments: Tuple[Segment, ...]
    bytes_in_program: int
    bytes_in_data_files: int
    header: Optional[Header] = None
    not_rewritable: Tuple[str, ...] = ()
    shards: Optional[Tuple[str, ...]] = None
    data_bytes_loaded: Optional[int] = None
    data_bytes_used: Optional[int] = None


@dataclass(frozen=True)
class Tally:
    """Keys and bytes under one name (a method, dtype or shard)."""
    name: str
    keys: int
    bytes: int


@dataclass(frozen=True)
class LargeTensor:
    """One of the largest tensors."""
    key: str
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class Breakdown:
    """dump(summary=True): bytes by method, dtype and shard, and the largest tensors."""
    tensor_count: int
    by_method: Tuple[Tally, ...]
    by_dtype: Tuple[Tally, ...]
    by_shard: Tuple[Tally, ...]
    largest: Tuple[LargeTensor, ...]


@dataclass(frozen=True)
class DumpResult:
    """`ptepack dump --json` (schema/dump.schema.json): the artifact's kind and summary,
    its shards, its .pte programs or program graph, and its tensors by key."""
    artifact: str
    kind: str
    summary: Summary
    raw: Mapping[str, Any] = field(repr=False)
    shards: Tuple[DumpShard, ...] = ()
    programs: Tuple[ProgramFile, ...] = ()
    tensors: Mapping[str, Tensor] = field(default_factory=_empty)  # empty: tensors=False
    program: Optional[GraphProgram] = None  # a program graph's methods
    state: Tuple[str, ...] = ()
    shard_format: Optional[str] = None
    max_shard_bytes: Optional[int] = None
    cap_mode: Optional[str] = None
    breakdown: Optional[Breakdown] = None  # summary=True
    notes: Tuple[str, ...] = ()

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "DumpResult":
        """The result from the parsed --json document."""
        return _build(cls, doc)


# -- diff -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProgramPair:
    """.pte programs paired across the sides (`a` None: added in b; `b` None: removed)."""
    a: Optional[str]
    b: Optional[str]


@dataclass(frozen=True)
class MethodChange:
    """A method added, removed or changed."""
    program: Optional[str]
    method: str
    change: str


@dataclass(frozen=True)
class TensorSide:
    """A changed key's tensor on one side."""
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int
    sha256: str


@dataclass(frozen=True)
class KeyChange:
    """A key in both sides whose bytes, dtype or shape differ (`changes` says which)."""
    key: str
    changes: Tuple[str, ...]
    a: TensorSide
    b: TensorSide


@dataclass(frozen=True)
class Difference:
    """Something a computation could tell apart: where, of what kind, and its text."""
    program: Optional[str]
    method: Optional[str]
    what: str
    text: str


@dataclass(frozen=True)
class FileEntry:
    """A file of a packed directory, by name, size and SHA-256."""
    file: str
    size: int
    sha256: str


@dataclass(frozen=True)
class FileChanges:
    """Two packed directories' files: added, removed, unchanged, and the bytes to fetch."""
    added: Tuple[FileEntry, ...]
    removed: Tuple[FileEntry, ...]
    unchanged: Tuple[FileEntry, ...]
    download_bytes: int


@dataclass(frozen=True)
class DiffResult:
    """`ptepack diff --json` (schema/diff.schema.json). `equivalent` is False when any
    computation could tell the two apart (the CLI's exit 1)."""
    a: str
    b: str
    equivalent: bool
    differences: Tuple[Difference, ...]
    differences_omitted: int
    keys_added: Tuple[str, ...]
    keys_removed: Tuple[str, ...]
    keys_changed: Tuple[KeyChange, ...]
    notes: Tuple[str, ...]
    files: Optional[FileChanges]  # both sides packed directories
    raw: Mapping[str, Any] = field(repr=False)
    programs: Tuple[ProgramPair, ...] = ()
    methods: Tuple[MethodChange, ...] = ()
    state_added: Tuple[str, ...] = ()
    state_removed: Tuple[str, ...] = ()

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "DiffResult":
        """The result from the parsed --json document."""
        return _build(cls, doc)


# -- version ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class FormatVersion:
    """A file format the CLI writes, and the version it writes (`ptepack --version`'s
    `writes:` line): e.g. file ".ptd", version "FlatTensor FT01 version 0"."""
    file: str
    version: str


@dataclass(frozen=True)
class Version:
    """`ptepack --version`: the CLI's version (e.g. "0.2.0"), the formats it writes, and
    the whole text. `str()` gives the first line ("ptepack 0.2.0")."""
    cli: str
    formats: Tuple[FormatVersion, ...]
    text: str = field(repr=False)

    def __str__(self) -> str:
        return self.text.splitlines()[0] if self.text else f"ptepack {self.cli}"

    @classmethod
    def from_text(cls, text: str) -> "Version":
        """Parse `ptepack --version`'s output."""
        lines = text.splitlines()
        first = lines[0].split() if lines else []
        cli = first[1] if len(first) > 1 else ""
        formats = []
        for line in lines[1:]:
            if not line.startswith("writes:"):
                continue
            for item in line[len("writes:"):].split(";"):
                name, _, version = item.strip().partition(" ")
                if name:
                    formats.append(FormatVersion(name, version.strip()))
        return cls(cli, tuple(formats), text)
