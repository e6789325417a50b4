#!/usr/bin/env python3
"""An independent signer and verifier of OpenSSF Model Signing v1.0 key-based signatures,
for tests: written from the format as sigstore/model-transparency's `model_signing` v1.1.1
writes and checks it (docs/signing.md), with Debian's python3-cryptography, sharing no code
with ptepack.

sign(directory, private_key_pem) -> bundle text, in the reference's shape (one compact line);
verify(directory, public_key_pem, bundle_text) -> list of problems (empty: verified), doing
what `model_signing verify key` does: media type, key hint, ECDSA over the DSSE PAE, the
in-toto statement, the subject digest, then every file of the directory (git's files and
the payload's ignore_paths skipped) hashed and compared with the signed resources.
"""
import base64
import hashlib
import json
import os
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
GIT = [".git", ".gitattributes", ".github", ".gitignore"]


def _hash_for(key):
    size = key.curve.key_size
    return {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}[size]


def _hint(public_key):
    pem = public_key.public_bytes(serialization.Encoding.PEM,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def pae(payload):
    return b"DSSEv1 %d %s %d " % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(payload)) + payload


def _ignored(rel, ignore):
    first = rel.split("/")[0]
    return any(rel == p.rstrip("/") or first == p.rstrip("/") for p in ignore)


def files_of(directory, ignore):
    """[(relative path, sha256 hex)] of every regular file, sorted by path component."""
    out = []
    for root, dirs, names in os.walk(directory):
        for name in names:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, directory).replace(os.sep, "/")
            if _ignored(rel, ignore):
                continue
            with open(full, "rb") as handle:
                out.append((rel, hashlib.sha256(handle.read()).hexdigest()))
    out.sort(key=lambda item: item[0].split("/"))
    return out


def statement(name, files, ignore):
    root = hashlib.sha256(b"".join(bytes.fromhex(d) for _, d in files)).hexdigest()
    return {"_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": name, "digest": {"sha256": root}}],
            "predicateType": "https://model_signing/signature/v1.0",
            "predicate": {"serialization": {"method": "files", "hash_type": "sha256",
                                            "allow_symlinks": False, "ignore_paths": ignore},
                          "resources": [{"name": n, "algorithm": "sha256", "digest": d}
                                        for n, d in files]}}


def bundle_of(payload, key):
    sig = key.sign(pae(payload), ec.ECDSA(_hash_for(key.public_key())))
    return json.dumps({"mediaType": MEDIA_TYPE,
                       "verificationMaterial": {"publicKey": {"hint": _hint(key.public_key())},
                                                "tlogEntries": []},
                       "dsseEnvelope": {"payload": base64.b64encode(payload).decode(),
                                        "payloadType": PAYLOAD_TYPE,
                                        "signatures": [{"sig": base64.b64encode(sig).decode(),
                                                        "keyid": ""}]}},
                      separators=(",", ":"))


def sign(directory, private_key_pem, ignore=None):
    """The bundle signing every file of `directory` (the signature and git's files skipped),
    as `model_signing sign key` writes it with the signature inside the directory."""
    with open(private_key_pem, "rb") as handle:
        key = serialization.load_pem_private_key(handle.read(), None)
    ignore = ignore if ignore is not None else ["model.sig"] + GIT
    name = os.path.basename(os.path.abspath(directory))
    payload = json.dumps(statement(name, files_of(directory, ignore), ignore), indent=2).encode()
    return bundle_of(payload, key)


def verify(directory, public_key_pem, bundle_text):
    try:
        return _verify(directory, public_key_pem, bundle_text)
    except (ValueError, KeyError, TypeError, IndexError, InvalidSignature) as error:
        return [f"{type(error).__name__}: {error}"]


def _verify(directory, public_key_pem, bundle_text):
    with open(public_key_pem, "rb") as handle:
        key = serialization.load_pem_public_key(handle.read())
    bundle = json.loads(bundle_text)
    if bundle["mediaType"] != MEDIA_TYPE:
        return ["media type"]
    hint = bundle["verificationMaterial"]["publicKey"].get("hint")
    if hint and hint != _hint(key):
        return ["key mismatch"]
    envelope = bundle["dsseEnvelope"]
    if envelope["payloadType"] != PAYLOAD_TYPE:
        return ["payload type"]
    payload = base64.b64decode(envelope["payload"], validate=True)
    sig = base64.b64decode(envelope["signatures"][0]["sig"], validate=True)
    key.verify(sig, pae(payload), ec.ECDSA(_hash_for(key)))
    doc = json.loads(payload)
    if doc["_type"] != "https://in-toto.io/Statement/v1":
        return ["statement type"]
    if doc["predicateType"] != "https://model_signing/signature/v1.0":
        return ["predicate type"]
    resources = doc["predicate"]["resources"]
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in resources)).hexdigest()
    if len(doc["subject"]) != 1 or doc["subject"][0]["digest"]["sha256"] != root:
        return ["subject digest"]
    ignore = set(doc["predicate"]["serialization"].get("ignore_paths", [])) | set(GIT)
    signed = {r["name"]: r["digest"] for r in resources}
    actual = dict(files_of(directory, ignore))
    problems = [f"extra file {n}" for n in sorted(set(actual) - set(signed))]
    problems += [f"missing file {n}" for n in sorted(set(signed) - set(actual))]
    problems += [f"hash mismatch {n}" for n in sorted(set(signed) & set(actual))
                 if signed[n] != actual[n]]
    return problems


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "sign":
        print(sign(sys.argv[2], sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "verify":
        with open(sys.argv[4], encoding="utf-8") as handle:
            found = verify(sys.argv[2], sys.argv[3], handle.read())
        print("\n".join(found) or "verified")
        sys.exit(1 if found else 0)
    else:
        sys.exit("usage: oms_tool.py sign DIR KEY.pem | verify DIR PUB.pem BUNDLE")
