# Burns CPU forever, in argv[1] processes (default 1): the CPU limit counts
# all of them together.
import os
import sys

for _ in range(int(sys.argv[1]) - 1 if len(sys.argv) > 1 else 0):
    if os.fork() == 0:
        break
while True:
    pass
