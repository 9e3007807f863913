#!/usr/bin/env bash
# `make run` until wardend exists: shows what this host supports, then runs a
# few programs through warden-run so you can see the sandbox at work.
set -euo pipefail
bin=${1:-build/bin}
run() { echo; echo "\$ warden-run $*"; "$bin/warden-run" "$@" || true; }

echo "== What this host supports =="
"$bin/warden-run" --check

echo
echo "== A few sandboxed runs =="
run --json -- /usr/bin/python3 -c 'import numpy as np; print(np.arange(10).sum())'
run --json -- /bin/sh -c 'id; hostname; ls /'
run --json --wall-ms 500 -- /bin/sleep 10
run --json --memory-mb 64 -- /usr/bin/python3 -c 'x = bytearray(1 << 30)'
run --json -- /usr/bin/python3 -c 'import ctypes; ctypes.CDLL(None).ptrace(0, 0, 0, 0)'

cat <<EOT

Try your own:  $bin/warden-run --json -- /usr/bin/python3 -c 'print(1)'
               $bin/warden-run --help
EOT
