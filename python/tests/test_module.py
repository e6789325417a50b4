#!/usr/bin/env python3
# The Python module against the built CLI on the real fixtures: every public function with a
# real input and with a failing one. Imported from the source tree (python/).
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
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
        self.assertEqual([(m["name"], m["source_method"]) for m in result.methods],
                         [("forward", "forward"), ("conv", "forward")])
        self.assertEqual([p.file for p in result.programs], ["model.pte"])
        same = ptepack.diff(self.out("m"), conv, ptepack=self.cli, method="conv=forward")
        self.assertTrue(same.equivalent)
        only = ptepack.pack(self.out("m"), self.out("conv.pte"), ptepack=self.cli, method="conv")
        self.assertEqual([m["name"] for m in only.methods], ["conv"])
        with self.assertRaises(ptepack.ConflictError) as caught:
            ptepack.pack([self.pte, self.pte], self.out("twice.pte"), ptepack=self.cli)
        self.assertIn("'forward'", str(caught.exception))

    def test_sign_and_verify_a_release(self):
        key, pub = self.out("k.pem"), self.out("k.pub")
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                        key], check=True, capture_output=True)
        subprocess.run(["openssl", "ec", "-in", key, "-pubout", "-out", pub], check=True,
                       capture_output=True)
        ptepack.pack(self.pte, self.out("r"), ptepack=self.cli, release=3)
        signed = ptepack.sign(self.out("r"), key, ptepack=self.cli)
        self.assertEqual((signed.files, signed.release), (3, 3))
        checked = ptepack.verify(self.out("r"), ptepack=self.cli, public_key=pub, newer_than=2)
        self.assertTrue(checked.ok)
        self.assertTrue(checked.signature["valid"])
        self.assertEqual(checked.release, 3)
        rolled = ptepack.verify(self.out("r"), ptepack=self.cli, public_key=pub, newer_than=3)
        self.assertFalse(rolled.ok)
        with self.assertRaises(ptepack.UsageError):
            ptepack.sign(self.out("r"), pub, ptepack=self.cli)

    def test_pack_program_graphs_dry_run(self):
        result = ptepack.pack(self.examples, self.out("plan"), ptepack=self.cli, dry_run=True,
                              shard_format="safetensors")
        self.assertTrue(result.dry_run)
        self.assertEqual([m["name"] for m in result.methods], ["prefill", "decode"])
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
        self.assertEqual([p.text for p in report.problem_details], report.problems)
        changed = [p for p in report.problem_details if p.id == "file_changed"]
        self.assertEqual([os.path.basename(p.file) for p in changed], [shard])
        self.assertIn("tensor_bytes", {p.id for p in report.problem_details})
        with self.assertRaises(ptepack.VerifyFailed) as caught:
            ptepack.verify(self.out("d"), ptepack=self.cli, check=True)
        self.assertIn(shard, caught.exception.message)
        self.assertIn("file_changed", caught.exception.problem_ids)
        self.assertEqual(caught.exception.problems, report.problem_details)
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
        self.assertTrue(ptepack.version(ptepack=self.cli).startswith("ptepack "))
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
        for name in ("pack", "dump", "verify", "diff"):
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
