"""Tests of Warden's pip (kernel/bin/warden_pip.py), run as the sandbox runs
it: as `pip` on PATH, with the environment Warden gives kernels, a
wheelhouse of wheels these tests build, and a user base of their own.
Outside any sandbox; no network is used (PIP_NO_INDEX). Run from the
repository root:

    /usr/bin/python3 -m unittest kernel/python/test_warden_pip.py
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))

from wheels import build_wheel, pip_environment  # noqa: E402

BIN = os.path.abspath(os.path.join(HERE, "..", "bin"))
PYTHON = "/usr/bin/python3"
SITE = os.path.join("lib", "python%d.%d" % sys.version_info[:2], "site-packages")


class PipTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="warden-pip-test-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.wheelhouse = os.path.join(self.dir, "wheelhouse")
        os.makedirs(self.wheelhouse)
        self.base = os.path.join(self.dir, "userbase")
        self.site = os.path.join(self.base, SITE)
        self.env = {"PATH": "%s:/usr/bin:/bin" % BIN, "HOME": self.dir, "LANG": "C.UTF-8",
                    **pip_environment(self.base, self.wheelhouse)}

    def pip(self, *args, env=None):
        return subprocess.run(["pip"] + list(args), env=env or self.env, capture_output=True,
                              text=True, timeout=120, cwd=self.dir)

    def python(self, code):
        done = subprocess.run([PYTHON, "-c", code], env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_installs_a_wheel_and_its_dependencies_at_their_best_versions(self):
        build_wheel(self.wheelhouse, "tinypkg", "1.0", init="VALUE = 1\n")
        build_wheel(self.wheelhouse, "tinypkg", "2.0", init="from depa import D\nVALUE = 2 + D\n",
                    requires=["depa>=0.5", "never-needed; python_version < '3'", "extra-only; extra == 'x'"])
        build_wheel(self.wheelhouse, "depa", "0.4")
        build_wheel(self.wheelhouse, "depa", "0.5", init="D = 40\n")
        build_wheel(self.wheelhouse, "depa", "0.6", init="D = 0\n", tag="cp27-cp27m-manylinux1_x86_64")
        done = self.pip("install", "tinypkg")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.splitlines(), [
            "Looking in links: %s" % self.wheelhouse,
            "Processing %s/tinypkg-2.0-py3-none-any.whl" % self.wheelhouse,
            "Processing %s/depa-0.5-py3-none-any.whl" % self.wheelhouse,
            "Installing collected packages: depa, tinypkg",
            "Successfully installed depa-0.5 tinypkg-2.0"])
        self.assertEqual(self.python("import tinypkg; print(tinypkg.VALUE)"), "42\n")
        # Only the requested package is marked REQUESTED, as pip does it.
        self.assertTrue(os.path.exists(os.path.join(self.site, "tinypkg-2.0.dist-info", "REQUESTED")))
        self.assertFalse(os.path.exists(os.path.join(self.site, "depa-0.5.dist-info", "REQUESTED")))

    def test_already_present_is_satisfied_at_once(self):
        build_wheel(self.wheelhouse, "tinypkg", "1.0")
        self.assertEqual(self.pip("install", "tinypkg").returncode, 0)
        done = self.pip("install", "tinypkg==1.0", "numpy", "PIL")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.splitlines()[1:], [
            "Requirement already satisfied: tinypkg==1.0 in %s (1.0)" % self.site,
            "Requirement already satisfied: numpy in /usr/lib/python3/dist-packages (%s)"
            % self.python("import numpy; print(numpy.__version__, end='')"),
            # An import name rather than a distribution's: what smolagents'
            # install_packages passes.
            "Requirement already satisfied: PIL (the module PIL is importable here)"])

    def test_quiet_says_nothing_on_success(self):
        build_wheel(self.wheelhouse, "tinypkg", "1.0")
        done = self.pip("install", "-q", "--user", "tinypkg")
        self.assertEqual((done.returncode, done.stdout, done.stderr), (0, "", ""))

    def test_missing_packages_fail_saying_why_and_what_to_do(self):
        build_wheel(self.wheelhouse, "tinypkg", "1.0")
        build_wheel(self.wheelhouse, "oldpy", "1.0", tag="cp27-cp27m-manylinux1_x86_64")
        cases = {
            ("nosuchpkg",): "not in the wheelhouse %s" % self.wheelhouse,
            ("tinypkg>=2",): "has versions 1.0, none matching",
            ("oldpy",): "built for another Python or platform",
            ("numpy>=99",): "numpy 1.",       # what is installed, and why it does not do
        }
        for args, why in cases.items():
            done = self.pip("install", *args)
            self.assertEqual(done.returncode, 1, done)
            self.assertIn("ERROR: No matching distribution found for %s" % args[0], done.stderr)
            self.assertIn(why, done.stderr)
            self.assertIn("no network", done.stderr)
        self.assertFalse(os.path.exists(self.base), "nothing may be installed")
        # A missing dependency fails the whole request before anything is installed.
        build_wheel(self.wheelhouse, "needy", "1.0", requires=["absent>=1"])
        done = self.pip("install", "needy")
        self.assertIn("absent>=1 (required by needy==1.0)", done.stderr)
        self.assertFalse(os.path.exists(self.base))

    def test_without_a_wheelhouse_the_message_says_how_to_get_one(self):
        env = dict(self.env)
        del env["PIP_FIND_LINKS"]
        done = self.pip("install", "nosuchpkg", env=env)
        self.assertEqual(done.returncode, 1)
        self.assertIn("has no wheelhouse", done.stderr)
        self.assertIn("pools[].wheelhouse", done.stderr)

    def test_console_scripts_and_uninstall_by_debian_pip(self):
        build_wheel(self.wheelhouse, "tinypkg", "1.0", init="def main():\n    print('tiny ran')\n",
                    console_scripts={"tiny": "tinypkg:main"})
        self.assertEqual(self.pip("install", "tinypkg").returncode, 0)
        script = os.path.join(self.base, "bin", "tiny")
        self.assertEqual(subprocess.run([script], env=self.env, capture_output=True, text=True).stdout,
                         "tiny ran\n")
        # The RECORD written lists every file, so pip can remove them all.
        done = subprocess.run([PYTHON, "-m", "pip", "uninstall", "-y", "tinypkg"], env=self.env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        left = [os.path.join(d, f) for d, _, files in os.walk(self.base) for f in files]
        self.assertEqual(left, [])

    def test_what_it_does_not_handle_goes_to_debian_pip(self):
        build_wheel(self.wheelhouse, "tinypkg", "1.0")
        done = self.pip("--version")
        self.assertRegex(done.stdout, r"^pip \d+\.\d+(\.\d+)? from /usr/lib/python3/dist-packages/pip")
        # An upgrade is pip's: it answers from the same wheelhouse, and
        # alone (what this program had to say before it handed over is dropped).
        self.assertEqual(self.pip("install", "tinypkg").returncode, 0)
        build_wheel(self.wheelhouse, "tinypkg", "1.1")
        done = self.pip("install", "tinypkg==1.1")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("Successfully installed tinypkg-1.1", done.stdout)
        self.assertEqual(done.stdout.count("Looking in links"), 1, done.stdout)

    def test_unsafe_paths_in_a_wheel_are_refused(self):
        path = build_wheel(self.wheelhouse, "evil", "1.0")
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("../../escaped.py", "x = 1\n")
        done = self.pip("install", "evil")
        self.assertEqual(done.returncode, 1)
        self.assertIn("unsafe path", done.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "escaped.py")))


if __name__ == "__main__":
    unittest.main()
