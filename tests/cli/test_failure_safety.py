#!/usr/bin/env python3
# Output safety when writing fails part way (file size limit, full filesystem, unwritable
# directory, SIGTERM/SIGINT): no partial output, no temp file left, an existing output unchanged.
import atexit
import glob
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import ROOT, Suite, run_in_terminal, snapshot, tree_differences  # noqa: E402

suite = Suite()
GENERATOR = os.path.join(ROOT, "bench", "gen_model.py")
_big_model = None


def examples(ctx):
    return [os.path.join(ctx.examples, "prefill.json"), os.path.join(ctx.examples, "decode.json")]


def generate(out, size, methods=2):
    subprocess.run([sys.executable, GENERATOR, "--out", out, "--size", size, "--methods",
                    str(methods), "--quiet"], check=True, timeout=300)
    return [os.path.join(out, name + ".json") for name in ("prefill", "decode")[:methods]]


def big_model():
    """~300 MB of weights (150 MiB per method) from bench/gen_model.py, generated once."""
    global _big_model
    if _big_model is None:
        root = tempfile.mkdtemp(prefix="ptepack-failure-safety-model-")
        atexit.register(shutil.rmtree, root, True)
        _big_model = generate(os.path.join(root, "model"), "150MiB")
    return _big_model


def temps_beside(output):
    """Temporaries of this output: `.<name>.ptepack-tmp-<pid>-<n>` in its directory."""
    parent, name = os.path.split(os.path.abspath(output))
    pattern = os.path.join(glob.escape(parent), f".{glob.escape(name)}.ptepack-tmp*")
    return sorted(os.path.basename(p) for p in glob.glob(pattern))


def writing(process, output):
    """True once the pack is writing `output`: its temporary exists, or (for a file output
    written through O_TMPFILE, which has no name) it holds an unnamed file in that directory."""
    if temps_beside(output):
        return True
    parent = os.path.dirname(os.path.abspath(output))
    fd_dir = f"/proc/{process.pid}/fd"
    try:
        for fd in os.listdir(fd_dir):
            target = os.readlink(os.path.join(fd_dir, fd))
            if target.startswith(parent + "/#") or (target.startswith(parent + "/")
                                                   and target.endswith("(deleted)")):
                return True
    except OSError:
        pass
    return False


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def run_raw(ctx, *args, preexec_fn=None):
    """(exit code, stderr lines), without the harness's exit-code check: these runs may die."""
    result = subprocess.run([ctx.ptepack, *args], capture_output=True, timeout=120,
                            preexec_fn=preexec_fn)
    return result.returncode, result.stderr.decode("utf-8", "replace").splitlines()


def check_failed_cleanly(ctx, what, code, stderr, output, before):
    """A failed write: exit 5 (I/O), one error line, no temporary, the output as it was."""
    leftovers = temps_beside(output)
    if code < 0:
        ctx.check(False, f"{what}: killed by {signal.Signals(-code).name}, expected exit 5; "
                         f"temporaries left: {leftovers}")
    else:
        if ctx.check(code == 5, f"{what}: exit {code}, expected 5: {stderr[:3]}"):
            ctx.check(len(stderr) == 1 and stderr[0].startswith("ptepack: error: "),
                      f"{what}: expected one 'ptepack: error:' line, got {stderr[:3]}")
        ctx.check(not leftovers, f"{what}: temporaries left: {leftovers}")
    for name in leftovers:  # so the next case is judged on its own
        remove(os.path.join(os.path.dirname(os.path.abspath(output)), name))
    after = snapshot(output)
    if before is None:
        ctx.check(after is None, f"{what}: a partial output was left at {output}")
    else:
        ctx.check(after == before, f"{what}: the existing output changed: "
                                   f"{tree_differences(before, after)[:3]}")


def largest_file(path):
    if os.path.isdir(path):
        return max(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return os.path.getsize(path)


def fsize_limit(limit, ignore_sigxfsz):
    def apply():
        if ignore_sigxfsz:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def sweep_fsize(ctx, ignore_sigxfsz):
    """RLIMIT_FSIZE below the largest file pack writes: pack fails, leaving nothing behind; at
    the largest file's size it succeeds. .ptn and directory outputs, with and without an
    existing output (a different, one-method model) at the path."""
    prefill, decode = examples(ctx)
    for kind, name in (("package", "out.ptn"), ("directory", "out_dir")):
        reference = os.path.join(ctx.tmp, "reference-" + name)
        ctx.run_ok("pack", prefill, decode, "-o", reference, "-q")
        largest = largest_file(reference)
        for existing in (False, True):
            output = os.path.join(ctx.tmp, name)
            remove(output)
            if existing:
                ctx.run_ok("pack", prefill, "-o", output, "-q")
            before = snapshot(output)
            for limit in (0, 1, 512, largest // 3, largest // 2, largest - 1):
                code, stderr = run_raw(ctx, "pack", prefill, decode, "-o", output, "-q",
                                       preexec_fn=fsize_limit(limit, ignore_sigxfsz))
                check_failed_cleanly(ctx, f"{kind} under RLIMIT_FSIZE={limit} (existing output: "
                                          f"{existing})", code, stderr, output, before)
                if code < 0:
                    break  # every larger limit dies the same way
            code, stderr = run_raw(ctx, "pack", prefill, decode, "-o", output, "-q",
                                   preexec_fn=fsize_limit(largest, ignore_sigxfsz))
            ctx.check(code == 0 and snapshot(output) == snapshot(reference),
                      f"{kind} at RLIMIT_FSIZE={largest} (the largest file): exit {code} "
                      f"{stderr[:2]}, expected the reference output")


@suite.test
def file_size_limit(ctx):
    """(a) Writes fail with EFBIG part way (SIGXFSZ ignored, as a parent process may leave it)."""
    sweep_fsize(ctx, ignore_sigxfsz=True)


@suite.test
def file_size_limit_default_sigxfsz(ctx):
    """(a) `prlimit --fsize=N`: SIGXFSZ keeps its default action (terminate)."""
    sweep_fsize(ctx, ignore_sigxfsz=False)


class Mount:
    """A mount for the duration of a test; `skipped` says why when this system may not mount."""

    def __init__(self, target, *mount_args):
        self.target, self.skipped, self.mounted = target, None, False
        os.makedirs(target, exist_ok=True)
        result = subprocess.run(["mount", *mount_args, target], capture_output=True, text=True)
        if result.returncode != 0:
            self.skipped = (f"cannot mount {' '.join(mount_args)} on {target}: "
                            f"{result.stderr.strip() or result.returncode}")
        else:
            self.mounted = True

    def remount(self, *options):
        result = subprocess.run(["mount", "-o", ",".join(options), self.target],
                                capture_output=True, text=True)
        if result.returncode != 0:
            self.skipped = f"cannot remount {self.target} {options}: {result.stderr.strip()}"
        return result.returncode == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.mounted:
            subprocess.run(["umount", self.target], capture_output=True)


def skip(reason):
    print(f"    skipped: {reason}")


@suite.test
def full_filesystem(ctx):
    """(b) A 256 KiB tmpfs and a model of several MB: ENOSPC part way through every output."""
    model = generate(os.path.join(ctx.tmp, "model"), "2MiB")
    with Mount(os.path.join(ctx.tmp, "small-fs"), "-t", "tmpfs", "-o", "size=256k",
               "tmpfs") as fs:
        if fs.skipped:
            return skip(fs.skipped)
        for name in ("out.ptn", "out_dir"):
            for existing in (False, True):
                output = os.path.join(fs.target, name)
                remove(output)
                if existing:
                    ctx.run_ok("pack", *examples(ctx), "-o", output, "-q")
                before = snapshot(output)
                code, stderr = run_raw(ctx, "pack", *model, "-o", output, "-q")
                check_failed_cleanly(ctx, f"{name} on a full filesystem (existing output: "
                                          f"{existing})", code, stderr, output, before)
                remove(output)
        ctx.equal(os.listdir(fs.target), [], "files left on the full filesystem")


@suite.test
def unwritable_directory(ctx):
    """(c) Outputs that cannot be created. Root ignores permission bits, so: a parent that is a
    regular file, a directory under /proc, and a read-only bind mount."""
    not_a_dir = os.path.join(ctx.tmp, "regular-file")
    with open(not_a_dir, "w") as handle:
        handle.write("not a directory\n")
    for output in (os.path.join(not_a_dir, "out.ptn"), os.path.join(not_a_dir, "out_dir"),
                   "/proc/self/out.ptn", "/proc/self/out_dir"):
        code, stderr = run_raw(ctx, "pack", *examples(ctx), "-o", output, "-q")
        check_failed_cleanly(ctx, f"output {output}", code, stderr, output, None)
    with open(not_a_dir) as handle:
        ctx.equal(handle.read(), "not a directory\n", "the file standing in for a directory")

    read_only = os.path.join(ctx.tmp, "read-only")
    os.makedirs(read_only)
    prefill = examples(ctx)[0]
    ctx.run_ok("pack", prefill, "-o", os.path.join(read_only, "out.ptn"), "-q")
    ctx.run_ok("pack", prefill, "-o", os.path.join(read_only, "out_dir"), "-q")
    with Mount(read_only, "--bind", read_only) as mount:
        if mount.skipped or not mount.remount("remount", "bind", "ro"):
            return skip(mount.skipped)
        for name in ("out.ptn", "out_dir", "new.ptn", "new_dir"):
            output = os.path.join(read_only, name)
            before = snapshot(output)
            code, stderr = run_raw(ctx, "pack", *examples(ctx), "-o", output, "-q")
            check_failed_cleanly(ctx, f"{name} on a read-only mount", code, stderr, output,
                                 before)


def interrupt(ctx, name, sig, existing, delay=0.0, options=(), model=None):
    """Starts packing the big model, waits for its temporary beside `name` (and `delay` more
    seconds), delivers `sig`: exit 128 + sig, no temporary left, the existing output (if any)
    unchanged."""
    output = os.path.join(ctx.tmp, name)
    remove(output)
    if existing:
        ctx.run_ok("pack", *examples(ctx), "-o", output, "-q")
    before = snapshot(output)

    def default_signals():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    process = subprocess.Popen([ctx.ptepack, "pack", *(model or big_model()), "-o", output, "-q",
                                *options],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               preexec_fn=default_signals)
    deadline = time.monotonic() + 60
    while not writing(process, output) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    saw_temp = writing(process, output)
    time.sleep(delay)
    process.send_signal(sig)
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        ctx.check(False, f"{name}: no exit within 30 s of {sig.name}")
        return
    what = (f"{sig.name} {delay} s into writing {name} {' '.join(options)} (existing output: "
            f"{existing})")
    if not ctx.check(saw_temp, f"{what}: pack ended (exit {process.returncode}) before its "
                               "temporary appeared"):
        return
    if process.returncode == 0:
        # The signal came after the output was renamed into place: the command completed
        # (documented), so the output must be whole and nothing temporary may remain.
        ctx.check(not temps_beside(output), f"{what}: temporaries left: {temps_beside(output)}")
        verify = ctx.run("verify", output)
        ctx.equal(verify.code, 0, f"{what}: completed output does not verify")
        remove(output)
        return
    ctx.equal(process.returncode, 128 + sig.value, f"{what}: exit code "
              f"({stderr.decode('utf-8', 'replace')[:200]!r})")
    ctx.equal(stderr, b"ptepack: interrupted\n", f"{what}: one line on stderr, not a terminal")
    ctx.check(not temps_beside(output), f"{what}: temporaries left: {temps_beside(output)}")
    after = snapshot(output)
    if before is None:
        ctx.check(after is None, f"{what}: a partial output was left")
    else:
        ctx.check(after == before, f"{what}: the existing output changed")
    remove(output)


@suite.test
def signals_during_pack(ctx):
    """(d) SIGTERM and SIGINT while a ~300 MB model is written to a .ptn: exit 143/130, no
    temporary left, an existing output unchanged."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        for existing in (False, True):
            interrupt(ctx, "big.ptn", sig, existing)


@suite.test
def an_interrupt_on_a_terminal_leaves_one_line_after_the_progress(ctx):
    """Ctrl-C while the progress line is drawn: the line is replaced by "ptepack: interrupted"
    and nothing is drawn after it (the progress thread and the interrupt do not race)."""
    interrupted = 0
    prefill, decode = big_model()
    # Each input twice (the copies as methods of other names) on one thread: about 0.6 s on
    # these machines, against 0.2 s for the whole model on two, which can end before the first
    # progress line is drawn (200 ms).
    inputs = [prefill, decode, f"again_prefill={prefill}", f"again_decode={decode}"]
    for attempt in range(8):
        output = os.path.join(ctx.tmp, f"tty-{attempt}")
        code, text = run_in_terminal(
            [ctx.ptepack, "pack", *inputs, "-o", output, "-j", "1", "--progress", "auto"],
            columns=100, interrupt_when=lambda seen: "hashed" in seen or "written" in seen)
        if code == 0:  # finished before the first progress line: nothing to interrupt
            remove(output)
            continue
        interrupted += 1
        ctx.equal(code, 130, f"attempt {attempt}: exit code ({text[-200:]!r})")
        ctx.check(text.endswith("\x1b[Kptepack: interrupted\r\n"),
                  f"attempt {attempt}: the last thing drawn is the one line: {text[-160:]!r}")
        ctx.equal(text.count("ptepack: interrupted"), 1, f"attempt {attempt}: said once")
        ctx.check(not os.path.exists(output), f"attempt {attempt}: no output left")
    ctx.check(interrupted > 0, "no attempt was interrupted while its progress line was drawn")


_many_shards = None


def many_shard_model():
    """2 x 64 MiB in 400 tensors per method: with a 1 MiB cap, ~75 shard files."""
    global _many_shards
    if _many_shards is None:
        root = tempfile.mkdtemp(prefix="ptepack-failure-safety-shards-")
        atexit.register(shutil.rmtree, root, True)
        out = os.path.join(root, "model")
        subprocess.run([sys.executable, GENERATOR, "--out", out, "--size", "64MiB", "--methods",
                        "2", "--tensors", "400", "--quiet"], check=True, timeout=300)
        _many_shards = [os.path.join(out, name + ".json") for name in ("prefill", "decode")]
    return _many_shards


@suite.test
def signals_during_directory_pack(ctx):
    """(d) SIGTERM and SIGINT while a directory output is written: the ~300 MB model with and
    without an existing output, then a ~75-shard model signalled at seeded moments."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        for existing in (False, True):
            interrupt(ctx, "big_dir", sig, existing)
    rng = random.Random(5)
    for attempt in range(8):
        interrupt(ctx, f"shards_{attempt}", signal.SIGTERM, attempt % 2 == 1,
                  round(rng.uniform(0.0, 0.6), 3), ("--max-shard-bytes", "1MiB"),
                  model=many_shard_model())


def start_and_kill(ctx, output, options=()):
    """Starts packing the big model into `output`, SIGKILLs it while it writes."""
    process = subprocess.Popen([ctx.ptepack, "pack", *big_model(), "-o", output, "-q", *options],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not writing(process, output) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    saw = writing(process, output)
    process.kill()
    process.wait()
    return saw and process.returncode == -signal.SIGKILL


@suite.test
def sigkill_leaves_no_file_temporary(ctx):
    """SIGKILL cannot be caught: a .ptn output is written unnamed (O_TMPFILE), so nothing is
    left beside it."""
    output = os.path.join(ctx.tmp, "killed.ptn")
    ctx.require(start_and_kill(ctx, output), "pack finished before it could be killed")
    ctx.equal(temps_beside(output), [], "temporaries left after SIGKILL")
    ctx.check(not os.path.exists(output), "a partial output was left")


@suite.test
def sigkill_leftovers_are_noted_then_removed_by_the_next_pack(ctx):
    """A killed directory pack leaves its temporary directory: verify of the output notes it,
    the next pack to that output removes it, and a live process's temporary is never touched."""
    output = os.path.join(ctx.tmp, "model")
    ctx.run_ok("pack", *examples(ctx), "-o", output, "-q")
    ctx.require(start_and_kill(ctx, output), "pack finished before it could be killed")
    left = temps_beside(output)
    ctx.require(left, "test setup: SIGKILL left no temporary directory")
    live = os.path.join(ctx.tmp, f".model.ptepack-tmp-{os.getpid()}-0")
    os.mkdir(live)  # as if this (running) process were packing
    r = ctx.run("verify", output)
    ctx.code(r, 0, "verify with a stray temporary beside the output")
    ctx.check("note:" in r.err and left[0] in r.err, f"stray temporary not noted: {r.err!r}")
    ctx.run_ok("pack", *examples(ctx), "-o", output, "-q")
    ctx.equal(temps_beside(output), [os.path.basename(live)],
              "temporaries after the next pack (only the live one may remain)")
    os.rmdir(live)


if __name__ == "__main__":
    suite.main()
