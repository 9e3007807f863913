# Listens on loopback TCP port argv[2] (argv[1] == "tcp") or on the abstract
# UNIX socket "\0" + argv[2] (argv[1] == "abstract"), proves it works by
# connecting to itself, creates argv[3] to say it is listening, then waits
# for stdin to close and reports whether anyone else connected.
import socket
import sys

mode, where, ready = sys.argv[1:4]
if mode == "tcp":
    family, address = socket.AF_INET, ("127.0.0.1", int(where))
else:
    family, address = socket.AF_UNIX, "\0" + where
server = socket.socket(family, socket.SOCK_STREAM)
server.bind(address)
server.listen(8)
with socket.socket(family, socket.SOCK_STREAM) as own:
    own.connect(address)
    server.accept()[0].close()
print("self-connect works")
open(ready, "w").close()
sys.stdin.read()
server.setblocking(False)
try:
    server.accept()
    print("accepted a connection from outside")
except BlockingIOError:
    print("no connection from outside")
