#!/usr/bin/env python3
# mypy --strict on the module (python/ptepack): its type hints are checked, not only written.
# Exits 77 (skipped) when mypy is not installed (Debian: apt-get install mypy).
import os
import sys
import tempfile

SKIP = 77


def main():
    package = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ptepack")
    try:
        import mypy.api
    except ImportError:
        print("skipped: mypy is not installed (apt-get install mypy)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="ptepack-mypy-") as cache:
        out, err, status = mypy.api.run(["--strict", "--cache-dir", cache, package])
    print(out + err, end="")
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
