#!/usr/bin/env bash
# Installs deps, builds with warnings as errors, runs every test; then the same suite under ASan/UBSan.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install_deps.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTEPACK_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

if [[ "${PTEPACK_SKIP_SANITIZERS:-0}" != 1 ]]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPTEPACK_WERROR=ON -DPTEPACK_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  # The process-level corruption sample runs a quarter of its cases here (each run of the
  # instrumented debug binary costs about 40 times more); the Release pass above runs them all.
  # The packaging tests (the Python module's install, its wheel, mypy) check how ptepack is
  # shipped, not its memory: the Release pass runs them.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    PTEPACK_TEST_SAMPLE=0.25 ctest --test-dir build-asan --output-on-failure -j"$jobs" \
    -E '^python_(install|wheel|mypy)$'
fi
