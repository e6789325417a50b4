#!/usr/bin/env bash
# The main job on the bundled example: install deps, build, pack examples/ into one .ptn, dump it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target ptepack_cli   # the CLI only, not the test suite
mkdir -p out
build/ptepack pack examples/prefill.json examples/decode.json -o out/model.ptn
build/ptepack dump out/model.ptn
