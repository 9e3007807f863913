#!/usr/bin/python3
"""The `warden` package test, as a user would install it.

Makes a fresh virtualenv (/usr/bin/python3 -m venv --system-site-packages,
so Debian's python3-grpcio, python3-protobuf and python3-pytest are seen),
installs client/python into it offline (pip --no-build-isolation
--no-index) from a staged copy with the stubs the build generated, then
runs the pytest files beside this one with the virtualenv's python, from
a directory outside the source tree, against a real wardend (conftest.py).

With --pyenv BUILD/pyenv (the tests' PyPI virtualenv, `make test-deps`) it
runs frameworks/ instead: the package is installed from the same staged copy
into a directory of its own put on that virtualenv's path, beside the real
agent frameworks, SDKs and model server (tests/pypi/requirements.txt).

usage: run_tests.py --bin-dir BUILD/bin --stubs BUILD/proto/python [--pyenv BUILD/pyenv] [pytest args]
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
    parser.add_argument("--pyenv", help="BUILD/pyenv: run frameworks/ in it")
    args, pytest_args = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="warden-pypkg-") as tmp:
        tmp = pathlib.Path(tmp)
        stage = tmp / "src"
        shutil.copytree(REPO / "client" / "python", stage,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        env = dict(os.environ, WARDEN_PYTHON_STUBS_DIR=str(pathlib.Path(args.stubs).resolve()),
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PIP_FIND_LINKS", None)
        pythonpath = []
        if args.pyenv:
            python = pathlib.Path(args.pyenv).resolve() / "bin" / "python"
            if not os.access(python, os.X_OK):
                raise SystemExit("%s is missing: run `make test-deps` (scripts/pypi_env.sh), which installs "
                                 "the tests' PyPI packages into it" % python)
            site = tmp / "site"
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                            "--no-index", "--target", str(site), str(stage)], check=True, env=env, cwd=tmp)
            pythonpath = [str(site)]
            suite = ["--rootdir", str(HERE), str(HERE / "frameworks")]
        else:
            venv = tmp / "venv"
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--no-build-isolation", "--no-index",
                            str(stage)], check=True, env=env, cwd=tmp)
            python = venv / "bin" / "python"
            suite = [str(HERE), "--ignore", str(HERE / "frameworks")]
        shutil.rmtree(stage)  # the tests must import the installed package
        env = dict(os.environ, WARDEN_BIN_DIR=str(pathlib.Path(args.bin_dir).resolve()),
                   WARDEN_TESTS_DIR=str(REPO / "tests"))
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        for name in ("WARDEN_ADDR", "WARDEN_TOKEN", "WARDEN_CA_FILE", "WARDEN_CERT_FILE", "WARDEN_KEY_FILE"):
            env.pop(name, None)
        run = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-v"] + suite + pytest_args,
                             env=env, cwd=tmp)
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
