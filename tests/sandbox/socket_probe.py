"""Socket attempts a confined command makes (standard library only; run by the sandbox tests).

``python socket_probe.py ATTEMPT [ARGS...]`` prints ``OK``, or the errno name of the call that
failed (``EACCES``), and nothing else, so a test can compare the outcome exactly. Variables in
the arguments are expanded (``$TMPDIR``: the command's temp directory).
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
import sys

TOKEN = b"pwned"


def connect_stream(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(TOKEN)


def connect_dgram(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(path)
        s.send(TOKEN)


def sendto_dgram(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(TOKEN, path)


def sendto_pair(path: str) -> None:
    """A socketpair's datagram socket can still send to any named address."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.sendto(TOKEN, path)


def sendmsg_dgram(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendmsg([TOKEN], [], 0, path)


def sendmmsg_dgram(path: str) -> None:
    """sendmmsg(2) with one message addressed to ``path`` (Python has no wrapper)."""
    libc = ctypes.CDLL(None, use_errno=True)
    address = struct.pack("<H", socket.AF_UNIX) + path.encode() + b"\0"
    name = ctypes.create_string_buffer(address, len(address))
    data = ctypes.create_string_buffer(TOKEN, len(TOKEN))
    iov = struct.pack("<QQ", ctypes.addressof(data), len(TOKEN))
    iov_buf = ctypes.create_string_buffer(iov, len(iov))
    header = struct.pack(
        "<QI4xQQQQi4xI4x", ctypes.addressof(name), len(address), ctypes.addressof(iov_buf), 1,
        0, 0, 0, 0,
    )  # fmt: skip
    vec = ctypes.create_string_buffer(header, len(header))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        if libc.sendmmsg(s.fileno(), vec, 1, 0) != 1:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))


def connect_abstract(name: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect("\0" + name)
        s.sendall(TOKEN)


def sendto_abstract(name: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(TOKEN, "\0" + name)


def udp(host: str, port: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(TOKEN, (host, int(port)))


def dns(host: str, port: str) -> None:
    """An A query for example.com; OK only if an answer comes back."""
    query = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    query += b"".join(bytes([len(p)]) + p for p in (b"example", b"com")) + b"\0"
    query += struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(query, (host, int(port)))
        answer = s.recv(512)
    if answer[:2] != b"\x12\x34":
        raise OSError(errno.EBADMSG, "not our answer")


def tcp_fast_open(host: str, port: str) -> None:
    """TCP Fast Open connects through sendto, not connect."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.sendto(TOKEN, socket.MSG_FASTOPEN, (host, int(port)))


def listen_unbound() -> None:
    """listen on a TCP socket never bound: the kernel binds it to a port on every address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.listen(1)


FAMILIES = {
    "vsock": (40, socket.SOCK_STREAM, 0),
    "packet": (17, socket.SOCK_RAW, 0x0300),
    "raw": (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    "icmp": (socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP),
    "udp6": (socket.AF_INET6, socket.SOCK_DGRAM, 0),
    "sctp": (socket.AF_INET, socket.SOCK_STREAM, 132),
    "alg": (38, socket.SOCK_SEQPACKET, 0),
    "netlink-diag": (16, socket.SOCK_RAW, 4),
    "netlink-route": (16, socket.SOCK_RAW, 0),
    "tcp": (socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC, 0),
    "unix": (socket.AF_UNIX, socket.SOCK_DGRAM, 0),
}


def family(name: str) -> None:
    """Create a socket of the named kind (libc's socket(), so the exact errno shows)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(*FAMILIES[name])
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    os.close(fd)


def socketpair_inet() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fds = (ctypes.c_int * 2)()
    if libc.socketpair(socket.AF_INET, socket.SOCK_STREAM, 0, fds) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def io_uring() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 4, params)
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    os.close(fd)


def mount_and_connect(socket_path: str, target: str) -> None:
    """In a user and mount namespace of its own (capabilities there, none outside), bind the
    socket at ``socket_path`` over ``target`` (an empty file), then connect to ``target``."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int) -> None:
        if result != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    open(target, "w").close()
    check(libc.unshare(0x10000000 | 0x00020000))  # CLONE_NEWUSER | CLONE_NEWNS
    check(libc.mount(None, b"/", None, 0x4000 | 0x40000, None))  # MS_REC | MS_PRIVATE
    check(libc.mount(socket_path.encode(), target.encode(), None, 0x1000, None))  # MS_BIND
    connect_stream(target)


def magic_link(path: str) -> None:
    """connect through /proc/self/fd/N, N an O_PATH descriptor of the socket."""
    fd = os.open(path, os.O_PATH)
    connect_stream(f"/proc/self/fd/{fd}")


def relative(directory: str, name: str) -> None:
    os.chdir(directory)
    connect_stream(name)


def stream_roundtrip(directory: str) -> None:
    """A server of the command's own in ``directory``, and a client that talks to it."""
    path = os.path.join(directory, "own.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
            client.sendall(b"ping")
            peer, _ = server.accept()
            with peer:
                assert peer.recv(4) == b"ping"


def dgram_roundtrip(directory: str) -> None:
    path = os.path.join(directory, "own-dgram.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
            client.sendto(b"ping", path)
            client.sendmsg([b"pong"], [], 0, path)
            assert server.recv(4) == b"ping" and server.recv(4) == b"pong"


def socketpairs() -> None:
    """Stream and datagram pairs, with a descriptor passed across (SCM_RIGHTS)."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
        a, b = socket.socketpair(socket.AF_UNIX, kind)
        with a, b:
            read_end, write_end = os.pipe()
            socket.send_fds(a, [b"fd"], [write_end])
            message, fds, _, _ = socket.recv_fds(b, 16, 1)
            os.write(fds[0], b"x")
            assert message == b"fd" and os.read(read_end, 1) == b"x"
            for fd in (read_end, write_end, *fds):
                os.close(fd)


ATTEMPTS = {
    "connect-stream": connect_stream,
    "connect-dgram": connect_dgram,
    "sendto-dgram": sendto_dgram,
    "sendto-pair": sendto_pair,
    "sendmsg-dgram": sendmsg_dgram,
    "sendmmsg-dgram": sendmmsg_dgram,
    "connect-abstract": connect_abstract,
    "sendto-abstract": sendto_abstract,
    "udp": udp,
    "dns": dns,
    "tcp-fast-open": tcp_fast_open,
    "listen-unbound": listen_unbound,
    "family": family,
    "socketpair-inet": socketpair_inet,
    "io-uring": io_uring,
    "magic-link": magic_link,
    "mount-and-connect": mount_and_connect,
    "relative": relative,
    "stream-roundtrip": stream_roundtrip,
    "dgram-roundtrip": dgram_roundtrip,
    "socketpairs": socketpairs,
}

if __name__ == "__main__":
    try:
        ATTEMPTS[sys.argv[1]](*(os.path.expandvars(arg) for arg in sys.argv[2:]))
    except OSError as err:
        print(errno.errorcode.get(err.errno or 0, type(err).__name__))
    else:
        print("OK")
