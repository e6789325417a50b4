"""`python -m ptepack ARGS`: runs the ptepack CLI (the one find_cli() finds) with ARGS.

The process becomes the CLI (os.execv), so arguments, output, signals and the exit code are
the CLI's own. Exit 127 when there is no CLI to run.
"""
from __future__ import annotations

import os
import sys

from ._cli import find_cli
from .errors import CliNotFound


def main() -> None:
    """Replace this process with the CLI, given this process's arguments."""
    try:
        cli = find_cli()
    except CliNotFound as error:
        print(f"ptepack: error: {error}", file=sys.stderr)
        sys.exit(127)
    sys.stdout.flush()
    os.execv(cli, [cli, *sys.argv[1:]])


if __name__ == "__main__":
    main()
