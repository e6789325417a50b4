#!/usr/bin/env python3
# The deployment case of the ptepack benchmark (run_bench.py --deploy), standard library only.
"""A foundation program and variants of it, packed as an app ships them, release over release.

The foundation is a generated ExecuTorch program (gen_pte.py, delegate-style named data keyed
by the SHA-256 of its bytes, as XNNPACK keys them). Each variant is the foundation with about
`--deploy-change` of its named-data bytes given new bytes and new keys (what a fine-tune, a
LoRA merge or a per-device requantisation gives). Release 1 packs the foundation and its
variants together; release 2 gives every variant new bytes again and is packed with and
without --base release 1. Reported: time, peak RSS, the bytes each program loads beyond what
it uses (dump --json), and the download from release 1 against the bytes that changed.
"""
import hashlib
import json
import mmap
import os
import random
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
import pte_reader  # noqa: E402  (the independent .pte reader of the tests)

MIB = 1 << 20


def parsed_program(path):
    """The program parsed by the tests' reader over a read-only map of the file."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return pte_reader.parse(m)


def named_entries(path):
    """[(key, file offset, size)] of a program's named data."""
    parsed = parsed_program(path)
    out = []
    for entry in parsed["program"]["named_data"]:
        start, size = pte_reader.segment_range(parsed, entry["segment_index"])
        out.append((entry["key"], start, size))
    return out


def make_variant(source, target, fraction, seed):
    """Copies `source` to `target` and gives named-data entries holding about `fraction` of
    its named bytes new bytes; each one's key (its old SHA-256 hex, in the named-data table
    and the delegate blob) becomes the new bytes' SHA-256 hex. Returns the bytes changed."""
    shutil.copyfile(source, target)
    entries = named_entries(target)
    goal = fraction * sum(size for _, _, size in entries)
    rng = random.Random(seed)
    order = list(range(len(entries)))
    rng.shuffle(order)
    chosen, total = [], 0
    for index in order:
        size = entries[index][2]
        if total >= goal:
            break
        if total + size <= 1.5 * goal:
            chosen.append(index)
            total += size
    with open(target, "r+b") as handle, mmap.mmap(handle.fileno(), 0) as data:
        head_end = min(len(data), 1 << 20)
        renames = []
        for index in chosen:
            key, start, size = entries[index]
            step = 4093
            for i in range(0, size, step):
                data[start + i] ^= (seed & 0xFF) | 1
            new_key = hashlib.sha256(data[start:start + size]).hexdigest()
            renames.append((key.encode(), new_key.encode()))
        # Keys live in the flatbuffer and in the (small) delegate blob segments.
        ranges = [(0, head_end)] + delegate_ranges(target)
        for old, new in renames:
            for begin, end in ranges:
                at = data.find(old, begin, end)
                while at != -1:
                    data[at:at + len(old)] = new
                    at = data.find(old, at + len(new), end)
    return total


def delegate_ranges(path):
    """File ranges of the program's delegate blobs stored in segments."""
    parsed = parsed_program(path)
    ranges = []
    for plan in parsed["program"].get("execution_plan", []):
        for delegate in plan.get("delegates", []):
            processed = delegate.get("processed", {})
            if processed.get("location") == 1 and "index" in processed:
                start, size = pte_reader.segment_range(parsed, processed["index"])
                ranges.append((start, start + size))
    return ranges


def files_of(directory):
    """{file: (sha256 hex, size)} from a packed directory's manifest, manifest aside."""
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    files = {p["file"]: (p["sha256"], p["size"]) for p in manifest["programs"]}
    files.update({s["file"]: (s["sha256"], s["size"]) for s in manifest["shards"]})
    return files


def download(old, new):
    before = files_of(old)
    return sum(size for name, (sha, size) in files_of(new).items()
               if before.get(name, (None,))[0] != sha)


def waste(ptepack, directory):
    """{program: bytes loaded / bytes used - 1} from dump --json."""
    report = json.loads(subprocess.run([ptepack, "dump", directory, "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    return {p["file"]: p["data_bytes_loaded"] / p["data_bytes_used"] - 1
            for p in report["programs"]}


def two_halves(directory):
    """The files of a directory in two lists of about equal bytes (largest first, each to
    the lighter list): what two `openssl dgst` processes hash on two cores."""
    files = sorted((os.path.join(directory, name) for name in os.listdir(directory)),
                   key=os.path.getsize, reverse=True)
    halves, totals = ([], []), [0, 0]
    for path in files:
        lighter = 0 if totals[0] <= totals[1] else 1
        halves[lighter].append(path)
        totals[lighter] += os.path.getsize(path)
    return halves


def verify_release(args, ptepack, release, jobs, measure, runs):
    """`ptepack verify` of a release whose programs share tensors, against openssl hashing
    the same files split over both cores (two processes), in turn; and verify's bytes
    hashed against the files' total."""
    halves = two_halves(release)
    both = " & ".join("openssl dgst -sha256 " + " ".join(half) + " >/dev/null"
                      for half in halves if half) + " & wait"
    for name, command in (("verify", [ptepack, "verify"] + jobs + [release]),
                          ("verify_tensors", [ptepack, "verify", "--tensors"] + jobs + [release]),
                          ("sha256_2p", ["sh", "-c", both])):
        walls = sorted(measure(command) for _ in range(args.reps))
        wall, rss, cpu = walls[len(walls) // 2]
        runs[name] = {"wall_s": wall, "rss_mib": rss / 1024, "cpu_s": cpu}
    report = json.loads(subprocess.run([ptepack, "verify", "--json"] + jobs + [release],
                                       capture_output=True, text=True).stdout)
    runs["verify"]["bytes_hashed"] = report["bytes_hashed"]
    runs["verify"]["files_bytes"] = sum(os.path.getsize(p) for half in halves for p in half)


def deploy(args, ptepack, workdir, jobs, created, measure, generate):
    """Runs the case; `measure(argv)` -> (wall, rss KiB, cpu), `generate(path, size, seed)`
    writes the foundation program."""
    base_dir = os.path.join(workdir, f"deploy-{args.size >> 20}MiB-{args.deploy_variants}v")
    os.makedirs(base_dir, exist_ok=True)
    created.append(("model", base_dir))
    foundation = os.path.join(base_dir, "foundation.pte")
    if not os.path.exists(foundation):
        print(f"generating {foundation} ...", flush=True)
        generate(foundation, args.size, args.seed)
    releases = {}
    for release in (1, 2):
        folder = os.path.join(base_dir, f"r{release}")
        os.makedirs(folder, exist_ok=True)
        programs = [foundation]
        for v in range(args.deploy_variants):
            path = os.path.join(folder, f"variant{v}.pte")
            if not os.path.exists(path):
                make_variant(foundation, path + ".tmp", args.deploy_change, 1000 * release + v)
                os.replace(path + ".tmp", path)  # complete, or absent
            programs.append(path)
        releases[release] = programs
    out = os.path.join(workdir, "deploy-out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    created.append(("output", out))
    cap = ["--max-shard-bytes", args.max_shard_bytes]
    rel1, rel2, rel2_fresh = (os.path.join(out, n) for n in ("rel1", "rel2", "rel2_fresh"))
    runs = {}
    for name, argv in (("release1", releases[1] + ["-o", rel1]),
                       ("release2_fresh", releases[2] + ["-o", rel2_fresh]),
                       ("release2_base", releases[2] + ["-o", rel2, "--base", rel1]),
                       ("sha256", None)):
        # sha256: openssl over release 2's inputs, the floor of reading and hashing them.
        command = (["openssl", "dgst", "-sha256"] + releases[2] if argv is None else
                   [ptepack, "pack", "--quiet"] + jobs + cap + argv)
        target = argv[argv.index("-o") + 1] if argv else None
        walls = []
        for rep in range(args.reps):
            if target:
                shutil.rmtree(target, ignore_errors=True)
            wall, rss, cpu = measure(command)
            walls.append((wall, rss, cpu))
            print(f"  rep {rep + 1}/{args.reps} {name:<15} {wall:8.3f} s  {cpu:6.2f} s CPU  "
                  f"{rss / 1024:7.1f} MiB RSS", flush=True)
        walls.sort()
        wall, rss, cpu = walls[len(walls) // 2]
        runs[name] = {"wall_s": wall, "rss_mib": rss / 1024, "cpu_s": cpu}
        if target:
            subprocess.run([ptepack, "verify", target], check=True, capture_output=True)
    verify_release(args, ptepack, rel2, jobs, measure, runs)
    summary = json.loads(subprocess.run(
        [ptepack, "pack", "--json"] + jobs + cap + releases[2] + ["-o", rel2, "--base", rel1],
        check=True, capture_output=True, text=True).stdout)["base"]
    input_bytes = sum(os.path.getsize(p) for p in releases[1])
    result = {
        "mode": "deploy", "input_bytes": input_bytes, "variants": args.deploy_variants,
        "change": args.deploy_change, "runs": runs,
        "waste_release1": waste(ptepack, rel1), "waste_release2": waste(ptepack, rel2),
        "changed_bytes": summary["changed_bytes"],
        "download_base": download(rel1, rel2), "download_fresh": download(rel1, rel2_fresh),
        "summary_download": summary["download_bytes"], "shards_reused": summary["shards_reused"],
        "shards_new": summary["shards_new"], "stale_bytes": summary["stale_bytes"],
    }
    print(f"\ninputs: foundation {os.path.getsize(foundation) / MIB:.0f} MiB and "
          f"{args.deploy_variants} variants ({100 * args.deploy_change:g}% of named bytes new "
          f"each), {input_bytes / MIB:.0f} MiB read per release; cap {args.max_shard_bytes}")
    print(f"{'case':<16}{'wall s':>9}{'CPU s':>8}{'RSS MiB':>9}")
    for name, r in runs.items():
        print(f"{name:<16}{r['wall_s']:9.2f}{r['cpu_s']:8.2f}{r['rss_mib']:9.1f}")
    checked = runs["verify"]
    print(f"verify of release 2: {checked['bytes_hashed'] / MIB:.1f} MiB hashed of "
          f"{checked['files_bytes'] / MIB:.1f} MiB of files; "
          f"{checked['wall_s'] / runs['sha256_2p']['wall_s']:.2f}x the wall of openssl over "
          f"the same files in two processes "
          f"({runs['verify_tensors']['wall_s'] / runs['sha256_2p']['wall_s']:.2f}x with --tensors)")
    print(f"release2_base / sha256 of its inputs: "
          f"{runs['release2_base']['wall_s'] / runs['sha256']['wall_s']:.2f}x wall")
    for key in ("waste_release1", "waste_release2"):
        values = result[key].values()
        print(f"{key}: loads beyond use, max {100 * max(values):.2f}%, "
              f"mean {100 * sum(values) / len(values):.2f}% over {len(values)} programs")
    changed = result["changed_bytes"]
    print(f"release 2 download: {result['download_base'] / MIB:.1f} MiB with --base, "
          f"{result['download_fresh'] / MIB:.1f} MiB without, against "
          f"{changed / MIB:.1f} MiB changed ({result['download_base'] / changed:.2f}x, "
          f"{result['download_fresh'] / changed:.2f}x); {result['shards_reused']} shards "
          f"reused, {result['shards_new']} new, {result['stale_bytes'] / MIB:.1f} MiB stale")
    return result
