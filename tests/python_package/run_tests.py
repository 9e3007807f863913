#!/usr/bin/python3
"""The `warden` package test, as a user would install it.

Makes a fresh virtualenv (/usr/bin/python3 -m venv --system-site-packages,
so Debian's python3-grpcio, python3-protobuf and python3-pytest are seen),
installs client/python into it offline (pip --no-build-isolation
--no-index) from a staged copy with the stubs the build generated, then
runs the pytest files beside this one with the virtualenv's python, from
a directory outside the source tree, against a real wardend (conftest.py).

usage: run_tests.py --bin-dir BUILD/bin --stubs BUILD/proto/python [pytest args]
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--stubs", required=True, help="BUILD/proto/python")
    args, pytest_args = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="warden-pypkg-") as tmp:
        tmp = pathlib.Path(tmp)
        venv = tmp / "venv"
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
        stage = tmp / "src"
        shutil.copytree(REPO / "client" / "python", stage,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        env = dict(os.environ, WARDEN_PYTHON_STUBS_DIR=str(pathlib.Path(args.stubs).resolve()),
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--no-build-isolation", "--no-index",
                        str(stage)], check=True, env=env, cwd=tmp)
        shutil.rmtree(stage)  # the tests must import the installed package
        env = dict(os.environ, WARDEN_BIN_DIR=str(pathlib.Path(args.bin_dir).resolve()),
                   WARDEN_TESTS_DIR=str(REPO / "tests"))
        for name in ("WARDEN_ADDR", "WARDEN_TOKEN", "WARDEN_CA_FILE", "WARDEN_CERT_FILE", "WARDEN_KEY_FILE"):
            env.pop(name, None)
        run = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider",
                              "-v", str(HERE)] + pytest_args, env=env, cwd=tmp)
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
