"""Linux system calls the standard library lacks, through ctypes; and the numbers they need.

Standard library only, like every module the sandbox's stand-alone programs load (the fork
server, the launchers): they run as ``python -S`` or ``-I`` with nothing else importable.

Only x86_64 and aarch64 are supported (:func:`machine`): the seccomp filters need each
architecture's syscall numbers, and a confined command on any other architecture would run
without them, so the backends refuse to confine there.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NoReturn

AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""``AUDIT_ARCH_*`` of the supported architectures (what a seccomp filter sees as ``arch``)."""
X32_BIT: Final = 0x40000000
"""Set in the syscall number of x86_64's x32 ABI."""

# name -> number per architecture (aarch64 has no legacy path-only calls). Numbers from 424
# on are the same everywhere (the tables were unified).
SYSCALLS: Final[dict[str, dict[str, int]]] = {
    "x86_64": {
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "utimensat": 280,
        "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
        "utime": 132, "utimes": 235, "futimesat": 261,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
        "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
        "setxattrat": 463, "removexattrat": 466, "file_setattr": 469, "ioctl": 16,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "socket": 41, "connect": 42, "sendto": 44, "sendmsg": 46, "bind": 49, "socketpair": 53,
        "sendmmsg": 307, "clone": 56, "unshare": 272, "setns": 308, "clone3": 435,
        "seccomp": 317, "rt_sigaction": 13, "openat2": 437, "pidfd_getfd": 438,
        "fcntl": 72, "open": 2, "creat": 85, "openat": 257,
        "mkdir": 83, "mkdirat": 258, "mknod": 133, "mknodat": 259, "symlink": 88,
        "symlinkat": 266, "link": 86, "linkat": 265, "rename": 82, "renameat": 264,
        "renameat2": 316,
    },
    "aarch64": {
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "utimensat": 88,
        "fchown": 55, "fchownat": 54,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7,
        "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16,
        "setxattrat": 463, "removexattrat": 466, "file_setattr": 469, "ioctl": 29,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "socket": 198, "socketpair": 199, "bind": 200, "connect": 203, "sendto": 206,
        "sendmsg": 211,
        "sendmmsg": 269, "clone": 220, "unshare": 97, "setns": 268, "clone3": 435,
        "seccomp": 277, "rt_sigaction": 134, "openat2": 437, "pidfd_getfd": 438,
        "fcntl": 25, "openat": 56, "mkdirat": 34, "mknodat": 33, "symlinkat": 36,
        "linkat": 37, "renameat": 38, "renameat2": 276,
    },
}  # fmt: skip

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522

RESOLVE_NO_MAGICLINKS: Final = 0x02
RESOLVE_BENEATH: Final = 0x08
RESOLVE_IN_ROOT: Final = 0x10
PIDFD_THREAD: Final = os.O_EXCL
"""``pidfd_open`` flag (Linux 6.9): a pidfd of that thread, not of its thread group."""


def machine() -> str | None:
    """The architecture name if the seccomp filters support it, else ``None``."""
    name = os.uname().machine
    return name if name in AUDIT_ARCH else None


@dataclass(slots=True)
class Libc:
    syscall: Callable[..., int]
    prctl: Callable[..., int]
    capset: Callable[..., int]
    utimensat: Callable[..., int]
    connect: Callable[..., int]
    sendmsg: Callable[..., int]
    getsockopt: Callable[..., int]
    process_vm_writev: Callable[..., int]
    process_vm_readv: Callable[..., int]
    statx: Callable[..., int]


_libc_cache: list[Libc] = []


def libc() -> Libc:
    """The C library's functions, loaded once per process (forks inherit them)."""
    if not _libc_cache:
        lib = ctypes.CDLL(None, use_errno=True)
        syscall = lib.syscall
        syscall.restype = ctypes.c_long
        prctl = lib.prctl
        prctl.restype = ctypes.c_int
        # Five arguments always: PR_SET_NO_NEW_PRIVS and PR_CAP_AMBIENT reject non-zero unused ones.
        prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
        capset = lib.capset
        capset.restype = ctypes.c_int
        utimensat = lib.utimensat
        utimensat.restype = ctypes.c_int
        utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
        connect = lib.connect
        connect.restype = ctypes.c_int
        connect.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        sendmsg = lib.sendmsg
        sendmsg.restype = ctypes.c_ssize_t
        sendmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        getsockopt = lib.getsockopt
        getsockopt.restype = ctypes.c_int
        getsockopt.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
        ]  # fmt: skip
        writev = lib.process_vm_writev
        readv = lib.process_vm_readv
        for vm in (writev, readv):
            vm.restype = ctypes.c_ssize_t
            vm.argtypes = [
                ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                ctypes.c_ulong,
            ]  # fmt: skip
        statx = lib.statx
        statx.restype = ctypes.c_int
        statx.argtypes = [
            ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p,
        ]  # fmt: skip
        functions = (syscall, prctl, capset, utimensat, connect, sendmsg, getsockopt)
        _libc_cache.append(Libc(*functions, writev, readv, statx))
    return _libc_cache[0]


def int32(value: int) -> int:
    """A system call argument the kernel takes as an ``int`` (seccomp sees 64 bits)."""
    return ctypes.c_int32(value & 0xFFFFFFFF).value


def fail_errno(what: str) -> NoReturn:
    """Raise ``OSError`` for the C call ``what`` that just failed."""
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")


def syscall(arch: str, name: str, *args: object) -> int:
    """The raw system call ``name``; the result, or -1 with ``ctypes.get_errno()`` set."""
    return int(libc().syscall(ctypes.c_long(SYSCALLS[arch][name]), *args))


# -- credentials and process attributes ------------------------------------------------------
_cap_header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
_cap_data = (ctypes.c_uint32 * 6)()  # all zero: no capability at all
_last_cap_cache: list[int] = []


def _last_cap() -> int:
    if not _last_cap_cache:
        try:
            with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
                _last_cap_cache.append(int(f.read().strip()))
        except (OSError, ValueError):
            _last_cap_cache.append(63)
    return _last_cap_cache[0]


def prepare() -> None:
    """Load everything :func:`drop_privileges` and the other calls below need, so a forked
    child that calls them allocates (and copies) little."""
    libc()
    _last_cap()


def drop_privileges() -> None:
    """Drop every capability (bounding, ambient, effective/permitted/inheritable) and set
    ``no_new_privs``. Both are inherited by everything the process forks and execs."""
    lib = libc()
    for cap in range(_last_cap() + 1):
        lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: nothing to drop
    lib.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if lib.capset(_cap_header, _cap_data) != 0:
        fail_errno("capset")
    set_no_new_privs()


def set_no_new_privs() -> None:
    """``PR_SET_NO_NEW_PRIVS``: needed to install a seccomp filter without capabilities; an
    exec can no longer gain privileges (setuid bits are ignored)."""
    if libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail_errno("prctl(PR_SET_NO_NEW_PRIVS)")


def become_subreaper() -> None:
    """Orphans below this process are reparented to it, not to init."""
    libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def set_dumpable(dumpable: bool) -> None:
    """Not dumpable: a process of the same uid (without ``CAP_SYS_PTRACE``) can neither
    ptrace this one nor open its /proc files. Reset to dumpable by ``exec``."""
    libc().prctl(_PR_SET_DUMPABLE, int(dumpable), 0, 0, 0)


def die_with_parent(signo: int, parent: int, exit_status: int) -> None:
    """Get ``signo`` when ``parent`` (the forking thread) dies; exit with ``exit_status`` at
    once when it already has (it died before the death signal was armed)."""
    libc().prctl(_PR_SET_PDEATHSIG, int(signo), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(exit_status)


def default_internal_signals(arch: str) -> None:
    """Give the two signals glibc keeps for itself (32 and 33) their default disposition.
    ``posix_spawn`` leaves them ignored in the child, an ignored signal stays ignored across
    ``exec``, and glibc's ``sigaction`` refuses to touch them, hence the raw syscall (a
    ``struct sigaction`` of zeros: ``SIG_DFL``, no flags, an empty mask)."""
    action = ctypes.create_string_buffer(32)
    for signo in (32, 33):
        syscall(
            arch, "rt_sigaction", ctypes.c_int(signo), action, ctypes.c_void_p(None),
            ctypes.c_size_t(8),
        )  # fmt: skip


# -- descriptors of other processes, and path resolution -------------------------------------
class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


def openat2(arch: str, dirfd: int, path: bytes, flags: int, resolve: int) -> int:
    """``openat2(dirfd, path, {flags, resolve})`` (Linux 5.6); raises ``OSError``."""
    how = _OpenHow(flags, 0, resolve)
    fd = syscall(
        arch, "openat2", ctypes.c_int(dirfd), ctypes.c_char_p(path), ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )  # fmt: skip
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return fd


def pidfd_getfd(arch: str, pidfd: int, fd: int) -> int:
    """A duplicate (close-on-exec) of descriptor ``fd`` of the process behind ``pidfd``
    (Linux 5.6; needs ptrace access to it); raises ``OSError``."""
    copy = syscall(arch, "pidfd_getfd", ctypes.c_int(pidfd), ctypes.c_int(fd), ctypes.c_uint(0))
    if copy < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return copy


def pidfd_of_thread(tid: int) -> int:
    """A pidfd of thread ``tid``, or of its thread group where threads have none (before
    Linux 6.9: a descriptor table is shared by the whole group, so either finds its fds)."""
    try:
        return os.pidfd_open(tid, PIDFD_THREAD)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOENT):
            raise
    with open(f"/proc/{tid}/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("Tgid:"):
                return os.pidfd_open(int(line.split()[1]))
    raise OSError(errno.ESRCH, "no such thread")


class _IoVec(ctypes.Structure):
    """``struct iovec``."""

    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


def write_memory(pid: int, address: int, data: bytes) -> None:
    """Write ``data`` at ``address`` in process ``pid`` (``process_vm_writev``: unlike
    ``/proc/<pid>/mem``, it is no file write, which a Landlock domain may refuse)."""
    local = ctypes.create_string_buffer(data, len(data))
    ours = _IoVec(ctypes.cast(local, ctypes.c_void_p), len(data))
    theirs = _IoVec(address, len(data))
    written = libc().process_vm_writev(pid, ctypes.byref(ours), 1, ctypes.byref(theirs), 1, 0)
    if written != len(data):
        raise OSError(errno.EFAULT, "bad address")


def read_memory(pid: int, address: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``address`` in process ``pid`` (``process_vm_readv``: one call,
    no descriptor to open); fewer when the range ends in unmapped memory. ``OSError``
    (``EFAULT``) when nothing there is readable."""
    local = ctypes.create_string_buffer(size)
    ours = _IoVec(ctypes.addressof(local), size)
    theirs = _IoVec(address, size)
    done = libc().process_vm_readv(pid, ctypes.byref(ours), 1, ctypes.byref(theirs), 1, 0)
    if done < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return ctypes.string_at(local, done)


_AT_EMPTY_PATH = 0x1000
_STATX_MNT_ID = 0x1000
_STATX_SIZE = 256
_STATX_MNT_ID_AT = 0x90
"""``stx_mnt_id`` in ``struct statx`` (Linux 5.8)."""


def mount_id(fd: int) -> int:
    """The id of the mount that descriptor ``fd`` is on (``statx``): in whatever mount
    namespace it was opened. ``OSError`` when the kernel cannot tell."""
    buf = ctypes.create_string_buffer(_STATX_SIZE)
    if libc().statx(fd, b"", _AT_EMPTY_PATH, _STATX_MNT_ID, buf) != 0:
        fail_errno("statx")
    mask = int.from_bytes(buf.raw[0:4], "little")
    if not mask & _STATX_MNT_ID:
        raise OSError(errno.ENOSYS, "statx: no mount id")
    return int.from_bytes(buf.raw[_STATX_MNT_ID_AT : _STATX_MNT_ID_AT + 8], "little")


def signal_thread(pidfd: int, signo: int) -> None:
    """Send ``signo`` through ``pidfd`` (to the thread, for a thread's pidfd)."""
    with contextlib.suppress(OSError):  # it is gone: nothing to tell
        signal.pidfd_send_signal(pidfd, signo)


__all__ = [
    "AUDIT_ARCH",
    "PIDFD_THREAD",
    "RESOLVE_BENEATH",
    "RESOLVE_IN_ROOT",
    "RESOLVE_NO_MAGICLINKS",
    "SYSCALLS",
    "X32_BIT",
    "Libc",
    "become_subreaper",
    "default_internal_signals",
    "die_with_parent",
    "drop_privileges",
    "fail_errno",
    "int32",
    "libc",
    "machine",
    "mount_id",
    "openat2",
    "pidfd_getfd",
    "pidfd_of_thread",
    "prepare",
    "read_memory",
    "set_dumpable",
    "set_no_new_privs",
    "signal_thread",
    "syscall",
    "write_memory",
]
