"""Finding the ptepack executable, and running it with --json."""
from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple, Union

from .errors import CliNotFound, InternalError, PtepackIOError, error_for

PathLike = Union[str, "os.PathLike[str]"]

NOT_FOUND = ("ptepack not found: install it (pip install ptepack), set $PTEPACK, "
             "or pass ptepack=PATH")


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


@functools.lru_cache(maxsize=1)
def bundled_cli() -> Optional[str]:
    """The executable the ptepack wheel installed beside this module (the wheel's
    `ptepack-<v>.data/scripts/ptepack`, in the scheme's scripts directory), or None when the
    module was installed another way (from the source tree, or the .deb)."""
    try:  # written into the wheel only (scripts/make_wheel.py)
        _bundled = importlib.import_module(f"{__package__}._bundled")
    except ImportError:
        return None
    name: str = getattr(_bundled, "SCRIPT", "ptepack")
    marker = _bundled.__file__ or ""
    # The wheel's RECORD names where pip put the script, whatever the scheme (venv, --user,
    # --prefix, --target).
    try:
        from importlib import metadata
        here = os.path.realpath(marker)
        for dist in metadata.distributions(name="ptepack"):
            files = dist.files or []
            if not any(os.path.realpath(str(dist.locate_file(f))) == here for f in files
                       if f.name == "_bundled.py"):
                continue
            for f in files:
                if f.name == name and f.parent.name in ("bin", "Scripts"):
                    path = os.path.normpath(str(dist.locate_file(f)))
                    if _executable(path):
                        return path
    except Exception:  # metadata unreadable: fall back on the scheme's directory
        pass
    # A --user install's scripts are in the user scheme's; any other in the interpreter's.
    user = sysconfig.get_preferred_scheme("user") if sys.version_info >= (3, 10) else \
        f"{os.name}_user"
    site = os.path.realpath(os.path.dirname(os.path.dirname(marker)))
    scripts = [sysconfig.get_path("scripts")]
    if site == os.path.realpath(sysconfig.get_path("purelib", user)):
        scripts.insert(0, sysconfig.get_path("scripts", user))
    for directory in scripts:
        path = os.path.join(directory, name)
        if _executable(path):
            return path
    return None


def find_cli(ptepack: Optional[PathLike] = None) -> str:
    """The executable to run, in this order: `ptepack` if given, else $PTEPACK, else the
    binary the ptepack wheel installed, else `ptepack` on PATH. Raises CliNotFound (also a
    FileNotFoundError) when there is none."""
    if ptepack is not None and not isinstance(ptepack, (str, os.PathLike)):
        raise TypeError(f"ptepack must be a path, not {type(ptepack).__name__}")
    candidate = os.fspath(ptepack) if ptepack is not None else os.environ.get("PTEPACK")
    if candidate:
        if os.sep in candidate or (os.altsep and os.altsep in candidate):
            if _executable(candidate):
                return candidate
            raise CliNotFound(f"{candidate}: not an executable file", filename=candidate)
        found = shutil.which(candidate)
        if found is None:
            raise CliNotFound(f"{candidate}: not found on PATH", filename=candidate)
        return found
    found = bundled_cli() or shutil.which("ptepack")
    if found is None:
        raise CliNotFound(NOT_FOUND)
    return found


def run(command: str, args: Sequence[str], ptepack: Optional[PathLike],
        ok_codes: Iterable[int] = (0,)) -> Tuple[int, Dict[str, Any]]:
    """`ptepack COMMAND ARGS --json`: its exit code and parsed report, or the exception for
    its exit code."""
    argv = [find_cli(ptepack), command, *args, "--json"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as error:
        raise PtepackIOError(f"{argv[0]}: cannot run: {error}", argv=argv,
                             path=argv[0]) from error
    if done.returncode not in ok_codes:
        raise error_for(done.returncode, argv, done.stderr, done.stdout)
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        raise InternalError(f"{command} --json printed no JSON document: {error}", argv=argv,
                            stderr=done.stderr) from error
    if not isinstance(doc, dict):
        raise InternalError(f"{command} --json printed no JSON object", argv=argv,
                            stderr=done.stderr)
    return done.returncode, doc
