"""Call ptepack from a Python export script.

Each function runs the ptepack CLI with --json, returns its report as a frozen dataclass
(ptepack.results), and raises one exception class per documented exit code
(ptepack.errors), all PtepackErrors carrying the CLI's one-line message; a missing input is
also a FileNotFoundError, any read or write failure an OSError. The CLI is the `ptepack=`
path given, else $PTEPACK, else the binary the ptepack wheel installed, else `ptepack` on
PATH. Options are keyword arguments named like the CLI's long options
(`max_shard_bytes="1GB"` is `--max-shard-bytes 1GB`; True is a flag, None or False leaves
an option out); a wrong type is a TypeError and a wrong value a ValueError, before anything
runs.

    import ptepack
    result = ptepack.pack(["model.pte"], output="dist/model", max_shard_bytes="1GB")
    assert ptepack.verify("dist/model").ok
"""
from __future__ import annotations

import difflib
import inspect
import os
import subprocess
from typing import Any, Dict, List, Optional, Sequence, Union

from ._cli import PathLike, find_cli, run as _run
from .errors import (CliNotFound, ConflictError, InternalError, Interrupted,
                     InvalidInputError, PtepackError, PtepackFileNotFoundError,
                     PtepackIOError, UsageError, VerifyFailed, error_for)
from .results import (BaseRelease, DiffResult, DumpResult, FilesResult, PackResult, Problem,
                      Program, ProgramCheck, ReleaseFile, Shard, SignResult, Version,
                      VerifyResult)

__version__ = "0.2.0"
"""The module's version (python/pyproject.toml's); the wheel's CLI has the same."""

__all__ = [
    "__version__", "pack", "dump", "verify", "diff", "sign", "files", "version", "find_cli",
    "FilesResult", "ReleaseFile", "ProgramCheck",
    "PackResult", "VerifyResult", "Problem", "SignResult", "DumpResult", "DiffResult", "Shard",
    "Program", "BaseRelease", "Version", "PtepackError", "VerifyFailed", "UsageError",
    "InvalidInputError", "ConflictError", "PtepackIOError", "PtepackFileNotFoundError",
    "InternalError", "Interrupted", "CliNotFound",
]


# CLI options a function passes through its **options (the others are its own keyword
# parameters; --json, --help and -o are the module's own).
_PASS_THROUGH = {
    "pack": ("release", "sign", "key_password_file", "key_password_env", "quiet", "verbose",
             "progress"),
    "dump": ("graph", "top", "width", "progress"),
    "verify": ("signature", "min_release", "progress"),
    "diff": (),
    "files": (),
}

# The type each keyword takes, checked before the CLI runs (Python's words: a wrong type is
# a TypeError, a negative count a ValueError).
_COUNTS = {"jobs", "max_shard_tensors", "alignment", "constant_alignment", "newer_than",
           "release", "top", "width", "min_release"}
_PATHS = {"output", "base", "path", "a", "b", "directory", "private_key", "key_password_file",
          "sign", "merge", "signature"}
_FLAGS = {"share_state", "dry_run", "force", "strict", "check", "summary", "tensors",
          "offsets", "hash_tensors", "quiet", "verbose"}
_TEXTS = {"cap_mode", "shard_format", "oversize", "placement", "shard_prefix", "sort",
          "key_password_env", "progress", "shard"}
_TEXT_LISTS = {"key", "program"}
_PATH_LISTS = {"public_key"}


def _type_name(value: Any) -> str:
    return type(value).__name__


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def _check_value(function: str, name: str, value: Any) -> None:
    """A TypeError or ValueError naming `function`'s argument when `value` is not what the
    CLI option takes (None is always an option left out)."""
    if value is None:
        return
    where = f"{function}() argument '{name}'"
    if name in _COUNTS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where} must be int, not {_type_name(value)}")
        if value < 0:
            raise ValueError(f"{where} must be >= 0, not {value}")
    elif name == "max_shard_bytes":
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError(f"{where} must be int or str (e.g. '1GB'), not {_type_name(value)}")
        if isinstance(value, int) and value <= 0:
            raise ValueError(f"{where} must be > 0, not {value}")
    elif name in _PATHS:
        if not _is_path(value):
            raise TypeError(f"{where} must be str or os.PathLike, not {_type_name(value)}")
    elif name in _FLAGS:
        if not isinstance(value, bool):
            raise TypeError(f"{where} must be bool, not {_type_name(value)}")
    elif name in _TEXTS:
        if not isinstance(value, str):
            raise TypeError(f"{where} must be str, not {_type_name(value)}")
    elif name in _TEXT_LISTS or name in _PATH_LISTS or name == "method":
        items = [value] if isinstance(value, (str, os.PathLike)) else value
        ok = _is_path if name in _PATH_LISTS else (lambda v: isinstance(v, str))
        if isinstance(items, (bytes, bytearray)) or not isinstance(items, (list, tuple)) \
                or not all(ok(i) for i in items):
            raise TypeError(f"{where} must be str or a list of str, not {_type_name(value)}")
    elif name == "graph":
        if not isinstance(value, (bool, str)):
            raise TypeError(f"{where} must be bool or str ('text', 'dot'), not "
                            f"{_type_name(value)}")


def _check_options(function: Any, values: Dict[str, Any], options: Dict[str, Any]) -> None:
    """Every argument of `function` checked: a keyword no CLI option takes is a TypeError
    naming it (with the nearest one), as Python reports a misspelt keyword; a value of the
    wrong type a TypeError; a negative count a ValueError."""
    allowed = _PASS_THROUGH.get(function.__name__, ())
    for name in options:
        if name in allowed:
            continue
        known = [p for p in inspect.signature(function).parameters if p != "options"]
        near = difflib.get_close_matches(name, known + list(allowed), n=1)
        raise TypeError(f"{function.__name__}() got an unexpected keyword argument '{name}'"
                        + (f"; did you mean '{near[0]}'?" if near else ""))
    for name, value in {**values, **options}.items():
        _check_value(function.__name__, name, value)


def _options(options: Dict[str, Any]) -> List[str]:
    """Keyword arguments as CLI options: name_with_underscores -> --name-with-underscores."""
    argv: List[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                argv += [flag, os.fspath(item) if isinstance(item, os.PathLike) else str(item)]
        else:
            argv += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return argv


def _paths(function: str, inputs: Any) -> List[str]:
    """One path or a sequence of them, as strings (a TypeError for anything else, a
    ValueError for none)."""
    if _is_path(inputs):
        return [os.fspath(inputs)]
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"{function}() argument 'inputs' must be a path or a list of paths, "
                        f"not {_type_name(inputs)}")
    for item in inputs:
        if not _is_path(item):
            raise TypeError(f"{function}() argument 'inputs' must hold str or os.PathLike, "
                            f"not {_type_name(item)}")
    if not inputs:
        raise ValueError(f"{function}() needs at least one input")
    return [os.fspath(i) for i in inputs]


def pack(inputs: Union[PathLike, Sequence[PathLike]], output: PathLike, *,
         ptepack: Optional[PathLike] = None, jobs: Optional[int] = None,
         max_shard_bytes: Union[str, int, None] = None, cap_mode: Optional[str] = None,
         shard_format: Optional[str] = None, oversize: Optional[str] = None,
         max_shard_tensors: Optional[int] = None, placement: Optional[str] = None,
         base: Optional[PathLike] = None, shard_prefix: Optional[str] = None,
         alignment: Optional[int] = None, merge: Optional[str] = None,
         method: Union[str, Sequence[str], None] = None, share_state: bool = False,
         constant_alignment: Optional[int] = None, dry_run: bool = False, force: bool = False,
         **options: Any) -> PackResult:
    """`ptepack pack INPUTS -o OUTPUT`: inputs are paths (`[METHOD=]PATH[@DATA,...]` strings,
    `NEW=PATH` renaming a .pte program's method). `merge="m.pte"` merges .pte inputs into
    one program of a directory output, `method` keeps only those methods, `share_state`
    shares mutable buffers between merged methods, `constant_alignment` forces the padding
    of a .pte output's constants. Further CLI options pass through `options`."""
    paths = _paths("pack", inputs)
    own = dict(jobs=jobs, max_shard_bytes=max_shard_bytes, cap_mode=cap_mode,
               shard_format=shard_format, oversize=oversize,
               max_shard_tensors=max_shard_tensors, placement=placement, base=base,
               shard_prefix=shard_prefix, alignment=alignment, merge=merge,
               method=[method] if isinstance(method, str) else method,
               share_state=share_state, constant_alignment=constant_alignment,
               dry_run=dry_run, force=force)
    _check_options(pack, dict(own, output=output), options)
    args = paths + ["-o", os.fspath(output)] + _options(dict(own, **options))
    return PackResult.from_json(_run("pack", args, ptepack)[1])


def verify(path: PathLike, *, ptepack: Optional[PathLike] = None, jobs: Optional[int] = None,
           strict: bool = False, check: bool = False, tensors: bool = False,
           public_key: Union[PathLike, Sequence[PathLike], None] = None,
           newer_than: Optional[int] = None, program: Union[str, Sequence[str], None] = None,
           **options: Any) -> VerifyResult:
    """`ptepack verify PATH`. An artifact with problems gives ok=False (the CLI's exit 1),
    or raises VerifyFailed with its problem lines when check=True. `public_key` (one or
    several) checks a signed release; `newer_than` refuses a rollback; `program` (one or
    several) checks only those programs of a directory of programs and the files they
    load, as a device holding just those files does. `tensors=True` also hashes each
    tensor of a packed directory against its recorded digest (each file is hashed once
    either way)."""
    own = dict(jobs=jobs, strict=strict, tensors=tensors,
               public_key=[public_key] if _is_path(public_key) else public_key,
               newer_than=newer_than,
               program=[program] if isinstance(program, str) else program)
    _check_options(verify, dict(own, path=path, check=check), options)
    args = [os.fspath(path)] + _options(dict(own, **options))
    code, doc = _run("verify", args, ptepack, ok_codes=(0, 1))
    result = VerifyResult.from_json(doc)
    if check and not result.ok:
        problems = result.problems or result.notes
        raise VerifyFailed(problems[0] if problems else f"{result.artifact}: not whole",
                           exit_code=code, lines=problems, problems=result.problem_details)
    return result


def dump(path: PathLike, *, ptepack: Optional[PathLike] = None, jobs: Optional[int] = None,
         summary: bool = False, tensors: bool = True, offsets: bool = False,
         key: Union[str, Sequence[str], None] = None, method: Optional[str] = None,
         shard: Optional[str] = None, sort: Optional[str] = None, hash_tensors: bool = True,
         **options: Any) -> DumpResult:
    """`ptepack dump PATH`: any artifact, as its JSON report. `tensors=False` leaves the key
    table out, `hash_tensors=False` the digests; `graph=True` adds every node."""
    _check_options(dump, dict(path=path, jobs=jobs, summary=summary, tensors=tensors,
                              offsets=offsets, key=key, method=method, shard=shard, sort=sort,
                              hash_tensors=hash_tensors), options)
    if method is not None and not isinstance(method, str):
        raise TypeError(f"dump() argument 'method' must be str, not {_type_name(method)}")
    args = [os.fspath(path)] + _options(dict(
        jobs=jobs, summary=summary, no_tensors=not tensors, offsets=offsets,
        key=[key] if isinstance(key, str) else key, method=method, shard=shard, sort=sort,
        no_hash=not hash_tensors, **options))
    return DumpResult.from_json(_run("dump", args, ptepack)[1])


def diff(a: PathLike, b: PathLike, *, ptepack: Optional[PathLike] = None,
         jobs: Optional[int] = None, method: Optional[str] = None,
         **options: Any) -> DiffResult:
    """`ptepack diff A B`: equivalent=False when anything a runtime computes differs;
    `method="M"` or `"M=N"` compares one method of each side."""
    _check_options(diff, dict(a=a, b=b, jobs=jobs, method=method), options)
    if method is not None and not isinstance(method, str):
        raise TypeError(f"diff() argument 'method' must be str, not {_type_name(method)}")
    args = [os.fspath(a), os.fspath(b)] + _options(dict(jobs=jobs, method=method, **options))
    return DiffResult.from_json(_run("diff", args, ptepack, ok_codes=(0, 1))[1])


def sign(directory: PathLike, private_key: PathLike, *, ptepack: Optional[PathLike] = None,
         key_password_file: Optional[PathLike] = None, key_password_env: Optional[str] = None,
         jobs: Optional[int] = None) -> SignResult:
    """`ptepack sign DIR --private-key KEY`: the release checked whole, then signed
    (DIR/model.sig, OpenSSF Model Signing). The passphrase of an encrypted key comes from a
    file or from the environment variable named, never from an argument."""
    own = dict(private_key=private_key, key_password_file=key_password_file,
               key_password_env=key_password_env, jobs=jobs)
    _check_options(sign, dict(own, directory=directory), {})
    args = [os.fspath(directory)] + _options(own)
    return SignResult.from_json(_run("sign", args, ptepack)[1])


def files(directory: PathLike, *, program: Union[str, Sequence[str], None] = None,
          ptepack: Optional[PathLike] = None) -> FilesResult:
    """`ptepack files DIR --program NAME`: the files a device running those programs (every
    program when none is named) downloads from a directory of programs, with their sizes and
    SHA-256 digests."""
    own = dict(program=[program] if isinstance(program, str) else program)
    _check_options(files, dict(own, directory=directory), {})
    args = [os.fspath(directory)] + _options(own)
    return FilesResult.from_json(_run("files", args, ptepack)[1])


def version(*, ptepack: Optional[PathLike] = None) -> Version:
    """`ptepack --version` as a Version: the CLI's version (`.cli`, e.g. "0.2.0") and the
    file formats and versions it writes (`.formats`); `str()` is its first line."""
    argv = [find_cli(ptepack), "--version"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise error_for(done.returncode, argv, done.stderr, done.stdout)
    return Version.from_text(done.stdout)
