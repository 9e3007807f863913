# Writes one file in the directory argv[1] until the write fails; prints how
# many bytes went in and the errno name.
import errno
import os
import sys

path = os.path.join(sys.argv[1], "fill")
block = b"x" * 65536
total = 0
try:
    with open(path, "wb", buffering=0) as f:
        while True:
            total += f.write(block)
except OSError as e:
    print("filled", total, errno.errorcode[e.errno])
