#!/usr/bin/env python3
# Regenerates the seed corpora fuzz/corpus/<target>/ from the fixtures, the examples and
# artifacts packed by a built ptepack: fuzz/make_corpus.py --ptepack build/ptepack.
import argparse
import json
import os
import shutil
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "tests", "data")
EXAMPLES = os.path.join(ROOT, "examples")

# The smallest program worth packing: one method, one input, one constant, one add.
TINY_PROGRAM = {
    "version": "1",
    "methods": [{
        "name": "forward",
        "graph": {
            "nodes": [
                {"name": "x", "op_kind": "PLACEHOLDER", "outputs": [{"name": "x"}]},
                {"name": "w", "op_kind": "PLACEHOLDER", "outputs": [{"name": "w"}]},
                {"name": "add", "op_kind": "CALL_FUNCTION", "target": "aten.add.Tensor",
                 "inputs": [
                     {"name": "self", "arg": {"value_type": "TensorArg", "value": {"name": "x"}}},
                     {"name": "other", "arg": {"value_type": "TensorArg", "value": {"name": "w"}}},
                 ],
                 "outputs": [{"name": "add"}]},
                {"name": "output", "op_kind": "OUTPUT",
                 "inputs": [{"arg": {"value_type": "TensorArg", "value": {"name": "add"}}}]},
            ],
            "inputs": ["x"],
            "outputs": ["add"],
            "tensor_values": [{"name": "add", "meta": {"dtype": "FLOAT",
                                                       "sizes": [{"min": 2, "max": 2}]}}],
        },
        "constants": [{"name": "w", "data_key": "w", "kind": "PARAMETER",
                       "meta": {"dtype": "FLOAT", "sizes": [{"min": 2, "max": 2}]}}],
    }],
}


def safetensors_bytes(tensors, metadata=None):
    """tensors: [(key, dtype, shape, raw bytes)] laid out in order, header padded to 8."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for key, dtype, shape, raw in tensors:
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def index_text(weight_map):
    return json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}, indent=2) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ptepack", required=True)
    args = parser.parse_args()
    corpus = os.path.join(HERE, "corpus")

    def put(target, name, source=None, data=None):
        os.makedirs(os.path.join(corpus, target), exist_ok=True)
        path = os.path.join(corpus, target, name)
        if source is not None:
            shutil.copyfile(source, path)
        else:
            with open(path, "wb") as handle:
                handle.write(data if isinstance(data, bytes) else data.encode())

    def pack(out, *inputs_and_options):
        subprocess.run([args.ptepack, "pack", *inputs_and_options, "-o", out, "-q"], check=True)
        return out

    def first(directory, suffix):
        return os.path.join(directory, sorted(f for f in os.listdir(directory)
                                              if f.endswith(suffix))[0])

    with tempfile.TemporaryDirectory() as tmp:
        tiny_json = os.path.join(tmp, "tiny.json")
        with open(tiny_json, "w") as handle:
            json.dump(TINY_PROGRAM, handle, indent=1)
        with open(os.path.join(tmp, "tiny.safetensors"), "wb") as handle:
            handle.write(safetensors_bytes([("w", "F32", [2], struct.pack("<2f", 1.0, 2.0))]))
        examples = [os.path.join(EXAMPLES, "prefill.json"), os.path.join(EXAMPLES, "decode.json")]
        tiny_ptn = pack(os.path.join(tmp, "tiny.ptn"), tiny_json)
        tiny_dir = pack(os.path.join(tmp, "tiny_dir"), tiny_json, "--alignment", "16")
        model_ptn = pack(os.path.join(tmp, "model.ptn"), *examples)
        ptd_dir = pack(os.path.join(tmp, "dir_ptd"), *examples, "--max-shard-bytes", "3KiB")
        st_dir = pack(os.path.join(tmp, "dir_st"), *examples, "--max-shard-bytes", "3KiB",
                      "--shard-format", "safetensors")

        put("program_binary", "two_methods.ptg", os.path.join(DATA, "two_methods.ptg"))
        put("program_binary", "examples.ptg", os.path.join(ptd_dir, "program.ptg"))
        put("program_binary", "tiny.ptg", os.path.join(tiny_dir, "program.ptg"))

        put("program_json", "two_methods.json", os.path.join(DATA, "two_methods.json"))
        put("program_json", "prefill.json", os.path.join(EXAMPLES, "prefill.json"))
        put("program_json", "tiny.json", tiny_json)

        put("safetensors", "prefill.safetensors", os.path.join(EXAMPLES, "prefill.safetensors"))
        put("safetensors", "shard.safetensors", first(st_dir, ".safetensors"))
        put("safetensors", "metadata.safetensors", data=safetensors_bytes(
            [("a", "BF16", [2, 1], b"\x01\x02\x03\x04"), ("b", "BOOL", [0], b""),
             ("c", "U64", [], b"\xff" * 8)], {"format": "pt"}))

        # Shard names of the fixed world in fuzz_safetensors_index.cpp.
        one, two = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
        put("safetensors_index", "two_shards.json",
            data=index_text({"a": one, "b": one, "c": two}))
        put("safetensors_index", "nested.json",
            data=index_text({"a": one, "b": one, "d": "sub/nested.safetensors"}))
        put("safetensors_index", "symlink_outside.json",
            data=index_text({"e": "outside.safetensors"}))
        put("safetensors_index", "packed.index.json",
            os.path.join(st_dir, "model.safetensors.index.json"))

        for i, shard in enumerate(sorted(f for f in os.listdir(ptd_dir) if f.endswith(".ptd"))):
            put("ptd", f"examples-{i}.ptd", os.path.join(ptd_dir, shard))
        put("ptd", "tiny-align16.ptd", first(tiny_dir, ".ptd"))

        put("zip", "tiny.ptn", tiny_ptn)
        put("zip", "examples.ptn", model_ptn)

        put("manifest", "ptd.json", os.path.join(ptd_dir, "manifest.json"))
        put("manifest", "safetensors.json", os.path.join(st_dir, "manifest.json"))
        put("manifest", "tiny.json", os.path.join(tiny_dir, "manifest.json"))


if __name__ == "__main__":
    main()
