"""The tests' llama.cpp runs on any x86-64 machine they meet.

A fresh machine's `make test` once failed because llama.cpp (inside
llama-cpp-python, which `make test-deps` builds into build/pyenv) had been
compiled for the build machine's own CPU: a Sapphire Rapids VM that reports
AMX and AVX-512 but does not let a process use AMX, so the model server died
on `ldtilecfg`. scripts/pypi_env.sh builds it for x86-64-v3 (AVX2, FMA,
F16C) without AVX-512, AVX-VNNI or AMX, and keys pip's wheel cache by those
flags. This test disassembles llama.cpp's CPU backend (libggml-cpu, the
only part compiled with instruction-set flags) installed in the venv and
fails on any instruction of those extensions:

* AVX-512 (and AVX10): any EVEX-encoded instruction (the 0x62 prefix, which
  only EVEX has in 64-bit mode), and the zmm, k and xmm/ymm 16-31 registers
  only EVEX reaches;
* AMX: ldtilecfg, sttilecfg, tile*, tdp*;
* AVX-VNNI: vpdpbusd(s), vpdpwssd(s) in their VEX form.

It first checks itself on --fixture, a library the build compiles with
-mavx512f -mamx-tile (never run), which must show both: a native build
on this project's machines looks like that.

usage: llama_portable_test.py --pyenv build/pyenv --fixture LIBRARY
"""
import argparse
import glob
import hashlib
import os
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(.*)$")
PREFIXES_BEFORE_EVEX = {"26", "2e", "36", "3e", "64", "65", "67"}   # segment and address-size
EVEX_ONLY_REGISTERS = re.compile(r"%(zmm\d+|k[0-7]\b|[xy]mm(1[6-9]|2\d|3[01])\b)")
AMX = re.compile(r"^(ldtilecfg|sttilecfg|tile\w+|tdp\w+)\b")
AVX_VNNI = re.compile(r"^(\{vex\}\s*)?vpdp(bus|wss)ds?\b")


def offending(library):
    """(address, bytes, instruction, why) of every instruction of AVX-512,
    AMX or AVX-VNNI in the library's code."""
    # -w: each instruction on one line, all its bytes with it.
    out = subprocess.run(["objdump", "-d", "-w", library], check=True,
                         capture_output=True, text=True).stdout
    found, instructions = [], 0
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        address, raw, text = m.groups()
        if not text or text.startswith("(bad)"):
            continue
        instructions += 1
        bytes_ = raw.split()
        i = 0
        while i < len(bytes_) - 1 and bytes_[i] in PREFIXES_BEFORE_EVEX:
            i += 1
        why = None
        if bytes_[i] == "62":
            why = "EVEX (AVX-512)"
        elif EVEX_ONLY_REGISTERS.search(text):
            why = "AVX-512 register"
        elif AMX.match(text):
            why = "AMX"
        elif AVX_VNNI.match(text):
            why = "AVX-VNNI"
        if why:
            found.append((address, raw, text.strip(), why))
    return found, instructions


def report(library, found, instructions):
    kinds = sorted({why for *_, why in found})
    print("%s: %d instructions, %d of them AVX-512/AMX/AVX-VNNI%s" % (
        library, instructions, len(found), " (%s)" % ", ".join(kinds) if kinds else ""))
    for address, raw, text, why in found[:10]:
        print("    %s: %-30s %s    [%s]" % (address, raw, text, why))


def cpu_libraries(pyenv):
    """llama.cpp's CPU backends in the venv (libggml-cpu*.so: the only part
    compiled with instruction-set flags), each distinct file once (the
    wheel installs copies, not links)."""
    seen, libraries = set(), []
    for path in sorted(glob.glob(os.path.join(pyenv, "lib", "python3*", "site-packages", "**", "libggml-cpu*.so*"),
                                 recursive=True)):
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).digest()
        if digest not in seen:
            seen.add(digest)
            libraries.append(path)
    return libraries


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pyenv", required=True)
    parser.add_argument("--fixture", required=True)
    args = parser.parse_args()

    found, instructions = offending(args.fixture)
    report(args.fixture, found, instructions)
    kinds = {why for *_, why in found}
    if not {"EVEX (AVX-512)", "AMX"} <= kinds:
        print("FAIL: the check does not see AVX-512 and AMX in the fixture built with them")
        return 1

    libraries = cpu_libraries(args.pyenv)
    if not libraries:
        print("FAIL: no libggml-cpu in %s: run `make test-deps` (scripts/pypi_env.sh installs llama-cpp-python)"
              % args.pyenv)
        return 1
    bad = []
    for library in libraries:
        found, instructions = offending(library)
        report(library, found, instructions)
        if found:
            bad.append(library)
    if bad:
        print("FAIL: llama.cpp was built for a CPU with AVX-512, AMX or AVX-VNNI (a native build?); a machine "
              "without them, or a VM that does not allow them, kills the model server. scripts/pypi_env.sh "
              "builds it for x86-64-v3: remove %s and run `make test-deps` again" % args.pyenv)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
