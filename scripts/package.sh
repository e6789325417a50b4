#!/usr/bin/env bash
# Builds ptepack's release artifacts from a clean tree into dist/, then checks them:
#   ptepack_<version>-1_<arch>.deb       the CLI, ptepack(1), the schemas
#   ptepack-dev_<version>-1_<arch>.deb   the library, headers and CMake package
#   ptepack-<version>-x86_64-linux       one statically linked CLI for any x86-64 Linux
#   ptepack-<version>-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#                                        the Python module with that static CLI inside
#                                        (pip install; scripts/make_wheel.py)
# The .deb files are checked from their unpacked files (tests/package/check_deb.py), the
# static binary against the dynamic build (tests/package/check_static.py); with lintian
# installed, it reports on both packages too.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install_deps.sh"
jobs="$(nproc)"
dist="$root/dist"
rm -rf "$dist" build-package build-static
mkdir -p "$dist"

# The packages: /usr prefix, so the library lands in Debian's multiarch directory.
cmake -S . -B build-package -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DPTEPACK_BUILD_TESTS=OFF -DPTEPACK_WERROR=ON
cmake --build build-package -j "$jobs"
(cd build-package && cpack -G DEB -B "$dist" >/dev/null)
rm -rf "$dist/_CPack_Packages"

# The static binary (the library compiled again: fmt header-only).
cmake -S . -B build-static -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTEPACK_STATIC=ON \
  -DPTEPACK_BUILD_TESTS=OFF -DPTEPACK_WERROR=ON
cmake --build build-static -j "$jobs" --target ptepack_cli
version="$(build-package/ptepack --version | head -n 1 | cut -d ' ' -f 2)"
static="$dist/ptepack-$version-x86_64-linux"
strip -o "$static" build-static/ptepack
# The wheel: the stripped static binary, so a manylinux tag (make_wheel.py refuses one for a
# binary with any dynamic dependency).
/usr/bin/python3 scripts/make_wheel.py --binary "$static" --out "$dist" \
  --plat-tag manylinux_2_17_x86_64.manylinux2014_x86_64

python3 tests/package/check_deb.py --debs "$dist" --examples examples --data tests/data
python3 tests/package/check_static.py --static "$static" --dynamic build-package/ptepack \
  --examples examples --data tests/data
if command -v lintian >/dev/null; then
  lintian "$dist"/*.deb || true
fi
ls -l "$dist"
