#!/usr/bin/env python3
"""What the merge suites check a merged .pte with, through the independent readers in
tests/tools alone: each method of a merged program against the method of its source (its plan
field for field with only what a merge renumbers masked, every stored tensor's layout and bytes
resolved through the data files, every delegate blob, the named data its delegates name), and
with `diff --method`."""
import glob
import hashlib
import os

import pte_reader  # noqa: E402  (tests/tools is on sys.path through cli_common)
from pte_reader import classify, strip  # noqa: E402

JOBS = ("-j", "2")


def sha(blob):
    return hashlib.sha256(blob).hexdigest()


def fixture(ctx, stem):
    return os.path.join(ctx.data, "pte", stem + ".pte")


def pack(ctx, *argv):
    return ctx.run_ok("pack", *JOBS, "-q", *argv)


def shards_of(directory):
    return sorted(glob.glob(os.path.join(directory, "*.ptd")))


def data_maps(paths):
    maps = {}
    for path in paths:
        maps.update(pte_reader.read_ptd(path)[0])
    return maps


# ------------------------------------------------------------------ one method, independently

def method_view(path, data_files, method):
    """What a runtime computes method `method` of the program with: its plan with the fields
    a merge may renumber masked (its name, data_buffer_idx and where a stored tensor lives, a
    delegate's data reference), every stored tensor's layout and bytes, every delegate blob,
    and the named data its delegates name inside their blobs."""
    parsed, blob = pte_reader.load(path)
    maps = data_maps(data_files)
    plans = parsed["program"]["execution_plan"]
    index = next(i for i, p in enumerate(plans) if p["name"] == method)
    plan = strip(plans[index], scalar_presence=True)
    plan["name"] = "*"
    stored = {}
    for _, p, v, t in pte_reader.tensors(parsed):
        if p != method or classify(t) == "none":
            continue
        kind = classify(t)
        if kind == "external":
            entry = maps[pte_reader.fqn(t)]
            data = entry["bytes"]
            assert entry["layout"] == pte_reader.layout(t), f"{path}: {method} value {v} layout"
        elif kind == "constant":
            data = pte_reader.constant_bytes(parsed, blob, t)
        else:
            data = pte_reader.mutable_bytes(parsed, blob, t)
        stored[v] = (kind == "mutable", pte_reader.layout(t), sha(data))
        value = plan["values"][v]["val"]["value"]
        value["data_buffer_idx"] = "*"
        value["_present"] = [f for f in value["_present"]
                             if f not in ("data_buffer_idx", "extra_tensor_info")]
        value["extra_tensor_info"] = "*"
    for delegate in plan["delegates"] or []:
        delegate["processed"] = "*"
    blobs = [b for p, _, _, _, b in pte_reader.delegate_blobs(parsed, blob) if p == method]
    own = dict(pte_reader.named_data(parsed, blob))
    external = {pte_reader.fqn(t) for _, _, _, t in pte_reader.tensors(parsed)
                if classify(t) == "external"}
    # Named data as the runtime serves it: data files first, then the program's own.
    candidates = {**own, **{k: e["bytes"] for k, e in maps.items() if k not in external}}
    named = {k: sha(v) for k, v in candidates.items()
             if any(b is not None and k.encode() in b for b in blobs)}
    return {"plan": plan, "stored": stored, "blobs": [sha(b) for b in blobs if b is not None],
            "named": named}


def check_method(ctx, merged, merged_data, name, source, source_data, source_method, what):
    got = method_view(merged, merged_data, name)
    want = method_view(source, source_data, source_method)
    for part in ("plan", "stored", "blobs", "named"):
        ctx.check(got[part] == want[part], f"{what}: method {name} differs from {source_method} "
                                           f"of {os.path.basename(source)} in its {part}")
    spec = merged + ("@" + ",".join(merged_data) if merged_data else "")
    src = source + ("@" + ",".join(source_data) if source_data else "")
    method = name if name == source_method else f"{name}={source_method}"
    ctx.code(ctx.run("diff", spec, src, "--method", method), 0, f"{what}: diff --method {method}")
