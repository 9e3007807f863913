# Tries to create sockets of families and protocols that reach kernel
# attack surface or the host: packet capture, netlink, vsock (to the
# hypervisor), Bluetooth, crypto (AF_ALG), raw and ping ICMP, and SCTP.
# Prints the errno name for each.
import errno
import socket

attempts = [
    ("AF_PACKET", 17, socket.SOCK_RAW, 0),
    ("AF_NETLINK", 16, socket.SOCK_RAW, 0),
    ("AF_VSOCK", 40, socket.SOCK_STREAM, 0),
    ("AF_BLUETOOTH", 31, socket.SOCK_RAW, 0),
    ("AF_ALG", 38, socket.SOCK_SEQPACKET, 0),
    ("AF_INET raw ICMP", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    ("AF_INET ping", socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP),
    ("AF_INET6 raw ICMPv6", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
    ("AF_INET SCTP", socket.AF_INET, socket.SOCK_STREAM, 132),
]
for name, family, kind, proto in attempts:
    try:
        socket.socket(family, kind, proto).close()
        print(f"{name}: CREATED")
    except OSError as e:
        print(f"{name}: {errno.errorcode[e.errno]}")
