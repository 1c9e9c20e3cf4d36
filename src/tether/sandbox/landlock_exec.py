"""Landlock confinement of one command: syscalls, the ruleset, and a supervisor.

This module imports nothing but the standard library, because it runs three ways:

* imported by the harness, which builds rulesets (:func:`build_ruleset`);
* imported by the fork server (:mod:`tether.sandbox.landlock_server`), whose pairs use the
  supervisor, the hand-over and the filter below;
* as a launcher script, ``python -I -S .../landlock_exec.py [options] -- ARGV...`` (a Python
  start-up per call), which is what :attr:`ConfinedCommand.argv` holds, so a caller that only
  knows how to spawn an argv still gets a confined command.

A command runs below a *supervisor*: a child subreaper that forks it and waits. The command
enters a Landlock domain and execs; from ABI 6 a domain may not signal processes outside
itself, and a confined process may never ptrace one, so the command cannot touch its
supervisor. (The launcher's supervisor, forked from the caller, enters a domain of its own
first and the command a nested one; the fork server's stays outside any domain.) When the
command exits, or the supervisor is told to stop (SIGTERM, SIGINT, SIGHUP; its parent dying
sends SIGTERM through ``PR_SET_PDEATHSIG``), the supervisor kills every process left below
it, including ones that called ``setsid`` (they were reparented to it). That gives Landlock
what bubblewrap's PID namespace gives for free: nothing a command starts outlives the call.

Supervisor and command drop every capability (bounding set, ambient, effective/permitted/
inheritable) and set ``PR_SET_NO_NEW_PRIVS``, so root inside is a plain uid 0 (as with
``bwrap --cap-drop ALL``): it cannot mount, create device nodes, chroot or load modules. The
command also gets a seccomp filter for what Landlock cannot see (metadata changes; see
"metadata filter" below), whose emulated calls the supervisor serves.

Launcher failures print one ``tether-landlock: ...`` line on stderr and exit 125 (the
backend's runner-failure rule); a command that cannot be executed exits 127 like a shell.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import errno
import fcntl
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, NoReturn

LAUNCHER_EXIT = 125
"""Exit status of the launcher when it could not confine (the command never ran)."""
LAUNCHER_PREFIX = "tether-landlock: "
"""Prefix of the one stderr line the launcher writes before exiting with ``LAUNCHER_EXIT``."""

# Syscall numbers: Landlock came after the syscall tables were unified, so these are the
# same on x86_64, aarch64, riscv64 and the other generic-table architectures.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522

# Filesystem access rights (include/uapi/linux/landlock.h).
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE
"""Rights a rule on a non-directory may carry (others make ``landlock_add_rule`` fail)."""
# Device nodes are never creatable (MAKE_CHAR/MAKE_BLOCK are handled and granted nowhere), and
# only DEVICES can be opened at all. LANDLOCK_ACCESS_FS_IOCTL_DEV (ABI 5) is not handled: with
# /dev reduced to DEVICES it would add nothing, and it would exist only from ABI 5.
_WRITE_V1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_SYM
)

FULL_ENFORCEMENT_ABI = 3
"""From ABI 3 (``TRUNCATE``) every file effect of the modes is covered; below it ``truncate``
of an outside file cannot be refused, so enforcement is reported ``partial``."""
NETWORK_ABI = 4
SCOPE_ABI = 6


class LandlockError(OSError):
    """Landlock is unusable here, or a rule could not be built."""


@dataclass(frozen=True, slots=True)
class LandlockSpec:
    """What one confined command may do.

    ``writable``: canonical directories (or files) the command may modify (empty for
    read-only; ``/dev/null`` is always writable); one that is a symbolic link grants nothing. ``hidden``: paths that must be neither readable nor writable
    (credentials, the session store); everything else is readable. ``readonly``: paths that
    stay readable but must not change, even inside a writable directory (the workspace's
    control files). ``hidden`` and ``readonly`` are canonical and need not exist: one that
    is missing cannot be created. ``network``: leave TCP alone.
    """

    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    network: bool = False
    readonly: tuple[str, ...] = ()


@dataclass(slots=True)
class _Libc:
    syscall: Callable[..., int]
    prctl: Callable[..., int]
    capset: Callable[..., int]
    utimensat: Callable[..., int]


_libc_cache: list[_Libc] = []


def _libc() -> _Libc:
    if not _libc_cache:
        lib = ctypes.CDLL(None, use_errno=True)
        syscall = lib.syscall
        syscall.restype = ctypes.c_long
        prctl = lib.prctl
        prctl.restype = ctypes.c_int
        # Five arguments always: PR_SET_NO_NEW_PRIVS and PR_CAP_AMBIENT reject non-zero unused ones.
        prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        capset = lib.capset
        capset.restype = ctypes.c_int
        utimensat = lib.utimensat
        utimensat.restype = ctypes.c_int
        utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
        _libc_cache.append(_Libc(syscall, prctl, capset, utimensat))
    return _libc_cache[0]


def abi_version() -> int:
    """The kernel's Landlock ABI version; raises :class:`LandlockError` when unavailable.

    This is the probe platform.md prescribes (``/sys/kernel/security/lsm`` may be absent).
    """
    try:
        libc = _libc()
    except (OSError, AttributeError) as err:
        raise LandlockError(errno.ENOSYS, f"cannot load libc: {err}") from err
    value = libc.syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )
    if value < 0:
        code = ctypes.get_errno()
        why = {
            errno.ENOSYS: "the kernel was built without Landlock",
            errno.EOPNOTSUPP: "Landlock is disabled at boot (lsm= does not list it)",
        }.get(code, os.strerror(code))
        raise LandlockError(code, f"landlock_create_ruleset: {why}")
    return int(value)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def handled_fs(abi: int) -> int:
    access = FS_READ | _WRITE_V1 | FS_MAKE_CHAR | FS_MAKE_BLOCK
    if abi >= 2:
        access |= FS_REFER
    if abi >= FULL_ENFORCEMENT_ABI:
        access |= FS_TRUNCATE
    return access


def writable_access(abi: int) -> int:
    """Rights granted beneath a writable root: everything but device nodes."""
    return handled_fs(abi) & ~(FS_MAKE_CHAR | FS_MAKE_BLOCK)


DEVICES: Final = (
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
    "/dev/tty", "/dev/pts", "/dev/ptmx",
)  # fmt: skip
"""The only entries under ``/dev`` a command may open (what ``bwrap --dev`` provides). As uid 0
without capabilities it could otherwise read a raw disk (and so any hidden file) or drive a
device by ioctl (``/dev/loop-control``, ``/dev/userfaultfd``), which Landlock does not refuse
below ABI 5."""


def readable_roots(hidden: Sequence[str]) -> list[str]:
    """The smallest set of paths whose subtrees cover everything except ``hidden`` and
    ``/dev`` (:data:`DEVICES` are granted one by one).

    Landlock only grants, it cannot carve out, so hiding ``~/.ssh`` means granting read on
    every sibling of every directory on the way down to it: ``/`` minus ``/root``, then
    ``/root`` minus ``/root/.ssh``. Symbolic links are skipped (a link in ``$HOME`` pointing
    into ``~/.ssh`` must not re-grant it; its target is covered where it really lives).
    Entries created later under those directories are unreadable until they are listed again
    (see :func:`build_ruleset`).
    """
    return _walk_readable(hidden)[0]


def _normalised(paths: Sequence[str]) -> set[str]:
    return {os.path.normpath(p) for p in paths if p and os.path.isabs(p)}


def _walk_readable(hidden: Sequence[str]) -> tuple[list[str], list[str]]:
    """:func:`readable_roots`, and the directories whose listings it depends on."""
    return _cover("/", _normalised(hidden) | {"/dev"})


def _cover(top: str, hide: set[str]) -> tuple[list[str], list[str]]:
    """Paths whose subtrees cover ``top`` except ``hide``, and the directories listed."""
    roots: list[str] = []
    walked: list[str] = []

    def on_path(directory: str) -> bool:
        prefix = directory.rstrip("/") + "/"
        return any(h.startswith(prefix) for h in hide)

    def walk(directory: str) -> None:
        walked.append(directory)
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            path = os.path.join(directory, name)
            if path in hide:
                continue
            if on_path(path):
                if os.path.isdir(path) and not os.path.islink(path):
                    walk(path)
                continue
            if os.path.islink(path):
                continue
            roots.append(path)

    if top in hide:
        return [], []
    if not on_path(top):
        return [top], []
    walk(top)
    return roots, walked


def writable_roots(spec: LandlockSpec) -> tuple[str, ...]:
    """What a command may modify beneath: each of ``spec.writable`` resolved, or, when it
    holds a hidden or read-only path (existing or not), :func:`writable_cover` of it."""
    folded = {c.casefold() for c in _normalised((*spec.hidden, *spec.readonly))}
    if not folded:
        # Nothing to carve (a fork-server pair gets the roots the harness carved already).
        return tuple(dict.fromkeys(spec.writable))
    roots: list[str] = []
    for path in spec.writable:
        roots += writable_cover(os.path.realpath(path), folded)[0]
    return tuple(dict.fromkeys(roots))


def writable_cover(root: str, carve: set[str]) -> tuple[list[str], list[str]]:
    """The entries to grant so that everything under ``root`` is writable except ``carve``
    (canonical paths, existing or not), and the directories not granted themselves.

    Neither a Landlock rule nor a bind mount can refuse one missing name in a writable
    directory while allowing others, so a directory that holds a carved path (or is on the
    way to one) is not granted: its other entries are, one by one, and the directories on
    the way are walked the same way. No entry can then be created, removed or renamed
    directly in those directories. Only directories and regular files are granted: a
    symbolic link would grant its target, and a device, socket or FIFO has no business being
    written through the workspace. Names compare case-insensitively, so ``TETHER.TOML`` on
    such a filesystem is refused with ``tether.toml``. A ``root`` inside a carved path is
    not granted at all; one that cannot be listed raises :class:`LandlockError`.
    """
    folded = {c.casefold() for c in carve}
    key = root.casefold()
    under = key.rstrip("/") + "/"
    if any(key == c or key.startswith(c + "/") for c in folded):
        return [], []
    inside = {c for c in folded if c.startswith(under)}
    if not inside:
        return [root], []
    granted: list[str] = []
    walked: list[str] = []

    def on_path(folded_path: str) -> bool:
        prefix = folded_path + "/"
        return any(c.startswith(prefix) for c in inside)

    def walk(directory: str) -> None:
        walked.append(directory)
        try:
            names = sorted(os.listdir(directory))
        except OSError as err:
            if directory == root:
                raise LandlockError(err.errno, f"cannot open {root}: {err.strerror}") from err
            return
        for name in names:
            path = os.path.join(directory, name)
            folded_path = path.casefold()
            if folded_path in inside:
                continue
            try:
                kind = stat.S_IFMT(os.lstat(path).st_mode)
            except OSError:
                continue
            if on_path(folded_path):
                if kind == stat.S_IFDIR:
                    walk(path)
            elif kind in (stat.S_IFDIR, stat.S_IFREG):
                granted.append(path)

    walk(root)
    return granted, walked


@dataclass(frozen=True, slots=True)
class _ReadableRoots:
    """The readable roots for one ``hidden`` set, and what they were derived from."""

    stamps: tuple[tuple[str, int, int, int], ...]
    """(directory, device, inode, mtime in ns) of every directory listed to find them."""
    built: int
    """When the listing was taken (``time.time_ns``)."""
    roots: tuple[str, ...]


_READABLE_CACHE: Final = 4
"""``hidden`` sets whose readable roots are kept for reuse (a harness has one, usually)."""
_FRESH_NS: Final = 2_000_000_000
"""A listing is trusted again only if every directory it read was last changed this long
before it was taken: on a filesystem with coarse timestamps, a change in the same tick would
otherwise go unseen."""
_readable_cache: dict[tuple[str, ...], _ReadableRoots] = {}
_readable_lock = threading.Lock()


def _fresh_lock_after_fork() -> None:
    # A thread of the parent may have held the lock at fork time; it does not exist here.
    global _readable_lock
    _readable_lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_after_fork)


def _stamp(directory: str) -> tuple[str, int, int, int]:
    info = os.stat(directory)
    return directory, info.st_dev, info.st_ino, info.st_mtime_ns


def _still_valid(entry: _ReadableRoots) -> bool:
    try:
        for recorded in entry.stamps:
            if _stamp(recorded[0]) != recorded or recorded[3] > entry.built - _FRESH_NS:
                return False
    except OSError:
        return False
    return True


def _list_readable(hidden: tuple[str, ...]) -> _ReadableRoots:
    built = time.time_ns()
    roots, walked = _walk_readable(hidden)
    stamps = []
    for directory in walked:
        with contextlib.suppress(OSError):
            stamps.append(_stamp(directory))
    return _ReadableRoots(tuple(stamps), built, tuple(roots))


def _add_readable(libc: _Libc, ruleset: int, hidden: Sequence[str]) -> None:
    """Grant read and execute beneath every readable root and on :data:`DEVICES`. Listing the
    directories on the way to the hidden paths is a good part of a ruleset's cost, so the
    roots found are kept, and reused while none of those directories has changed (an entry
    added, removed or renamed changes its directory's mtime). Paths are kept, not open
    descriptors: those would keep the filesystems they are on busy."""
    key = tuple(sorted(set(hidden)))
    with _readable_lock:
        entry = _readable_cache.pop(key, None)
        if entry is None or not _still_valid(entry):
            entry = _list_readable(key)
        _readable_cache[key] = entry  # most recently used last
        while len(_readable_cache) > _READABLE_CACHE:
            del _readable_cache[next(iter(_readable_cache))]
    for path in (*entry.roots, *DEVICES):
        _add_rule(libc, ruleset, path, FS_READ, required=False)


def build_ruleset(
    spec: LandlockSpec, abi: int | None = None, *, roots: Sequence[str] | None = None
) -> int:
    """A ruleset file descriptor (close-on-exec) for ``spec``. Creating it restricts nothing;
    :func:`restrict_self` in the child does. The caller closes it after spawning. ``roots``:
    :func:`writable_roots` of ``spec`` when the caller has them already."""
    abi = abi_version() if abi is None else abi
    libc = _libc()
    attr = _RulesetAttr(handled_fs(abi), 0, 0)
    size = 8
    if abi >= NETWORK_ABI:
        size = 16
        if not spec.network:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if abi >= SCOPE_ABI:
        size = 24
        attr.scoped = SCOPE_SIGNAL | (0 if spec.network else SCOPE_ABSTRACT_UNIX_SOCKET)
    fd = _checked(
        libc,
        "landlock_create_ruleset",
        _SYS_CREATE_RULESET,
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )
    try:
        # Listing is allowed everywhere (``ls /`` must work); reading and executing only
        # outside the hidden paths. A hidden directory's entry names stay visible.
        _add_rule(libc, fd, "/", FS_READ_DIR)
        _add_readable(libc, fd, spec.hidden)
        for path in writable_roots(spec) if roots is None else roots:
            # Not through a link: an entry swapped for one since it was listed grants nothing.
            _add_rule(libc, fd, path, writable_access(abi), required=False, follow=False)
        _add_rule(libc, fd, "/dev/null", FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _checked(libc: _Libc, what: str, number: int, *args: object) -> int:
    """A Landlock syscall; :class:`LandlockError` naming ``what`` when it fails."""
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        code = ctypes.get_errno()
        raise LandlockError(code, f"{what}: {os.strerror(code)}")
    return int(result)


def _add_rule(
    libc: _Libc,
    ruleset: int,
    path: str,
    access: int,
    *,
    required: bool = True,
    follow: bool = True,
) -> None:
    """Grant ``access`` beneath ``path``; a missing path is an error only if ``required``,
    and a symbolic link grants nothing unless ``follow``."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError as err:
        if not required and err.errno == errno.ENOENT:
            return  # vanished since it was listed: nothing to grant
        raise LandlockError(err.errno, f"cannot open {path}: {err.strerror}") from err
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return
        if not stat.S_ISDIR(mode):
            access &= _FILE_ONLY
        rule = _PathBeneathAttr(access, fd)
        _checked(
            libc,
            f"landlock_add_rule {path}",
            _SYS_ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


# -- metadata filter (seccomp) ---------------------------------------------------------------
# Landlock cannot refuse metadata changes: chmod, chown, utimes and extended attributes of any
# file the uid owns (for root: every system file; ``chmod u+s`` included). A seccomp filter
# closes that gap. chmod and utimensat are handed to the supervisor (seccomp user
# notification), which opens the target itself, checks that the opened file lies under a
# writable root, and performs the change, so a path swapped after the check cannot redirect it
# (the launcher under read-only, with no writable root, refuses them in the filter itself);
# chown and xattr changes are refused everywhere (without capabilities they were of little use
# anyway). Refusals are EACCES, so they read "Permission denied".
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_SYS_RT_SIGACTION = {"x86_64": 13, "aarch64": 134}
_X32_BIT = 0x40000000
# name -> number per architecture (aarch64 has no legacy path-only calls).
_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "utimensat": 280,
        "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
        "utime": 132, "utimes": 235, "futimesat": 261,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
        "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
        "setxattrat": 463, "removexattrat": 466, "file_setattr": 469, "ioctl": 16,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    },
    "aarch64": {
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "utimensat": 88,
        "fchown": 55, "fchownat": 54,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7,
        "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16,
        "setxattrat": 463, "removexattrat": 466, "file_setattr": 469, "ioctl": 29,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    },
}  # fmt: skip
_EMULATED = ("chmod", "fchmod", "fchmodat", "fchmodat2", "utimensat")
_REFUSED = (
    "chown", "fchown", "lchown", "fchownat", "utime", "utimes", "futimesat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "setxattrat", "removexattrat", "file_setattr",
    # io_uring performs xattr changes (and more) without the syscalls above ever being made.
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)  # fmt: skip
# chattr through ioctl: FS_IOC_SETFLAGS (64- and 32-bit forms) and FS_IOC_FSSETXATTR.
_REFUSED_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)

_RET_ALLOW = 0x7FFF0000
_RET_USER_NOTIF = 0x7FC00000
_RET_ERRNO = 0x00050000
_FILTER_FLAG_NEW_LISTENER = 1 << 3
_SECCOMP_SET_MODE_FILTER = 1
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF_ID_VALID = 0x40082102
_NOTIF = struct.Struct("<QIIiIQ6Q")  # struct seccomp_notif (80 bytes)
_NOTIF_RESP = struct.Struct("<QqiI")  # struct seccomp_notif_resp (24 bytes)
_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_EMPTY_PATH = 0x1000


def machine() -> str | None:
    """The architecture name if the metadata filter supports it, else ``None``."""
    name = os.uname().machine
    return name if name in _AUDIT_ARCH else None


_BPF_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_BPF_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_BPF_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_BPF_RET = 0x06  # BPF_RET | BPF_K


def _filter_program(arch: str, emulate: bool) -> bytes:
    """The classic-BPF program, assembled by hand (no libseccomp needed).

    Jumps name their target (``next``, or one of the three returns at the end); offsets are
    resolved once the program's length is known.
    """
    numbers = _SYSCALLS[arch]
    # EACCES, not EPERM: it reads "Permission denied", the backend's denial signature.
    deny = _RET_ERRNO | errno.EACCES
    returns = {"allow": _RET_ALLOW, "notify": _RET_USER_NOTIF if emulate else deny, "deny": deny}
    # (code, k, true-target, false-target); loads use neither target.
    body: list[tuple[int, int, str, str]] = [
        (_BPF_LD_ABS, 4, "", ""),  # seccomp_data.arch
        (_BPF_JEQ, _AUDIT_ARCH[arch], "next", "deny"),  # another ABI (i386 on x86_64): refuse
        (_BPF_LD_ABS, 0, "", ""),  # seccomp_data.nr
    ]
    if arch == "x86_64":
        body.append((_BPF_JGE, _X32_BIT, "deny", "next"))  # the x32 ABI: refuse
    body += [(_BPF_JEQ, numbers[n], "notify", "next") for n in _EMULATED if n in numbers]
    body += [(_BPF_JEQ, numbers[n], "deny", "next") for n in _REFUSED if n in numbers]
    body.append((_BPF_JEQ, numbers["ioctl"], "next", "allow"))
    body.append((_BPF_LD_ABS, 24, "", ""))  # low half of args[1]: the ioctl request
    body += [(_BPF_JEQ, request, "deny", "next") for request in _REFUSED_IOCTLS]
    labels = {name: len(body) + i for i, name in enumerate(returns)}
    labels["allow"] = len(body)  # falling off the ioctl checks allows

    def offset(target: str, index: int) -> int:
        return 0 if target in ("", "next") else labels[target] - index - 1

    out = bytearray()
    for index, (code, k, jt, jf) in enumerate(body):
        out += struct.pack("<HBBI", code, offset(jt, index), offset(jf, index), k)
    for name in returns:
        out += struct.pack("<HBBI", _BPF_RET, 0, 0, returns[name])
    return bytes(out)


class _FProg(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


# -- in the child -------------------------------------------------------------------------------
_SUPERVISOR_SIGNALS = frozenset({signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


@dataclass(slots=True)
class _ChildPlan:
    """Everything the child needs, built in the parent so the child allocates little."""

    ruleset: int
    last_cap: int
    writable: tuple[str, ...]
    arch: str
    libc: _Libc = field(default_factory=lambda: _libc())
    cap_header: ctypes.Array[ctypes.c_uint32] = field(
        default_factory=lambda: (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    )
    cap_data: ctypes.Array[ctypes.c_uint32] = field(default_factory=lambda: (ctypes.c_uint32 * 6)())

    @property
    def emulate(self) -> bool:
        return bool(self.writable)


_programs: dict[tuple[str, bool], tuple[ctypes.Array[ctypes.c_char], _FProg]] = {}


def _compiled(arch: str, emulate: bool) -> tuple[ctypes.Array[ctypes.c_char], _FProg]:
    """The filter program as the kernel takes it, built once per process (and inherited by
    forks, which then do not rebuild it)."""
    key = (arch, emulate)
    if key not in _programs:
        code = _filter_program(arch, emulate)
        program = ctypes.create_string_buffer(code, len(code))
        _programs[key] = (program, _FProg(len(code) // 8, ctypes.cast(program, ctypes.c_void_p)))
    return _programs[key]


def plan_for(ruleset: int, spec: LandlockSpec) -> _ChildPlan:
    arch = machine()
    if arch is None:
        raise LandlockError(
            errno.ENOTSUP, f"no metadata filter for architecture {os.uname().machine}"
        )
    return _ChildPlan(ruleset, _last_cap(), writable_roots(spec), arch)


_last_cap_cache: list[int] = []


def _last_cap() -> int:
    if not _last_cap_cache:
        try:
            with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
                _last_cap_cache.append(int(f.read().strip()))
        except (OSError, ValueError):
            _last_cap_cache.append(63)
    return _last_cap_cache[0]


def drop_privileges(plan: _ChildPlan) -> None:
    """Drop every capability (bounding, ambient, effective/permitted/inheritable) and set
    ``no_new_privs``. Both are inherited by everything the process forks and execs."""
    libc = plan.libc
    for cap in range(plan.last_cap + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: nothing to drop
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if libc.capset(plan.cap_header, plan.cap_data) != 0:
        _fail_errno("capset")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail_errno("prctl(PR_SET_NO_NEW_PRIVS)")


def enter_domain(plan: _ChildPlan) -> None:
    """Enter a (new, nested) Landlock domain built from ``plan.ruleset``; needs
    ``no_new_privs`` (:func:`drop_privileges`) first."""
    result = plan.libc.syscall(
        ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(plan.ruleset), ctypes.c_uint32(0)
    )
    if result != 0:
        _fail_errno("landlock_restrict_self")


def _restrict(plan: _ChildPlan) -> None:
    drop_privileges(plan)
    enter_domain(plan)


def install_filter(plan: _ChildPlan, emulate: bool | None = None) -> int:
    """Install the metadata filter, with calls emulated when ``emulate`` (default: when the
    plan has writable roots); the listener fd when calls are emulated, else -1."""
    emulate = plan.emulate if emulate is None else emulate
    _, fprog = _compiled(plan.arch, emulate)
    flags = _FILTER_FLAG_NEW_LISTENER if emulate else 0
    result = plan.libc.syscall(
        ctypes.c_long(_SYS_SECCOMP[plan.arch]),
        ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_uint(flags),
        ctypes.byref(fprog),
    )
    if result < 0:
        _fail_errno("seccomp")
    return int(result) if emulate else -1


def _fail_errno(what: str) -> NoReturn:
    code = ctypes.get_errno()
    raise LandlockError(code, f"{what}: {os.strerror(code)}")


def confine_and_fork(plan: _ChildPlan) -> None:
    """Run in the process that will become the command (the launcher). Returns in the command
    process, ready to exec; the calling process itself becomes the supervisor and never
    returns."""
    die_with_parent(plan, signal.SIGTERM, os.getppid())
    _restrict(plan)
    channel, old_mask = become_supervisor(plan)
    supervisor = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(plan, signal.SIGKILL, supervisor)
        channel[0].close()
        _restrict(plan)
        hand_over(plan, channel[1])
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return
    channel[1].close()
    status: int | None = None
    try:
        (handover,) = isolate_fds([channel[0].detach()])
        status = supervise(pid, handover)
    except BaseException:
        with contextlib.suppress(BaseException):
            sweep()
        os._exit(LAUNCHER_EXIT)
    _exit_like(status)


def become_supervisor(plan: _ChildPlan) -> tuple[tuple[socket.socket, socket.socket], set[int]]:
    """Make this process the supervisor of a command it is about to fork: a child subreaper
    (whatever the command starts stays below it), not dumpable (a process of the same uid can
    neither ptrace it nor open its /proc files, whatever the Landlock ABI), with the signals
    it waits for blocked until :func:`supervise` handles them. Returns the hand-over channel
    (supervisor's end first) and the signal mask to restore in the command."""
    become_subreaper(plan)
    plan.libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    channel = handover_channel()
    return channel, signal.pthread_sigmask(signal.SIG_BLOCK, _SUPERVISOR_SIGNALS)


def die_with_parent(plan: _ChildPlan, signo: int, parent: int) -> None:
    """Get ``signo`` when ``parent`` (the forking thread) dies; exit at once when it already
    has (it died before the death signal was armed)."""
    plan.libc.prctl(_PR_SET_PDEATHSIG, int(signo), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(LAUNCHER_EXIT)


def default_internal_signals(plan: _ChildPlan) -> None:
    """Give the two signals glibc keeps for itself (32 and 33) their default disposition.
    ``posix_spawn`` leaves them ignored in the child, an ignored signal stays ignored across
    ``exec``, and glibc's ``sigaction`` refuses to touch them, hence the raw syscall (a
    ``struct sigaction`` of zeros: ``SIG_DFL``, no flags, an empty mask)."""
    action = ctypes.create_string_buffer(32)
    for signo in (32, 33):
        plan.libc.syscall(
            ctypes.c_long(_SYS_RT_SIGACTION[plan.arch]),
            ctypes.c_int(signo),
            action,
            ctypes.c_void_p(None),
            ctypes.c_size_t(8),
        )


def become_subreaper(plan: _ChildPlan) -> None:
    """Orphans below this process are reparented to it, not to init."""
    plan.libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def hand_over(plan: _ChildPlan, channel: socket.socket) -> None:
    """In the command, once inside its domain: install the metadata filter and send the
    supervisor its listener (when calls are emulated) and the writable roots."""
    if plan.emulate:
        send_listener(plan, channel)
    else:
        install_filter(plan)
    send_roots(plan.writable, channel)
    channel.close()


def send_listener(plan: _ChildPlan, channel: socket.socket) -> None:
    """Install the metadata filter with calls emulated, and send the supervisor its listener.
    Until :func:`send_roots`, the supervisor refuses every emulated call."""
    listener = install_filter(plan, emulate=True)
    try:
        socket.send_fds(channel, [b"L"], [listener])
    finally:
        os.close(listener)


def send_roots(roots: Sequence[str], channel: socket.socket) -> None:
    """Tell the supervisor which roots emulated calls may change."""
    channel.send(b"R" + "\0".join(roots).encode())


def recv_with_fds(
    sock: socket.socket, size: int, max_fds: int, flags: int = 0
) -> tuple[bytes, list[int]]:
    """One message and the descriptors sent with it, marked close-on-exec. (Python 3.11's
    ``socket.recv_fds`` ignores ``flags`` and leaves the descriptors inheritable.)"""
    fds = array.array("i")
    message, ancillary, _, _ = sock.recvmsg(
        size, socket.CMSG_SPACE(max_fds * fds.itemsize), flags | socket.MSG_CMSG_CLOEXEC
    )
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def handover_channel() -> tuple[socket.socket, socket.socket]:
    """The supervisor's and the command's ends of the hand-over channel (one message each)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def isolate_fds(keep: Sequence[int]) -> list[int]:
    """Stdin and stdout to ``/dev/null``, ``keep`` moved to 3, 4, ... (close-on-exec), every
    other descriptor but stderr closed: above all a harness pipe whose EOF it waits for."""
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256) for fd in keep]
    moved = [os.dup2(fd, 3 + i, inheritable=False) for i, fd in enumerate(high)]
    os.closerange(3 + len(moved), max_fd())
    return moved


_stop_requested: list[int] = []


def _note_signal(signo: int, _frame: object) -> None:
    if signo != signal.SIGCHLD:
        _stop_requested.append(signo)


def supervise(command: int, handover: int, owner: int = -1) -> int | None:
    """Wait for the command (a child of this process), serving its metadata filter, until it
    exits or this process is told to stop (SIGTERM, SIGINT, SIGHUP, or ``owner`` hanging up);
    then kill everything left below. Returns the command's wait status, or ``None`` when
    stopped first.

    ``handover``: the descriptor :func:`send_listener` and :func:`send_roots` write to from
    the command. ``owner``: a socket whose peer owns the command (only its hang-up is
    watched, never its data, which may be the command's to read).
    """
    status: int | None = None
    channel = _Handover(handover)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    for signo in _SUPERVISOR_SIGNALS:
        signal.signal(signo, _note_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SUPERVISOR_SIGNALS)
    poller = select.poll()
    poller.register(wake_r, select.POLLIN)
    poller.register(handover, select.POLLIN)
    if owner >= 0:
        poller.register(owner, 0)  # POLLHUP and POLLERR are always reported
    while status is None and not _stop_requested:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == command:
            status = wait_status
            break
        if pid != 0:
            continue
        for fd, events in poller.poll():
            if fd == wake_r:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 512)
            elif fd == owner:
                _stop_requested.append(signal.SIGHUP)  # the harness is gone: stop
            elif fd == handover:
                if not channel.read(poller):
                    poller.unregister(fd)
            elif events & select.POLLIN:
                # Roots sent before the exec must be known before any call is served.
                while channel.open and channel.read(poller, block=False):
                    pass
                _serve(fd, channel.plan)
            else:
                poller.unregister(fd)  # the listener hung up: no process uses the filter
    sweep()
    return status


class _Handover:
    """The supervisor's end of the hand-over channel, and what came over it."""

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.open = True
        arch = machine() or ""
        self.plan = _ChildPlan(-1, 0, (), arch)  # no roots yet: every emulated call refused

    def read(self, poller: select.poll, block: bool = True) -> bool:
        """Take one message (a listener to poll, or the roots); False at end of file, or
        when ``block`` is false and nothing is waiting."""
        try:
            body, fds = recv_with_fds(self.sock, 1 << 16, 1, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            body, fds = b"", []
        for fd in fds:
            poller.register(fd, select.POLLIN)
        if body.startswith(b"R"):
            roots = tuple(r for r in body[1:].decode().split("\0") if r)
            self.plan = _ChildPlan(-1, 0, roots, self.plan.arch)
        if not body:
            self.open = False
            self.sock.close()
        return bool(body)


def _serve(listener: int, plan: _ChildPlan) -> None:
    """Answer one notification: perform the call for the command, or refuse it."""
    buf = bytearray(_NOTIF.size)
    try:
        fcntl.ioctl(listener, _NOTIF_RECV, buf, True)
    except OSError:
        return  # the caller died, or a spurious wake-up
    nid, pid, _flags, nr, _arch, _ip, *args = _NOTIF.unpack(buf)
    try:
        error = _emulate(listener, nid, pid, nr, args, plan)
    except OSError as err:
        error = err.errno or errno.EPERM
    except Exception:
        error = errno.EPERM
    if error < 0:
        return  # the notification went stale: nobody is waiting for an answer
    with contextlib.suppress(OSError):
        fcntl.ioctl(listener, _NOTIF_SEND, bytearray(_NOTIF_RESP.pack(nid, 0, -error, 0)), True)


def _emulate(listener: int, nid: int, pid: int, nr: int, args: list[int], plan: _ChildPlan) -> int:
    numbers = _SYSCALLS[plan.arch]
    name = next((n for n in _EMULATED if numbers.get(n) == nr), None)
    if name is None:
        return errno.EPERM
    times: bytes | None = None
    if name == "chmod":
        dirfd, path_addr, mode, flags = _AT_FDCWD, args[0], args[1], 0
    elif name == "fchmod":
        dirfd, path_addr, mode, flags = _int32(args[0]), 0, args[1], 0
    elif name in ("fchmodat", "fchmodat2"):
        dirfd, path_addr, mode = _int32(args[0]), args[1], args[2]
        flags = args[3] if name == "fchmodat2" else 0
    else:  # utimensat(dirfd, path, times, flags)
        dirfd, path_addr, mode, flags = _int32(args[0]), args[1], 0, args[3]
        if args[2]:
            times = _read_memory(pid, args[2], 32)
    path = _read_path(pid, path_addr) if path_addr else None
    target = _open_target(pid, dirfd, path, flags)
    try:
        # Everything read from the caller is in hand: make sure it is still the same caller,
        # still waiting (its pid cannot have been reused in between).
        try:
            fcntl.ioctl(listener, _NOTIF_ID_VALID, bytearray(struct.pack("<Q", nid)), True)
        except OSError:
            return -1
        where = os.readlink(f"/proc/self/fd/{target}")
        if not _inside(where, plan.writable):
            return errno.EACCES
        if stat.S_ISLNK(os.fstat(target).st_mode):
            return errno.EOPNOTSUPP
        proc_path = f"/proc/self/fd/{target}"
        if name == "utimensat":
            return _utimensat(plan, proc_path, times)
        os.chmod(proc_path, mode & 0o7777)
        return 0
    finally:
        os.close(target)


def _int32(value: int) -> int:
    return ctypes.c_int32(value & 0xFFFFFFFF).value


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    if not path.startswith("/") or path.endswith(" (deleted)"):
        return False
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _read_memory(pid: int, address: int, size: int) -> bytes:
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            data = mem.read(size)
    except (OSError, OverflowError, ValueError) as err:
        raise OSError(errno.EFAULT, "bad address") from err
    if data is None or len(data) != size:
        raise OSError(errno.EFAULT, "bad address")
    return data


def _read_path(pid: int, address: int) -> bytes:
    out = b""
    while len(out) < 4096:
        try:
            chunk = _read_memory(pid, address + len(out), 256)
        except OSError:
            chunk = _read_memory(pid, address + len(out), 1)
        end = chunk.find(b"\0")
        if end >= 0:
            return out + chunk[:end]
        out += chunk
    raise OSError(errno.ENAMETOOLONG, "path too long")


def _open_target(pid: int, dirfd: int, path: bytes | None, flags: int) -> int:
    """An ``O_PATH`` descriptor of what the caller's call would have operated on."""
    base = f"/proc/{pid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
    if path is None or (path == b"" and flags & _AT_EMPTY_PATH):
        return os.open(base, os.O_PATH | os.O_CLOEXEC)
    if path == b"":
        raise OSError(errno.ENOENT, "empty path")
    nofollow = os.O_NOFOLLOW if flags & _AT_SYMLINK_NOFOLLOW else 0
    if path.startswith(b"/"):
        return os.open(path, os.O_PATH | os.O_CLOEXEC | nofollow)
    directory = os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return os.open(path, os.O_PATH | os.O_CLOEXEC | nofollow, dir_fd=directory)
    finally:
        os.close(directory)


def _utimensat(plan: _ChildPlan, path: str, times: bytes | None) -> int:
    buf = ctypes.create_string_buffer(times, 32) if times is not None else None
    result = plan.libc.utimensat(_AT_FDCWD, path.encode(), buf, 0)
    return ctypes.get_errno() if result != 0 else 0


def max_fd() -> int:
    try:
        return max(int(os.sysconf("SC_OPEN_MAX")), 1024)
    except (OSError, ValueError):
        return 65536


def children() -> list[int]:
    """This process's children (its main thread's)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == me:
                found.append(int(name))
    return found


def sweep() -> None:
    """Kill everything below the supervisor until it has no children left.

    Killing a process reparents its children to us (we are a subreaper), so repeat until
    ``waitpid`` reports no children at all.
    """
    while True:
        for pid in children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            signal.sigtimedwait({signal.SIGCHLD}, 0.005)


def _exit_like(status: int | None) -> NoReturn:
    if status is None:
        os._exit(128 + signal.SIGTERM)
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status)
    # Die of the same signal so the harness sees what an unconfined run would show; no core.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


# -- launcher -------------------------------------------------------------------------------
def _parse(args: list[str]) -> tuple[LandlockSpec, dict[str, str], list[str]]:
    paths: dict[str, list[str]] = {"--rw": [], "--hide": [], "--ro": []}
    env: dict[str, str] = {}
    network = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            argv = args[i + 1 :]
            if not argv:
                raise ValueError("no command after --")
            writable, hidden, readonly = (tuple(paths[k]) for k in ("--rw", "--hide", "--ro"))
            return LandlockSpec(writable, hidden, network, readonly), env, argv
        if arg == "--net":
            network = True
            i += 1
        elif arg in paths and i + 1 < len(args):
            paths[arg].append(args[i + 1])
            i += 2
        elif arg == "--setenv" and i + 2 < len(args):
            env[args[i + 1]] = args[i + 2]
            i += 3
        else:
            raise ValueError(f"unknown or incomplete option {arg!r}")
    raise ValueError("missing -- before the command")


def main(args: list[str]) -> NoReturn:
    try:
        spec, env, argv = _parse(args)
        ruleset = build_ruleset(spec)
        confine_and_fork(plan_for(ruleset, spec))
    except Exception as err:
        sys.stderr.write(f"{LAUNCHER_PREFIX}{err}\n")
        sys.stderr.flush()
        os._exit(LAUNCHER_EXIT)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as err:
        sys.stderr.write(f"{argv[0]}: {err.strerror}\n")
        sys.stderr.flush()
        os._exit(126 if err.errno == errno.EACCES else 127)


if __name__ == "__main__":
    main(sys.argv[1:])
