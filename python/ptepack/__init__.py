"""Call ptepack from a Python export script.

Each function runs the ptepack CLI (found on PATH, or the `ptepack=` path given, or the
PTEPACK environment variable) with --json, returns the parsed report as a typed result, and
raises one exception class per documented exit code (ptepack.errors) carrying the CLI's
one-line message. Options are keyword arguments named like the CLI's long options
(`max_shard_bytes="1GB"` is `--max-shard-bytes 1GB`; True is a flag, None or False leaves
an option out).

    import ptepack
    result = ptepack.pack(["model.pte"], output="dist/model", max_shard_bytes="1GB")
    assert ptepack.verify("dist/model").ok
"""
from __future__ import annotations

import difflib
import inspect
import json
import os
import shutil
import subprocess
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from .errors import (CliNotFound, ConflictError, InternalError, Interrupted,
                     InvalidInputError, PtepackError, PtepackIOError, UsageError,
                     VerifyFailed, error_for)
from .results import (BaseRelease, DiffResult, DumpResult, PackResult, Problem, Program, Shard,
                      SignResult, VerifyResult)

__all__ = [
    "pack", "dump", "verify", "diff", "sign", "version", "find_cli",
    "PackResult", "VerifyResult", "Problem", "SignResult", "DumpResult", "DiffResult", "Shard", "Program",
    "BaseRelease", "PtepackError", "VerifyFailed", "UsageError", "InvalidInputError",
    "ConflictError", "PtepackIOError", "InternalError", "Interrupted", "CliNotFound",
]

PathLike = Union[str, "os.PathLike[str]"]


def find_cli(ptepack: Optional[PathLike] = None) -> str:
    """The executable to run: `ptepack` if given, else $PTEPACK, else `ptepack` on PATH."""
    candidate = os.fspath(ptepack) if ptepack is not None else os.environ.get("PTEPACK")
    if candidate:
        if os.sep in candidate or (os.altsep and os.altsep in candidate):
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
            raise CliNotFound(f"{candidate}: not an executable file")
        found = shutil.which(candidate)
    else:
        found = shutil.which("ptepack")
    if found is None:
        raise CliNotFound("ptepack not found on PATH (install it, or pass ptepack=PATH)")
    return found


# CLI options a function passes through its **options (the others are its own keyword
# parameters; --json, --help and -o are the module's own).
_PASS_THROUGH = {
    "pack": ("release", "sign", "key_password_file", "key_password_env", "quiet", "verbose",
             "progress"),
    "dump": ("graph", "top", "width", "progress"),
    "verify": ("signature", "min_release", "progress"),
    "diff": (),
}


def _check_options(function: Any, options: Dict[str, Any]) -> None:
    """A keyword no CLI option takes is a TypeError naming it (with the nearest one), as
    Python reports a misspelt keyword, before anything runs."""
    allowed = _PASS_THROUGH[function.__name__]
    for name in options:
        if name in allowed:
            continue
        known = [p for p in inspect.signature(function).parameters if p != "options"]
        near = difflib.get_close_matches(name, known + list(allowed), n=1)
        raise TypeError(f"{function.__name__}() got an unexpected keyword argument '{name}'"
                        + (f"; did you mean '{near[0]}'?" if near else ""))


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


def _run(command: str, args: Sequence[str], ptepack: Optional[PathLike],
         ok_codes: Iterable[int] = (0,)) -> "tuple[int, Dict[str, Any]]":
    argv = [find_cli(ptepack), command, *args, "--json"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as error:
        raise PtepackIOError(f"{argv[0]}: cannot run: {error}", argv=argv) from error
    if done.returncode not in ok_codes:
        raise error_for(done.returncode, argv, done.stderr)
    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError as error:
        raise InternalError(f"{command} --json printed no JSON document: {error}", argv=argv,
                            stderr=done.stderr) from error


def _paths(inputs: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    if isinstance(inputs, (str, os.PathLike)):
        return [os.fspath(inputs)]
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
    _check_options(pack, options)
    args = _paths(inputs) + ["-o", os.fspath(output)]
    methods = [method] if isinstance(method, str) else method
    args += _options(dict(jobs=jobs, max_shard_bytes=max_shard_bytes, cap_mode=cap_mode,
                          shard_format=shard_format, oversize=oversize,
                          max_shard_tensors=max_shard_tensors, placement=placement, base=base,
                          shard_prefix=shard_prefix, alignment=alignment, merge=merge,
                          method=methods, share_state=share_state,
                          constant_alignment=constant_alignment, dry_run=dry_run,
                          force=force, **options))
    return PackResult.from_json(_run("pack", args, ptepack)[1])


def verify(path: PathLike, *, ptepack: Optional[PathLike] = None, jobs: Optional[int] = None,
           strict: bool = False, check: bool = False,
           public_key: Union[PathLike, Sequence[PathLike], None] = None,
           newer_than: Optional[int] = None, **options: Any) -> VerifyResult:
    """`ptepack verify PATH`. An artifact with problems gives ok=False (the CLI's exit 1),
    or raises VerifyFailed with its problem lines when check=True. `public_key` (one or
    several) checks a signed release; `newer_than` refuses a rollback."""
    _check_options(verify, options)
    keys = [public_key] if isinstance(public_key, (str, os.PathLike)) else public_key
    args = [os.fspath(path)] + _options(dict(jobs=jobs, strict=strict, public_key=keys,
                                             newer_than=newer_than, **options))
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
    """`ptepack dump PATH`: any artifact, as its JSON report."""
    _check_options(dump, options)
    keys = [key] if isinstance(key, str) else key
    args = [os.fspath(path)] + _options(dict(
        jobs=jobs, summary=summary, no_tensors=not tensors, offsets=offsets, key=keys,
        method=method, shard=shard, sort=sort, no_hash=not hash_tensors, **options))
    return DumpResult.from_json(_run("dump", args, ptepack)[1])


def diff(a: PathLike, b: PathLike, *, ptepack: Optional[PathLike] = None,
         jobs: Optional[int] = None, method: Optional[str] = None,
         **options: Any) -> DiffResult:
    """`ptepack diff A B`: equivalent=False when anything a runtime computes differs;
    `method="M"` or `"M=N"` compares one method of each side."""
    _check_options(diff, options)
    args = [os.fspath(a), os.fspath(b)] + _options(dict(jobs=jobs, method=method, **options))
    return DiffResult.from_json(_run("diff", args, ptepack, ok_codes=(0, 1))[1])


def sign(directory: PathLike, private_key: PathLike, *, ptepack: Optional[PathLike] = None,
         key_password_file: Optional[PathLike] = None, key_password_env: Optional[str] = None,
         jobs: Optional[int] = None) -> SignResult:
    """`ptepack sign DIR --private-key KEY`: the release checked whole, then signed
    (DIR/model.sig, OpenSSF Model Signing). The passphrase of an encrypted key comes from a
    file or from the environment variable named, never from an argument."""
    args = [os.fspath(directory)] + _options(dict(
        private_key=private_key, key_password_file=key_password_file,
        key_password_env=key_password_env, jobs=jobs))
    return SignResult.from_json(_run("sign", args, ptepack)[1])


def version(*, ptepack: Optional[PathLike] = None) -> str:
    """The CLI's version string (`ptepack --version`)."""
    argv = [find_cli(ptepack), "--version"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise error_for(done.returncode, argv, done.stderr)
    return done.stdout.splitlines()[0].strip() if done.stdout else ""
