"""Builds the `warden` package with the gRPC stubs that the CMake build
generated from proto/ (proto/CMakeLists.txt, target warden_proto_python).

The stubs (warden/v1/*_pb2*.py) are not committed. They are taken from, in
order: the package directory itself (a staged copy or an sdist that has
them), $WARDEN_PYTHON_STUBS_DIR, or <checkout>/build/proto/python (what
`make build` writes). Users never run protoc.
"""
import os
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
STUBS = ["executor_pb2.py", "executor_pb2.pyi", "executor_pb2_grpc.py",
         "agent_pb2.py", "agent_pb2.pyi", "agent_pb2_grpc.py",
         "images_pb2.py", "images_pb2.pyi", "images_pb2_grpc.py"]


def stubs_dir():
    """The directory holding warden/v1/<stubs>, or an error saying how to make it."""
    candidates = [HERE]
    if os.environ.get("WARDEN_PYTHON_STUBS_DIR"):
        candidates.append(pathlib.Path(os.environ["WARDEN_PYTHON_STUBS_DIR"]))
    candidates.append(HERE.parent.parent / "build" / "proto" / "python")
    for candidate in candidates:
        if all((candidate / "warden" / "v1" / name).is_file() for name in STUBS):
            return candidate
    raise SystemExit(
        "warden-client: the generated gRPC stubs (warden/v1/*_pb2.py) are missing. "
        "Build them first with `make build` (or `cmake --build BUILD --target warden_proto_python`), "
        "and if your build directory is not ./build, set WARDEN_PYTHON_STUBS_DIR=BUILD/proto/python. "
        "Looked in: " + ", ".join(str(c) for c in candidates))


class BuildPyWithStubs(build_py):
    """build_py that adds the generated stubs to warden/v1 in the build tree."""

    def run(self):
        source = stubs_dir()
        super().run()
        target = pathlib.Path(self.build_lib) / "warden" / "v1"
        target.mkdir(parents=True, exist_ok=True)
        for name in STUBS:
            shutil.copyfile(source / "warden" / "v1" / name, target / name)


setup(cmdclass={"build_py": BuildPyWithStubs})
