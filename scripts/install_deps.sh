#!/usr/bin/env bash
# Installs ptepack's build and test dependencies from Debian packages, only if missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ python3 python3-jsonschema time
  python3-cryptography openssl  # the independent OpenSSF Model Signing verifier, test keys
  libcli11-dev libflatbuffers-dev flatbuffers-compiler libssl-dev zlib1g-dev
  nlohmann-json3-dev libfmt-dev catch2 libmimalloc-dev
  graphviz  # the tests render every `dump --graph=dot` with Graphviz's own dot
  python3-venv python3-setuptools python3-wheel  # the Python module's documented install
  mypy  # python_mypy: mypy --strict on the Python module
  dpkg-dev file man-db  # the Debian packages: cpack's dpkg-shlibdeps, and their checks
  groff-base bsdextrautils  # ptepack(1)'s check: groff -ww, col -b (man-db pulls them in too)
)
if [[ "${PTEPACK_WITH_FUZZ:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) != 0 ]]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
