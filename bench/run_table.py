#!/usr/bin/env python3
# One command for every row of docs/performance.md's table of current figures.
"""Run every row of the current-figures table of docs/performance.md and print it.

Runs run_bench.py's modes as subprocesses, each with --json-out: the throughput mode (rows 1
and 2: two 512 MiB program graphs to a .ptn and to 256 MiB shards), --pte (rows 3, 4, 6 and
7: one 1 GiB .pte to one shard, to 256 MiB shards, merged with itself into one .pte and into
shards, and the capped pack signed) and --scaling (row 5: 100,000 tensors to 64 KiB shards
and to one .ptn). Then prints one markdown table in docs/performance.md's layout: per row
the median wall time, the ratio to its floor (and to its durable floor), to cp, and the
median peak RSS.

With --baseline-ptepack OLD, every row's pack command is also run with OLD on the same
inputs: the two outputs are compared file by file with cmp (model.sig, whose ECDSA nonce is
random, is compared without its signature value and both are verified with the public key),
then the two binaries are timed alternately (new, old, new, old, ...) and both medians are
printed. Exit status: 0, 1 when any output differs (or the new binary fails), 2 when no
output differs but the old binary could not run some row.

--size-scale S multiplies every size of every row (tensor bytes, shard caps, the number of
tensors of row 5) for a smoke run; --small is --size-scale 1/64.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench  # noqa: E402  (sibling script: measuring, alternating, removing outputs)

MIB = run_bench.MIB
GRAPH_SIZE = 512 * MIB      # tensor bytes per method, rows 1-2
PTE_SIZE = 1024 * MIB       # tensor bytes of the program, rows 3, 4, 6, 7
CAP = 256 * MIB             # shard cap of every capped row
SCALING_TENSORS = 100000    # row 5, over two methods
SCALING_SIZE = 32 * MIB     # row 5, tensor bytes per method
QUANTUM = 64 << 10          # scaled sizes are rounded to this


@dataclass
class Row:
    number: str
    label: str   # formatted with the run's sizes
    mode: str    # "graphs", "pte" or "scaling"
    case: str    # run_bench.py's case name


ROWS = [
    Row("1", "2 x {graph} program graphs, 85 % shared -> `.ptn`", "graphs", "pack_ptn"),
    Row("2", "the same -> {cap} `.ptd` shards", "graphs", "pack_ptd"),
    Row("3", "{pte} `.pte` -> one shard (uncapped directory)", "pte", "pack"),
    Row("4", "the same -> {cap} shards", "pte", "pack_cap"),
    Row("5a", "{tensors} tensors -> 64 KiB shards", "scaling", "pack_64k"),
    Row("5b", "the same model -> one `.ptn`", "scaling", "pack_ptn"),
    Row("6a", "merge of two `.pte` (the {pte} program with itself) -> one `.pte`", "pte",
        "merge"),
    Row("6b", "the same -> {cap} shards (`--merge`)", "pte", "merge_cap"),
    Row("7", "`pack --sign` (row 4, signed)", "pte", "pack_sign"),
]


def scaled(nbytes, scale, minimum=QUANTUM):
    return max(minimum, round(nbytes * scale / QUANTUM) * QUANTUM)


def label(nbytes):
    if nbytes % (1 << 30) == 0:
        return f"{nbytes >> 30} GiB"
    return f"{nbytes // MIB} MiB" if nbytes % MIB == 0 else f"{nbytes / MIB:.2f} MiB"


def mode_args(args):
    """run_bench.py arguments of each mode, the sizes scaled."""
    scale = args.size_scale
    graph, pte = scaled(GRAPH_SIZE, scale, MIB), scaled(PTE_SIZE, scale, MIB)
    cap = run_bench.size_label(scaled(CAP, scale))
    tensors = max(200, 2 * round(SCALING_TENSORS * scale / 2))
    sizes = {"graph": label(graph), "pte": label(pte), "cap": label(scaled(CAP, scale)),
             "tensors": f"{tensors:,}"}
    return {
        "graphs": ["--size", run_bench.size_label(graph), "--max-shard-bytes", cap],
        "pte": ["--pte", "--size", run_bench.size_label(pte), "--max-shard-bytes", cap],
        "scaling": ["--scaling", "--scaling-tensors", str(tensors), "--scaling-size",
                    run_bench.size_label(scaled(SCALING_SIZE, scale))],
    }, sizes


def run_modes(args, ptepack, workdir, keep, results):
    """Runs the three run_bench.py modes, filling `results` (mode -> its JSON result) as each
    ends; returns the commands."""
    per_mode, _ = mode_args(args)
    commands = []
    common = ["--ptepack", ptepack, "--workdir", workdir, "--reps", str(args.reps)]
    if args.jobs:
        common += ["--jobs", str(args.jobs)]
    if args.idle_wait is not None:
        common += ["--idle-wait", f"{args.idle_wait:g}"]
    if keep:
        common.append("--keep")
    for mode in ("graphs", "pte", "scaling"):
        json_out = os.path.join(workdir, f"run_table-{mode}.json")
        argv = [sys.executable, os.path.join(HERE, "run_bench.py")] + common + per_mode[mode] \
            + ["--json-out", json_out]
        commands.append(argv)
        print(f"\n== {mode}: {' '.join(argv[1:])}", flush=True)
        status = subprocess.call(argv)
        if status != 0:
            run_bench.fail(f"run_bench.py ({mode}) exited with status {status}")
        with open(json_out, encoding="utf-8") as handle:
            results[mode] = json.load(handle)
    return commands


def row_figures(row, results):
    """A row's median wall seconds, ratios to its floor, durable floor and cp (median over
    median, as run_bench.py prints them) and median peak RSS; None where its mode measures
    no floor or cp (--scaling)."""
    result = results[row.mode]
    case = result["cases"][row.case]
    wall = case["median_wall_s"]
    floor = result.get("floors", {}).get(row.case, {}).get("median")
    cp = result["cases"].get("cp")
    return {"wall_s": wall,
            "floor_ratio": floor["ratio"] if floor else None,
            "durable_floor_ratio": floor["durable_ratio"] if floor else None,
            "cp_ratio": wall / cp["median_wall_s"] if cp and cp["median_wall_s"] > 0 else None,
            "peak_rss_mib": case["median_peak_rss_mib"]}


def print_table(results, sizes, args, ptepack):
    print(f"\n## Current figures ({datetime.date.today().isoformat()}, {os.cpu_count()} cores, "
          f"--reps {args.reps}, --size-scale {args.size_scale:g}, {ptepack})\n")
    print("| # | case | wall (median) | ratio to floor (durable) | ratio to `cp` | peak RSS |")
    print("|---|---|---|---|---|---|")
    rows = {}
    for row in ROWS:
        figures = row_figures(row, results)
        rows[row.number] = {"case": row.case, "mode": row.mode,
                            "label": row.label.format(**sizes), **figures}
        floor = ("no floor" if figures["floor_ratio"] is None else
                 f"{figures['floor_ratio']:.2f} ({figures['durable_floor_ratio']:.2f})")
        cp = "no `cp`" if figures["cp_ratio"] is None else f"{figures['cp_ratio']:.2f}"
        print(f"| {row.number} | {row.label.format(**sizes)} | {figures['wall_s']:.3f} s | "
              f"{floor} | {cp} | {figures['peak_rss_mib']:.1f} MiB |")
    many, single = rows["5a"]["wall_s"], rows["5b"]["wall_s"]
    signed, capped = rows["7"]["wall_s"], rows["4"]["wall_s"]
    print(f"\n5a / 5b (many small shards over one .ptn of the same model): {many / single:.2f}")
    print(f"7 / 4 (pack --sign over the same pack unsigned): {signed / capped:.2f}")
    disk = results["pte"]["floors"].get("disk_under_load")
    if disk:
        print(f"durable write with every core busy (sync_busy / sync_uniq, --pte run): "
              f"{disk:.2f}")
    return rows


def output_of(argv):
    index = argv.index("-o")
    return index, argv[index + 1]


def with_output(argv, binary, output):
    index, _ = output_of(argv)
    return [binary] + argv[1:index + 1] + [output] + argv[index + 2:]


def files_under(path):
    if os.path.isfile(path):
        return {"": path}
    return {os.path.relpath(os.path.join(root, name), path): os.path.join(root, name)
            for root, _, names in os.walk(path) for name in names}


def signature_payload(path):
    """The bytes of model.sig with every signature value blanked (ECDSA's nonce is random,
    so only those differ from run to run)."""
    with open(path, "rb") as handle:
        text = handle.read()
    for signature in json.loads(text).get("dsseEnvelope", {}).get("signatures", []):
        if signature.get("sig"):
            text = text.replace(signature["sig"].encode(), b"")
    return text


def compare_outputs(new_out, old_out, argv, verifier, workdir):
    """Differences between two outputs, one line each (empty: byte-identical)."""
    new_files, old_files = files_under(new_out), files_under(old_out)
    problems = [f"only in the new output: {name}" for name in sorted(new_files.keys()
                                                                      - old_files.keys())]
    problems += [f"only in the old output: {name}" for name in sorted(old_files.keys()
                                                                       - new_files.keys())]
    for name in sorted(new_files.keys() & old_files.keys()):
        if os.path.basename(name) == "model.sig" and "--sign" in argv:
            if signature_payload(new_files[name]) != signature_payload(old_files[name]):
                problems.append(f"{name}: differs beyond its signature value")
            continue
        check = subprocess.run(["cmp", new_files[name], old_files[name]], capture_output=True,
                               text=True)
        if check.returncode != 0:
            problems.append((check.stdout + check.stderr).strip()
                            or f"{name}: cmp exited with {check.returncode}")
    if "--sign" in argv:
        key = argv[argv.index("--sign") + 1]
        public = os.path.join(workdir, "run_table-signing-key.pub.pem")
        subprocess.run(["openssl", "ec", "-in", key, "-pubout", "-out", public], check=True,
                       capture_output=True)
        for side, path in (("new", new_out), ("old", old_out)):
            check = subprocess.run([verifier, "verify", "--public-key", public, path],
                                   capture_output=True, text=True)
            if check.returncode != 0:
                problems.append(f"the {side} output's signature does not verify: "
                                + (check.stdout + check.stderr).strip()[-500:])
        os.remove(public)
    return problems


def baseline(args, results, ptepack, old, workdir):
    """For every row: both binaries' outputs compared, then both timed alternately. Returns
    (row -> report, any difference, any row not compared)."""
    reports, differ, skipped = {}, False, False
    base = os.path.join(workdir, "run_table-baseline")
    for row in ROWS:
        result = results[row.mode]
        argv = result["cases"][row.case]["command"]
        _, output = output_of(argv)
        name = os.path.basename(output)  # the same name for both: a signature names it
        new_out, old_out = (os.path.join(base, side, row.number, name) for side in ("new", "old"))
        run_bench.remove(base)
        for path in (new_out, old_out):
            os.makedirs(os.path.dirname(path))
        new_argv, old_argv = with_output(argv, ptepack, new_out), with_output(argv, old, old_out)
        print(f"\n== row {row.number} ({row.case}): new and old outputs compared", flush=True)
        run_bench.warm_up(list(files_under(result["model_dir"]).values()))
        run_bench.measure(new_argv)
        ran = subprocess.run(old_argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        if ran.returncode != 0:
            skipped = True
            reason = f"old binary exited with {ran.returncode}: " + \
                (ran.stderr.strip().splitlines() or [""])[-1][:300]
            print(f"   not compared: {reason}")
            reports[row.number] = {"compared": False, "reason": reason}
            run_bench.remove(base)
            continue
        problems = compare_outputs(new_out, old_out, argv, ptepack, workdir)
        for problem in problems:
            print(f"   DIFFERENT: {problem}")
        if not problems:
            print(f"   identical ({len(files_under(new_out))} files)")
        differ = differ or bool(problems)
        run_bench.remove(base)
        # Timed alternately, new first: new, old, new, old, ...
        cases = [run_bench.Case(f"{row.number}:new", new_argv, output=new_out,
                                remove_after=(new_out,), writes=True),
                 run_bench.Case(f"{row.number}:old", old_argv, output=old_out,
                                remove_after=(old_out,), writes=True)]
        for path in (new_out, old_out):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        idle_wait = args.idle_wait if args.idle_wait is not None else (
            0.0 if row.mode == "scaling" else 20.0)
        ballast = 0 if row.mode == "scaling" else result["input_bytes"] + 64 * MIB
        run_bench.run_cases(cases, args.reps, False, lambda case: None, ballast,
                            (idle_wait, 0.15) if idle_wait > 0 else None)
        new_case, old_case = (case.summary(0) for case in cases)
        reports[row.number] = {
            "compared": True, "identical": not problems, "differences": problems,
            "new_median_wall_s": new_case["median_wall_s"],
            "old_median_wall_s": old_case["median_wall_s"],
            "new_walls": new_case["wall_s"], "old_walls": old_case["wall_s"],
            "new_peak_rss_mib": new_case["median_peak_rss_mib"],
            "old_peak_rss_mib": old_case["median_peak_rss_mib"]}
    run_bench.remove(base)
    return reports, differ, skipped


def print_baseline(reports, sizes, old):
    print(f"\n## New against old ({old}), timed alternately\n")
    print("| # | case | new wall (median) | old wall (median) | new / old | new peak RSS | "
          "old peak RSS | outputs |")
    print("|---|---|---|---|---|---|---|---|")
    for row in ROWS:
        report = reports[row.number]
        text = row.label.format(**sizes)
        if not report["compared"]:
            print(f"| {row.number} | {text} | - | - | - | - | - | not compared: "
                  f"{report['reason']} |")
            continue
        new, old_wall = report["new_median_wall_s"], report["old_median_wall_s"]
        outputs = "identical" if report["identical"] else \
            f"DIFFERENT ({len(report['differences'])})"
        print(f"| {row.number} | {text} | {new:.3f} s | {old_wall:.3f} s | "
              f"{new / old_wall:.2f} | {report['new_peak_rss_mib']:.1f} MiB | "
              f"{report['old_peak_rss_mib']:.1f} MiB | {outputs} |")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptepack", required=True, help="path of the ptepack binary measured")
    parser.add_argument("--baseline-ptepack", metavar="OLD",
                        help="also run every row with this binary: outputs compared with cmp, "
                             "both timed alternately")
    parser.add_argument("--workdir", required=True, help="models and outputs go here")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of every case "
                        "(default 5)")
    parser.add_argument("--size-scale", type=float, default=1.0,
                        help="multiply every row's sizes by this (default 1: the documented "
                             "sizes)")
    parser.add_argument("--small", action="store_true", help="--size-scale 1/64 (a smoke run)")
    parser.add_argument("--jobs", "-j", type=int, help="pass -j N to ptepack pack")
    parser.add_argument("--idle-wait", type=float, default=None,
                        help="run_bench.py's --idle-wait for every mode (default: its own, "
                             "20 s except --scaling)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the generated models in the work directory")
    parser.add_argument("--json-out", help="also write the table (and the comparison) here")
    args = parser.parse_args(argv)
    if args.small:
        args.size_scale = 1 / 64
    if args.size_scale <= 0:
        parser.error("--size-scale must be positive")
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    ptepack = os.path.abspath(args.ptepack)
    old = os.path.abspath(args.baseline_ptepack) if args.baseline_ptepack else None
    for path in filter(None, (ptepack, old)):
        if not os.access(path, os.X_OK):
            run_bench.fail(f"{path}: not an executable file")
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    results, status = {}, 0
    try:
        # The baseline packs the generated inputs again, so they stay until the end.
        commands = run_modes(args, ptepack, workdir, args.keep or old is not None, results)
        _, sizes = mode_args(args)
        rows = print_table(results, sizes, args, ptepack)
        print("\nrun_bench.py commands:")
        for argv in commands:
            print("  " + " ".join(argv[1:]))
        report = {"format": "ptepack.bench.table", "version": 1, "ptepack": ptepack,
                  "date": datetime.date.today().isoformat(), "cpus": os.cpu_count(),
                  "reps": args.reps, "size_scale": args.size_scale, "rows": rows,
                  "commands": [argv[1:] for argv in commands]}
        if old:
            reports, differ, skipped = baseline(args, results, ptepack, old, workdir)
            print_baseline(reports, sizes, old)
            report.update({"baseline_ptepack": old, "baseline": reports})
            if differ:
                print("\nrun_table: outputs differ between the two binaries (see DIFFERENT "
                      "above)")
                status = 1
            elif skipped:
                print("\nrun_table: the old binary could not run every row; the others are "
                      "identical")
                status = 2
            else:
                print("\nrun_table: every row's outputs are byte-identical")
        if args.json_out:
            with open(args.json_out, "w", encoding="utf-8") as handle:
                json.dump(report, handle, indent=1, sort_keys=True)
                handle.write("\n")
            print(f"results written to {args.json_out}")
    finally:
        if not args.keep:
            for result in results.values():
                if os.path.isdir(result["model_dir"]):
                    shutil.rmtree(result["model_dir"])
    return status


if __name__ == "__main__":
    sys.exit(main())
