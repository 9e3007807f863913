# Writes to the stream named by argv[1] ("stdout" or "stderr") forever.
import os
import sys

fd = 1 if sys.argv[1] == "stdout" else 2
block = b"A" * 65536
while True:
    os.write(fd, block)
