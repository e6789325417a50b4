"""Typed results: the documented fields of each command's --json report (schema/*.json),
with the whole parsed document in `raw`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Shard:
    file: Optional[str]  # None in a dry run (names come from the written bytes)
    size: int
    payload_bytes: int
    keys: List[str]
    reused: bool = False  # kept whole from the --base release
    stale_bytes: int = 0


@dataclass(frozen=True)
class Program:
    file: str
    input: str
    methods: List[str]
    size: int
    shards: List[str]


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
    methods: List[Dict[str, str]]
    tensor_count: int
    stored_tensor_count: int
    referenced_bytes: int
    stored_bytes: int
    dedup_saved_bytes: int
    output_bytes: int
    input_bytes: int  # the inputs' files, each once (--base's aside)
    shards: List[Shard]
    programs: List[Program]
    notes: List[str]
    base: Optional[BaseRelease]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> "PackResult":
        shards = [Shard(s["file"], s["size"], s["payload_bytes"], s["keys"],
                        s.get("reused", False), s.get("stale_bytes", 0))
                  for s in doc.get("shards", [])]
        programs = [Program(p["file"], p["input"], p["methods"], p["size"], p["shards"])
                    for p in doc.get("programs", [])]
        base = BaseRelease(**doc["base"]) if doc.get("base") else None
        return cls(doc["output"], doc["kind"], doc["dry_run"], doc["methods"],
                   doc["tensor_count"], doc["stored_tensor_count"], doc["referenced_bytes"],
                   doc["stored_bytes"], doc["dedup_saved_bytes"], doc["output_bytes"],
                   doc["input_bytes"], shards,
                   programs, doc.get("notes", []), base, doc)


@dataclass(frozen=True)
class Problem:
    """One problem `verify` found: its stable identifier (docs/problems.md; never renamed
    or reused), the file it is in, and the line of text the CLI prints."""
    id: str
    file: str
    text: str


@dataclass(frozen=True)
class VerifyResult:
    """`ptepack verify --json` (schema/verify.schema.json)."""
    artifact: str
    kind: str
    ok: bool
    problems: List[str]
    notes: List[str]
    files_checked: int
    tensors_checked: int
    bytes_hashed: int
    raw: Dict[str, Any] = field(repr=False)
    signature: Optional[Dict[str, Any]] = None  # file, checked, valid, key_hint, key
    release: Optional[int] = None
    problem_details: List[Problem] = field(default_factory=list)  # `problems`, with ids

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> "VerifyResult":
        details = [Problem(p["id"], p["file"], p["text"])
                   for p in doc.get("problem_details", [])]
        return cls(doc["artifact"], doc["kind"], doc["ok"], doc["problems"], doc["notes"],
                   doc["files_checked"], doc["tensors_checked"], doc["bytes_hashed"], doc,
                   doc.get("signature"), doc.get("release"), details)


@dataclass(frozen=True)
class SignResult:
    """`ptepack sign --json`: the bundle written, the key's hint, files signed, release."""
    signature: str
    key_hint: str
    files: int
    release: Optional[int]

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> "SignResult":
        return cls(doc["signature"], doc["key_hint"], doc["files"], doc["release"])


@dataclass(frozen=True)
class DumpResult:
    """`ptepack dump --json` (schema/dump.schema.json): the artifact's kind and summary at
    hand; programs, tensors and shards as the schema gives them."""
    artifact: str
    kind: str
    summary: Dict[str, Any]
    shards: List[Dict[str, Any]]
    programs: List[Dict[str, Any]]
    tensors: Dict[str, Dict[str, Any]]  # key -> tensor; empty with tensors=False
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> "DumpResult":
        return cls(doc["artifact"], doc["kind"], doc["summary"], doc.get("shards", []),
                   doc.get("programs") or [], doc.get("tensors") or {}, doc)


@dataclass(frozen=True)
class DiffResult:
    """`ptepack diff --json` (schema/diff.schema.json). `equivalent` is False when any
    computation could tell the two apart (the CLI's exit 1)."""
    a: str
    b: str
    equivalent: bool
    differences: List[Dict[str, Any]]
    differences_omitted: int
    keys_added: List[str]
    keys_removed: List[str]
    keys_changed: List[Dict[str, Any]]
    notes: List[str]
    files: Optional[Dict[str, Any]]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> "DiffResult":
        return cls(doc["a"], doc["b"], doc["equivalent"], doc["differences"],
                   doc["differences_omitted"], doc["keys_added"], doc["keys_removed"],
                   doc["keys_changed"], doc["notes"], doc.get("files"), doc)
