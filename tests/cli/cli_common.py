# Shared harness of the CLI suites: arguments, temp dirs, running ptepack, soft checks, fixture
# mutation, an independent safetensors writer and independent readers of packed artifacts.
import argparse
import copy
import difflib
import fnmatch
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "schema", "program.fbs")
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
import ptd_reader  # noqa: E402  (independent readers written from docs/format-*.md)
import st_reader  # noqa: E402

# Atomic-output temp files are `.<name>.ptepack-tmp-<pid>-<n>`; none may survive a run.
TEMP_PATTERN = ".*ptepack-tmp*"
ELEMENT_SIZE = st_reader.ELEMENT_SIZE
PROGRAM_DTYPE = {"F32": "FLOAT", "F64": "DOUBLE", "F16": "HALF", "BF16": "BFLOAT16",
                 "I64": "LONG", "I32": "INT", "I16": "SHORT", "I8": "CHAR", "U8": "BYTE",
                 "BOOL": "BOOL", "U16": "UINT16", "U32": "UINT32", "U64": "UINT64"}
SAFETENSORS_DTYPE = {program: code for code, program in PROGRAM_DTYPE.items()}


class CheckFailed(AssertionError):
    pass


class Result:
    """Exit code, stdout and stderr of one ptepack run."""

    def __init__(self, argv, code, out, err):
        self.argv, self.code, self.out, self.err = argv, code, out, err

    def __repr__(self):
        return (f"`ptepack {' '.join(self.argv)}` -> exit {self.code}\n"
                f"      stdout: {self.out[-600:]!r}\n      stderr: {self.err[-600:]!r}")

    def json(self):
        return json.loads(self.out)


class Context:
    """What a test gets: the binary, fixture dirs, a private temp dir and check helpers."""

    def __init__(self, args, tmp):
        self.ptepack, self.data, self.examples = args.ptepack, args.data, args.examples
        self.update, self.verbose = args.update, args.verbose
        self.tmp = tmp
        self.failures = []
        self._counter = 0

    # ----- soft checks: record and continue, so one test reports every broken rule -----
    def check(self, condition, what):
        if not condition:
            self.failures.append(what)
        return bool(condition)

    def equal(self, actual, expected, what):
        return self.check(actual == expected, f"{what}: got {actual!r}, expected {expected!r}")

    def require(self, condition, what):
        """Like check, but stops the test: later steps depend on it."""
        if not condition:
            raise CheckFailed(what)

    def code(self, result, expected, what=""):
        expected = expected if isinstance(expected, (set, tuple, list)) else (expected,)
        return self.check(result.code in expected,
                          f"{what} exit {result.code}, expected {'/'.join(map(str, expected))}: "
                          f"{result!r}")

    def error_names(self, result, names, what=""):
        """Every stderr line has the documented prefix and the message names all of `names`."""
        lines = result.err.splitlines()
        self.check(lines and all(line.startswith("ptepack: error: ") for line in lines),
                   f"{what} stderr lines lack 'ptepack: error: ': {result.err!r}")
        for name in names:
            self.check(name in result.err, f"{what} stderr does not name {name!r}: {result.err!r}")

    # ----- processes and files -----
    def run(self, *argv, cwd=None, timeout=120):
        argv = [str(a) for a in argv]
        proc = subprocess.run([self.ptepack, *argv], cwd=cwd, capture_output=True, timeout=timeout)
        result = Result(argv, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                        proc.stderr.decode("utf-8", "replace"))
        if self.verbose:
            print(f"    $ ptepack {' '.join(argv)}  -> exit {result.code}")
            for line in result.err.splitlines():
                print("      " + line)
        self.check(result.code in (0, 1, 2, 3, 4, 5),
                   f"undocumented exit code (crash or internal error): {result!r}")
        return result

    def run_ok(self, *argv, cwd=None):
        result = self.run(*argv, cwd=cwd)
        self.require(result.code == 0, f"command failed: {result!r}")
        return result

    def mkdir(self, name="t"):
        self._counter += 1
        path = os.path.join(self.tmp, f"{self._counter:03d}-{name}")
        os.makedirs(path)
        return path

    def fixture(self, stem):
        """(program JSON, {key: Tensor}) of tests/data/<stem>.json and its same-stem data."""
        program = load_json(os.path.join(self.data, stem + ".json"))
        data = os.path.join(self.data, stem + ".safetensors")
        return program, (read_safetensors(data) if os.path.exists(data) else {})

    def write_model(self, directory, stem, program, tensors):
        """Writes <stem>.json and, unless tensors is None, <stem>.safetensors; returns the json."""
        path = os.path.join(directory, stem + ".json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(program, handle, indent=1)
        if tensors is not None:
            write_safetensors(os.path.join(directory, stem + ".safetensors"), tensors)
        return path

    def fixture_pair(self, directory, mutate=None):
        """Copies prefill+decode into directory after mutate(progs, datas); returns json paths."""
        programs, datas = {}, {}
        for stem in ("prefill", "decode"):
            programs[stem], datas[stem] = self.fixture(stem)
        if mutate:
            mutate(programs, datas)
        return [self.write_model(directory, stem, programs[stem], datas[stem])
                for stem in ("prefill", "decode")]

    def flatc_json(self, ptg_bytes):
        """The Program as flatc prints it (a decoder independent of ptepack's)."""
        flatc = shutil.which("flatc")
        self.require(flatc is not None, "flatc (a build dependency) is not on PATH")
        work = self.mkdir("flatc")
        ptg = os.path.join(work, "program.ptg")
        with open(ptg, "wb") as handle:
            handle.write(ptg_bytes)
        subprocess.run([flatc, "--json", "--strict-json", "--raw-binary", "--defaults-json",
                        "-o", work, SCHEMA, "--", ptg], check=True, capture_output=True)
        return load_json(os.path.join(work, "program.json"))

    def flatc_binary(self, program):
        """Program JSON -> .ptg bytes through flatc, for hand-made artifacts."""
        work = self.mkdir("flatc")
        source = os.path.join(work, "program.json")
        with open(source, "w", encoding="utf-8") as handle:
            json.dump(program, handle)
        subprocess.run([shutil.which("flatc") or "flatc", "--binary", "--strict-json", "-o", work,
                        SCHEMA, source], check=True, capture_output=True)
        return read_file(os.path.join(work, "program.ptg"))

    def write_ptn(self, path, program, tensors, aliases, align=64):
        """A .ptn made without ptepack: zipfile, stored members; with align, each member's
        data starts at a multiple of it (padding in a private extra field, id 0xA1A1)."""
        work = self.mkdir("ptn")
        data = os.path.join(work, "program.safetensors")
        write_safetensors(data, tensors)
        members = [("program.ptg", self.flatc_binary(program)),
                   ("program.safetensors", read_file(data))]
        if aliases:
            members.append(("aliases.json", json.dumps(aliases, indent=2).encode()))
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            for name, payload in members:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                if align:
                    start = archive.fp.tell() + 30 + len(name) + 4
                    info.extra = struct.pack("<HH", 0xA1A1, -start % align) + bytes(-start % align)
                archive.writestr(info, payload)


# ----- tensors and safetensors (independent of ptepack) -----

class Tensor:
    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), bytes(data)

    def __eq__(self, other):
        return (self.dtype, self.shape, self.data) == (other.dtype, other.shape, other.data)

    def __repr__(self):
        return f"Tensor({self.dtype}, {self.shape}, {len(self.data)} B)"


def tensor(dtype, shape, fill=0):
    """A tensor whose bytes are a deterministic pattern seeded by `fill`."""
    count = 1
    for dim in shape:
        count *= dim
    size = count * ELEMENT_SIZE[dtype]
    seed = hashlib.sha256(str(fill).encode()).digest()
    data = (seed * (size // len(seed) + 1))[:size]
    return Tensor(dtype, shape, data)


def read_safetensors(path, offset=0, size=None):
    with open(path, "rb") as handle:
        handle.seek(offset)
        blob = handle.read() if size is None else handle.read(size)
    return tensors_of(blob)


def tensors_of(blob):
    parsed = st_reader.parse(blob, 0)
    start = parsed["data_start"]
    return {t["key"]: Tensor(t["dtype"], t["shape"], blob[t["offset"]:t["offset"] + t["nbytes"]])
            for t in parsed["tensors"]}


def write_safetensors(path, tensors):
    """Writes {key: Tensor} in key order, header padded with spaces to a multiple of 8."""
    header, cursor = {}, 0
    for key in sorted(tensors):
        entry = tensors[key]
        header[key] = {"dtype": entry.dtype, "shape": entry.shape,
                       "data_offsets": [cursor, cursor + len(entry.data)]}
        cursor += len(entry.data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(text)) + text)
        for key in sorted(tensors):
            handle.write(tensors[key].data)


# ----- program JSON helpers -----

def load_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def method(program, name=None):
    methods = program["methods"]
    return methods[0] if name is None else next(m for m in methods if m["name"] == name)


def walk_graphs(graph, path=""):
    """(path, graph) of graph and every GraphArg subgraph at any depth."""
    yield path, graph
    for node in graph["nodes"]:
        for argument in node.get("inputs", []):
            arg = argument["arg"]
            if arg.get("value_type") == "GraphArg":
                yield from walk_graphs(arg["value"]["graph"], f"{path}/{arg['value']['name']}")


def subgraph(graph, name):
    return next(g for p, g in walk_graphs(graph) if p.endswith("/" + name))


def node(graph, name):
    return next(n for n in graph["nodes"] if n["name"] == name)


def quant_keys(meta):
    quant = meta.get("quant") or {}
    if quant.get("scheme_type") != "AffineGroup":
        return []
    scheme = quant["scheme"]
    return [k for k in (scheme.get("scale_data_key"), scheme.get("zero_point_data_key")) if k]


def meta(dtype, shape):
    return {"dtype": dtype, "sizes": [{"min": d, "max": d} for d in shape]}


def tensor_arg(name):
    return {"value_type": "TensorArg", "value": {"name": name}}


def call(name, target, arguments, outputs=None):
    """A CALL_FUNCTION node; arguments is [(name, Argument)]."""
    return {"name": name, "op_kind": "CALL_FUNCTION", "target": target,
            "inputs": [{"name": n, "arg": a} for n, a in arguments],
            "outputs": [{"name": o} for o in (outputs or [name])]}


def placeholder(name):
    return {"name": name, "op_kind": "PLACEHOLDER", "outputs": [{"name": name}]}


def add_constant(method_json, name, key, tensor_meta, kind="PARAMETER", mutated=False):
    """Binds a new constant and restates it as a placeholder after the existing ones."""
    method_json["constants"].append({"name": name, "data_key": key, "meta": tensor_meta,
                                     "kind": kind, "mutated": mutated})
    nodes = method_json["graph"]["nodes"]
    last = max(i for i, n in enumerate(nodes) if n.get("op_kind") == "PLACEHOLDER")
    nodes.insert(last + 1, placeholder(name))


def synthetic_program(method_name, constants):
    """A minimal valid one-method program binding constants [(key, safetensors dtype, shape)]."""
    nodes = [placeholder("x")]
    bound = []
    for index, (key, dtype, shape) in enumerate(constants):
        bound.append({"name": f"c{index}", "data_key": key, "kind": "PARAMETER",
                      "meta": meta(PROGRAM_DTYPE[dtype], shape)})
        nodes.append(placeholder(f"c{index}"))
    nodes.append({"name": "output", "op_kind": "OUTPUT",
                  "inputs": [{"arg": {"value_type": "TensorListArg", "value": {"names": ["x"]}}}]})
    graph = {"nodes": nodes, "inputs": ["x"], "outputs": ["x"],
             "tensor_values": [{"name": "x", "meta": meta("FLOAT", [4])}]}
    return {"version": "1", "methods": [{
        "name": method_name, "graph": graph, "constants": bound,
        "output_specs": [{"name": "x", "kind": "USER_OUTPUT"}], "mutable_buffers": []}]}


# ----- artifacts on disk -----

def read_file(path):
    with open(path, "rb") as handle:
        return handle.read()


# docs/problems.md's one outcome of a problem for dump, diff and pack (verify exits 1 for
# any): a missing file is I/O, the signature's problems 1, any other damage invalid input.
def damage_exit_code(problem_id):
    if problem_id == "file_missing":
        return 5
    if problem_id in ("signature_missing", "signature_invalid", "release_rollback"):
        return 1
    return 3


def flip(path, offset, mask=0x01):
    """XORs the byte at `offset` of the file with `mask`, in place."""
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ mask]))


def edit_manifest(directory, change):
    """Rewrites DIR/manifest.json after change(manifest), as a hand edit would."""
    path = os.path.join(directory, "manifest.json")
    manifest = load_json(path)
    change(manifest)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)


def snapshot(path):
    """{relative path: bytes} of a file or a directory tree (None when absent)."""
    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path):
        return {"": read_file(path)}
    tree = {}
    for base, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(base, d))]):
            full = os.path.join(base, name)
            tree[os.path.relpath(full, path)] = read_file(full) if os.path.isfile(full) else "?"
        if not files and not dirs:
            tree[os.path.relpath(base, path) + "/"] = b""
    return tree


def tree_differences(first, second):
    """Human-readable differences between two snapshots."""
    if first is None or second is None:
        return [] if first == second else [f"one side missing: {first is None}/{second is None}"]
    out = [f"only in first: {k}" for k in sorted(set(first) - set(second))]
    out += [f"only in second: {k}" for k in sorted(set(second) - set(first))]
    out += [f"differs: {k or '(file)'} ({len(first[k])} vs {len(second[k])} bytes)"
            for k in sorted(set(first) & set(second)) if first[k] != second[k]]
    return out


def temp_leftovers(directory):
    return sorted(n for n in os.listdir(directory) if fnmatch.fnmatch(n, TEMP_PATTERN))


def local_data_offset(blob, info):
    """File offset of a ZIP entry's data, read from its local header (whose extra field may
    differ from the central directory's, which is what ZipInfo.extra holds)."""
    signature, = struct.unpack_from("<I", blob, info.header_offset)
    assert signature == 0x04034B50, f"{info.filename}: no local header at {info.header_offset}"
    name_len, extra_len = struct.unpack_from("<HH", blob, info.header_offset + 26)
    return info.header_offset + 30 + name_len + extra_len


def read_ptn(path):
    """{'names', 'program', 'tensors', 'aliases', 'offsets', 'stored'} of a .ptn package."""
    blob = read_file(path)
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        out = {"names": [i.filename for i in infos],
               "stored": all(i.compress_type == zipfile.ZIP_STORED for i in infos),
               "offsets": {i.filename: local_data_offset(blob, i) for i in infos},
               "testzip": archive.testzip(),
               "program": archive.read("program.ptg"),
               "tensors": {}, "aliases": {}}
        if "program.safetensors" in out["names"]:
            out["tensors"] = tensors_of(archive.read("program.safetensors"))
        if "aliases.json" in out["names"]:
            out["aliases"] = json.loads(archive.read("aliases.json"))
    return out


def read_shard(path):
    """{key: (dtype name, shape, sha256)} of one .ptd or .safetensors shard, read independently."""
    if path.endswith(".ptd"):
        parsed = ptd_reader.parse(path)
        return {e["key"]: (e["tensor_layout"]["scalar_type_name"], e["tensor_layout"]["sizes"],
                           e["sha256"]) for e in parsed["named_data"]}
    return {key: (PROGRAM_DTYPE[t.dtype], t.shape, hashlib.sha256(t.data).hexdigest())
            for key, t in read_safetensors(path).items()}


def sha256_file(path):
    return hashlib.sha256(read_file(path)).hexdigest()


def unified_diff(expected, actual, name):
    return "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                        f"{name} (stored)", f"{name} (actual)", n=2))


# ----- the runner -----

class Suite:
    """Registers tests; main() runs them all, prints `N passed, M failed` and exits the process
    with the suite's status (1 when any case failed or none ran), so no script can forget to."""

    def __init__(self):
        self.tests = []

    def test(self, function=None, *, known_bug=None):
        """Decorator. known_bug: a one-line description of a ptepack bug this test exposes;
        the test is still counted as failed while the bug exists (search 'KNOWN BUG')."""
        def register(fn):
            self.add(fn.__name__, fn, known_bug)
            return fn
        return register(function) if function else register

    def add(self, name, function, known_bug=None):
        self.tests.append((name, function, known_bug))

    def main(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--ptepack", required=True)
        parser.add_argument("--data", default=os.path.join(ROOT, "tests", "data"))
        parser.add_argument("--examples", default=os.path.join(ROOT, "examples"))
        parser.add_argument("--update", action="store_true", help="rewrite golden files")
        parser.add_argument("-k", dest="only", default="", help="run tests whose name has this")
        parser.add_argument("-v", dest="verbose", action="store_true",
                            help="print every command, its exit code and stderr")
        args, _ = parser.parse_known_args()
        args.ptepack = os.path.abspath(args.ptepack)
        args.data, args.examples = os.path.abspath(args.data), os.path.abspath(args.examples)
        passed = failed = 0
        with tempfile.TemporaryDirectory(prefix="ptepack-cli-") as tmp:
            for name, function, known_bug in self.tests:
                if args.only not in name:
                    continue
                ctx = Context(args, os.path.join(tmp, name))
                os.makedirs(ctx.tmp)
                try:
                    function(ctx)
                except CheckFailed as error:
                    ctx.failures.append(f"{error} (test stopped here)")
                except Exception:  # a harness error fails this test only
                    ctx.failures.append(traceback.format_exc().rstrip())
                label = f" [KNOWN BUG: {known_bug}]" if known_bug else ""
                if ctx.failures:
                    failed += 1
                    print(f"FAIL {name}{label}")
                    for failure in ctx.failures:
                        print("    - " + failure.replace("\n", "\n      "))
                else:
                    passed += 1
                    print(f"ok   {name}" + (f" (marked known bug, now passing: {known_bug})"
                                            if known_bug else ""))
                shutil.rmtree(ctx.tmp, ignore_errors=True)
        print(f"{passed} passed, {failed} failed")
        if passed + failed == 0:
            print(f"no test matched -k {args.only!r}")
        raise SystemExit(1 if failed or passed + failed == 0 else 0)


def deep(value):
    return copy.deepcopy(value)


def run_in_terminal(argv, columns=80, interrupt_when=None, timeout=120):
    """Runs argv with stdout and stderr on a pseudo-terminal `columns` wide; returns (exit code,
    everything it printed, as text with \\r\\n kept). interrupt_when(output so far) -> True sends
    SIGINT once."""
    import fcntl
    import pty
    import select
    import signal
    import struct
    import termios
    import time
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = dict(os.environ, COLUMNS=str(columns))
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                               env=env, close_fds=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(slave)
    output = b""
    sent = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: every writer exited
                break
            if not chunk:
                break
            output += chunk
        if interrupt_when and not sent and interrupt_when(output.decode("utf-8", "replace")):
            process.send_signal(signal.SIGINT)
            sent = True
        if not ready and process.poll() is not None:
            break
    if process.poll() is None:
        process.kill()
    code = process.wait()
    os.close(master)
    return code, output.decode("utf-8", "replace")
