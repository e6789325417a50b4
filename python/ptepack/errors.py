"""One exception class per documented exit code of the ptepack CLI (README, "Exit codes").

Every class derives from PtepackError, so `except PtepackError` catches any failure of the
CLI. The input/output failures are also OSErrors (`except OSError` works), and a missing
input or a missing CLI is also a FileNotFoundError carrying `filename` and `errno.ENOENT`.
"""
from __future__ import annotations

import errno as _errno
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Type


class PtepackError(Exception):
    """A ptepack command failed.

    `message` is the CLI's one-line error (its error document's `message`, the first line of
    stderr without its "ptepack: error: " prefix); `lines` holds every problem line; `path`
    is the file the message is about (or None) and `problem` its problem identifier
    (docs/problems.md) when one applies. `str(error)` is `message`.
    """

    exit_code: Optional[int] = None

    def __init__(self, message: str, *, exit_code: Optional[int] = None,
                 argv: Sequence[str] = (), stderr: str = "",
                 lines: Sequence[str] = (), problems: Sequence[Any] = (),
                 path: Optional[str] = None, problem: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code
        self.argv = list(argv)
        self.stderr = stderr
        self.lines = list(lines) or [message]
        self.path = path
        self.problem = problem
        # verify(check=True): each problem with its stable identifier (results.Problem).
        self.problems = list(problems)

    def __str__(self) -> str:
        return self.message

    @property
    def problem_ids(self) -> List[str]:
        """The identifiers of `problems` (docs/problems.md), in order."""
        return [p.id for p in self.problems]


class VerifyFailed(PtepackError):
    """Exit 1: pack was given a damaged packed directory (verify's problem lines), or
    verify(check=True) found problems (then `problems` and `problem_ids` name each one)."""
    exit_code = 1


class UsageError(PtepackError):
    """Exit 2: a bad option or INPUT, or an output that would overwrite an input."""
    exit_code = 2


class InvalidInputError(PtepackError):
    """Exit 3: a malformed, truncated or corrupt file, or a rule of the graph or data broken."""
    exit_code = 3


class ConflictError(PtepackError):
    """Exit 4: two keys with one final name, state disagreeing across methods, a tensor
    larger than the shard cap, a named-data key with different bytes in two programs."""
    exit_code = 4


class PtepackIOError(PtepackError, OSError):
    """Exit 5: a read or write failure. Also an OSError: `filename` is the file the CLI
    named (or None)."""
    exit_code = 5

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.filename = self.path


class PtepackFileNotFoundError(PtepackIOError, FileNotFoundError):
    """Exit 5 for an input that does not exist. Also a FileNotFoundError: `errno` is
    errno.ENOENT and `filename` the missing path."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.errno = _errno.ENOENT
        self.strerror = os.strerror(_errno.ENOENT)


class InternalError(PtepackError):
    """Exit 70: a bug in ptepack."""
    exit_code = 70


class Interrupted(PtepackError):
    """Exit 130 or 143: interrupted by SIGINT or SIGTERM (the temporary output removed)."""
    exit_code = 130


class CliNotFound(PtepackError, FileNotFoundError):
    """The ptepack executable was not found (not bundled, not on PATH, or not at the path
    given). Also a FileNotFoundError with errno.ENOENT; `filename` is the path tried, if
    one was given."""

    def __init__(self, message: str, *, filename: Optional[str] = None) -> None:
        super().__init__(message, path=filename)
        self.errno = _errno.ENOENT
        self.strerror = os.strerror(_errno.ENOENT)
        self.filename = filename


ERRORS: Dict[int, Type[PtepackError]] = {
    1: VerifyFailed, 2: UsageError, 3: InvalidInputError, 4: ConflictError,
    5: PtepackIOError, 70: InternalError, 130: Interrupted, 143: Interrupted,
}

# The CLI's words for an input that is not there (its messages are "<file>: no such file or
# directory", and "... missing" for a file a manifest lists).
_MISSING = ("no such file", "missing", "does not exist")


def _error_document(stdout: str) -> Optional[Mapping[str, Any]]:
    """The `{"error": {...}}` document --json prints on a failure (schema/error.schema.json),
    or None when stdout holds none."""
    import json
    try:
        doc = json.loads(stdout)
    except ValueError:
        return None
    error = doc.get("error") if isinstance(doc, dict) else None
    return error if isinstance(error, dict) else None


def error_for(exit_code: int, argv: Sequence[str], stderr: str,
              stdout: str = "") -> PtepackError:
    """The exception for a failed run: its class from the exit code, its message, path and
    problem from the CLI's error document on stdout (else its one-line error on stderr).
    Exit 5 naming a file that is not there is a PtepackFileNotFoundError."""
    prefix = "ptepack: error: "
    lines = [line[len(prefix):] if line.startswith(prefix) else line
             for line in stderr.splitlines() if line.strip()]
    document = _error_document(stdout) if stdout else None
    message = lines[0] if lines else f"ptepack exited with status {exit_code}"
    path: Optional[str] = None
    problem: Optional[str] = None
    if document is not None:
        if isinstance(document.get("message"), str) and document["message"]:
            message = document["message"]
        path = document.get("path") if isinstance(document.get("path"), str) else None
        problem = document.get("problem") if isinstance(document.get("problem"), str) else None
    cls = ERRORS.get(exit_code, PtepackError)
    if cls is PtepackIOError and any(word in message.lower() for word in _MISSING):
        cls = PtepackFileNotFoundError
    return cls(message, exit_code=exit_code, argv=argv, stderr=stderr, lines=lines or [message],
               path=path, problem=problem)
