# Connects to loopback TCP port argv[2] or the abstract UNIX socket
# "\0" + argv[2]; prints CONNECTED or the errno name.
import errno
import socket
import sys

mode, where = sys.argv[1:3]
if mode == "tcp":
    family, address = socket.AF_INET, ("127.0.0.1", int(where))
else:
    family, address = socket.AF_UNIX, "\0" + where
with socket.socket(family, socket.SOCK_STREAM) as s:
    try:
        s.connect(address)
        print("CONNECTED")
    except OSError as e:
        print(errno.errorcode[e.errno])
