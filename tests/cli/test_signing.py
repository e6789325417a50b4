#!/usr/bin/env python3
# Signed releases (docs/signing.md): `ptepack sign`, `pack --sign` and `pack --release` write
# OpenSSF Model Signing v1.0 bundles that an independent verifier (tests/tools/oms_tool.py,
# Debian's python3-cryptography) accepts, and that fail it after each tampering; bundles that
# verifier signs in model_signing's own shape verify with `ptepack verify --public-key`;
# rollback bounds, keys handled as secrets, and hostile bundles, each with its exit code and
# message.
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite, edit_manifest, load_json, read_file, temp_leftovers  # noqa: E402
import oms_tool  # noqa: E402  (tests/tools is on sys.path through cli_common)

suite = Suite()


def openssl(*argv):
    subprocess.run(["openssl", *argv], check=True, capture_output=True)


def keys(ctx, name="k", curve="prime256v1"):
    """(private PEM, public PEM) of a new EC key on `curve`."""
    d = ctx.mkdir("keys")
    private, public = os.path.join(d, name + ".pem"), os.path.join(d, name + ".pub")
    openssl("ecparam", "-name", curve, "-genkey", "-noout", "-out", private)
    openssl("ec", "-in", private, "-pubout", "-out", public)
    return private, public


def release(ctx, *extra, name="rel"):
    out = os.path.join(ctx.mkdir(name), name)
    ctx.run_ok("pack", os.path.join(ctx.data, "pte", "xnnpack_conv.pte"),
               os.path.join(ctx.data, "pte", "portable_multi_method.pte"), "-o", out, "-q",
               *extra)
    return out


def signature(out):
    return read_file(os.path.join(out, "model.sig")).decode()


def independent(ctx, out, public, what, bundle=None):
    found = oms_tool.verify(out, public, bundle if bundle is not None else signature(out))
    ctx.equal(found, [], f"{what}: the independent verifier")


def refused_by_both(ctx, out, public, what, needle, bundle=None, problem=None):
    result = ctx.run("verify", out, "--public-key", public)
    ctx.code(result, 1, f"{what}: ptepack verify")
    ctx.check(needle in result.err, f"{what}: {needle!r} not in {result.err!r}")
    report = ctx.run("verify", out, "--public-key", public, "--json")
    ctx.code(report, 1, f"{what}: verify --json")
    doc = report.json()
    ctx.equal((doc["ok"], doc["signature"]["checked"]), (False, True), f"{what}: --json ok, checked")
    if problem is not None:
        ctx.check(problem in {p["id"] for p in doc["problem_details"]},
                  f"{what}: problem {problem} not in {doc['problem_details']}")
    found = oms_tool.verify(out, public, bundle if bundle is not None else signature(out))
    ctx.check(found, f"{what}: the independent verifier accepted it")


@suite.test
def sign_and_pack_sign_write_what_an_independent_verifier_accepts(ctx):
    private, public = keys(ctx)
    out = release(ctx)
    result = ctx.run_ok("sign", out, "--private-key", private, "--json").json()
    ctx.equal((result["format"], result["files"]), ("ptepack.sign", 5), "sign --json")
    independent(ctx, out, public, "sign")
    ctx.code(ctx.run("verify", out, "--public-key", public), 0, "ptepack verify")
    bundle = json.loads(signature(out))
    ctx.equal(sorted(bundle), ["dsseEnvelope", "mediaType", "verificationMaterial"],
              "bundle fields")
    ctx.equal(bundle["dsseEnvelope"]["signatures"][0]["keyid"], "", "keyid")
    payload = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    ctx.equal(payload["predicate"]["serialization"],
              {"method": "files", "hash_type": "sha256", "allow_symlinks": False,
               "ignore_paths": ["model.sig", ".git", ".gitattributes", ".github", ".gitignore"]},
              "serialization")
    ctx.equal([r["name"] for r in payload["predicate"]["resources"]],
              sorted(n for n in os.listdir(out) if n != "model.sig"), "every file, sorted")
    # pack --sign: the same release, signed before it is committed.
    signed = release(ctx, "--sign", private, name="signed")
    independent(ctx, signed, public, "pack --sign")
    ctx.code(ctx.run("verify", signed, "--public-key", public), 0, "pack --sign: ptepack verify")
    # Every file but the signature is byte-identical to the unsigned release's (ECDSA uses a
    # random nonce: model.sig alone differs from run to run).
    for name in os.listdir(out):
        if name != "model.sig":
            ctx.equal(read_file(os.path.join(signed, name)), read_file(os.path.join(out, name)),
                      f"{name} of the signed and the unsigned release")
    # A renamed directory still verifies: the subject's name does not bind.
    moved = os.path.join(ctx.mkdir("moved"), "renamed")
    shutil.copytree(signed, moved)
    ctx.code(ctx.run("verify", moved, "--public-key", public), 0, "renamed directory")
    independent(ctx, moved, public, "renamed directory")


@suite.test
def a_program_graph_release_with_a_safetensors_index_is_signed_whole(ctx):
    private, public = keys(ctx)
    out = os.path.join(ctx.mkdir("graph"), "graph")
    ctx.run_ok("pack", os.path.join(ctx.examples, "prefill.json"),
               os.path.join(ctx.examples, "decode.json"), "-o", out, "--max-shard-bytes", "3000",
               "--shard-format", "safetensors", "--sign", private, "--release", "4", "-q")
    independent(ctx, out, public, "program graphs, safetensors shards")
    payload = json.loads(base64.b64decode(json.loads(signature(out))["dsseEnvelope"]["payload"]))
    names = [r["name"] for r in payload["predicate"]["resources"]]
    ctx.check("model.safetensors.index.json" in names and "program.ptg" in names, names)
    ctx.code(ctx.run("verify", out, "--public-key", public, "--min-release", "4"), 0, "verify")


@suite.test
def other_curves_sign_and_verify(ctx):
    for curve in ("secp384r1", "secp521r1"):
        private, public = keys(ctx, curve, curve)
        out = release(ctx, "--sign", private, name=curve)
        ctx.code(ctx.run("verify", out, "--public-key", public), 0, f"{curve}: verify")
        independent(ctx, out, public, curve)


@suite.test
def a_bundle_signed_in_model_signings_shape_verifies(ctx):
    private, public = keys(ctx)
    out = release(ctx)
    with open(os.path.join(out, "model.sig"), "w", encoding="utf-8") as handle:
        handle.write(oms_tool.sign(out, private))
    result = ctx.run("verify", out, "--public-key", public, "--json")
    ctx.code(result, 0, "a foreign signature")
    report = result.json()
    ctx.equal((report["signature"]["checked"], report["signature"]["valid"]), (True, True),
              "verify --json signature")
    # Kept outside the directory (model_signing's own default), named with --signature.
    outside = os.path.join(ctx.mkdir("outside"), "model.sig")
    os.rename(os.path.join(out, "model.sig"), outside)
    with open(outside, "w", encoding="utf-8") as handle:
        handle.write(oms_tool.sign(out, private))
    ctx.code(ctx.run("verify", out, "--public-key", public, "--signature", outside), 0,
             "--signature outside the directory")
    # A foreign signature whose ignore_paths leave a file of the release unsigned.
    with open(outside, "w", encoding="utf-8") as handle:
        handle.write(oms_tool.sign(out, private, ignore=["model.sig", ".git", "manifest.json"]))
    result = ctx.run("verify", out, "--public-key", public, "--signature", outside)
    ctx.code(result, 1, "ignore_paths hiding manifest.json")
    ctx.check("leaves 'manifest.json' unsigned" in result.err, result.err)


def flip(path, offset=-1):
    data = bytearray(read_file(path))
    data[offset] ^= 1
    with open(path, "wb") as handle:
        handle.write(bytes(data))


@suite.test
def a_correctly_signed_but_inconsistent_payload_is_refused(ctx):
    """Bundles a key really signed, whose payloads are wrong: the subject's digest not that of
    the resources, and a release file left out of the resources."""
    private, public = keys(ctx)
    with open(private, "rb") as handle:
        key = oms_tool.serialization.load_pem_private_key(handle.read(), None)
    out = release(ctx)
    files = oms_tool.files_of(out, ["model.sig"] + oms_tool.GIT)
    ignore = ["model.sig"] + oms_tool.GIT
    wrong_subject = oms_tool.statement("rel", files, ignore)
    wrong_subject["subject"][0]["digest"]["sha256"] = "0" * 64
    missing = oms_tool.statement("rel", [f for f in files if not f[0].endswith(".ptd")], ignore)
    for what, doc, needle in (("subject digest", wrong_subject, "the subject's digest"),
                              ("a file left out", missing, "is not signed")):
        bundle = oms_tool.bundle_of(json.dumps(doc).encode(), key)
        path = os.path.join(ctx.mkdir("sig"), "model.sig")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(bundle)
        result = ctx.run("verify", out, "--public-key", public, "--signature", path)
        ctx.code(result, 1, what)
        ctx.check(needle in result.err, f"{what}: {needle!r} not in {result.err!r}")


@suite.test
def every_tampering_fails_both_verifiers(ctx):
    private, public = keys(ctx)
    _, other_public = keys(ctx, "other")

    def shard_byte(out):
        shard = next(n for n in os.listdir(out) if n.endswith(".ptd"))
        flip(os.path.join(out, shard))
        return shard

    def manifest_and_digest(out):  # a shard changed and the manifest fixed to match it
        shard = shard_byte(out)
        manifest = load_json(os.path.join(out, "manifest.json"))
        entry = next(s for s in manifest["shards"] if s["file"] == shard)
        entry["sha256"] = hashlib.sha256(read_file(os.path.join(out, shard))).hexdigest()
        with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as handle:
            json.dump(manifest, handle, indent=2)
        return "manifest.json"

    def extra_file(out):
        with open(os.path.join(out, "notes.txt"), "w", encoding="utf-8") as handle:
            handle.write("x")
        return "notes.txt"

    def removed_program(out):
        os.remove(os.path.join(out, "portable_multi_method.pte"))
        return "portable_multi_method.pte"

    cases = [(shard_byte, "SHA-256"), (manifest_and_digest, "'manifest.json' differs"),
             (extra_file, "notes.txt"), (removed_program, "portable_multi_method.pte")]
    for damage, needle in cases:
        out = release(ctx, "--sign", private, name=damage.__name__)
        damage(out)
        refused_by_both(ctx, out, public, damage.__name__, needle)
        doc = ctx.run("verify", out, "--public-key", public, "--json").json()
        if damage is manifest_and_digest:  # only the signature tells this one
            ctx.equal(doc["signature"]["valid"], False, f"{damage.__name__}: signature.valid")
    out = release(ctx, "--sign", private, name="other_key")
    result = ctx.run("verify", out, "--public-key", other_public)
    ctx.code(result, 1, "another key")
    ctx.check("signed by another key" in result.err, result.err)
    doc = ctx.run("verify", out, "--public-key", other_public, "--json").json()
    ctx.equal((doc["ok"], doc["signature"]["checked"], doc["signature"]["valid"]),
              (False, True, False), "another key: --json ok, checked, valid")
    good = ctx.run("verify", out, "--public-key", public, "--json").json()
    ctx.check(len(good["signature"]["key_hint"]) == 64, f"the bundle's hint: {good['signature']}")
    ctx.equal(doc["signature"]["key_hint"], good["signature"]["key_hint"],
              "another key: --json still names the bundle's key hint")
    text = ctx.run("verify", out, "--public-key", public).out.splitlines()
    ctx.equal(text[1:], [f"signature: valid, {os.path.join(out, 'model.sig')} by {public} "
                         f"(key hint {good['signature']['key_hint'][:16]}), release (none)"],
              "a verified signature is said in the text")
    ctx.check(oms_tool.verify(out, other_public, signature(out)), "independent: another key")
    # The payload changed (a file dropped from the list, subject fixed) with the old signature.
    bundle = json.loads(signature(out))
    payload = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    payload["predicate"]["resources"].pop()
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    text = json.dumps(bundle)
    with open(os.path.join(out, "model.sig"), "w", encoding="utf-8") as handle:
        handle.write(text)
    refused_by_both(ctx, out, public, "payload changed", "does not verify", text)


def forged_shard(out):
    """A byte of a named-data tensor changed, and every record derived from it rewritten to
    match: the tensor's digest, the shard's digest, size and digest-derived name, and each
    program's shard list."""
    manifest = load_json(os.path.join(out, "manifest.json"))
    key = next(k for k, t in manifest["tensors"].items() if t["nbytes"] == 864)
    old = manifest["tensors"][key]["shard"]
    data = bytearray(read_file(os.path.join(out, old)))
    # The tensor's bytes are the shard's payload whose SHA-256 the manifest records.
    start = next(i for i in range(0, len(data) - 863)
                 if hashlib.sha256(data[i:i + 864]).hexdigest() == manifest["tensors"][key]["sha256"])
    data[start + 100] ^= 0x01
    digest = hashlib.sha256(data).hexdigest()
    new = f"weights-{digest[:16]}.ptd"
    os.remove(os.path.join(out, old))
    with open(os.path.join(out, new), "wb") as handle:
        handle.write(data)
    tensor_digest = hashlib.sha256(data[start:start + 864]).hexdigest()

    def change(m):
        m["tensors"][key]["sha256"] = tensor_digest
        for t in m["tensors"].values():
            if t.get("shard") == old:
                t["shard"] = new
        for shard in m["shards"]:
            if shard["file"] == old:
                shard.update(file=new, sha256=digest)
        for program in m["programs"]:
            program["shards"] = [new if f == old else f for f in program["shards"]]
        weight_map = m.get("weight_map") or {}
        for k, f in weight_map.items():
            weight_map[k] = new if f == old else f
    edit_manifest(out, change)


def forged_program(out):
    """A byte of a program's delegate blob changed, its manifest digest rewritten."""
    path = os.path.join(out, "xnnpack_conv.pte")
    data = bytearray(read_file(path))
    data[-100] ^= 0x01
    with open(path, "wb") as handle:
        handle.write(data)

    def change(m):
        entry = next(p for p in m["programs"] if p["file"] == "xnnpack_conv.pte")
        entry["sha256"] = hashlib.sha256(data).hexdigest()
    edit_manifest(out, change)


def forged_manifest(out):
    """The release number raised past every rollback bound, nothing else touched."""
    edit_manifest(out, lambda m: m.__setitem__("release", 99))


@suite.test
def only_the_signature_stops_a_consistent_forgery(ctx):
    """Every record ptepack can derive is made to agree with the change; the release still
    verifies without a key, so only the signature stands between it and acceptance."""
    private, public = keys(ctx)
    for forge in (forged_shard, forged_program, forged_manifest):
        out = release(ctx, "--release", "1", "--sign", private, name=forge.__name__)
        forge(out)
        ctx.code(ctx.run("verify", out), 0, f"{forge.__name__}: consistent without a key")
        result = ctx.run("verify", out, "--public-key", public, "--json")
        ctx.code(result, 1, f"{forge.__name__}: verify --public-key")
        doc = result.json()
        ctx.equal((doc["ok"], doc["signature"]["checked"], doc["signature"]["valid"]),
                  (False, True, False), f"{forge.__name__}: ok, checked, valid")
        ctx.check("signature_invalid" in {p["id"] for p in doc["problem_details"]},
                  f"{forge.__name__}: signature_invalid in {doc['problem_details']}")
        ctx.check(oms_tool.verify(out, public, signature(out)),
                  f"{forge.__name__}: the independent verifier accepted it")


@suite.test
def release_numbers_guard_against_rollback(ctx):
    private, public = keys(ctx)
    first = release(ctx, "--release", "1", "--sign", private, name="r1")
    ctx.equal(load_json(os.path.join(first, "manifest.json"))["release"], 1, "release 1")
    second = os.path.join(ctx.mkdir("r2"), "r2")
    conv = os.path.join(ctx.data, "pte", "xnnpack_conv.pte")
    multi = os.path.join(ctx.data, "pte", "portable_multi_method.pte")
    result = ctx.run("pack", conv, multi, "-o", second, "--base", first, "--release", "1")
    ctx.code(result, 2, "--release not greater than the base's")
    ctx.check("must be greater than" in result.err and not os.path.exists(second), result.err)
    ctx.run_ok("pack", conv, multi, "-o", second, "--base", first, "--release", "2", "--sign",
               private, "-q")
    manifest = load_json(os.path.join(second, "manifest.json"))
    ctx.equal(manifest["base_manifest_sha256"],
              hashlib.sha256(read_file(os.path.join(first, "manifest.json"))).hexdigest(),
              "the base's manifest digest")
    ctx.code(ctx.run("verify", second, "--public-key", public, "--newer-than", "1"), 0,
             "newer than 1")
    result = ctx.run("verify", first, "--public-key", public, "--newer-than", "1")
    ctx.code(result, 1, "release 1 is not newer than 1 (rollback)")
    ctx.check("not newer than 1" in result.err, result.err)
    ctx.code(ctx.run("verify", second, "--public-key", public, "--min-release", "2"), 0,
             "min release 2")
    ctx.code(ctx.run("verify", first, "--public-key", public, "--min-release", "2"), 1,
             "release 1 under min 2")
    result = ctx.run("verify", second, "--newer-than", "1")
    ctx.code(result, 2, "--newer-than without a key")
    # A signed release with no number passes no bound: it could be any release.
    unnumbered = release(ctx, "--sign", private, name="unnumbered")
    ctx.code(ctx.run("verify", unnumbered, "--public-key", public), 0, "unnumbered, no bound")
    for bound in (["--min-release", "5"], ["--newer-than", "0"], ["--newer-than", "5"]):
        result = ctx.run("verify", unnumbered, "--public-key", public, *bound)
        ctx.code(result, 1, f"an unnumbered release with {bound}")
        ctx.check("release (none)" in result.err, f"{bound}: {result.err}")
        doc = ctx.run("verify", unnumbered, "--public-key", public, *bound, "--json").json()
        ctx.equal((doc["ok"], doc.get("release"), doc["signature"]["valid"]), (False, None, True),
                  f"{bound}: --json ok, release, signature.valid")
        ctx.equal([p["id"] for p in doc["problem_details"]], ["release_rollback"],
                  f"{bound}: the problem")
    # Without --release, the release after the base's, said in a note; the chain recorded.
    third = os.path.join(ctx.mkdir("r3"), "r3")
    result = ctx.run("pack", conv, multi, "-o", third, "--base", second)
    ctx.code(result, 0, "--base without --release")
    ctx.check("release 3: the next after --base" in result.out, f"the note: {result.out}")
    chained = load_json(os.path.join(third, "manifest.json"))
    ctx.equal((chained["release"], chained["base_manifest_sha256"]),
              (3, hashlib.sha256(read_file(os.path.join(second, "manifest.json"))).hexdigest()),
              "release 3, chained to release 2")
    # A base with no number and no --release: neither, and the same content reproduces it.
    plain = release(ctx, name="plain")
    fourth = os.path.join(ctx.mkdir("r4"), "r4")
    ctx.run_ok("pack", conv, multi, "-o", fourth, "--base", plain, "-q")
    unnumbered = load_json(os.path.join(fourth, "manifest.json"))
    ctx.equal((unnumbered.get("release"), unnumbered.get("base_manifest_sha256")), (None, None),
              "a base without a number")
    ctx.equal(read_file(os.path.join(fourth, "manifest.json")),
              read_file(os.path.join(plain, "manifest.json")), "reproduced byte for byte")
    # A repack carries the number and the base's digest unchanged.
    again = os.path.join(ctx.mkdir("again"), "again")
    ctx.run_ok("pack", second, "-o", again, "-q")
    carried = load_json(os.path.join(again, "manifest.json"))
    ctx.equal((carried["release"], carried["base_manifest_sha256"]),
              (2, manifest["base_manifest_sha256"]), "a repack's release fields")
    for bad in ("0", "9007199254740992"):
        result = ctx.run("pack", conv, "-o", os.path.join(ctx.tmp, "x"), "--release", bad)
        ctx.code(result, 2, f"--release {bad}")


@suite.test
def keys_are_handled_as_secrets(ctx):
    private, public = keys(ctx)
    d = ctx.mkdir("enc")
    encrypted = os.path.join(d, "enc.pem")
    openssl("pkcs8", "-topk8", "-in", private, "-out", encrypted, "-v2", "aes-256-cbc",
            "-passout", "pass:s3cret-pass")
    secret_file = os.path.join(d, "pass.txt")
    with open(secret_file, "w", encoding="utf-8") as handle:
        handle.write("s3cret-pass\n")
    out = release(ctx)
    ctx.run_ok("sign", out, "--private-key", encrypted, "--key-password-file", secret_file)
    ctx.code(ctx.run("verify", out, "--public-key", public), 0, "signed with an encrypted key")
    os.environ["PTEPACK_TEST_PASS"] = "s3cret-pass"
    try:
        ctx.run_ok("sign", out, "--private-key", encrypted, "--key-password-env",
                   "PTEPACK_TEST_PASS")
    finally:
        del os.environ["PTEPACK_TEST_PASS"]
    with open(secret_file, "w", encoding="utf-8") as handle:
        handle.write("wrong\n")
    for argv, needle in (
            (["--private-key", encrypted, "--key-password-file", secret_file], "wrong passphrase"),
            (["--private-key", encrypted], "--key-password-file"),
            (["--private-key", public], "a public key"),
            (["--private-key", os.path.join(d, "missing.pem")], "missing.pem")):
        result = ctx.run("sign", out, *argv)
        ctx.code(result, 5 if "missing" in needle else 2, f"sign {argv}")
        ctx.check(needle in result.err, f"{argv}: {needle!r} not in {result.err!r}")
        ctx.check("s3cret" not in result.err + result.out and "BEGIN" not in result.err,
                  "a secret printed")
    result = ctx.run("verify", out, "--public-key", private)
    ctx.code(result, 2, "a private key as --public-key")
    ctx.check("a private key" in result.err, result.err)
    ed = os.path.join(d, "ed.pem")
    openssl("genpkey", "-algorithm", "ed25519", "-out", ed)
    result = ctx.run("sign", out, "--private-key", ed)
    ctx.code(result, 2, "an Ed25519 key")
    ctx.check("not an elliptic-curve key" in result.err, result.err)


@suite.test
def sign_refuses_damage_and_single_files(ctx):
    private, public = keys(ctx)
    out = release(ctx)
    shard = next(n for n in os.listdir(out) if n.endswith(".ptd"))
    flip(os.path.join(out, shard))
    result = ctx.run("sign", out, "--private-key", private)
    ctx.code(result, 1, "sign of a damaged release")
    ctx.check("SHA-256" in result.err, f"verify's problem lines: {result.err!r}")
    ctx.check(not os.path.exists(os.path.join(out, "model.sig")), "a damaged release was signed")
    ctx.equal(temp_leftovers(out), [], "temporary files")
    conv = os.path.join(ctx.data, "pte", "xnnpack_conv.pte")
    for target in ("x.pte", "x.ptn"):
        path = os.path.join(ctx.mkdir("single"), target)
        result = ctx.run("pack", conv, "-o", path, "--sign", private)
        ctx.code(result, 2, f"--sign with {target}")
        ctx.check(not os.path.exists(path), f"{target} written")
    bad = os.path.join(ctx.mkdir("bad"), "out")
    result = ctx.run("pack", conv, "-o", bad, "--sign", public)
    ctx.code(result, 2, "pack --sign with a public key")
    ctx.check(not os.path.exists(bad), "written with a bad key")


@suite.test
def an_unchecked_signature_is_a_note_and_git_files_are_skipped(ctx):
    private, public = keys(ctx)
    out = release(ctx, "--sign", private)
    result = ctx.run("verify", out)
    ctx.code(result, 0, "no --public-key")
    ctx.check("not checked" in result.err, result.err)
    ctx.code(ctx.run("verify", out, "--strict"), 1, "--strict makes it a failure")
    os.makedirs(os.path.join(out, ".git", "objects"))
    with open(os.path.join(out, ".gitignore"), "w", encoding="utf-8") as handle:
        handle.write("*.tmp\n")
    ctx.code(ctx.run("verify", out, "--public-key", public), 0, "git's files are skipped")
    unsigned = release(ctx, name="unsigned")
    result = ctx.run("verify", unsigned, "--public-key", public)
    ctx.code(result, 1, "no signature with --public-key")
    ctx.check("no signature" in result.err, result.err)
    result = ctx.run("verify", os.path.join(ctx.data, "pte", "xnnpack_conv.pte"), "--public-key",
                     public)
    ctx.code(result, 2, "--public-key on a program file")


@suite.test
def a_program_swapped_under_its_manifest_record_is_found(ctx):
    """What verify can close from the files themselves: the slim add program put in place of
    xnnpack_conv.pte, its digest and size fixed in the manifest, still leaves the manifest's
    named-data keys for it, which a program without a delegate cannot read."""
    out = release(ctx)
    other = os.path.join(ctx.mkdir("add"), "add")
    ctx.run_ok("pack", os.path.join(ctx.data, "pte", "portable_add_no_header.pte"), "-o", other,
               "-q")
    shutil.copyfile(os.path.join(other, "portable_add_no_header.pte"),
                    os.path.join(out, "xnnpack_conv.pte"))
    manifest = load_json(os.path.join(out, "manifest.json"))
    entry = next(p for p in manifest["programs"] if p["file"] == "xnnpack_conv.pte")
    data = read_file(os.path.join(out, "xnnpack_conv.pte"))
    entry["sha256"], entry["size"] = hashlib.sha256(data).hexdigest(), len(data)
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
    result = ctx.run("verify", out)
    ctx.code(result, 1, "a swapped program")
    ctx.check("has no delegate to read them" in result.err, result.err)


def hostile_bundles(good):
    """(name, bundle text) of malformed signatures, each a variant of a good one."""
    bundle = json.loads(good)
    env = bundle["dsseEnvelope"]

    def edited(change):
        copy = json.loads(good)
        change(copy)
        return json.dumps(copy)
    payload = base64.b64decode(env["payload"])
    sig = base64.b64decode(env["signatures"][0]["sig"])
    return [
        ("truncated", good[: len(good) // 2]),
        ("empty", ""),
        ("not utf-8", "\xff\xfe".encode("latin-1").decode("latin-1") + good),
        ("duplicate key", good.replace('"mediaType"', '"mediaType": "x", "mediaType"', 1)),
        ("unknown field", edited(lambda b: b.update({"extra": 1}))),
        ("unknown envelope field", edited(lambda b: b["dsseEnvelope"].update({"x": 1}))),
        ("media type", edited(lambda b: b.update({"mediaType": "application/json"}))),
        ("base64 garbage", edited(lambda b: b["dsseEnvelope"].update({"payload": "!!!!"}))),
        ("unpadded base64", edited(lambda b: b["dsseEnvelope"].update(
            {"payload": env["payload"].rstrip("=") + "A"}))),
        ("short DER", edited(lambda b: b["dsseEnvelope"]["signatures"][0].update(
            {"sig": base64.b64encode(sig[:10]).decode()}))),
        ("long DER", edited(lambda b: b["dsseEnvelope"]["signatures"][0].update(
            {"sig": base64.b64encode(sig + b"\0" * 9).decode()}))),
        ("two signatures", edited(lambda b: b["dsseEnvelope"]["signatures"].append(
            b["dsseEnvelope"]["signatures"][0]))),
        ("no signatures", edited(lambda b: b["dsseEnvelope"].update({"signatures": []}))),
        ("payload type", edited(lambda b: b["dsseEnvelope"].update({"payloadType": "text/x"}))),
        ("payload not JSON", edited(lambda b: b["dsseEnvelope"].update(
            {"payload": base64.b64encode(payload[:-3]).decode()}))),
        ("deep nesting", "[" * 100000 + "]" * 100000),
        ("huge", " " * (65 << 20)),
    ]


@suite.test
def hostile_bundles_are_problems_never_crashes(ctx):
    private, public = keys(ctx)
    out = release(ctx, "--sign", private)
    good = signature(out)
    for name, text in hostile_bundles(good):
        path = os.path.join(ctx.mkdir("bad"), "model.sig")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(text)
        result = ctx.run("verify", out, "--public-key", public, "--signature", path, timeout=120)
        ctx.code(result, 1, f"hostile bundle: {name}")
        lines = result.err.splitlines()
        ctx.check(len(lines) == 1 and lines[0].startswith(f"ptepack: error: {path}"),
                  f"{name}: not one line naming the bundle: {result.err[:300]!r}")


if __name__ == "__main__":
    suite.main()
