"""Builds small wheels for the pip tests and benchmark, by writing the zip by
hand (no network, no setuptools run): a package `NAME` whose __init__.py is
given, with the METADATA, WHEEL and RECORD files a wheel has. Also pip's
environment as Warden sets it in sandboxes.

    build_wheel("/tmp/wh", "tinypkg", "1.0", init="VALUE = 42\\n",
                requires=["otherpkg>=0.5"], console_scripts={"tiny": "tinypkg:main"})

From the command line (tests/daemon_test.cc uses it):

    python3 kernel/testing/wheels.py DIR NAME VERSION [INIT [REQUIREMENT...]]
"""

import base64
import hashlib
import os
import sys
import zipfile


def pip_environment(user_base, wheelhouse=None):
    """pip's settings in every Warden kernel's environment (kernel/zygote.cc,
    docs/runtime.md), for a user base and wheelhouse outside a sandbox."""
    env = {"PYTHONUSERBASE": user_base, "PIP_USER": "1", "PIP_NO_INDEX": "1",
           "PIP_BREAK_SYSTEM_PACKAGES": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    if wheelhouse:
        env["PIP_FIND_LINKS"] = wheelhouse
    return env


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def build_wheel(directory, name, version, init="", requires=(), console_scripts=None,
                tag="py3-none-any", extra_files=None):
    """Writes DIR/NAME-VERSION-TAG.whl (world-readable) and returns its path."""
    info = "%s-%s.dist-info" % (name, version)
    metadata = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    metadata += "".join("Requires-Dist: %s\n" % r for r in requires)
    files = {
        "%s/__init__.py" % name: init.encode(),
        info + "/METADATA": metadata.encode(),
        info + "/WHEEL": ("Wheel-Version: 1.0\nGenerator: warden-tests\nRoot-Is-Purelib: true\n"
                          "Tag: %s\n" % tag).encode(),
    }
    if console_scripts:
        lines = ["[console_scripts]"] + ["%s = %s" % item for item in console_scripts.items()]
        files[info + "/entry_points.txt"] = ("\n".join(lines) + "\n").encode()
    for path, data in (extra_files or {}).items():
        files[path] = data if isinstance(data, bytes) else data.encode()
    record = "".join("%s,%s,%d\n" % (path, _record_hash(data), len(data)) for path, data in files.items())
    files[info + "/RECORD"] = (record + info + "/RECORD,,\n").encode()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s-%s-%s.whl" % (name, version, tag))
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    os.chmod(path, 0o644)
    return path


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit("usage: wheels.py DIR NAME VERSION [INIT [REQUIREMENT...]]")
    directory, name, version = sys.argv[1:4]
    init = sys.argv[4] if len(sys.argv) > 4 else ""
    print(build_wheel(directory, name, version, init=init, requires=sys.argv[5:]))
