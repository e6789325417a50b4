"""One exception class per documented exit code of the ptepack CLI (README, "Exit codes")."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Type


class PtepackError(Exception):
    """A ptepack command failed. `message` is the CLI's one-line error (the first line of
    stderr without its "ptepack: error: " prefix); `lines` holds every problem line."""

    exit_code: Optional[int] = None

    def __init__(self, message: str, *, exit_code: Optional[int] = None,
                 argv: Sequence[str] = (), stderr: str = "",
                 lines: Sequence[str] = (), problems: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code
        self.argv = list(argv)
        self.stderr = stderr
        self.lines = list(lines) or [message]
        # verify(check=True): each problem with its stable identifier (results.Problem).
        self.problems = list(problems)

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


class PtepackIOError(PtepackError):
    """Exit 5: a missing file, a read or write failure (also an OSError)."""
    exit_code = 5


class InternalError(PtepackError):
    """Exit 70: a bug in ptepack."""
    exit_code = 70


class Interrupted(PtepackError):
    """Exit 130 or 143: interrupted by SIGINT or SIGTERM (the temporary output removed)."""
    exit_code = 130


class CliNotFound(PtepackError):
    """The ptepack executable was not found (not on PATH, or the given path)."""


ERRORS: Dict[int, Type[PtepackError]] = {
    1: VerifyFailed, 2: UsageError, 3: InvalidInputError, 4: ConflictError,
    5: PtepackIOError, 70: InternalError, 130: Interrupted, 143: Interrupted,
}


def error_for(exit_code: int, argv: Sequence[str], stderr: str) -> PtepackError:
    """The exception for a failed run: its class from the exit code, its message from the
    CLI's one-line error."""
    prefix = "ptepack: error: "
    lines = [line[len(prefix):] if line.startswith(prefix) else line
             for line in stderr.splitlines() if line.strip()]
    message = lines[0] if lines else f"ptepack exited with status {exit_code}"
    cls = ERRORS.get(exit_code, PtepackError)
    return cls(message, exit_code=exit_code, argv=argv, stderr=stderr, lines=lines)
