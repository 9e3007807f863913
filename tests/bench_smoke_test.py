"""Every section of `make bench` runs, in its smallest form, and gives every
figure it feeds (bench/run_bench.py --smoke): a section that breaks is
caught by `make test` when it breaks, not by the next full run. It checks
that each section ran and that each figure has a value, Warden's and its
anchor's; never how large a figure is (the smoke run's numbers mean
nothing). Needs root and the bench's anchors (`make bench-deps`, which
`make test` runs).
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(os.environ.get("WARDEN_BIN_DIR", REPO / "build" / "bin"))
sys.path.insert(0, str(REPO / "bench"))
import report  # noqa: E402
import run_bench  # noqa: E402

# Anchors that only some runs have: the HTTP server from before issue 20
# runs only when --http-baseline-bin names it; "-" is a figure with none.
OPTIONAL_ANCHORS = {"the HTTP server before issue 20", "-"}


class BenchSmokeTest(unittest.TestCase):
    def test_every_section_runs_and_gives_its_figures(self):
        with tempfile.TemporaryDirectory(prefix="bench-smoke-") as tmp:
            out = pathlib.Path(tmp) / "smoke.json"
            proc = subprocess.run(["/usr/bin/python3", str(REPO / "bench" / "run_bench.py"), "--smoke", "--out",
                                   str(out), "--bin-dir", str(BIN)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
            self.assertEqual(proc.returncode, 0, proc.stdout[-4000:])
            results = json.loads(out.read_text())
        self.assertEqual(results["mode"], "smoke")
        self.assertEqual(results["errors"], {}, "sections failed:\n%s\n--- log:\n%s" % (
            json.dumps(results["errors"], indent=1), proc.stdout[-4000:]))
        self.assertEqual(sorted(results["sections"]), sorted(run_bench.SECTIONS))
        missing = []
        for row in report.figures(results):
            name = "%s: %s" % (row["group"], row["what"])
            if row["warden"] is None:
                missing.append("%s (Warden's figure)" % name)
            if row["anchor"] is None and row["anchor_name"] not in OPTIONAL_ANCHORS:
                missing.append("%s (anchor: %s)" % (name, row["anchor_name"]))
        self.assertEqual(missing, [], "figures without a value:\n" + "\n".join(missing))
        # The goals and details render from what the run gave.
        self.assertIn(report.BEGIN, report.generated(results))


if __name__ == "__main__":
    unittest.main(verbosity=2)
