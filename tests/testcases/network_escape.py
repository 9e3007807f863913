# Tries to reach the outside world: TCP connects and a UDP send to the
# addresses given as arguments (host:port, IPv4 or [IPv6]), then a DNS
# lookup. Prints one line per attempt: the address and the errno name (or
# "CONNECTED"/"SENT"), and how the lookup ended.
import errno
import socket
import sys


def errname(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__


def split(target):
    host, _, port = target.rpartition(":")
    return host.strip("[]"), int(port)


for target in sys.argv[1:]:
    host, port = split(target)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        try:
            s.connect((host, port))
            print(f"tcp {target}: CONNECTED")
        except OSError as e:
            print(f"tcp {target}: {errname(e)}")
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.sendto(b"\0" * 12, (host, port))
            print(f"udp {target}: SENT")
        except OSError as e:
            print(f"udp {target}: {errname(e)}")

try:
    print("dns example.com:", socket.getaddrinfo("example.com", 443)[0][4][0])
except socket.gaierror as e:
    print("dns example.com: gaierror", e.args[1])
