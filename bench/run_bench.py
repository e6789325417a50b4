#!/usr/bin/env python3
# Benchmark driver: times `ptepack pack` next to cp and openssl over the same bytes, one run.
"""Benchmark ptepack on a synthetic model made by gen_model.py.

Throughput mode (default): packs a two-method model to a .ptn and to a directory of .ptd
shards, and copies (`cp --reflink=never`) and hashes (`openssl dgst -sha256`) the same input
safetensors, alternating the commands repetition by repetition on a warm page cache. Each
command runs under `/usr/bin/time -v` for its peak RSS. Prints medians and the ratios.

Scaling mode (--scaling): 100,000 small tensors over two methods; times pack (to a
directory), dump, dump --json and verify of the packed output, pack to 64 KiB shards, and
pack to a .ptn package.

ExecuTorch mode (--pte): one synthetic .pte program made by gen_pte.py (constants and named
data); times `ptepack pack X.pte -o DIR` uncapped and with --max-shard-bytes next to cp and
openssl over the same file, with a page-cache ballast refill before every timed write and a
wait for an idle machine before every timed command.

Metadata mode (--metadata): inputs whose cost is all metadata, for the memory bound (peak RSS
at most 8x the metadata bytes plus the process's own baseline): a safetensors file holding
--metadata-keys zero-byte tensors (dump --json, dump, verify) and a program JSON whose one
IntListArg has --metadata-ints elements (verify, dump). Prints each peak RSS over the
metadata bytes, after subtracting the baseline of `ptepack verify` on a tiny program.
"""
import argparse
import json
import mmap
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model  # noqa: E402  (sibling script, imported for the generator and parse_size)
import gen_pte  # noqa: E402  (sibling script: the .pte generator)
import deploy  # noqa: E402  (sibling script: the deployment case)

TIME_BINARY = "/usr/bin/time"
MIB = 1 << 20
READ_CHUNK = 8 << 20
SLACK_BYTES = 256 * MIB   # programs, manifests and filesystem overhead in the disk estimate
BALLAST_CHUNK = 16 * MIB
BALLAST_RESERVE = 512 * MIB  # free memory the ballast always leaves alone
IDLE_WINDOW_S = 0.5          # CPU usage is sampled over windows of this length


@dataclass
class Case:
    """One benchmarked command: argv to run and paths (untimed) to prepare and clear."""
    name: str
    argv: list
    output: str = ""          # its size is recorded after every run
    remove_after: tuple = ()  # removed (untimed) after every run
    fresh_dir: str = ""       # created empty before every run (cp's destination)
    writes: bool = False      # gets the ballast refill (--ballast) before every run
    walls: list = field(default_factory=list)
    rss_kib: list = field(default_factory=list)
    cpu_s: list = field(default_factory=list)  # user + system seconds
    idle_wait_s: list = field(default_factory=list)  # waited for an idle machine (--idle-wait)
    busy: list = field(default_factory=list)  # CPU busy fraction of the last window before it
    output_bytes: int = 0

    def summary(self, input_bytes):
        wall = statistics.median(self.walls)
        return {"command": self.argv, "wall_s": self.walls, "peak_rss_kib": self.rss_kib,
                "median_wall_s": wall, "min_wall_s": min(self.walls),
                "max_wall_s": max(self.walls),
                "mib_per_s": input_bytes / MIB / wall if wall > 0 else None,
                "median_peak_rss_mib": statistics.median(self.rss_kib) / 1024,
                "cpu_s": self.cpu_s, "median_cpu_s": statistics.median(self.cpu_s),
                "output_bytes": self.output_bytes,
                **({"idle_wait_s": self.idle_wait_s, "busy_before": self.busy}
                   if self.busy else {})}


def size_label(nbytes):
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def fail(message):
    print(f"run_bench: error: {message}", file=sys.stderr)
    sys.exit(1)


def path_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def measure(argv):
    """Runs argv, returns (wall seconds, peak RSS KiB, CPU seconds). Wall time is taken here
    (finer than time's 10 ms); RSS and user + system time come from GNU time -v, or from
    wait4() when it is missing."""
    with tempfile.TemporaryFile() as stderr:
        wall, rss_kib, cpu, status = run_child(argv, stderr)
        if status != 0:
            stderr.seek(0)
            detail = stderr.read().decode(errors="replace").strip()[-2000:]
            fail(f"command failed with exit status {status}: {' '.join(argv)}\n{detail}")
    return wall, rss_kib, cpu


def run_child(argv, stderr):
    """(wall seconds, peak RSS KiB, CPU seconds, exit status) of argv, its stderr going to
    `stderr`."""
    if os.access(TIME_BINARY, os.X_OK):
        with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
            start = time.perf_counter()
            status = subprocess.call([TIME_BINARY, "-v", "-o", report.name] + argv,
                                     stdout=subprocess.DEVNULL, stderr=stderr)
            wall = time.perf_counter() - start
            lines = report.read().splitlines()
        rss = [line.rsplit(":", 1)[1] for line in lines if "Maximum resident set size" in line]
        rss_kib = int(rss[0]) if rss else 0
        cpu = sum(float(line.rsplit(":", 1)[1]) for line in lines
                  if "User time (seconds)" in line or "System time (seconds)" in line)
    else:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
        _, wait_status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = status = os.waitstatus_to_exitcode(wait_status)
        rss_kib = usage.ru_maxrss
        cpu = usage.ru_utime + usage.ru_stime
    return wall, rss_kib, cpu, status


def warm_up(paths):
    """Reads every input once so all commands start from the same warm page cache."""
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(READ_CHUNK):
                pass


def meminfo_kib(field_name):
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def refill_ballast(nbytes):
    """Writes `nbytes` of anonymous memory and frees it again (untimed), so the pages a timed
    write then takes for the page cache were just touched. On a VM that hands freed guest
    memory back to the host, new pages otherwise fault in from the host during the timed
    command (docs/performance-history.md: cp's bimodal times). Never takes the last
    BALLAST_RESERVE of free memory, so it cannot evict the warm inputs. Returns the bytes
    touched."""
    nbytes = min(nbytes, max(0, meminfo_kib("MemFree") * 1024 - BALLAST_RESERVE))
    nbytes -= nbytes % BALLAST_CHUNK
    if nbytes <= 0:
        return 0
    chunk = b"\xa5" * BALLAST_CHUNK
    ballast = mmap.mmap(-1, nbytes)
    try:
        for _ in range(nbytes // BALLAST_CHUNK):
            ballast.write(chunk)
    finally:
        ballast.close()
    return nbytes


def cpu_times():
    """(busy, total) jiffies of all CPUs from /proc/stat (iowait counts as idle)."""
    with open("/proc/stat", encoding="ascii") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])  # guest time is already inside user/nice
    return total - idle, total


def wait_idle(limit_s, busy_below):
    """Waits until one IDLE_WINDOW_S window has under `busy_below` of all CPUs busy, at most
    `limit_s` seconds. Returns (seconds waited, busy fraction of the last window)."""
    start = time.perf_counter()
    busy = 1.0
    while True:
        busy0, total0 = cpu_times()
        time.sleep(IDLE_WINDOW_S)
        busy1, total1 = cpu_times()
        busy = (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0
        waited = time.perf_counter() - start
        if busy < busy_below or waited >= limit_s:
            return waited, busy


def ensure_model(directory, gen_argv, params, assume_inputs_bytes, workdir, created):
    """Generates the model unless generator.json in `directory` records the same params.
    Returns the generator report; a model generated now is added to `created`."""
    marker = os.path.join(directory, "generator.json")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as handle:
            report = json.load(handle)
        if report.get("params") == params:
            return report
        shutil.rmtree(directory)
    check_disk(workdir, assume_inputs_bytes, "generating the model")
    print(f"generating {directory} ...", flush=True)
    created.append(("model", directory))
    gen_model.main(gen_argv + ["--out", directory, "--quiet"])
    with open(marker, encoding="utf-8") as handle:
        return json.load(handle)


def check_disk(workdir, needed, what):
    free = shutil.disk_usage(workdir).free
    if free < needed:
        fail(f"{workdir}: {what} needs about {needed / MIB:.0f} MiB free, "
             f"only {free / MIB:.0f} MiB available")


def stored_bytes(ptepack, argv):
    """Bytes a pack stores (its dry run's stored_bytes): the unique bytes it writes."""
    report = subprocess.run(argv + ["--dry-run", "--json"], check=True, capture_output=True,
                            text=True).stdout
    return json.loads(report)["stored_bytes"]


def make_unique_file(path, sources, nbytes):
    """Writes the first `nbytes` of the concatenated `sources` to `path` (untimed): a file as
    large as the unique bytes a pack writes, for the write and hash terms of the floor."""
    left = nbytes
    with open(path, "wb") as out:
        for source in sources:
            with open(source, "rb") as handle:
                while left > 0:
                    block = handle.read(min(READ_CHUNK, left))
                    if not block:
                        break
                    out.write(block)
                    left -= len(block)
    if left > 0:
        fail(f"{path}: inputs hold fewer than {nbytes} bytes")


def while_cores_busy(argv, cpus):
    """`argv` run while `cpus` shell loops keep every core busy, killed when it ends."""
    command = " ".join(shlex.quote(a) for a in argv)
    script = (f'pids=""; for i in $(seq {cpus}); do (while :; do :; done) & pids="$pids $!"; '
              f'done; {command}; rc=$?; kill $pids; exit $rc')
    return ["sh", "-c", script]


def floor_cases(inputs, unique, out, cpus):
    """The machine's limit, measured in the same run: read the inputs (cat), and for a file of
    the unique bytes: read it, copy it (cp, whose cost minus the read is the write), hash it
    (openssl, one core) and write it durably (dd conv=fsync, as pack ends with fsync), alone
    and while every core is busy (sync_busy: whether the disk writes back behind computation,
    which a pack that hashes while it writes needs)."""
    copy, synced = os.path.join(out, "floor_cp"), os.path.join(out, "floor_sync.bin")
    sync = ["dd", f"if={unique}", f"of={synced}", "bs=1M", "conv=fsync", "status=none"]
    return [
        Case("cat", ["cat"] + inputs),
        Case("cat_uniq", ["cat", unique]),
        Case("cp_uniq", ["cp", "--reflink=never", unique, copy], output=copy,
             remove_after=(copy,), fresh_dir=copy, writes=True),
        Case("sha_uniq", ["openssl", "dgst", "-sha256", unique]),
        Case("sync_uniq", sync, output=synced, remove_after=(synced,), writes=True),
        Case("sync_busy", while_cores_busy(sync, cpus), output=synced, remove_after=(synced,),
             writes=True),
    ]


def print_floors(results, packs, cpus):
    """For each pack case: the floor of its job (all CPU work spread over `cpus` cores) and
    pack's ratio to it, from medians and from fastest runs; and the durable floor, which also
    waits for the unique bytes to reach the disk. `packs` maps case name to whether the
    output is shard files (each hashed for its name and the manifest), or to (shards, reads):
    a merge of the input with itself reads and hashes it `reads` times."""
    def floor_of(stat, shards):
        shards, reads = shards if isinstance(shards, tuple) else (shards, 1)
        value = {name: result[stat] for name, result in results.items()}
        write = max(0.0, value["cp_uniq"] - value["cat_uniq"])
        floor = (reads * (value["sha256"] + value["cat"]) + write) / cpus
        if shards:
            floor += value["sha_uniq"] / cpus
        return floor, max(floor, value["sync_uniq"])

    print(f"\nfloor (hash all inputs + read them + write the unique bytes, over {cpus} cores; "
          "shards also hash the unique bytes)\nand durable floor (at least the unique bytes' "
          "durable write, dd conv=fsync):")
    print(f"{'case':<10}{'stat':>8}{'pack s':>9}{'floor s':>9}{'ratio':>7}{'durable s':>11}"
          f"{'ratio':>7}")
    floors = {}
    for name, shards in packs.items():
        floors[name] = {}
        for stat, label in (("median_wall_s", "median"), ("min_wall_s", "min")):
            floor, durable = floor_of(stat, shards)
            wall = results[name][stat]
            floors[name][label] = {"wall_s": wall, "floor_s": floor, "ratio": wall / floor,
                                   "durable_floor_s": durable, "durable_ratio": wall / durable}
            print(f"{name:<10}{label:>8}{wall:>9.3f}{floor:>9.3f}{wall / floor:>7.2f}"
                  f"{durable:>11.3f}{wall / durable:>7.2f}")
    stall = results["sync_busy"]["median_wall_s"] / results["sync_uniq"]["median_wall_s"]
    floors["disk_under_load"] = stall
    print(f"the durable write with every core busy takes {stall:.2f}x as long (sync_busy / "
          "sync_uniq, medians): near 1, writing overlaps hashing fully; well above 1, no pack "
          "that hashes on every core while it writes reaches the durable floor")
    return floors



def run_cases(cases, reps, rotate, verify_argv, ballast=0, idle=None):
    """Runs every case `reps` times, alternating them (rotated each repetition when `rotate`).
    verify_argv(case) gives an untimed check run on each output of the first repetition.
    Untimed before each run: when `idle` = (limit seconds, busy fraction), a wait for an idle
    machine, then a ballast refill of `ballast` bytes for cases that write."""
    for rep in range(reps):
        shift = rep % len(cases) if rotate else 0
        for case in cases[shift:] + cases[:shift]:
            if case.fresh_dir:
                remove(case.fresh_dir)
                os.makedirs(case.fresh_dir)
            note = ""
            if idle:
                waited, busy = wait_idle(*idle)
                case.idle_wait_s.append(waited)
                case.busy.append(busy)
                note = f"  (waited {waited:4.1f} s, {100 * busy:3.0f}% busy" + (
                    ", not idle)" if busy >= idle[1] else ")")
            if ballast and case.writes:
                refill_ballast(ballast)  # last, so the pages it frees are not handed back yet
            wall, rss, cpu = measure(case.argv)
            case.walls.append(wall)
            case.rss_kib.append(rss)
            case.cpu_s.append(cpu)
            print(f"  rep {rep + 1}/{reps} {case.name:<9} {wall:8.3f} s  {cpu:6.2f} s CPU  "
                  f"{rss / 1024:8.1f} MiB{note}", flush=True)
            if case.output:
                case.output_bytes = path_bytes(case.output)
                check = verify_argv(case) if rep == 0 else None
                if check:
                    measure(check)
            for path in case.remove_after:
                remove(path)
            os.sync()  # keeps write-back of one command out of the next one's timing


def print_table(title, rows, input_bytes):
    print(f"\n{title}")
    print(f"{'case':<10}{'wall s':>10}{'min s':>10}{'max s':>10}{'CPU s':>8}{'MiB/s':>10}"
          f"{'peak RSS MiB':>14}{'output MiB':>12}")
    for name, result in rows.items():
        rate = f"{result['mib_per_s']:.0f}" if result["mib_per_s"] and input_bytes else "-"
        output = f"{result['output_bytes'] / MIB:.1f}" if result["output_bytes"] else "-"
        print(f"{name:<10}{result['median_wall_s']:>10.3f}{result['min_wall_s']:>10.3f}"
              f"{result['max_wall_s']:>10.3f}{result['median_cpu_s']:>8.2f}{rate:>10}"
              f"{result['median_peak_rss_mib']:>14.1f}"
              f"{output:>12}")


def throughput(args, ptepack, workdir, jobs, created):
    shared = f"{args.shared:g}"
    name = f"model-{size_label(args.size)}-shared{shared}-seed{args.seed}"
    directory = os.path.join(workdir, name)
    gen_argv = ["--size", str(args.size), "--methods", "2", "--shared", shared,
                "--seed", str(args.seed)]
    params = {"size": args.size, "methods": 2, "layers": 0, "tensors": 0,
              "shared": args.shared, "lifted": 2, "seed": args.seed}
    report = ensure_model(directory, gen_argv, params, 2 * args.size + SLACK_BYTES, workdir,
                          created)
    programs = [os.path.join(directory, m["program"]) for m in report["methods"]]
    data = [os.path.join(directory, m["data"]) for m in report["methods"]]
    input_bytes = sum(os.path.getsize(path) for path in data)
    # One output exists at a time; the largest is cp's copy of every input byte.
    # cp's copy of every input byte, beside the floor's file of the unique bytes.
    check_disk(workdir, 3 * input_bytes + SLACK_BYTES, "the benchmark outputs")
    out = os.path.join(workdir, "out")
    remove(out)
    created.append(("output", out))
    os.makedirs(out)
    ptn, ptd, copy = (os.path.join(out, name) for name in ("model.ptn", "model_ptd", "cp"))
    cases = [
        Case("pack_ptn", [ptepack, "pack"] + jobs + ["--quiet"] + programs + ["-o", ptn],
             output=ptn, remove_after=(ptn,), writes=True),
        Case("pack_ptd", [ptepack, "pack"] + jobs + ["--quiet", "--max-shard-bytes",
                                                     args.max_shard_bytes] + programs
             + ["-o", ptd], output=ptd, remove_after=(ptd,), writes=True),
        Case("cp", ["cp", "--reflink=never"] + data + [copy], output=copy,
             remove_after=(copy,), fresh_dir=copy, writes=True),
        Case("sha256", ["openssl", "dgst", "-sha256"] + data),
    ]
    # A packed directory as input (made once, untimed): pack checks it as verify does.
    packed, repacked = os.path.join(out, "packed_input"), os.path.join(out, "repacked")
    subprocess.run([ptepack, "pack", "--quiet", "--max-shard-bytes", args.max_shard_bytes]
                   + programs + ["-o", packed], check=True)
    cases.append(Case("repack_ptd", [ptepack, "pack"] + jobs
                      + ["--quiet", "--max-shard-bytes", args.max_shard_bytes, packed,
                         "-o", repacked], output=repacked, remove_after=(repacked,),
                      writes=True))
    unique = os.path.join(workdir, "unique.bin")
    created.append(("output", unique))
    make_unique_file(unique, data, stored_bytes(ptepack, [ptepack, "pack"] + programs
                                                + ["-o", ptn]))
    cases += floor_cases(data, unique, out, os.cpu_count())
    warm_up(programs + data + [unique])
    print(f"input: {len(data)} methods, {input_bytes / MIB:.1f} MiB of safetensors, "
          f"shared fraction {report['shared_fraction']:.3f}; {args.reps} repetitions")

    def verify(case):
        if args.no_verify or not case.name.startswith("pack"):
            return None
        return [ptepack, "verify", case.output]

    ballast = input_bytes + 64 * MIB if args.ballast is None else args.ballast
    run_cases(cases, args.reps, True, verify, ballast, idle_of(args))
    results = {case.name: case.summary(input_bytes) for case in cases}
    print_table("medians over repetitions", results, input_bytes)
    ratios, best_ratios = print_ratios(results, (("pack_ptd", "cp"), ("pack_ptd", "sha256"),
                                                 ("pack_ptn", "cp"), ("pack_ptn", "sha256"),
                                                 ("repack_ptd", "pack_ptd")))
    floors = print_floors(results, {"pack_ptn": False, "pack_ptd": True}, os.cpu_count())
    return {"mode": "throughput", "model_dir": directory, "input_bytes": input_bytes,
            "input_files": data, "shared_fraction": report["shared_fraction"],
            "unique_bytes": os.path.getsize(unique), "cases": results, "ratios": ratios,
            "best_ratios": best_ratios, "floors": floors}


def scaling(args, ptepack, workdir, jobs, created):
    per_method = args.scaling_tensors // 2
    directory = os.path.join(workdir, f"scaling-{args.scaling_tensors}-seed{args.seed}")
    gen_argv = ["--size", str(args.scaling_size), "--methods", "2", "--tensors",
                str(per_method), "--shared", f"{args.shared:g}", "--seed", str(args.seed)]
    params = {"size": args.scaling_size, "methods": 2, "layers": 0, "tensors": per_method,
              "shared": args.shared, "lifted": 2, "seed": args.seed}
    report = ensure_model(directory, gen_argv, params, 4 * args.scaling_size + SLACK_BYTES,
                          workdir, created)
    programs = [os.path.join(directory, m["program"]) for m in report["methods"]]
    data = [os.path.join(directory, m["data"]) for m in report["methods"]]
    input_bytes = sum(os.path.getsize(path) for path in data)
    tensors = sum(m["tensors"] for m in report["methods"])
    out = os.path.join(workdir, "out")
    remove(out)
    created.append(("output", out))
    os.makedirs(out)
    packed = os.path.join(out, "scaling_ptd")
    small = os.path.join(out, "scaling_small_shards")
    package = os.path.join(out, "scaling.ptn")
    # pack_64k: the same model in 64 KiB shards, hundreds of them near the cap, which
    # exercises the planner's first-fit at scale.
    cases = [Case("pack", [ptepack, "pack"] + jobs + ["--quiet", "--max-shard-bytes",
                                                      args.max_shard_bytes] + programs
                  + ["-o", packed], output=packed, writes=True),
             Case("dump", [ptepack, "dump", packed]),
             Case("dump_json", [ptepack, "dump", "--json", packed]),
             Case("verify", [ptepack, "verify", packed], remove_after=(packed,)),
             Case("pack_64k", [ptepack, "pack"] + jobs + ["--quiet", "--max-shard-bytes",
                                                          "64KiB"] + programs
                  + ["-o", small], output=small, remove_after=(small,), writes=True),
             Case("pack_ptn", [ptepack, "pack"] + jobs + ["--quiet"] + programs
                  + ["-o", package], output=package, remove_after=(package,), writes=True)]
    warm_up(programs + data)
    print(f"input: {tensors} tensors in {len(data)} methods, {input_bytes / MIB:.1f} MiB; "
          f"{args.reps} repetitions")
    # dump and verify read pack's output, so the order is fixed; verify's run removes it.
    run_cases(cases, args.reps, False, lambda case: None, args.ballast, idle_of(args))
    results = {case.name: case.summary(input_bytes) for case in cases}
    print_table("medians over repetitions", results, 0)
    return {"mode": "scaling", "model_dir": directory, "input_bytes": input_bytes,
            "tensors": tensors, "cases": results}


def write_zero_byte_safetensors(path, keys):
    header = {f"model.layers.{i // 1000}.block_{i % 1000}.weight":
              {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(keys)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as handle:
        handle.write(len(text).to_bytes(8, "little") + text)
    return len(text)


def write_long_list_program(path, count):
    """A valid one-method program whose one node carries an IntListArg of `count` ones."""
    node = ('{"name": "sizes", "op_kind": "CALL_FUNCTION", "target": "aten::view", "inputs": '
            '[{"name": "size", "arg": {"value_type": "IntListArg", "value": {"values": [' +
            ",".join(["1"] * count) + ']}}}]}')
    text = ('{"version": "1", "methods": [{"name": "m", "graph": {"nodes": [' + node +
            '], "inputs": [], "outputs": []}}]}\n')
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)
    return len(text)


def metadata(args, ptepack, workdir, jobs, created):
    directory = os.path.join(workdir, "metadata")
    remove(directory)
    created.append(("output", directory))
    os.makedirs(directory)
    zeros = os.path.join(directory, "zero_byte_tensors.safetensors")
    program = os.path.join(directory, "long_list.json")
    tiny = os.path.join(directory, "tiny.json")
    header_bytes = write_zero_byte_safetensors(zeros, args.metadata_keys)
    json_bytes = write_long_list_program(program, args.metadata_ints)
    write_long_list_program(tiny, 1)
    cases = [Case("baseline", [ptepack, "verify", tiny]),
             Case("st_dump_json", [ptepack, "dump", "--json"] + jobs + [zeros]),
             Case("st_dump", [ptepack, "dump"] + jobs + [zeros]),
             Case("st_verify", [ptepack, "verify"] + jobs + [zeros]),
             Case("json_verify", [ptepack, "verify", program]),
             Case("json_dump", [ptepack, "dump", program])]
    print(f"inputs: {args.metadata_keys} zero-byte tensors ({header_bytes / MIB:.1f} MiB "
          f"header), a program JSON with {args.metadata_ints} list elements "
          f"({json_bytes / MIB:.1f} MiB); {args.reps} repetitions")
    run_cases(cases, args.reps, False, lambda case: None)
    results = {case.name: case.summary(0) for case in cases}
    print_table("medians over repetitions", results, 0)
    baseline = results["baseline"]["median_peak_rss_mib"]
    print(f"\npeak RSS over metadata bytes (baseline {baseline:.1f} MiB subtracted; bound 8x)")
    for name, result in results.items():
        if name == "baseline":
            continue
        size = header_bytes if name.startswith("st_") else json_bytes
        ratio = (result["median_peak_rss_mib"] - baseline) * MIB / size
        result["rss_over_metadata"] = ratio
        print(f"  {name:<14}{ratio:6.2f}x")
    return {"mode": "metadata", "header_bytes": header_bytes, "json_bytes": json_bytes,
            "keys": args.metadata_keys, "ints": args.metadata_ints, "cases": results}


def idle_of(args):
    return (args.idle_wait, args.idle_busy) if args.idle_wait > 0 else None


def print_ratios(results, pairs):
    """Prints median/median and fastest/fastest wall-time ratios; returns both dicts."""
    def ratios_of(stat):
        value = {name: result[stat] for name, result in results.items()}
        return {f"{a}/{b}": value[a] / value[b] if value[b] > 0 else None for a, b in pairs}

    ratios, best_ratios = ratios_of("median_wall_s"), ratios_of("min_wall_s")
    print("\nwall-time ratios, lower is better (median / median, and fastest / fastest run):")
    for name, value in ratios.items():
        best = best_ratios[name]
        print(f"  {name:<16} {value:.2f}   {best:.2f}" if value is not None and best is not None
              else f"  {name:<16} -")
    return ratios, best_ratios


def pte(args, ptepack, workdir, jobs, created):
    """One generated ExecuTorch program: pack to a directory (uncapped and capped), cp, sha256."""
    gen_argv = ["--size", str(args.size), "--dup", f"{args.pte_dup:g}",
                "--named", f"{args.pte_named:g}", "--seed", str(args.seed)]
    params = gen_pte.params_of(gen_pte.parse_args(gen_argv + ["--out", "-"]))
    directory = os.path.join(workdir, f"pte-{size_label(args.size)}-dup{args.pte_dup:g}-"
                                      f"named{args.pte_named:g}-seed{args.seed}")
    program = os.path.join(directory, "model.pte")
    marker = os.path.join(directory, "generator.json")
    report = None
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as handle:
            report = json.load(handle)
        if report.get("params") != params:
            report = None
            shutil.rmtree(directory)
    if report is None:
        check_disk(workdir, args.size + SLACK_BYTES, "generating the program")
        print(f"generating {program} ...", flush=True)
        created.append(("model", directory))
        os.makedirs(directory, exist_ok=True)
        report = gen_pte.generate(gen_pte.parse_args(
            gen_argv + ["--out", program, "--report", marker, "--quiet"]))
    input_bytes = os.path.getsize(program)
    check_disk(workdir, 3 * input_bytes + SLACK_BYTES, "the benchmark outputs")
    out = os.path.join(workdir, "out")
    remove(out)
    created.append(("output", out))
    os.makedirs(out)
    whole, capped, copy = (os.path.join(out, name) for name in ("pte_dir", "pte_cap", "cp"))
    cases = [
        Case("pack", [ptepack, "pack"] + jobs + ["--quiet", program, "-o", whole],
             output=whole, remove_after=(whole,), writes=True),
        Case("pack_cap", [ptepack, "pack"] + jobs + ["--quiet", "--max-shard-bytes",
                                                     args.max_shard_bytes, program, "-o", capped],
             output=capped, remove_after=(capped,), writes=True),
        Case("cp", ["cp", "--reflink=never", program, copy], output=copy,
             remove_after=(copy,), fresh_dir=copy, writes=True),
        Case("sha256", ["openssl", "dgst", "-sha256", program]),
    ]
    # A packed directory of the program as input (made once, untimed), back into one
    # program: pack checks the directory as verify does while it writes.
    packed, inlined = os.path.join(out, "packed_input"), os.path.join(out, "inlined.pte")
    subprocess.run([ptepack, "pack", "--quiet", "--max-shard-bytes", args.max_shard_bytes,
                    program, "-o", packed], check=True)
    cases.append(Case("repack_pte", [ptepack, "pack"] + jobs + ["--quiet", packed, "-o", inlined],
                      output=inlined, remove_after=(inlined,), writes=True))
    # The capped pack signed (--sign): signing reuses the digests the pack computed, so it
    # should cost about nothing beyond pack_cap (no second read of any file).
    key = os.path.join(workdir, "bench-signing-key.pem")
    if not os.path.exists(key):
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                        key], check=True, capture_output=True)
    signed = os.path.join(out, "pte_cap_signed")
    cases.append(Case("pack_sign", [ptepack, "pack"] + jobs + [
        "--quiet", "--max-shard-bytes", args.max_shard_bytes, "--sign", key, program, "-o",
        signed], output=signed, remove_after=(signed,), writes=True))
    # The program merged with itself under another method name: one multi-method program
    # about the size of one input (every byte stored once), as one file and capped shards.
    merged, merged_dir = os.path.join(out, "merged.pte"), os.path.join(out, "merged_dir")
    cases.append(Case("merge", [ptepack, "pack"] + jobs + ["--quiet", program, f"again={program}",
                                                           "-o", merged],
                      output=merged, remove_after=(merged,), writes=True))
    cases.append(Case("merge_cap", [ptepack, "pack"] + jobs + [
        "--quiet", program, f"again={program}", "-o", merged_dir, "--merge", "model.pte",
        "--max-shard-bytes", args.max_shard_bytes], output=merged_dir,
        remove_after=(merged_dir,), writes=True))
    unique = os.path.join(workdir, "unique.bin")
    created.append(("output", unique))
    make_unique_file(unique, [program], stored_bytes(ptepack, [ptepack, "pack", program, "-o",
                                                               whole]))
    cases += floor_cases([program], unique, out, os.cpu_count())
    ballast = input_bytes + 64 * MIB if args.ballast is None else args.ballast
    idle = idle_of(args)
    warm_up([program, unique])
    print(f"input: {program}, {input_bytes / MIB:.1f} MiB: {report['constants']} constants "
          f"({report['constant_bytes'] / MIB:.1f} MiB) and {report['named_data']} named data "
          f"({report['named_bytes'] / MIB:.1f} MiB), "
          f"{report['unique_tensor_bytes'] / MIB:.1f} MiB unique; {args.reps} repetitions; "
          f"ballast {ballast / MIB:.0f} MiB, idle wait "
          + (f"up to {args.idle_wait:g} s for < {100 * args.idle_busy:g}% busy" if idle
             else "off"), flush=True)
    shards = {}

    output_sizes = {}

    def verify(case):
        if case.name.startswith(("pack", "merge")):
            output_sizes[case.name] = path_bytes(case.output)
        if case.name.startswith(("pack", "merge")) and os.path.isdir(case.output):
            if case.name == "pack_sign":
                output_sizes["signature"] = os.path.getsize(os.path.join(case.output,
                                                                         "model.sig"))
            shards[case.name] = sum(1 for name in os.listdir(case.output)
                                    if name.endswith(".ptd"))
        if args.no_verify or not case.name.startswith(("pack", "merge")):
            return None
        return [ptepack, "verify", case.output]

    run_cases(cases, args.reps, True, verify, ballast=ballast, idle=idle)
    results = {case.name: case.summary(input_bytes) for case in cases}
    for name, count in shards.items():
        results[name]["shards"] = count
    print_table("medians over repetitions", results, input_bytes)
    print("shards: " + ", ".join(f"{name} {count}" for name, count in shards.items())
          + f" (cap {args.max_shard_bytes} for pack_cap)")
    ratios, best_ratios = print_ratios(results, (("pack", "cp"), ("pack", "sha256"),
                                                 ("pack_cap", "cp"), ("pack_cap", "sha256"),
                                                 ("repack_pte", "cp"), ("merge", "cp"),
                                                 ("merge_cap", "cp"), ("pack_sign", "pack_cap")))
    for name in ("merge", "merge_cap"):
        results[name]["output_bytes"] = output_sizes.get(name)
        print(f"{name}: output {output_sizes.get(name, 0) / MIB:.1f} MiB for two inputs of "
              f"{input_bytes / MIB:.1f} MiB ({output_sizes.get(name, 0) / input_bytes:.3f}x one)")
    floors = print_floors(results, {"pack": True, "pack_cap": True, "pack_sign": True,
                                    "merge": (False, 2), "merge_cap": (True, 2)}, os.cpu_count())
    return {"mode": "pte", "model_dir": directory, "input_bytes": input_bytes,
            "input_files": [program], "generator": report, "ballast_bytes": ballast,
            "unique_bytes": os.path.getsize(unique), "cases": results,
            "ratios": ratios, "best_ratios": best_ratios, "floors": floors}


def deploy_case(args, ptepack, workdir, jobs, created):
    """bench/deploy.py with this script's timing and the .pte generator (named data only,
    tensors of at most 8 MiB so that a variant's share is many of them)."""
    def generate(path, size, seed):
        gen_pte.generate(gen_pte.parse_args(
            ["--size", str(size), "--named", "1", "--dup", "0", "--max-tensor", "8MiB",
             "--seed", str(seed), "--out", path, "--quiet"]))
    return deploy.deploy(args, ptepack, workdir, jobs, created, measure, generate)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptepack", required=True, help="path of the ptepack binary")
    parser.add_argument("--size", type=gen_model.parse_size, default=None,
                        help="tensor bytes per method (default 512MiB; 4GiB needs ~17 GiB disk); "
                             "with --pte: tensor bytes of the program (default 1GiB)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--workdir", default="bench-work",
                        help="models and outputs go here (default ./bench-work)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the generated model for the next run (outputs are always "
                             "removed)")
    parser.add_argument("--json-out", help="also write the results to this JSON file")
    parser.add_argument("--jobs", "-j", type=int, help="pass -j N to ptepack pack")
    parser.add_argument("--shared", type=float, default=0.85,
                        help="shared fraction of weight bytes (default 0.85)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument("--max-shard-bytes", default="256MiB",
                        help="shard cap for the directory outputs (default 256MiB)")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the untimed `ptepack verify` of the first packed outputs")
    parser.add_argument("--scaling", action="store_true",
                        help="time pack/dump/verify on many small tensors instead")
    parser.add_argument("--scaling-tensors", type=int, default=100000,
                        help="total tensors over both methods in --scaling (default 100000)")
    parser.add_argument("--scaling-size", type=gen_model.parse_size,
                        default=gen_model.parse_size("32MiB"),
                        help="tensor bytes per method in --scaling (default 32MiB)")
    parser.add_argument("--metadata", action="store_true",
                        help="metadata-heavy inputs: peak RSS against metadata bytes")
    parser.add_argument("--metadata-keys", type=int, default=1000000,
                        help="zero-byte tensors in the metadata safetensors (default 1000000)")
    parser.add_argument("--metadata-ints", type=int, default=3000000,
                        help="elements of the metadata program's int list (default 3000000)")
    parser.add_argument("--deploy", action="store_true",
                        help="the deployment case: a foundation program (--size) and variants, "
                             "two releases, with and without --base (bench/deploy.py)")
    parser.add_argument("--deploy-variants", type=int, default=8,
                        help="variants over the foundation (default 8)")
    parser.add_argument("--deploy-change", type=float, default=0.01,
                        help="share of the foundation's named bytes each variant changes "
                             "(default 0.01)")
    parser.add_argument("--pte", action="store_true",
                        help="time pack of one generated ExecuTorch .pte program instead")
    parser.add_argument("--pte-dup", type=float, default=0.2,
                        help="--pte: fraction of tensor bytes repeating another tensor "
                             "(default 0.2)")
    parser.add_argument("--pte-named", type=float, default=0.5,
                        help="--pte: share of tensors stored as named data (default 0.5)")
    parser.add_argument("--ballast", type=gen_model.parse_size, default=None,
                        help="bytes of memory touched and freed before every timed write "
                             "(default: the input size + 64MiB; 0 = off; not used by --scaling "
                             "and --metadata)")
    parser.add_argument("--idle-wait", type=float, default=None,
                        help="seconds to wait at most for an idle machine before every timed "
                             "command (default 20; 0 with --scaling and --metadata)")
    parser.add_argument("--idle-busy", type=float, default=0.15,
                        help="idle means under this fraction of all CPUs busy over 0.5 s "
                             "(default 0.15)")
    args = parser.parse_args(argv)
    if sum((args.scaling, args.pte, args.metadata)) > 1:
        parser.error("--scaling, --pte and --metadata are separate runs")

    if args.size is None:
        args.size = gen_model.parse_size("1GiB" if args.pte or args.deploy else "512MiB")
    if args.idle_wait is None:
        args.idle_wait = 0.0 if args.scaling or args.metadata else 20.0
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    if not 0.0 < args.idle_busy <= 1.0 or args.idle_wait < 0:
        parser.error("--idle-busy must be in (0, 1] and --idle-wait not negative")
    try:  # reject a typo before generating gigabytes
        gen_model.parse_size(args.max_shard_bytes)
    except argparse.ArgumentTypeError as error:
        parser.error(f"--max-shard-bytes: {error}")
    return args


def main(argv=None):
    args = parse_args(argv)
    ptepack = os.path.abspath(args.ptepack)
    if not os.access(ptepack, os.X_OK):
        fail(f"{args.ptepack}: not an executable file")
    for tool in ("cp", "openssl"):
        if not shutil.which(tool):
            fail(f"{tool} not found on PATH")
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    jobs = ["-j", str(args.jobs)] if args.jobs else []
    created = []  # (kind, path) made by this run, removed at exit even after a failure
    try:
        mode = (metadata if args.metadata else scaling if args.scaling else pte if args.pte
                else deploy_case if args.deploy else throughput)
        result = mode(args, ptepack, workdir, jobs, created)
    finally:
        for kind, path in created:
            if kind == "output" or not args.keep:
                remove(path)
    result.update({
        "format": "ptepack.bench.result", "version": 1, "ptepack": ptepack,
        "config": {"size": args.size, "reps": args.reps, "shared": args.shared,
                   "seed": args.seed, "jobs": args.jobs, "max_shard_bytes": args.max_shard_bytes,
                   "scaling_tensors": args.scaling_tensors if args.scaling else None,
                   "scaling_size": args.scaling_size if args.scaling else None,
                   "pte_dup": args.pte_dup if args.pte else None,
                   "pte_named": args.pte_named if args.pte else None,
                   "ballast": args.ballast, "idle_wait": args.idle_wait,
                   "idle_busy": args.idle_busy},
        "host": {"cpus": os.cpu_count(), "platform": platform.platform(),
                 "python": platform.python_version(),
                 "rss_source": TIME_BINARY if os.access(TIME_BINARY, os.X_OK) else "wait4"}})
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1, sort_keys=True)
            handle.write("\n")
        print(f"\nresults written to {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
