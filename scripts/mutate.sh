#!/usr/bin/env bash
# Mutation testing by hand (not in CI): every planted bug of scripts/mutants.txt must make the
# test suite fail. See scripts/mutate.py and docs/testing.md.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/mutate.py" "$@"
