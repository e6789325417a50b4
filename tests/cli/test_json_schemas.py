#!/usr/bin/env python3
# Every JSON document ptepack prints or writes validates against its schema in schema/
# (draft 2020-12, Debian's python3-jsonschema): the golden outputs, manifests of every
# directory kind, and .pte dumps; and the schemas do reject documents that break them.
import copy
import glob
import json
import os
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
SCHEMA_OF = {"pack": "pack", "dump": "dump", "verify": "verify", "diff": "diff"}


def validators():
    store = {}
    for path in glob.glob(os.path.join(SCHEMA_DIR, "*.schema.json")):
        schema = load_json(path)
        jsonschema.Draft202012Validator.check_schema(schema)
        store[schema["$id"]] = schema
    out = {}
    for schema in store.values():
        name = os.path.basename(schema["$id"]).split(".")[0]
        resolver = jsonschema.RefResolver.from_schema(schema, store=store)
        out[name] = jsonschema.Draft202012Validator(schema, resolver=resolver)
    return out


VALIDATORS = validators()


def check(ctx, name, document, what):
    errors = sorted(VALIDATORS[name].iter_errors(document), key=lambda e: list(e.path))
    ctx.check(not errors, f"{what}: not valid {name} JSON: " + "; ".join(
        f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]))


def golden_documents():
    """(command, name, document) for every golden output that is a JSON document."""
    for path in sorted(glob.glob(os.path.join(GOLDEN, "*.txt"))):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        argv = text.split("\n", 1)[0].split()[2:]
        if "--json" not in argv:
            continue
        stdout = text.split("--- stdout\n", 1)[1].split("--- stderr", 1)[0]
        yield argv[0], os.path.basename(path), json.loads(stdout)


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
    for directory, version in (("ptd", 1), ("st", 1), ("pte", 2)):
        manifest = load_json(os.path.join(d, directory, "manifest.json"))
        ctx.equal(manifest["version"], version, f"{directory} manifest version")
        check(ctx, "manifest", manifest, f"{directory}/manifest.json")
        for argv in (["dump", "--json"], ["dump", "--json", "--graph"], ["verify", "--json"],
                     ["dump", "--json", "--summary", "--offsets"]):
            result = ctx.run_ok(argv[0], os.path.join(d, directory), *argv[1:])
            check(ctx, argv[0], result.json(), f"{' '.join(argv)} {directory}")
    for argv in (["dump", pte, "--json"], ["dump", os.path.join(d, "x.pte"), "--json"],
                 ["dump", os.path.join(ctx.data, "two_methods.ptg"), "--json", "--graph"]):
        check(ctx, "dump", ctx.run_ok(*argv).json(), " ".join(argv[:2]))


@suite.test
def schemas_reject_what_breaks_the_contract(ctx):
    documents = {command: document for command, _, document in golden_documents()}
    for command, document in documents.items():
        name = SCHEMA_OF[command]
        for mutate, what in (
                (lambda j: j.pop("format"), "no format"),
                (lambda j: j.__setitem__("version", 2), "another version"),
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


if __name__ == "__main__":
    suite.main()
