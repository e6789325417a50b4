#!/usr/bin/env python3
# Every JSON document ptepack prints or writes validates against its schema in schema/
# (draft 2020-12, Debian's python3-jsonschema): the golden outputs, manifests of every
# directory kind, and .pte dumps; and the schemas do reject documents that break them.
import copy
import glob
import json
import os
import subprocess
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, load_json  # noqa: E402

try:
    import jsonschema
except ImportError:  # a pyenv or venv interpreter: Debian's package lives here
    sys.path.append("/usr/lib/python3/dist-packages")
    import jsonschema

warnings.filterwarnings("ignore", category=DeprecationWarning)  # RefResolver in newer releases
suite = Suite()
HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_DIR = os.path.join(HERE, "..", "..", "schema")
GOLDEN = os.path.join(HERE, "golden")
SCHEMA_OF = {"pack": "pack", "dump": "dump", "verify": "verify", "diff": "diff", "files": "files"}


def schemas():
    return {os.path.basename(path).split(".")[0]: load_json(path)
            for path in glob.glob(os.path.join(SCHEMA_DIR, "*.schema.json"))}


def validators():
    """Each schema on its own, as a stock validator takes it: no store, no resolver."""
    out = {}
    for name, schema in schemas().items():
        jsonschema.Draft202012Validator.check_schema(schema)
        out[name] = jsonschema.Draft202012Validator(schema)
    return out


VALIDATORS = validators()


def check(ctx, name, document, what):
    errors = sorted(VALIDATORS[name].iter_errors(document), key=lambda e: list(e.path))
    ctx.check(not errors, f"{what}: not valid {name} JSON: " + "; ".join(
        f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]))


def golden_documents():
    """(command, name, document) for every golden output that is a JSON document."""
    for folder in sorted(glob.glob(os.path.join(GOLDEN, "*", ""))):
        with open(os.path.join(folder, "cmd"), encoding="utf-8") as handle:
            argv = handle.read().splitlines()
        if "--json" not in argv:
            continue
        with open(os.path.join(folder, "stdout"), encoding="utf-8") as handle:
            stdout = handle.read()
        yield argv[0], os.path.basename(os.path.dirname(folder)), json.loads(stdout)


@suite.test
def every_golden_json_output_validates(ctx):
    seen = set()
    for command, name, document in golden_documents():
        check(ctx, SCHEMA_OF[command], document, name)
        seen.add(command)
    ctx.equal(seen, set(SCHEMA_OF), "a golden JSON output for every command")


@suite.test
def manifests_and_pte_outputs_validate(ctx):
    d = ctx.mkdir()
    examples = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    pte = os.path.join(ctx.data, "pte", "portable_multi_method.pte")
    outputs = {
        "ptd": ctx.run_ok("pack", *examples, "-o", os.path.join(d, "ptd"), "--json",
                          "--max-shard-bytes", "3000"),
        "safetensors": ctx.run_ok("pack", *examples, "-o", os.path.join(d, "st"), "--json",
                                  "--shard-format", "safetensors"),
        "pte": ctx.run_ok("pack", pte, "-o", os.path.join(d, "pte"), "--json"),
        "pte_file": ctx.run_ok("pack", os.path.join(d, "pte"), "-o", os.path.join(d, "x.pte"),
                               "--json"),
        "dry": ctx.run_ok("pack", *examples, "-o", os.path.join(d, "dry"), "--json", "--dry-run",
                          "--max-shard-bytes", "3000"),
    }
    for what, result in outputs.items():
        check(ctx, "pack", result.json(), f"pack --json ({what})")
    # A single-file output has no shards: the summary says what it is and nothing of shards,
    # while each program keeps its (empty) shard list.
    ptn = ctx.run_ok("pack", *examples, "-o", os.path.join(d, "x.ptn"), "--json").json()
    check(ctx, "pack", ptn, "pack --json (ptn)")
    single = {"ptn": ptn, "pte_file": outputs["pte_file"].json(),
              "pte_bare": ctx.run_ok("pack", pte, "-o", os.path.join(d, "y.pte"), "--json").json()}
    for what, summary in single.items():
        ctx.equal(summary["kind"], "ptn package" if what == "ptn" else "pte program",
                  f"{what}: kind")
        ctx.equal(sorted({"shard_format", "cap_mode", "max_shard_bytes", "shards"} & set(summary)),
                  [], f"{what}: shard fields in a single-file summary")
        ctx.equal([p["shards"] for p in summary.get("programs", [])],
                  [] if what == "ptn" else [[]], f"{what}: programs[].shards")
    ctx.check("shard_format" in outputs["pte"].json() and "shards" in outputs["pte"].json(),
              "a directory summary keeps its shard fields")
    for directory, version in (("ptd", 1), ("st", 1), ("pte", 2)):
        manifest = load_json(os.path.join(d, directory, "manifest.json"))
        ctx.equal(manifest["version"], version, f"{directory} manifest version")
        check(ctx, "manifest", manifest, f"{directory}/manifest.json")
        for argv in (["dump", "--json"], ["dump", "--json", "--graph"], ["verify", "--json"],
                     ["dump", "--json", "--summary", "--offsets"]):
            result = ctx.run_ok(argv[0], os.path.join(d, directory), *argv[1:])
            check(ctx, argv[0], result.json(), f"{' '.join(argv)} {directory}")
    other = os.path.join(ctx.data, "pte", "xnnpack_stress_mlp.pte")
    for a, b in ((pte, os.path.join(d, "pte")), (pte, other), (os.path.join(d, "pte"), other),
                 (os.path.join(d, "ptd"), os.path.join(d, "st"))):
        result = ctx.run("diff", a, b, "--json")
        ctx.code(result, (0, 1), f"diff {a} {b}")
        check(ctx, "diff", result.json(), f"diff {a} {b}")
    for argv in (["dump", pte, "--json"], ["dump", os.path.join(d, "x.pte"), "--json"],
                 ["dump", os.path.join(ctx.data, "two_methods.ptg"), "--json", "--graph"]):
        check(ctx, "dump", ctx.run_ok(*argv).json(), " ".join(argv[:2]))


@suite.test
def base_release_outputs_validate(ctx):
    """pack --base: the summary's base object and reused shards, a manifest with stale
    keys, and dump/verify of that directory."""
    from test_placement import STRESS, variant  # noqa: E402  (sibling test module)
    d = ctx.mkdir()
    source = os.path.join(ctx.data, "pte", STRESS + ".pte")
    changed = os.path.join(d, "r2")
    os.makedirs(changed)
    program = variant(ctx, changed, STRESS + ".pte", {0: 5, 7: 9, 13: 3})
    old, new = os.path.join(d, "old"), os.path.join(d, "new")
    ctx.run_ok("pack", source, "-o", old, "--max-shard-bytes", "600KB", "-q")
    for extra in (["--dry-run"], []):
        result = ctx.run_ok("pack", program, "-o", new, "--max-shard-bytes", "600KB", "--base",
                            old, "--json", *extra)
        summary = result.json()
        check(ctx, "pack", summary, f"pack --base --json {extra}")
        ctx.check(summary["base"]["shards_reused"] > 0, f"reused {summary['base']}")
    manifest = load_json(os.path.join(new, "manifest.json"))
    ctx.check(any("stale" in s for s in manifest["shards"]), "a shard with stale keys")
    check(ctx, "manifest", manifest, "manifest with stale keys")
    dump = ctx.run_ok("dump", new, "--json").json()
    check(ctx, "dump", dump, "dump --json of a --base release")
    ctx.check(any(s.get("stale_key_count") for s in dump["shards"]), "dump counts stale keys")
    check(ctx, "verify", ctx.run_ok("verify", new, "--json").json(), "verify --json")


@suite.test
def schemas_reject_what_breaks_the_contract(ctx):
    documents = {command: document for command, _, document in golden_documents()}
    for command, document in documents.items():
        name = SCHEMA_OF[command]
        for mutate, what in (
                (lambda j: j.pop("format"), "no format"),
                (lambda j: j.__setitem__("version", 99), "another version"),
                (lambda j: j.__setitem__("surprise", 1), "an unknown field")):
            broken = copy.deepcopy(document)
            mutate(broken)
            ctx.check(not VALIDATORS[name].is_valid(broken), f"{command}: {what} accepted")
    dump = copy.deepcopy(documents["dump"])
    if dump.get("tensors"):
        key = sorted(dump["tensors"])[0]
        dump["tensors"][key]["shape"] = "[32, 16]"
        ctx.check(not VALIDATORS["dump"].is_valid(dump), "a shape given as one string accepted")
    manifest_like = {"format": "ptepack.manifest", "version": 1}
    ctx.check(not VALIDATORS["manifest"].is_valid(manifest_like), "an empty manifest accepted")


def refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


@suite.test
def schemas_are_self_contained_and_share_one_set_of_definitions(ctx):
    common = load_json(os.path.join(SCHEMA_DIR, "common.schema.json"))["$defs"]
    for name, schema in schemas().items():
        external = [r for r in refs(schema) if not r.startswith("#/")]
        ctx.equal(external, [], f"{name}: references outside the document")
        ctx.check("$id" not in schema, f"{name}: an $id a validator could try to fetch")
        for definition, body in schema.get("$defs", {}).items():
            if definition in common:
                ctx.equal(body, common[definition], f"{name}: $defs/{definition} differs from "
                          "common.schema.json's")


@suite.test
def the_documented_offline_command_validates_real_outputs(ctx):
    """`/usr/bin/python3 -m jsonschema -i DOC SCHEMA` (Debian's jsonschema), with no network:
    the command docs/json-output.md gives, on one document of each kind."""
    d = ctx.mkdir()
    examples = [os.path.join(ctx.examples, n) for n in ("prefill.json", "decode.json")]
    out = os.path.join(d, "model")
    pte = os.path.join(ctx.data, "pte", "xnnpack_conv.pte")
    documents = {
        "pack": ctx.run_ok("pack", *examples, "-o", out, "--json").out,
        "dump": ctx.run_ok("dump", out, "--json").out,
        "verify": ctx.run_ok("verify", out, "--json").out,
        "diff": ctx.run("diff", pte, os.path.join(ctx.data, "pte", "portable_add_no_header.pte"),
                        "--json").out,
    }
    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as handle:
        documents["manifest"] = handle.read()
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               no_proxy="")
    for name, text in documents.items():
        path = os.path.join(d, f"{name}.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        schema = os.path.join(SCHEMA_DIR, f"{name}.schema.json")
        result = subprocess.run(["/usr/bin/python3", "-m", "jsonschema", "-i", path, schema],
                                capture_output=True, text=True, env=env, timeout=120)
        ctx.equal((result.returncode, result.stdout + result.stderr), (0, ""),
                  f"{name}: jsonschema command")
        broken = json.loads(text)
        broken["format"] = "something else"
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(broken, handle)
        result = subprocess.run(["/usr/bin/python3", "-m", "jsonschema", "-i", path, schema],
                                capture_output=True, text=True, env=env, timeout=120)
        ctx.check(result.returncode != 0, f"{name}: a broken document passes the command")



@suite.test
def every_failing_json_call_prints_one_error_document(ctx):
    """--json always yields one JSON document on stdout: on a failure (exit 2 to 5) the error
    document of schema/error.schema.json, its code the exit code; stderr keeps its line."""
    d = ctx.mkdir()
    pte = os.path.join(ctx.data, "pte", "xnnpack_conv.pte")
    truncated = os.path.join(d, "cut.pte")
    with open(pte, "rb") as source, open(truncated, "wb") as out:
        out.write(source.read()[:300])
    prefill = os.path.join(ctx.examples, "prefill.json")
    missing = os.path.join(d, "missing.pte")
    cases = [
        (["dump", missing, "--json"], 5, missing),
        (["verify", missing, "--json"], 5, missing),
        (["diff", pte, missing, "--json"], 5, missing),
        (["dump", truncated, "--json"], 3, truncated),
        (["pack", "--json", "-o", os.path.join(d, "x.ptn")], 2, None),
        (["pack", prefill, prefill, "-o", os.path.join(d, "y.ptn"), "--json"], 4, None),
        (["pack", pte, "-o", os.path.join(d, "z"), "--constant-alignment", "3", "--json"], 2,
         None),
        (["sign", pte, "--private-key", pte, "--json"], 2, None),
    ]
    for argv, code, path in cases:
        result = ctx.run(*argv)
        ctx.code(result, code, " ".join(argv[:2]))
        try:
            doc = json.loads(result.out)
        except ValueError:
            ctx.check(False, f"{argv}: stdout is not one JSON document: {result.out!r}")
            continue
        check(ctx, "error", doc, f"{argv[:2]} error document")
        ctx.equal(doc["error"]["code"], code, f"{argv[:2]}: code")
        line = result.err.splitlines()[0] if result.err else ""
        ctx.equal("ptepack: error: " + doc["error"]["message"], line, f"{argv[:2]}: message")
        if path is not None:
            ctx.equal(doc["error"]["path"], path, f"{argv[:2]}: path")
    # A report is still the report: verify's problems (exit 1) are not an error document.
    report = ctx.run("verify", truncated, "--json")
    ctx.code(report, 1, "verify of a truncated program")
    ctx.check("error" not in report.json(), "verify's report")


if __name__ == "__main__":
    suite.main()
