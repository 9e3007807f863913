# tests/host/guest.sh, pids: forks until the kernel says no, from inside the
# sandbox, and prints how many children it got and the errno it got then.
import errno
import os
import time

kids = []
try:
    while len(kids) < 10000:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    print(len(kids), "no limit")
except OSError as e:
    print(len(kids), errno.errorcode[e.errno])
for pid in kids:
    os.kill(pid, 9)
