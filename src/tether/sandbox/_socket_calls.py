"""The socket calls a supervisor performs for a command without network. Standard library
only.

The command's filter (:mod:`._seccomp_filter`) hands ``connect``, ``sendmsg``, ``sendmmsg``
and ``sendto`` with a destination to the supervisor. For each, the supervisor copies the
arguments out of the caller, takes the caller's socket (``pidfd_getfd``: the same open file
description), checks the destination against :class:`SocketRules`, and performs the call
itself on that socket, answering with its result:

* an ``AF_UNIX`` pathname: resolved in the caller's view of the filesystem
  (:meth:`.Caller.resolve`), it must be a socket inside the rules' roots (and not under an
  excluded path) or one of the allowed paths; the call then goes to the resolved file itself
  (``/proc/self/fd/N``), so a path swapped after the check cannot redirect it.
* an abstract ``AF_UNIX`` name: refused (they are per network namespace, and under Landlock
  they are the host's).
* IP: performed when :attr:`SocketRules.ip` (bubblewrap: the socket lives in the command's
  own network namespace), refused otherwise (Landlock, whose filter lets no IP socket be
  made: and the supervisor, outside the command's Landlock domain, would bypass its rules).
* ``AF_NETLINK``: to the kernel only (port 0, no multicast group).
* ``AF_UNSPEC`` (``connect``'s "dissolve the association"): performed.

Calls that may block (a connect to a full backlog, a send to a full queue) run on a thread
of their own, so the supervisor keeps serving; the others (netlink, dissolving an
association, a send on a non-blocking socket, made with ``MSG_DONTWAIT`` then) are performed
at once. What the peer sees differs in one way: its
``SO_PEERCRED``/``SCM_CREDENTIALS`` name the supervisor's pid (same uid and gid).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import socket
import stat
import struct
import threading
from dataclasses import dataclass, field
from typing import Final

if __package__:
    from tether.sandbox import _seccomp_filter as seccomp_filter
    from tether.sandbox import _syscalls as syscalls
    from tether.sandbox._caller import Caller, beneath
else:  # loaded by the fork server or a launcher: this directory is on sys.path
    import _seccomp_filter as seccomp_filter  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _caller import Caller, beneath  # type: ignore[import-not-found,no-redef,unused-ignore]

AF_UNSPEC: Final = 0
AF_UNIX: Final = 1
AF_INET: Final = 2
AF_INET6: Final = 10
AF_NETLINK: Final = 16
_SOL_SOCKET = 1
_SO_TYPE = 3
SO_DOMAIN: Final = 39
_SCM_RIGHTS = 1
_SOCK_STREAM = 1
_MSG_DONTWAIT = 0x40
_MSG_NOSIGNAL = 0x4000
SOCKADDR_MAX: Final = 128
"""``sizeof(struct sockaddr_storage)``: the longest address a call may pass."""
_UIO_MAXIOV = 1024
_MAX_CONTROL = 1 << 16
_MAX_COPY: Final = 1 << 20
"""Bytes of one send the supervisor copies: a stream send is cut there (a short write, which
callers handle); a larger datagram fails with ``EMSGSIZE`` (over the kernel's limit anyway)."""
_MSGHDR = struct.Struct("<QI4xQQQQi4x")  # struct msghdr (56 bytes)
_MMSGHDR_SIZE = 64  # struct mmsghdr: a msghdr and its msg_len
_IOVEC = struct.Struct("<Qq")
_CMSGHDR = struct.Struct("<QiI")


@dataclass(frozen=True, slots=True)
class SocketRules:
    """Where a command without network may connect or send. Paths are in the command's view
    of the filesystem (under bubblewrap, inside its mount namespace)."""

    roots: tuple[str, ...] = ()
    """Pathname sockets beneath these may be used: the command's writable roots."""
    private: tuple[tuple[str, int], ...] = ()
    """(path, device): sockets beneath ``path`` too, but only on a filesystem other than
    ``device``. Bubblewrap's private ``/tmp`` is a fresh tmpfs: ``device`` is the host's
    ``/tmp``, so a runner that left the host's ``/tmp`` in place does not open its sockets."""
    excluded: tuple[str, ...] = ()
    """Nothing beneath these (read-only paths inside the roots, hidden paths)."""
    allowed: tuple[str, ...] = ()
    """These sockets, wherever they are (``allow_unix_sockets``)."""
    ip: bool = False
    """Perform IP calls (the socket is in the command's own network namespace)."""

    def permits(self, where: str, device: int) -> bool:
        """May a socket found at ``where`` (its real path), on ``device``, be used?"""
        if not beneath(where, ("/",)):
            return False
        if where in self.allowed:
            return True
        if beneath(where, self.excluded):
            return False
        if beneath(where, self.roots):
            return True
        return any(beneath(where, (path,)) and device != dev for path, dev in self.private)

    def to_json(self) -> dict[str, object]:
        return {
            "roots": list(self.roots),
            "private": [[path, dev] for path, dev in self.private],
            "excluded": list(self.excluded),
            "allowed": list(self.allowed),
            "ip": self.ip,
        }

    @classmethod
    def from_json(cls, data: object) -> SocketRules:
        """Rules from :meth:`to_json`'s form; ``ValueError`` for anything else."""
        if not isinstance(data, dict):
            raise ValueError("socket rules must be an object")

        def paths(key: str) -> tuple[str, ...]:
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"socket rules: {key} must be a list of paths")
            return tuple(value)

        private = data.get("private", [])
        if not isinstance(private, list) or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], int)
            for p in private
        ):
            raise ValueError("socket rules: private must be a list of [path, device]")
        ip = data.get("ip", False)
        if not isinstance(ip, bool):
            raise ValueError("socket rules: ip must be true or false")
        return cls(
            paths("roots"),
            tuple((str(p[0]), int(p[1])) for p in private),
            paths("excluded"),
            paths("allowed"),
            ip,
        )


@dataclass(slots=True)
class _Call:
    """One socket call, copied out of the caller."""

    name: str
    fd: int
    destination: bytes | None
    data: bytes = b""
    wanted: int = 0
    """Bytes the caller asked to send (``data`` may be shorter: :data:`_MAX_COPY`)."""
    control: bytearray = field(default_factory=bytearray)
    flags: int = 0
    msg_len_at: int | None = None
    """``sendmmsg``: where the first message's ``msg_len`` goes."""


def serve(listener: int, notification: seccomp_filter.Notification, name: str, arch: str,
          rules: SocketRules | None) -> None:  # fmt: skip
    """Answer one notified socket call ``name``: refuse it, or perform it (on a thread of its
    own when it may block) and answer with its result."""
    if rules is None:  # the rules have not arrived: the command is not running yet
        seccomp_filter.respond(listener, notification.id, errno.EACCES)
        return
    if name == "sendmmsg" and notification.args[2] & 0xFFFFFFFF == 0:
        seccomp_filter.respond(listener, notification.id, 0, 0)  # no message: none sent
        return
    caller = Caller(
        arch, notification.pid, lambda: seccomp_filter.still_waiting(listener, notification.id)
    )
    held: list[int] = []
    try:
        call = _copy_call(caller, name, notification.args)
        sock = caller.take_fd(call.fd)
        held.append(sock)
        address, family = _destination(caller, sock, call.destination, rules, held)
        _take_passed_fds(caller, call.control, held)
        if call.wanted > len(call.data) and socket_option(sock, _SO_TYPE) != _SOCK_STREAM:
            raise OSError(errno.EMSGSIZE, "message too long")
        blocks = _may_block(sock, call, family, address)
    except OSError as err:
        _release(caller, held)
        if err.errno != errno.ESRCH:  # ESRCH: the caller is gone, nobody waits for an answer
            seccomp_filter.respond(listener, notification.id, _errno(err))
        return
    except Exception:  # whatever went wrong, the call is refused, never let through
        _release(caller, held)
        seccomp_filter.respond(listener, notification.id, errno.EACCES)
        return

    def perform() -> None:
        try:
            result, error = _perform(caller, sock, call, address)
        except Exception:  # (on a thread: nothing may reach the command's stderr)
            result, error = 0, errno.EACCES
        finally:
            _release(caller, held)
        seccomp_filter.respond(listener, notification.id, error, result)

    if blocks:
        threading.Thread(target=perform, name="tether-socket-call", daemon=True).start()
    else:
        perform()


def _may_block(sock: int, call: _Call, family: int, address: bytes | None) -> bool:
    """Whether the call may wait (then it gets a thread). A send on a non-blocking socket is
    made with ``MSG_DONTWAIT``, so that clearing ``O_NONBLOCK`` meanwhile cannot make it
    wait."""
    if family == AF_NETLINK:
        return False  # to the kernel, which answers at once
    if call.name == "connect":
        given = struct.unpack_from("<H", address)[0] if address and len(address) >= 2 else None
        return given != AF_UNSPEC
    if call.flags & _MSG_DONTWAIT or fcntl.fcntl(sock, fcntl.F_GETFL) & os.O_NONBLOCK:
        call.flags |= _MSG_DONTWAIT
        return False
    return True


def _errno(err: OSError) -> int:
    if err.errno == errno.ELOOP:
        return errno.EACCES  # a magic link (/proc/self/fd/N) in the path: refused
    return err.errno or errno.EACCES


def _release(caller: Caller, held: list[int]) -> None:
    for fd in held:
        with contextlib.suppress(OSError):
            os.close(fd)
    held.clear()
    caller.close()


def _copy_call(caller: Caller, name: str, args: tuple[int, ...]) -> _Call:
    if name == "connect":
        return _Call(
            name, syscalls.int32(args[0]), _address(caller, args[1], syscalls.int32(args[2])) or b""
        )
    if name == "sendto":
        length = min(args[2], 0x7FFFFFFF)
        destination = _address(caller, args[4], syscalls.int32(args[5])) if args[4] else None
        data = caller.read(args[1], min(length, _MAX_COPY))
        return _Call(
            name, syscalls.int32(args[0]), destination, data, length, flags=syscalls.int32(args[3])
        )
    if name == "sendmmsg":  # only the first message is sent: a short count, as it may be
        header = caller.read(args[1], _MMSGHDR_SIZE)[: _MSGHDR.size]
        call = _message(caller, syscalls.int32(args[0]), header, syscalls.int32(args[3]))
        call.msg_len_at = args[1] + _MSGHDR.size
        return call
    return _message(
        caller, syscalls.int32(args[0]), caller.read(args[1], _MSGHDR.size), syscalls.int32(args[2])
    )


def _address(caller: Caller, pointer: int, length: int) -> bytes | None:
    if length < 0 or length > SOCKADDR_MAX:
        raise OSError(errno.EINVAL, "bad address length")
    return caller.read(pointer, length) if length else None


def _message(caller: Caller, fd: int, header: bytes, flags: int) -> _Call:
    """A ``sendmsg``: its destination, its data (all iovecs, up to :data:`_MAX_COPY`) and its
    control messages, with the limits the kernel applies."""
    name, namelen, iov, iovlen, control, controllen, _ = _MSGHDR.unpack(header)
    namelen = syscalls.int32(namelen)
    if namelen < 0:
        raise OSError(errno.EINVAL, "bad address length")
    destination = None
    if name and namelen:
        destination = caller.read(name, min(namelen, SOCKADDR_MAX))
    if iovlen > _UIO_MAXIOV:
        raise OSError(errno.EMSGSIZE, "too many iovecs")
    if controllen > _MAX_CONTROL:
        raise OSError(errno.ENOBUFS, "control data too large")
    vectors = caller.read(iov, _IOVEC.size * iovlen)
    wanted, copied = 0, 0
    chunks: list[bytes] = []
    for i in range(iovlen):
        base, length = _IOVEC.unpack_from(vectors, i * _IOVEC.size)
        if length < 0:
            raise OSError(errno.EINVAL, "bad iovec length")
        if copied < _MAX_COPY:
            chunks.append(caller.read(base, min(length, _MAX_COPY - copied)))
            copied += len(chunks[-1])
        wanted += length
    return _Call(
        "sendmsg",
        fd,
        destination,
        b"".join(chunks),
        wanted,
        bytearray(caller.read(control, controllen)) if controllen else bytearray(),
        flags,
    )


def socket_option(sock: int, option: int) -> int:
    """``getsockopt(sock, SOL_SOCKET, option)`` of an ``int`` option (``SO_DOMAIN``: the
    socket's own family, which its owner cannot change); ``ENOTSOCK`` for another file."""
    value = ctypes.c_int(0)
    size = ctypes.c_uint32(ctypes.sizeof(value))
    if syscalls.libc().getsockopt(
        sock, _SOL_SOCKET, option, ctypes.byref(value), ctypes.byref(size)
    ) != 0:  # fmt: skip
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return value.value


def _destination(
    caller: Caller, sock: int, address: bytes | None, rules: SocketRules, held: list[int]
) -> tuple[bytes | None, int]:
    """The address to perform the call with (``None``: none given) and the socket's family,
    or ``OSError`` when the rules refuse it. Decided by the socket's own family, which the
    caller cannot change: the address's family only says what the kernel would make of it."""
    family = socket_option(sock, SO_DOMAIN)
    given = struct.unpack_from("<H", address)[0] if address and len(address) >= 2 else None
    if family in (AF_INET, AF_INET6):
        if rules.ip or given == AF_UNSPEC or address is None:
            return address, family
        raise OSError(errno.EACCES, "no network")
    if family == AF_NETLINK:
        if address is not None and given == AF_NETLINK and len(address) >= 12:
            port, groups = struct.unpack_from("<II", address, 4)
            if port or groups:
                raise OSError(errno.EACCES, "netlink peers other than the kernel")
        return address, family
    if family != AF_UNIX:
        raise OSError(errno.EACCES, "socket family not allowed")
    if address is None or given != AF_UNIX or len(address) <= 2:
        return address, family  # none, AF_UNSPEC, or one the kernel refuses (EINVAL)
    if address[2] == 0:
        raise OSError(errno.EACCES, "abstract Unix sockets are not allowed")
    path = address[2:].split(b"\0", 1)[0]
    target = caller.resolve(path)
    held.append(target)
    info = os.fstat(target)
    if not stat.S_ISSOCK(info.st_mode):
        raise OSError(errno.ECONNREFUSED, "not a socket")  # what the kernel says
    if not rules.permits(os.readlink(f"/proc/self/fd/{target}"), info.st_dev):
        raise OSError(errno.EACCES, "socket outside the writable roots")
    return b"\x01\x00" + f"/proc/self/fd/{target}".encode() + b"\0", family


def _take_passed_fds(caller: Caller, control: bytearray, held: list[int]) -> None:
    """Replace the caller's descriptor numbers in ``SCM_RIGHTS`` messages by duplicates of
    ours (the same files), in place; malformed control data is ``EINVAL``, as the kernel
    says."""
    offset = 0
    while offset + _CMSGHDR.size <= len(control):
        length, level, kind = _CMSGHDR.unpack_from(control, offset)
        if length < _CMSGHDR.size or length > len(control) - offset:
            raise OSError(errno.EINVAL, "malformed control message")
        if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
            for at in range(offset + _CMSGHDR.size, offset + length - 3, 4):
                ours = caller.take_fd(struct.unpack_from("<i", control, at)[0])
                held.append(ours)
                struct.pack_into("<i", control, at, ours)
        offset += (length + 7) & ~7


def rehearse(arch: str) -> None:
    """Serve one send of this process's own, from copying its arguments to performing it on
    a socket pair: a forked supervisor that does this while it waits for its command copies
    the memory pages the first real call would touch now, not on the command's time."""
    sender, receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    payload = ctypes.create_string_buffer(b"x", 1)
    caller = Caller(arch, threading.get_native_id(), lambda: True)
    held: list[int] = []
    try:
        args = (sender.fileno(), ctypes.addressof(payload), 1, 0, 0, 0)
        call = _copy_call(caller, "sendto", args)
        sock = caller.take_fd(call.fd)
        held.append(sock)
        address, family = _destination(caller, sock, call.destination, SocketRules(), held)
        _may_block(sock, call, family, address)
        _perform(caller, sock, call, address)
    finally:
        _release(caller, held)
        sender.close()
        receiver.close()


def _perform(caller: Caller, sock: int, call: _Call, address: bytes | None) -> tuple[int, int]:
    """Make the call; (result, errno)."""
    lib = syscalls.libc()
    if call.name == "connect":
        given = address or b""
        done = lib.connect(sock, given, len(given))
        return (0, 0) if done == 0 else (0, ctypes.get_errno())
    keep: list[ctypes.Array[ctypes.c_char]] = []  # alive until the call returns

    def pointer(data: bytes) -> int:
        if not data:
            return 0
        keep.append(ctypes.create_string_buffer(data, len(data)))
        return ctypes.addressof(keep[-1])

    name = address or b""
    vector = pointer(_IOVEC.pack(pointer(call.data), len(call.data)))
    header = _MSGHDR.pack(
        pointer(name), len(name), vector, 1, pointer(bytes(call.control)), len(call.control), 0
    )
    sent = lib.sendmsg(sock, pointer(header), call.flags | _MSG_NOSIGNAL)
    if sent < 0:
        error = ctypes.get_errno()
        if error == errno.EPIPE and not call.flags & _MSG_NOSIGNAL:
            caller.signal(signal.SIGPIPE)  # what the kernel would have sent the caller
        return 0, error
    if call.msg_len_at is None:
        return sent, 0
    try:
        caller.write(call.msg_len_at, struct.pack("<I", sent))
    except OSError:
        return 0, errno.EFAULT
    return 1, 0


__all__ = [
    "AF_INET",
    "AF_INET6",
    "AF_NETLINK",
    "AF_UNIX",
    "AF_UNSPEC",
    "SOCKADDR_MAX",
    "SO_DOMAIN",
    "SocketRules",
    "rehearse",
    "serve",
    "socket_option",
]
