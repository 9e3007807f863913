# Writes one file (in argv[1], default /tmp) until the write fails. Python
# ignores SIGXFSZ at startup, so passing RLIMIT_FSIZE is an EFBIG error here,
# not a signal.
import errno
import os
import sys

block = b"x" * 65536
total = 0
try:
    with open(os.path.join(sys.argv[1] if len(sys.argv) > 1 else "/tmp", "huge"), "wb",
              buffering=0) as f:
        while True:
            total += f.write(block)
except OSError as e:
    print("wrote", total, errno.errorcode[e.errno])
