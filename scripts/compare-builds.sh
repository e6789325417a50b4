#!/usr/bin/env bash
# compare-builds.sh OLD_BIN NEW_BIN: runs the same pack, dump, verify and diff commands on
# every fixture and the example with both binaries, then compares every output file and
# every stdout, stderr and exit code byte for byte. Only pack's elapsed-time figures and
# the side's own directory in absolute paths are masked. Exit 0 when the two builds behave identically; else the differences are listed.
# Covered: every fixture packed, dumped, verified and diffed; --base releases, --placement
# single, --dry-run, --merge, -j 1/2/7, damaged inputs (truncated, corrupted shard,
# missing shard or manifest, a stray file, a truncated program, re-indented and broken
# manifests) given to every command, as a directory and as one program of it (DIR/prog.pte),
# with and without --json, and repacks of a packed directory and of a release on a base.
# A line "sh ..." is a shell step that prepares an input (its output is compared too).
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 OLD_BIN NEW_BIN" >&2
  exit 2
fi
old=$(realpath "$1")
new=$(realpath "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap '[[ -n ${COMPARE_KEEP:-} ]] && echo "kept $work" || rm -rf "$work"' EXIT

# The inputs, copied so that every path printed is relative and the same for both.
inputs="$work/inputs"
mkdir -p "$inputs"
cp "$root"/examples/*.json "$root"/examples/*.safetensors "$inputs/"
cp "$root"/tests/data/two_methods.json "$root"/tests/data/two_methods.ptg "$inputs/"
cp "$root"/tests/data/pte/*.pte "$root"/tests/data/pte/*.ptd "$inputs/"

# One command per line, run in the side's work directory; outputs land there too.
commands() {
  echo "pack prefill.json decode.json -o model.ptn"
  echo "pack prefill.json decode.json -o model --max-shard-bytes 3000"
  echo "pack prefill.json decode.json -o model_st --shard-format safetensors --max-shard-bytes 2500"
  echo "pack prefill.json decode.json -o model_json --json --max-shard-bytes 3000"
  echo "pack model -o again.ptn"
  echo "pack two_methods.ptg@prefill.safetensors,decode.safetensors -o two.ptn"
  for what in model.ptn model model_st model/manifest.json two_methods.json prefill.json \
              decode.safetensors; do
    echo "dump $what"
    echo "dump $what --json"
    echo "dump $what --graph"
    echo "dump $what --summary --offsets --no-hash"
    echo "dump $what --width 50"
    echo "verify $what"
    echo "verify $what --json"
  done
  echo "diff model.ptn model"
  echo "diff model model_st --json"
  for pte in *.pte; do
    stem=${pte%.pte}
    echo "pack $pte -o ${stem}_dir"
    echo "pack $pte -o ${stem}_cap --max-shard-bytes 64KB --oversize own-shard --json"
    echo "pack ${stem}_dir -o ${stem}_back.pte"
    for what in "$pte" "${stem}_dir" "${stem}_cap" "${stem}_back.pte"; do
      echo "dump $what"
      echo "dump $what --json --graph"
      echo "dump $what --graph=dot"
      echo "verify $what --json"
    done
    echo "diff $pte ${stem}_dir"
    echo "diff ${stem}_dir ${stem}_cap --json"
    echo "diff $pte ${stem}_back.pte --json"
    echo "diff $pte xnnpack_conv.pte"
  done
  echo "pack *.pte -o all --max-shard-bytes 300KB"
  echo "dump all"
  echo "verify all"
  # Several thread counts: the same bytes, the same messages.
  for j in 1 2 7; do
    echo "pack *.pte -o all_j$j --max-shard-bytes 300KB -j $j"
    echo "pack prefill.json decode.json -o model_j$j --max-shard-bytes 3000 -j $j --json"
    echo "pack prefill.json decode.json -o model_j$j.ptn -j $j"
  done
  # Releases over a base.
  echo "pack prefill.json decode.json -o model_next --max-shard-bytes 3000 --base model --json"
  echo "pack *.pte -o all_next --max-shard-bytes 300KB --base all --release 2 --json"
  echo "pack xnnpack_conv.pte portable_multi_method.pte -o all_fewer --base all/manifest.json"
  echo "diff all all_next --json"
  # One data file, plans without writing, one merged program.
  echo "pack *.pte -o all_single --placement single --json"
  echo "pack *.pte -o all_single_cap --placement single --max-shard-bytes 300KB -v"
  echo "pack *.pte -o dry --dry-run"
  echo "pack *.pte -o dry --dry-run --json --max-shard-bytes 300KB"
  echo "pack prefill.json decode.json -o dry.ptn --dry-run --json"
  echo "pack conv=xnnpack_conv.pte portable_multi_method.pte -o merged.pte --json"
  echo "pack conv=xnnpack_conv.pte portable_multi_method.pte -o merged_dir --merge model.pte -j 1"
  echo "verify merged_dir --json"
  # Damaged inputs: each refused or reported the same way, nothing written.
  echo "sh head -c 1000 xnnpack_conv.pte > truncated.pte"
  echo "pack truncated.pte -o from_truncated"
  echo "verify truncated.pte --json"
  echo "dump truncated.pte"
  echo "sh cp -r all all_flipped && f=\$(ls all_flipped/*.ptd | head -1) && printf 'X' | dd of=\$f bs=1 seek=300 conv=notrunc status=none"
  echo "verify all_flipped --json"
  echo "pack all_flipped -o from_flipped"
  echo "pack xnnpack_conv.pte xnnpack_quantized.pte -o flipped_next --base all_flipped"
  echo "sh cp -r all all_missing && rm \$(ls all_missing/*.ptd | tail -1)"
  echo "verify all_missing"
  echo "pack all_missing -o from_missing -j 1"
  echo "pack all_missing -o from_missing -j 2"
  echo "sh cp -r all all_indented && /usr/bin/python3 -c 'import json,sys; p=sys.argv[1]; m=json.load(open(p)); json.dump(m, open(p, \"w\"), indent=4)' all_indented/manifest.json"
  echo "pack all_indented -o from_indented"
  echo "verify all_indented"
  echo "sh cp -r model model_broken && printf '{\"version\": 2,' > model_broken/manifest.json"
  echo "verify model_broken"
  echo "pack model_broken -o from_broken"
  echo "pack prefill.json -o model_next --base model_broken"
  # Every command on each damage, on the directory and on one program of it (DIR/prog.pte),
  # with and without --json (a failing --json call prints one error document).
  echo "sh cp -r all all_nomanifest && rm all_nomanifest/manifest.json"
  echo "sh cp -r all all_stray && printf x > all_stray/stray.bin"
  echo "sh cp -r all all_truncprog && truncate -s 100 all_truncprog/xnnpack_conv.pte"
  for damaged in all_flipped all_missing all_nomanifest all_stray all_truncprog model_broken; do
    for what in "$damaged" "$damaged/xnnpack_conv.pte"; do
      for json in "" " --json"; do
        echo "dump $what$json"
        echo "verify $what$json"
        echo "diff $what all$json"
        echo "diff all $what$json"
      done
      echo "pack $what -o from_${damaged}_again --json"
    done
    echo "pack xnnpack_conv.pte -o on_${damaged} --base $damaged --json"
    echo "dump $damaged --no-hash"
  done
  for program in all/*.pte; do
    echo "dump $program --json"
    echo "verify $program --json"
    echo "diff $program ${program#all/}"
    echo "pack $program -o again_${program#all/}"
  done
  echo "pack all -o all_repacked --json"
  echo "pack all_next -o all_next_repacked"
  echo "pack missing.json -o x.ptn"
  echo "dump nothing.ptn"
  echo "pak prefill.json"
}

run_side() {
  local bin=$1 dir=$2 n=0
  mkdir -p "$dir/out" "$dir/log"
  cp -r "$inputs/." "$dir/out/"
  (
    cd "$dir/out"
    commands > ../commands.txt
    while IFS= read -r line; do
      n=$((n + 1))
      # shellcheck disable=SC2086  # word splitting and globs are the command's own
      set +e
      if [[ $line == "sh "* ]]; then
        bash -c "${line#sh }" > "../log/$n.out" 2> "../log/$n.err"
      else
        "$bin" $line > "../log/$n.out" 2> "../log/$n.err"
      fi
      echo "$?" > "../log/$n.code"
      set -e
      # Elapsed time and rates are the only figures that may differ between runs.
      sed -E -i 's/ in [0-9]+\.[0-9]+ s \((.*) read at [^)]*\)/ in $TIME (\1 read at $RATE)/;
                 s/"elapsed_seconds": [0-9.e+-]+/"elapsed_seconds": $TIME/' "../log/$n.out"
      # Absolute paths (a manifest found beside a program) name the side's directory.
      sed -i "s|$dir/out|\$SIDE|g" "../log/$n.out" "../log/$n.err"
    done < ../commands.txt
  )
}

run_side "$old" "$work/old"
run_side "$new" "$work/new"

count=$(wc -l < "$work/old/commands.txt")
if diff -r "$work/old" "$work/new" > "$work/differences.txt"; then
  echo "identical: $count commands, every output file, stdout, stderr and exit code"
  exit 0
fi
echo "the builds differ ($count commands):"
# Name the commands whose logs differ.
grep -oE 'log/[0-9]+\.(out|err|code)' "$work/differences.txt" | sort -u | while read -r f; do
  n=${f#log/}
  n=${n%%.*}
  echo "  command $n: $(sed -n "${n}p" "$work/old/commands.txt") ($f)"
done
head -50 "$work/differences.txt"
exit 1
