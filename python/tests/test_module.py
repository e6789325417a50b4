#!/usr/bin/env python3
# The Python module against the built CLI on the real fixtures: every public function with a
# real input and with a failing one. Imported from the source tree (python/).
import argparse
import dataclasses
import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import unittest
from collections.abc import Mapping

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.dont_write_bytecode = True  # nothing written into the source tree
import ptepack  # noqa: E402

ARGS = None


class ModuleTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ptepack-py-")
        self.cli = ARGS.ptepack
        self.pte = os.path.join(ARGS.data, "pte", "xnnpack_stress_mlp.pte")
        self.examples = [os.path.join(ARGS.examples, n) for n in ("prefill.json", "decode.json")]

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def out(self, name):
        return os.path.join(self.tmp, name)

    def test_pack_a_program_into_capped_shards(self):
        result = ptepack.pack([self.pte], self.out("d"), ptepack=self.cli,
                              max_shard_bytes="600KB", jobs=1)
        self.assertIsInstance(result, ptepack.PackResult)
        self.assertEqual(result.kind, "directory of programs")
        self.assertGreater(len(result.shards), 1)
        self.assertTrue(all(s.size <= 600000 for s in result.shards))
        on_disk = sorted(n for n in os.listdir(self.out("d")) if n.endswith(".ptd"))
        self.assertEqual(sorted(s.file for s in result.shards), on_disk)
        self.assertEqual(result.programs[0].file, "xnnpack_stress_mlp.pte")
        self.assertIsNone(result.base)

    def test_pack_with_base_reports_the_download(self):
        ptepack.pack(self.pte, self.out("old"), ptepack=self.cli, max_shard_bytes="600KB")
        result = ptepack.pack(self.pte, self.out("new"), ptepack=self.cli,
                              max_shard_bytes="600KB", base=self.out("old"))
        self.assertIsInstance(result.base, ptepack.BaseRelease)
        self.assertEqual(result.base.shards_new, 0)
        self.assertEqual(result.base.download_bytes, 0)
        self.assertTrue(all(s.reused for s in result.shards))

    def test_merge_programs_and_compare_one_method(self):
        conv = os.path.join(ARGS.data, "pte", "xnnpack_conv.pte")
        result = ptepack.pack([self.pte, f"conv={conv}"], self.out("m"), ptepack=self.cli,
                              merge="model.pte", max_shard_bytes="1MB")
        self.assertEqual([(m.name, m.source_method) for m in result.methods],
                         [("forward", "forward"), ("conv", "forward")])
        self.assertEqual([p.file for p in result.programs], ["model.pte"])
        same = ptepack.diff(self.out("m"), conv, ptepack=self.cli, method="conv=forward")
        self.assertTrue(same.equivalent)
        only = ptepack.pack(self.out("m"), self.out("conv.pte"), ptepack=self.cli, method="conv")
        self.assertEqual([m.name for m in only.methods], ["conv"])
        with self.assertRaises(ptepack.ConflictError) as caught:
            ptepack.pack([self.pte, self.pte], self.out("twice.pte"), ptepack=self.cli)
        self.assertIn("'forward'", str(caught.exception))

    def keys(self):
        """A new EC P-256 key pair: (private PEM, public PEM) paths."""
        key, pub = self.out("k.pem"), self.out("k.pub")
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                        key], check=True, capture_output=True)
        subprocess.run(["openssl", "ec", "-in", key, "-pubout", "-out", pub], check=True,
                       capture_output=True)
        return key, pub

    def test_sign_and_verify_a_release(self):
        key, pub = self.keys()
        ptepack.pack(self.pte, self.out("r"), ptepack=self.cli, release=3)
        signed = ptepack.sign(self.out("r"), key, ptepack=self.cli)
        self.assertEqual((signed.files, signed.release), (3, 3))
        checked = ptepack.verify(self.out("r"), ptepack=self.cli, public_key=pub, newer_than=2)
        self.assertTrue(checked.ok)
        self.assertTrue(checked.signature.valid)
        self.assertEqual(checked.release, 3)
        rolled = ptepack.verify(self.out("r"), ptepack=self.cli, public_key=pub, newer_than=3)
        self.assertFalse(rolled.ok)
        # A device holding one program's files checks them against the signed release.
        listed = ptepack.files(self.out("r"), program=os.path.basename(self.pte),
                               ptepack=self.cli)
        self.assertEqual([f.file for f in listed.files], sorted(os.listdir(self.out("r"))))
        self.assertEqual(listed.bytes, sum(f.size for f in listed.files))
        one = ptepack.verify(self.out("r"), ptepack=self.cli, public_key=pub, newer_than=2,
                             program=os.path.basename(self.pte))
        self.assertTrue(one.ok)
        self.assertEqual((one.programs[0].file, one.newer_than),
                         (os.path.basename(self.pte), 2))
        with self.assertRaises(ptepack.UsageError):
            ptepack.files(self.out("r"), program="nosuch", ptepack=self.cli)
        with self.assertRaises(TypeError):
            ptepack.files(self.out("r"), program=3, ptepack=self.cli)  # type: ignore[arg-type]
        with self.assertRaises(ptepack.UsageError):
            ptepack.sign(self.out("r"), pub, ptepack=self.cli)

    def test_pack_program_graphs_dry_run(self):
        result = ptepack.pack(self.examples, self.out("plan"), ptepack=self.cli, dry_run=True,
                              shard_format="safetensors")
        self.assertTrue(result.dry_run)
        self.assertEqual([m.name for m in result.methods], ["prefill", "decode"])
        self.assertFalse(os.path.exists(self.out("plan")))

    def test_pack_errors_carry_the_one_line_message(self):
        with self.assertRaises(ptepack.UsageError) as caught:
            ptepack.pack(self.pte, self.out("x.ptn"), ptepack=self.cli)
        self.assertEqual(caught.exception.exit_code, 2)
        self.assertIn(".ptn package", caught.exception.message)
        self.assertNotIn("\n", caught.exception.message)
        with self.assertRaises(ptepack.PtepackIOError) as caught:
            ptepack.pack(self.out("missing.pte"), self.out("d"), ptepack=self.cli)
        self.assertIn("missing.pte", caught.exception.message)
        with self.assertRaises(ptepack.ConflictError):
            ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, max_shard_bytes="1KB")
        self.assertFalse(os.path.exists(self.out("d")))
        broken = self.out("broken.pte")
        with open(self.pte, "rb") as src, open(broken, "wb") as dst:
            dst.write(src.read()[:3000])
        with self.assertRaises(ptepack.InvalidInputError) as caught:
            ptepack.pack(broken, self.out("d"), ptepack=self.cli)
        self.assertIn("broken.pte", caught.exception.message)
        self.assertIsInstance(caught.exception, ptepack.PtepackError)

    def test_verify_whole_and_damaged(self):
        ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, max_shard_bytes="600KB")
        report = ptepack.verify(self.out("d"), ptepack=self.cli)
        self.assertTrue(report.ok)
        self.assertGreater(report.files_checked, 1)
        files = sum(os.path.getsize(os.path.join(self.out("d"), n))
                    for n in os.listdir(self.out("d")) if n != "manifest.json")
        self.assertEqual(report.bytes_hashed, files)  # each file once
        deep = ptepack.verify(self.out("d"), ptepack=self.cli, tensors=True)
        self.assertTrue(deep.ok)
        self.assertGreater(deep.bytes_hashed, files)  # and each tensor again
        shard = sorted(n for n in os.listdir(self.out("d")) if n.endswith(".ptd"))[0]
        path = os.path.join(self.out("d"), shard)
        with open(path, "r+b") as handle:
            handle.seek(os.path.getsize(path) - 1)
            byte = handle.read(1)[0]
            handle.seek(os.path.getsize(path) - 1)
            handle.write(bytes([byte ^ 1]))
        report = ptepack.verify(self.out("d"), ptepack=self.cli)
        self.assertFalse(report.ok)
        self.assertTrue(any(shard in p for p in report.problems))
        # Each problem carries its stable identifier and file: the changed shard is named
        # by kind, not by matching the English text.
        self.assertEqual(tuple(p.text for p in report.problem_details), report.problems)
        changed = [p for p in report.problem_details if p.id == "file_changed"]
        self.assertEqual([os.path.basename(p.file) for p in changed], [shard])
        self.assertIn("tensor_bytes", {p.id for p in report.problem_details})
        with self.assertRaises(ptepack.VerifyFailed) as caught:
            ptepack.verify(self.out("d"), ptepack=self.cli, check=True)
        self.assertIn(shard, caught.exception.message)
        self.assertIn("file_changed", caught.exception.problem_ids)
        self.assertEqual(tuple(caught.exception.problems), report.problem_details)
        with self.assertRaises(ptepack.PtepackIOError):
            ptepack.verify(self.out("nothing.ptn"), ptepack=self.cli)

    def test_dump_a_program_and_a_failure(self):
        result = ptepack.dump(self.pte, ptepack=self.cli)
        self.assertEqual(result.kind, "pte program")
        self.assertEqual(len(result.programs), 1)
        summary = ptepack.dump(self.examples[0], ptepack=self.cli, tensors=False, summary=True)
        self.assertEqual(summary.tensors, {})
        with self.assertRaises(ptepack.UsageError):
            ptepack.dump(self.pte, ptepack=self.cli, sort="bogus")

    def test_diff_equal_and_different(self):
        ptepack.pack(self.pte, self.out("d"), ptepack=self.cli)
        same = ptepack.diff(self.pte, self.out("d"), ptepack=self.cli)
        self.assertTrue(same.equivalent)
        other = os.path.join(ARGS.data, "pte", "portable_keyword_spotting.pte")
        changed = ptepack.diff(self.pte, other, ptepack=self.cli)
        self.assertFalse(changed.equivalent)
        self.assertTrue(changed.differences)
        with self.assertRaises(ptepack.PtepackIOError):
            ptepack.diff(self.pte, self.out("missing.pte"), ptepack=self.cli)

    def test_finding_the_cli(self):
        self.assertTrue(str(ptepack.version(ptepack=self.cli)).startswith("ptepack "))
        with self.assertRaises(ptepack.CliNotFound):
            ptepack.find_cli(self.out("no-such-ptepack"))
        old = os.environ.get("PATH", "")
        os.environ["PATH"] = os.path.dirname(os.path.abspath(self.cli)) + os.pathsep + old
        try:
            self.assertEqual(os.path.realpath(ptepack.find_cli()),
                             os.path.realpath(self.cli))
        finally:
            os.environ["PATH"] = old

    def test_a_misspelt_keyword_is_a_type_error(self):
        with self.assertRaises(TypeError) as raised:
            ptepack.pack([self.pte], self.out("d"), ptepack=self.cli, max_shard_byte="1MB")
        self.assertIn("'max_shard_byte'", str(raised.exception))
        self.assertIn("did you mean 'max_shard_bytes'?", str(raised.exception))
        self.assertFalse(os.path.exists(self.out("d")), "nothing ran")
        for call in (lambda: ptepack.dump(self.pte, ptepack=self.cli, sumary=True),
                     lambda: ptepack.verify(self.pte, ptepack=self.cli, strictt=True),
                     lambda: ptepack.diff(self.pte, self.pte, ptepack=self.cli, metod="forward")):
            with self.assertRaises(TypeError):
                call()
        # A pass-through option is still an option.
        doc = ptepack.dump(self.pte, ptepack=self.cli, top=3)
        self.assertIsInstance(doc, ptepack.DumpResult)

    def test_every_cli_option_is_a_keyword(self):
        """Each long option of each command is a keyword of its function (own or passed
        through), so the lists cannot drift from the CLI."""
        import inspect
        for name in ("pack", "dump", "verify", "diff", "files"):
            helped = subprocess.run([self.cli, name, "--help"], capture_output=True, text=True,
                                    check=True).stdout
            options = {o[2:].replace("-", "_") for o in re.findall(r"--[a-z][a-z-]*", helped)}
            options -= {"help", "json", "output"}
            function = getattr(ptepack, name)
            keywords = set(inspect.signature(function).parameters) | set(
                ptepack._PASS_THROUGH[name])
            keywords |= {"tensors", "hash_tensors"}  # --no-tensors, --no-hash as booleans
            missing = options - keywords - {"no_tensors", "no_hash"}
            self.assertEqual(missing, set(), f"{name}: CLI options with no keyword")


    def test_a_missing_input_is_a_file_not_found_error(self):
        missing = self.out("missing.pte")
        for call in (lambda: ptepack.pack(missing, self.out("d"), ptepack=self.cli),
                     lambda: ptepack.verify(missing, ptepack=self.cli),
                     lambda: ptepack.dump(missing, ptepack=self.cli),
                     lambda: ptepack.diff(self.pte, missing, ptepack=self.cli)):
            with self.assertRaises(FileNotFoundError) as caught:
                call()
            error = caught.exception
            self.assertIsInstance(error, ptepack.PtepackFileNotFoundError)
            self.assertIsInstance(error, ptepack.PtepackIOError)
            self.assertIsInstance(error, ptepack.PtepackError)
            self.assertEqual(error.errno, errno.ENOENT)
            self.assertEqual(error.filename, missing)
            self.assertEqual(error.exit_code, 5)
            self.assertEqual(str(error), f"{missing}: no such file or directory")
        # A file a packed directory lists and does not hold ("... cannot open D/x: missing"),
        # from every command that reads the directory (dump, diff, pack: exit 5).
        packed = self.out("holey")
        ptepack.pack(self.pte, packed, ptepack=self.cli)
        shard = next(n for n in os.listdir(packed) if n.startswith("weights-"))
        os.remove(os.path.join(packed, shard))
        for call in (lambda: ptepack.dump(packed, ptepack=self.cli),
                     lambda: ptepack.diff(packed, self.pte, ptepack=self.cli),
                     lambda: ptepack.pack(packed, self.out("again"), ptepack=self.cli)):
            with self.assertRaises(FileNotFoundError) as caught:
                call()
            error = caught.exception
            self.assertIsInstance(error, ptepack.PtepackFileNotFoundError)
            self.assertEqual((error.errno, error.exit_code), (errno.ENOENT, 5))
            self.assertIn(shard, error.message)
        from ptepack.errors import error_for
        listed = error_for(5, [], "ptepack: error: d/manifest.json: cannot open d/x.ptd: missing\n")
        self.assertIsInstance(listed, ptepack.PtepackFileNotFoundError)
        # Any other read or write failure is still an OSError (and a PtepackError).
        with open(self.out("file"), "w"):
            pass
        with self.assertRaises(OSError) as caught:
            ptepack.pack(self.pte, os.path.join(self.out("file"), "d"), ptepack=self.cli)
        self.assertIsInstance(caught.exception, ptepack.PtepackIOError)
        self.assertNotIsInstance(caught.exception, FileNotFoundError)
        self.assertEqual(caught.exception.filename, os.path.join(self.out("file"), "d"))

    def test_the_error_document_fills_the_exception(self):
        with self.assertRaises(ptepack.UsageError) as caught:
            ptepack.pack(self.pte, self.out("x.ptn"), ptepack=self.cli)
        self.assertNotIsInstance(caught.exception, OSError)
        self.assertIn(".ptn package", str(caught.exception))
        with self.assertRaises(ptepack.PtepackError) as caught:  # the base class still works
            ptepack.dump(self.out("missing.ptd"), ptepack=self.cli)
        self.assertEqual(caught.exception.path, self.out("missing.ptd"))

    def test_no_cli_is_a_file_not_found_error_naming_the_ways_to_get_one(self):
        old = {k: os.environ.get(k) for k in ("PATH", "PTEPACK")}
        os.environ["PATH"] = self.tmp
        os.environ.pop("PTEPACK", None)
        try:
            with self.assertRaises(FileNotFoundError) as caught:
                ptepack.version()
            self.assertIsInstance(caught.exception, ptepack.CliNotFound)
            self.assertEqual(caught.exception.errno, errno.ENOENT)
            self.assertIn("$PTEPACK", str(caught.exception))
            self.assertIn("pip install ptepack", str(caught.exception))
            os.environ["PTEPACK"] = self.cli  # $PTEPACK comes before PATH
            self.assertEqual(ptepack.find_cli(), self.cli)
            self.assertEqual(ptepack.find_cli(self.cli), self.cli)
            os.environ["PTEPACK"] = self.out("nowhere")
            with self.assertRaises(ptepack.CliNotFound) as caught:
                ptepack.find_cli()
            self.assertEqual(caught.exception.filename, self.out("nowhere"))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_argument_mistakes_are_type_and_value_errors(self):
        with self.assertRaises(ValueError) as caught:
            ptepack.pack([], self.out("d"), ptepack=self.cli)
        self.assertEqual(str(caught.exception), "pack() needs at least one input")
        type_errors = [
            lambda: ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, jobs="2"),
            lambda: ptepack.pack(3, self.out("d"), ptepack=self.cli),
            lambda: ptepack.pack([self.pte, 3], self.out("d"), ptepack=self.cli),
            lambda: ptepack.pack(self.pte, 7, ptepack=self.cli),
            lambda: ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, jobs=True),
            lambda: ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, dry_run="yes"),
            lambda: ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, max_shard_bytes=1.5),
            lambda: ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, release="3"),
            lambda: ptepack.verify(42, ptepack=self.cli),
            lambda: ptepack.verify(self.pte, ptepack=self.cli, public_key=[1]),
            lambda: ptepack.dump(self.pte, ptepack=self.cli, key=5),
            lambda: ptepack.diff(self.pte, None, ptepack=self.cli),
            lambda: ptepack.find_cli(5),
        ]
        for call in type_errors:
            with self.assertRaises(TypeError):
                call()
        with self.assertRaises(TypeError) as caught:
            ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, jobs="2")
        self.assertEqual(str(caught.exception), "pack() argument 'jobs' must be int, not str")
        value_errors = [
            lambda: ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, jobs=-1),
            lambda: ptepack.pack(self.pte, self.out("d"), ptepack=self.cli, max_shard_bytes=0),
            lambda: ptepack.verify(self.pte, ptepack=self.cli, newer_than=-2),
            lambda: ptepack.dump(self.pte, ptepack=self.cli, top=-1),
        ]
        for call in value_errors:
            with self.assertRaises(ValueError):
                call()
        self.assertFalse(os.path.exists(self.out("d")), "nothing ran")

    def assert_frozen_all_the_way_down(self, value, where):
        """No dict or list anywhere in a result (raw aside), every dataclass frozen."""
        self.assertNotIsInstance(value, (dict, list, set), where)
        if dataclasses.is_dataclass(value):
            self.assertTrue(type(value).__dataclass_params__.frozen, where)
            for f in dataclasses.fields(value):
                if f.name == "raw":
                    self.assertIsInstance(getattr(value, f.name), Mapping)
                    continue
                with self.assertRaises(dataclasses.FrozenInstanceError):
                    setattr(value, f.name, None)
                self.assert_frozen_all_the_way_down(getattr(value, f.name), f"{where}.{f.name}")
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                self.assert_frozen_all_the_way_down(item, f"{where}[{i}]")
        elif isinstance(value, Mapping):
            with self.assertRaises(TypeError):
                value["x"] = None  # read-only
            for key, item in value.items():
                self.assertIsInstance(key, str)
                self.assert_frozen_all_the_way_down(item, f"{where}[{key!r}]")
        else:
            self.assertIsInstance(value, (str, int, float, bool, type(None)), where)

    def test_results_are_frozen_dataclasses_all_the_way_down(self):
        conv = os.path.join(ARGS.data, "pte", "xnnpack_conv.pte")
        old = ptepack.pack(self.pte, self.out("old"), ptepack=self.cli, max_shard_bytes="600KB")
        new = ptepack.pack([self.pte, f"conv={conv}"], self.out("new"), ptepack=self.cli,
                           max_shard_bytes="600KB", base=self.out("old"), merge="model.pte")
        graphs = ptepack.pack(self.examples, self.out("g"), ptepack=self.cli)
        key, pub = self.keys()
        ptepack.pack(self.pte, self.out("r"), ptepack=self.cli, release=2)
        results = {
            "pack": old, "pack --base --merge": new, "pack graphs": graphs,
            "sign": ptepack.sign(self.out("r"), key, ptepack=self.cli),
            "verify signed": ptepack.verify(self.out("r"), ptepack=self.cli, public_key=pub),
            "dump pte": ptepack.dump(self.pte, ptepack=self.cli, graph=True, offsets=True),
            "dump dir": ptepack.dump(self.out("new"), ptepack=self.cli, summary=True),
            "dump graph": ptepack.dump(self.examples[0], ptepack=self.cli, graph=True),
            "dump packed graphs": ptepack.dump(self.out("g"), ptepack=self.cli, summary=True),
            "diff dirs": ptepack.diff(self.out("old"), self.out("new"), ptepack=self.cli),
            "diff graphs": ptepack.diff(self.examples[0], self.examples[1], ptepack=self.cli),
            "diff pte": ptepack.diff(self.pte, conv, ptepack=self.cli),
            "version": ptepack.version(ptepack=self.cli),
        }
        for name, result in results.items():
            self.assertTrue(dataclasses.is_dataclass(result), name)
            self.assert_frozen_all_the_way_down(result, name)
        # The nested objects are there, typed.
        self.assertIsInstance(new.methods[0], ptepack.results.PackedMethod)
        self.assertIsInstance(new.base, ptepack.BaseRelease)
        self.assertIsInstance(results["verify signed"].signature, ptepack.results.Signature)
        self.assertTrue(results["verify signed"].signature.valid)
        program = results["dump graph"].program
        self.assertIsInstance(program, ptepack.results.GraphProgram)
        self.assertTrue(any(isinstance(d, ptepack.results.Dim)
                            for v in program.methods[0].inputs for d in v.shape))
        self.assertTrue(program.methods[0].graph)
        pte = results["dump pte"].programs[0]
        self.assertIsInstance(pte.methods[0].delegates[0], ptepack.results.Delegate)
        self.assertTrue(results["dump dir"].shards)
        self.assertIsInstance(results["dump dir"].breakdown, ptepack.results.Breakdown)
        tensor = next(iter(results["dump pte"].tensors.values()))
        self.assertIsInstance(tensor, ptepack.results.Tensor)
        self.assertIsInstance(results["diff dirs"].files, ptepack.results.FileChanges)
        self.assertTrue(results["diff pte"].differences)
        self.assertIsInstance(results["diff pte"].differences[0], ptepack.results.Difference)
        self.assertEqual(dict(results["dump pte"].raw)["format"], "ptepack.dump")

    def test_versions(self):
        with open(os.path.join(os.path.dirname(HERE), "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        self.assertEqual(ptepack.__version__, project["version"])
        cli = ptepack.version(ptepack=self.cli)
        first = subprocess.run([self.cli, "--version"], capture_output=True, text=True,
                               check=True).stdout.splitlines()[0]
        self.assertEqual(str(cli), first)
        self.assertEqual(f"ptepack {cli.cli}", first)
        formats = {f.file: f.version for f in cli.formats}
        self.assertIn(".ptd", formats)
        self.assertIn("FT01", formats[".ptd"])
        self.assertIn("manifest.json", formats)

    def test_python_m_ptepack_is_the_cli(self):
        env = dict(os.environ, PTEPACK=self.cli, PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for args in (["--version"], ["verify", self.out("missing.pte")]):
            direct = subprocess.run([self.cli, *args], capture_output=True, text=True)
            module = subprocess.run([sys.executable, "-m", "ptepack", *args], env=env,
                                    capture_output=True, text=True)
            self.assertEqual((module.returncode, module.stdout, module.stderr),
                             (direct.returncode, direct.stdout, direct.stderr))
        env.update(PTEPACK="", PATH=self.tmp)
        gone = subprocess.run([sys.executable, "-m", "ptepack", "--version"], env=env,
                              capture_output=True, text=True)
        self.assertEqual(gone.returncode, 127)
        self.assertIn("$PTEPACK", gone.stderr)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--ptepack", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--examples", required=True)
    ARGS, rest = parser.parse_known_args()
    ARGS.ptepack = os.path.abspath(ARGS.ptepack)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
