#!/usr/bin/env bash
# Runs one libFuzzer target: fuzz/run.sh BUILD_DIR NAME [SECONDS] [libFuzzer options...].
# New inputs go to a scratch corpus ($PTEPACK_FUZZ_WORK/NAME/corpus, default under /tmp) so the
# checked-in seeds stay small; crashes, leaks and timeouts land in .../NAME/findings/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ $# -lt 2 ]]; then
  echo "usage: $0 BUILD_DIR NAME [SECONDS] [libFuzzer options...]" >&2
  exit 2
fi
build=$1
name=$2
seconds=${3:-240}
shift $(( $# < 3 ? $# : 3 ))
work=${PTEPACK_FUZZ_WORK:-/tmp/ptepack-fuzz}/$name
mkdir -p "$work/corpus" "$work/findings"
dict=()
case $name in
  program_json | safetensors | safetensors_index | manifest | json_document | signature) dict=(-dict="$here/json.dict") ;;
esac
exec "$build/fuzz/fuzz_$name" "$work/corpus" "$here/corpus/$name" "${dict[@]}" \
  -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/findings/" "$@"
