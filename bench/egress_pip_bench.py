"""`pip install` of a 50-package set from a local HTTPS index: in a Warden
session, through the egress proxy, beside the same install outside Warden
(the host's pip, straight to the index), in the same namespaces and run.
Issue 30's goal: within 20% of outside.

Runs in network and mount namespaces of its own (tests/network/world.py
makes the index's namespace and starts wardend):

    unshare --net --mount -- /usr/bin/python3 bench/egress_pip_bench.py [--bin-dir build/bin] [--runs 3]

Prints JSON: each side's install times (s) and their medians.
"""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = 50


def build_set(directory):
    sys.path.insert(0, str(REPO / "kernel" / "testing"))
    import wheels
    # 50 packages: 10 top-level ones, each requiring 4 of the rest (pip
    # resolves the whole set from the index).
    for i in range(PACKAGES):
        requires = ["benchnet%02d" % j for j in range(10 + (i * 4), 14 + (i * 4))] if i < 10 else []
        wheels.build_wheel(directory, "benchnet%02d" % i, "1.0", init="VALUE = %d\n" % i + "# pad\n" * 200,
                           requires=requires)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ["WARDEN_BIN_DIR"] = str(pathlib.Path(args.bin_dir).resolve())
    sys.path.insert(0, str(REPO / "tests" / "network"))
    import world as world_module
    world = world_module.World(extra_wheels=build_set)
    try:
        top = ["benchnet%02d" % i for i in range(10)]
        pb, stub = world.pb, world.stub
        md = [("authorization", "Bearer " + world.tokens["main"])]
        warden = []
        for _ in range(args.runs):
            request = pb.CreateSessionRequest(language=pb.LANGUAGE_PYTHON, shared_workspace=True,
                                              env={"PIP_INDEX_URL": "https://pypi.test/simple/"})
            request.network.allow.append("pypi.test")
            session = stub.CreateSession(request, metadata=md, timeout=60)
            try:
                command = "pip install --no-cache-dir -q " + " ".join(top)
                start = time.monotonic()
                code = None
                for event in stub.RunCommand(pb.RunCommandRequest(session_id=session.id, argv=["/bin/bash", "-c", command]),
                                             metadata=md, timeout=300):
                    if event.WhichOneof("event") == "end":
                        code = event.end.exit_code
                elapsed = time.monotonic() - start
                if code != 0:
                    raise SystemExit("pip in the session failed (exit %s)" % code)
                warden.append(elapsed)
            finally:
                stub.CloseSession(pb.CloseSessionRequest(session_id=session.id), metadata=md, timeout=60)
        # The host's pip finds pypi.test in a hosts file of this mount
        # namespace's own (unshare --mount: the host's /etc/hosts is
        # untouched), as wardend finds it in egress.hosts.
        hosts = world.tmp / "hosts"
        hosts.write_text(pathlib.Path("/etc/hosts").read_text() + "\n%s pypi.test\n" % world_module.HOSTS["pypi.test"])
        subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)
        # The host's pip as a fresh machine's: none of this one's pip or CA
        # settings (REQUESTS_CA_BUNDLE would override --cert).
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PIP_") and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE",
                                                          "SSL_CERT_DIR")}
        env["PIP_BREAK_SYSTEM_PACKAGES"] = "1"
        direct = []
        for _ in range(args.runs):
            target = tempfile.mkdtemp(prefix="egress-pip-")
            start = time.monotonic()
            installed = subprocess.run(["/usr/bin/python3", "-m", "pip", "install", "--no-cache-dir", "-q",
                                        "--disable-pip-version-check", "--target", target,
                                        "--index-url", "https://pypi.test/simple/", "--cert", str(world.ca_file)] + top,
                                       env=env, capture_output=True, text=True)
            if installed.returncode != 0:
                raise SystemExit("the host's pip failed:\n" + installed.stderr[-3000:])
            direct.append(time.monotonic() - start)
            shutil.rmtree(target, ignore_errors=True)
        print(json.dumps({"packages": PACKAGES, "warden_s": warden, "direct_s": direct,
                          "warden_median_s": statistics.median(warden), "direct_median_s": statistics.median(direct)}))
    finally:
        world.close()


if __name__ == "__main__":
    main()
