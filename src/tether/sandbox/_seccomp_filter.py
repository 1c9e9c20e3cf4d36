"""The seccomp filters of confined commands, assembled by hand (classic BPF, no libseccomp),
and the user-notification plumbing their supervisor uses. Standard library only.

A command gets one filter, built from two independent rule sets:

* **metadata** (Landlock only; Landlock cannot refuse ``chmod``/``chown``/``utimes``/xattr
  changes on files the uid owns): ``chmod``/``fchmod``/``fchmodat``/``fchmodat2``/
  ``utimensat`` go to the supervisor (``emulate``), which performs them inside the writable
  roots only, or are refused (``refuse``, a launcher without writable roots); ``chown``,
  xattr changes and ``chattr`` ioctls are refused.
* **creation** (whenever the filter has a listener, on both backends): every call that makes a name
  (``mkdir``, ``mknod``, ``symlink``, ``link``, ``rename`` and their ``*at`` forms, and ``bind``,
  which names a Unix socket) and every ``open``/``openat``/``creat`` that may create or change a
  file (its flags ask for writing, ``O_CREAT``, ``O_TRUNC`` or ``O_TMPFILE``, and not ``O_PATH``:
  BPF sees the flags, so reading pays nothing) go to the supervisor (:mod:`._creation_calls`), which
  refuses control names at any depth and performs the rest itself. ``openat2``, whose flags lie in
  memory BPF cannot read, says ``ENOSYS`` (its callers fall back to ``openat``).
* **network** (every restricted mode without network, on both backends): ``socket`` may
  create ``AF_UNIX`` sockets, ``AF_NETLINK`` sockets of ``NETLINK_ROUTE`` (bubblewrap sets
  up its loopback with one; changing a route needs ``CAP_NET_ADMIN``, which is dropped), and
  IP sockets as the :data:`NetworkRule` says (under bubblewrap only); every other family is
  refused (``AF_PACKET``, ``AF_VSOCK``, which a network namespace does not isolate,
  ``AF_ALG``, ...). ``socketpair``
  only for ``AF_UNIX``. ``connect``, ``sendmsg``, ``sendmmsg`` and ``sendto`` with a
  destination go to the supervisor (:mod:`._socket_calls`), which checks the destination and
  performs the call itself.

Always: another syscall ABI (i386 on x86_64, x32) is refused (its numbers would bypass every
rule), and so is io_uring, which connects, sends and changes xattrs without any of the
syscalls above, and so is ``fcntl(F_SETLEASE)``: a lease needs only a read-only descriptor
(and, for a write lease, owning the file, which uid 0 does for every system file), and makes
every host process that opens the file wait up to ``lease-break-time`` (45 s) while the
command holds it. Refusals are ``EACCES``: "Permission denied".
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import struct
from dataclasses import dataclass
from typing import Final, Literal

if __package__:
    from tether.sandbox import _syscalls as syscalls
else:  # loaded by the fork server or a launcher: this directory is on sys.path
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]

MetadataRule = Literal["emulate", "refuse"]
"""Landlock's metadata rules: emulated by the supervisor (inside writable roots), or refused."""
NetworkRule = Literal["ip", "none"]
"""Which IP sockets a command without network may create.

- ``ip``: every kind (bubblewrap: they live in the command's own network namespace, which
  has nothing but its loopback).
- ``none``: no IP socket at all (Landlock). Landlock's TCP rules (ABI 4) refuse ``bind`` and
  ``connect`` but neither TCP Fast Open (``sendto`` connects) nor ``listen`` on an unbound
  socket (which binds a port on every address); without network a Landlock command has no
  use for an IP socket anyway.
"""

EMULATED: Final = ("chmod", "fchmod", "fchmodat", "fchmodat2", "utimensat")
"""Metadata calls the supervisor performs (inside writable roots) when they are emulated."""
_REFUSED_METADATA: Final = (
    "chown", "fchown", "lchown", "fchownat", "utime", "utimes", "futimesat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "setxattrat", "removexattrat", "file_setattr",
)  # fmt: skip
_IO_URING: Final = ("io_uring_setup", "io_uring_enter", "io_uring_register")
# chattr through ioctl: FS_IOC_SETFLAGS (64- and 32-bit forms) and FS_IOC_FSSETXATTR.
_REFUSED_IOCTLS: Final = (0x40086602, 0x40046602, 0x401C5820)
SOCKET_CALLS: Final = ("connect", "sendto", "sendmsg", "sendmmsg")
"""Socket calls the supervisor checks and performs under a network rule."""
CREATION_CALLS: Final = (
    "open", "creat", "openat", "mkdir", "mkdirat", "mknod", "mknodat", "symlink",
    "symlinkat", "link", "linkat", "rename", "renameat", "renameat2", "bind",
)  # fmt: skip
"""Calls that make a name or open a file for a change: the supervisor checks and performs
them (``open`` and ``openat`` only with :data:`OPEN_WRITE_FLAGS`; every ``bind``, whose
address lies in memory: a Unix socket's path makes a name as ``mknod`` does)."""
OPEN_WRITE_FLAGS: Final = 0o1 | 0o2 | 0o100 | 0o1000 | 0o20000000
"""``O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | __O_TMPFILE`` (the same on both architectures):
an ``open`` with any of them may create or change a file."""
_O_PATH = 0o10000000

_AF_UNIX = 1
_AF_INET = 2
_AF_INET6 = 10
_AF_NETLINK = 16
_NETLINK_ROUTE = 0

_RET_ALLOW = 0x7FFF0000
_RET_USER_NOTIF = 0x7FC00000
_RET_ERRNO = 0x00050000
_USER_NOTIF_FLAG_CONTINUE = 1
_FILTER_FLAG_NEW_LISTENER = 1 << 3
_FILTER_FLAG_WAIT_KILLABLE_RECV = 1 << 5  # Linux 5.19
_SECCOMP_SET_MODE_FILTER = 1
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF_ID_VALID = 0x40082102
_NOTIF_ADDFD = 0x40182103
_ADDFD_FLAG_SEND = 1 << 1  # Linux 5.14
_ADDFD = struct.Struct("<QIIII")  # struct seccomp_notif_addfd (24 bytes)
_NOTIF = struct.Struct("<QIIiIQ6Q")  # struct seccomp_notif (80 bytes)
_NOTIF_RESP = struct.Struct("<QqiI")  # struct seccomp_notif_resp (24 bytes)

_BPF_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_BPF_JA = 0x05  # BPF_JMP | BPF_JA
_BPF_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_BPF_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_BPF_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_CLONE_NEWUSER = 0x10000000
_F_SETLEASE = 1024
_BPF_RET = 0x06  # BPF_RET | BPF_K


def _arg(index: int, high: bool = False) -> int:
    """Offset of an argument's low (or high) 32 bits in ``struct seccomp_data``
    (little-endian, as both supported architectures are)."""
    return 16 + 8 * index + (4 if high else 0)


class _Program:
    """A classic-BPF program with named jump targets, resolved once the layout is known."""

    def __init__(self) -> None:
        self.body: list[tuple[int, int, str, str]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.body)

    def load(self, offset: int) -> None:
        self.body.append((_BPF_LD_ABS, offset, "", ""))

    def jump(self, code: int, k: int, true: str, false: str = "next") -> None:
        self.body.append((code, k, true, false))

    def goto(self, target: str) -> None:
        self.body.append((_BPF_JA, 0, target, ""))

    def ret(self, value: int) -> None:
        self.body.append((_BPF_RET, value, "", ""))

    def _offset(self, target: str, index: int) -> int:
        return 0 if target in ("", "next") else self.labels[target] - index - 1

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, k, jt, jf) in enumerate(self.body):
            if code == _BPF_JA:
                out += struct.pack("<HBBI", code, 0, 0, self._offset(jt, index))
                continue
            if code in (_BPF_RET, _BPF_LD_ABS):
                out += struct.pack("<HBBI", code, 0, 0, k)
                continue
            true, false = self._offset(jt, index), self._offset(jf, index)
            if not (0 <= true <= 255 and 0 <= false <= 255):
                raise ValueError("seccomp program too long for a conditional jump")
            out += struct.pack("<HBBI", code, true, false, k)
        return bytes(out)


def program(
    arch: str, *, metadata: MetadataRule | None, network: NetworkRule | None, notify: bool
) -> bytes:
    """The filter for one command. ``metadata``: Landlock's metadata rules (``None`` for
    bubblewrap, whose read-only mounts refuse those changes). ``network``: which IP sockets a
    command without network may create (``None``: network allowed, no socket rule).
    ``notify``: the filter has a listener (else calls that would be emulated are refused)."""
    numbers = syscalls.SYSCALLS[arch]
    p = _Program()
    p.load(4)  # seccomp_data.arch
    p.jump(_BPF_JEQ, syscalls.AUDIT_ARCH[arch], "next", "deny")
    p.load(0)  # seccomp_data.nr
    if arch == "x86_64":
        p.jump(_BPF_JGE, syscalls.X32_BIT, "deny")
    refused = list(_IO_URING)
    if metadata is not None:
        target = "notify" if metadata == "emulate" and notify else "deny"
        for name in EMULATED:
            if name in numbers:
                p.jump(_BPF_JEQ, numbers[name], target)
        refused += _REFUSED_METADATA
    for name in refused:
        if name in numbers:
            p.jump(_BPF_JEQ, numbers[name], "deny")
    if notify:
        for name in CREATION_CALLS:
            if name in numbers and name not in ("open", "openat"):
                p.jump(_BPF_JEQ, numbers[name], "notify")
        if "open" in numbers:
            p.jump(_BPF_JEQ, numbers["open"], "open")
        p.jump(_BPF_JEQ, numbers["openat"], "openat")
        p.jump(_BPF_JEQ, numbers["openat2"], "enosys")
    if network is not None:
        for name in ("connect", "sendmsg", "sendmmsg"):
            p.jump(_BPF_JEQ, numbers[name], "notify" if notify else "deny")
        p.jump(_BPF_JEQ, numbers["sendto"], "sendto")
        p.jump(_BPF_JEQ, numbers["socket"], "socket")
        p.jump(_BPF_JEQ, numbers["socketpair"], "socketpair")
    if metadata is not None:
        p.jump(_BPF_JEQ, numbers["ioctl"], "ioctl")
    p.jump(_BPF_JEQ, numbers["fcntl"], "fcntl")
    p.goto("allow")
    if metadata is not None:
        p.label("ioctl")
        p.load(_arg(1))  # the request (the kernel takes 32 bits)
        for request in _REFUSED_IOCTLS:
            p.jump(_BPF_JEQ, request, "deny")
        p.goto("allow")
    p.label("fcntl")
    p.load(_arg(1))  # the command (the kernel takes 32 bits)
    p.jump(_BPF_JEQ, _F_SETLEASE, "deny", "allow")
    if notify:
        # The flags are a register: a thread cannot change them after this decision.
        for call, flags in (("open", 1), ("openat", 2)):
            p.label(call)
            p.load(_arg(flags))
            p.jump(_BPF_JSET, _O_PATH, "allow")
            p.jump(_BPF_JSET, OPEN_WRITE_FLAGS, "notify", "allow")
    if network is not None:
        _socket_rules(p, network, "notify" if notify else "deny")
    p.label("allow")
    p.ret(_RET_ALLOW)
    p.label("notify")
    # EACCES, not EPERM: it reads "Permission denied", the Landlock backend's denial signature.
    p.ret(_RET_USER_NOTIF if notify else _RET_ERRNO | errno.EACCES)
    p.label("deny")
    p.ret(_RET_ERRNO | errno.EACCES)
    p.label("enosys")
    p.ret(_RET_ERRNO | errno.ENOSYS)
    return p.assemble()


def _socket_rules(p: _Program, network: NetworkRule, notify: str) -> None:
    # sendto without a destination (a NULL pointer in a register, so no race) goes to the
    # connected peer, which connect already checked; with one, the supervisor decides.
    p.label("sendto")
    p.load(_arg(4))
    p.jump(_BPF_JEQ, 0, "next", notify)
    p.load(_arg(4, high=True))
    p.jump(_BPF_JEQ, 0, "allow", notify)
    p.label("socketpair")
    p.load(_arg(0))
    p.jump(_BPF_JEQ, _AF_UNIX, "allow", "deny")
    p.label("socket")
    p.load(_arg(0))
    p.jump(_BPF_JEQ, _AF_UNIX, "allow")
    p.jump(_BPF_JEQ, _AF_NETLINK, "netlink")
    ip = "allow" if network == "ip" else "deny"
    p.jump(_BPF_JEQ, _AF_INET, ip)
    p.jump(_BPF_JEQ, _AF_INET6, ip, "deny")
    p.label("netlink")
    p.load(_arg(2))
    p.jump(_BPF_JEQ, _NETLINK_ROUTE, "allow", "deny")


def no_user_namespaces(arch: str) -> bytes:
    """The filter bubblewrap installs on its command just before ``exec`` (``--seccomp``): no
    new user namespace (``clone``/``unshare`` with ``CLONE_NEWUSER``; ``clone3``, whose flags
    a filter cannot read, says ``ENOSYS`` so that glibc falls back to ``clone``) and no
    ``setns``. In a user namespace of its own a command could mount, and so bind a host
    socket over a path its supervisor lets it connect to. (bwrap's ``--disable-userns`` does
    the same from bubblewrap 0.8, and costs a spawn more.)"""
    numbers = syscalls.SYSCALLS[arch]
    p = _Program()
    p.load(4)
    p.jump(_BPF_JEQ, syscalls.AUDIT_ARCH[arch], "next", "deny")
    p.load(0)
    p.jump(_BPF_JEQ, numbers["clone3"], "enosys")
    p.jump(_BPF_JEQ, numbers["setns"], "deny")
    p.jump(_BPF_JEQ, numbers["unshare"], "flags")
    p.jump(_BPF_JEQ, numbers["clone"], "flags", "allow")
    p.label("flags")
    p.load(_arg(0))
    p.jump(_BPF_JSET, _CLONE_NEWUSER, "deny", "allow")
    p.label("allow")
    p.ret(_RET_ALLOW)
    p.label("enosys")
    p.ret(_RET_ERRNO | errno.ENOSYS)
    p.label("deny")
    p.ret(_RET_ERRNO | errno.EACCES)
    return p.assemble()


class _FProg(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


FilterKey = tuple[str, MetadataRule | None, NetworkRule | None, bool]
"""(arch, metadata, network, notify): what decides a filter program."""
_programs: dict[FilterKey, tuple[ctypes.Array[ctypes.c_char], _FProg]] = {}


def compiled(key: FilterKey) -> _FProg:
    """The program as the kernel takes it, built once per process (and inherited by forks,
    which then do not rebuild it)."""
    if key not in _programs:
        arch, metadata, network, notify = key
        code = program(arch, metadata=metadata, network=network, notify=notify)
        buffer = ctypes.create_string_buffer(code, len(code))
        _programs[key] = (buffer, _FProg(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p)))
    return _programs[key][1]


def install(key: FilterKey) -> int:
    """Install the filter for ``key`` on the calling thread (``no_new_privs`` or
    ``CAP_SYS_ADMIN`` first). Returns its listener when ``notify``, else -1.

    A listener waits killably once the supervisor has taken a notification (Linux 5.19):
    a signal handler cannot then interrupt the call and have it restarted, which would make
    the supervisor perform it twice (a message sent twice)."""
    fprog = compiled(key)
    notify = key[3]
    flags = _FILTER_FLAG_NEW_LISTENER | _FILTER_FLAG_WAIT_KILLABLE_RECV if notify else 0
    while True:
        result = syscalls.syscall(
            key[0], "seccomp", ctypes.c_uint(_SECCOMP_SET_MODE_FILTER), ctypes.c_uint(flags),
            ctypes.byref(fprog),
        )  # fmt: skip
        if result >= 0:
            return result if notify else -1
        if ctypes.get_errno() == errno.EINVAL and flags & _FILTER_FLAG_WAIT_KILLABLE_RECV:
            flags &= ~_FILTER_FLAG_WAIT_KILLABLE_RECV  # an older kernel
            continue
        syscalls.fail_errno("seccomp")


# -- notifications -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Notification:
    """One system call a filtered thread is blocked in, waiting for the supervisor."""

    id: int
    pid: int
    """The calling thread's id, in the supervisor's PID namespace."""
    nr: int
    args: tuple[int, ...]


def receive(listener: int) -> Notification | None:
    """The next notification; ``None`` when there is none after all (the caller died)."""
    buf = bytearray(_NOTIF.size)
    try:
        fcntl.ioctl(listener, _NOTIF_RECV, buf, True)
    except OSError:
        return None
    nid, pid, _flags, nr, _arch, _ip, *args = _NOTIF.unpack(buf)
    return Notification(nid, pid, nr, tuple(args))


def still_waiting(listener: int, nid: int) -> bool:
    """True while the caller of notification ``nid`` is still blocked in it: everything
    opened through its pid before this check belongs to that caller (the pid cannot have
    been reused in between)."""
    try:
        fcntl.ioctl(listener, _NOTIF_ID_VALID, bytearray(struct.pack("<Q", nid)), True)
    except OSError:
        return False
    return True


def let_runner_continue(listener: int, nid: int) -> None:
    """Let the kernel make the call as asked (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``). Only for
    a call of bubblewrap itself, setting the command up: a process that has not installed
    bubblewrap's own filter yet, so no code of the command's runs in it, and nothing can
    change its arguments after the check (see :mod:`._creation_calls`)."""
    response = _NOTIF_RESP.pack(nid, 0, 0, _USER_NOTIF_FLAG_CONTINUE)
    with contextlib.suppress(OSError):  # the caller is gone: nobody is waiting
        fcntl.ioctl(listener, _NOTIF_SEND, bytearray(response), True)


def send_fd(listener: int, nid: int, fd: int, cloexec: bool) -> None:
    """Finish the call by installing ``fd`` (a descriptor of ours) in the caller: the call
    returns its number there (``SECCOMP_IOCTL_NOTIF_ADDFD`` with ``SEND``, one step, so the
    descriptor cannot be lost between installing and answering). ``OSError`` when the
    caller is gone, or (``EINVAL``) on a kernel without ``SEND`` (before Linux 5.14)."""
    flags = os.O_CLOEXEC if cloexec else 0
    request = _ADDFD.pack(nid, _ADDFD_FLAG_SEND, fd, 0, flags)
    fcntl.ioctl(listener, _NOTIF_ADDFD, bytearray(request), True)


def respond(listener: int, nid: int, error: int, value: int = 0) -> None:
    """Finish the call: it returns ``value``, or fails with ``error`` (an errno) when set.
    Never ``SECCOMP_USER_NOTIF_FLAG_CONTINUE``: letting the kernel run the call after a check
    races with any thread that changes its arguments in between."""
    response = _NOTIF_RESP.pack(nid, 0 if error else value, -error, 0)
    with contextlib.suppress(OSError):  # the caller is gone: nobody is waiting
        fcntl.ioctl(listener, _NOTIF_SEND, bytearray(response), True)


__all__ = [
    "CREATION_CALLS",
    "EMULATED",
    "OPEN_WRITE_FLAGS",
    "SOCKET_CALLS",
    "FilterKey",
    "MetadataRule",
    "NetworkRule",
    "Notification",
    "compiled",
    "install",
    "let_runner_continue",
    "no_user_namespaces",
    "program",
    "receive",
    "respond",
    "send_fd",
    "still_waiting",
]
