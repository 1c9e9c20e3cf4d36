"""Landlock confinement of one command: the ruleset, the command's side, and a launcher.

This module imports nothing but the standard library (and the sandbox's other stdlib-only
modules, found next to it), because it runs three ways:

* imported by the harness, which builds rulesets (:func:`build_rulesets`);
* imported by the fork server (:mod:`tether.sandbox._landlock_server`), whose pairs enter the
  domain and install the filter as below;
* as a launcher script, ``python -I -S .../landlock_exec.py [options] -- ARGV...`` (a Python
  start-up per call), which is what :attr:`ConfinedCommand.argv` holds, so a caller that only
  knows how to spawn an argv still gets a confined command.

A command runs below a supervisor (:mod:`._supervisor`). The command enters a Landlock domain
and execs; from ABI 6 a domain may not signal processes outside itself, and a confined
process may never ptrace one, so the command cannot touch its supervisor. (The launcher's
supervisor, forked from the caller, enters a domain of its own first and the command a nested
one; the fork server's stays outside any domain.)

Supervisor and command drop every capability (bounding set, ambient, effective/permitted/
inheritable) and set ``PR_SET_NO_NEW_PRIVS``, so root inside is a plain uid 0 (as with
``bwrap --cap-drop ALL``): it cannot mount, create device nodes, chroot or load modules. The
command also gets a seccomp filter (:mod:`._seccomp_filter`) for what Landlock cannot see:
metadata changes, and the network beyond TCP (UDP, raw and other families, Unix sockets
outside the writable roots), whose checked calls the supervisor serves.

Launcher failures print one ``tether-landlock: ...`` line on stderr and exit 125 (the
backend's runner-failure rule); a command that cannot be executed exits 127 like a shell.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import re
import socket
import stat
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final, NoReturn

if __package__:
    from tether.sandbox import _listings as listings
    from tether.sandbox import _seccomp_filter as seccomp_filter
    from tether.sandbox import _supervisor as supervisor
    from tether.sandbox import _syscalls as syscalls
    from tether.sandbox._creation_calls import PTY_MULTIPLEXERS
    from tether.sandbox._socket_calls import SocketRules
    from tether.sandbox._supervisor import LAUNCHER_EXIT, LAUNCHER_PREFIX, Rules
else:  # the launcher: ``-I`` leaves this directory off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _listings as listings  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _seccomp_filter as seccomp_filter  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _supervisor as supervisor  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _creation_calls import PTY_MULTIPLEXERS  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _socket_calls import SocketRules  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _supervisor import (  # type: ignore[import-not-found,no-redef,unused-ignore]
        LAUNCHER_EXIT,
        LAUNCHER_PREFIX,
        Rules,
    )

_Libc = syscalls.Libc
_libc = syscalls.libc

# Syscall numbers: Landlock came after the syscall tables were unified, so these are the
# same on x86_64, aarch64, riscv64 and the other generic-table architectures.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

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
    control files); one whose last component holds ``*`` names every entry of its directory
    that matches (:func:`is_pattern`). ``hidden`` and ``readonly`` are canonical and need not
    exist: one that is missing cannot be created. ``network``: leave TCP alone.
    """

    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    network: bool = False
    readonly: tuple[str, ...] = ()


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
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
    *PTY_MULTIPLEXERS,
)  # fmt: skip
"""The only entries under ``/dev`` a command may open for reading (what ``bwrap --dev``
provides, but the terminals of ``/dev/pts``). As uid 0 without capabilities it could
otherwise read a raw disk (and so any hidden file) or drive a device by ioctl
(``/dev/loop-control``, ``/dev/userfaultfd``), which Landlock does not refuse below ABI 5.
Only :data:`~._creation_calls.WRITABLE_DEVICES` may be opened for writing."""


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
    folded = _folded(spec.hidden, spec.readonly)
    if not folded:
        # Nothing to carve (a fork-server pair gets the roots the harness carved already).
        return tuple(dict.fromkeys(spec.writable))
    roots: list[str] = []
    for path in spec.writable:
        roots += _writable_cover(os.path.realpath(path), folded)[0]
    return tuple(dict.fromkeys(roots))


@functools.lru_cache(maxsize=8)
def _folded(hidden: tuple[str, ...], readonly: tuple[str, ...]) -> frozenset[str]:
    # Some hundred paths, the same for every command of a harness.
    return frozenset(c.casefold() for c in _normalised((*hidden, *readonly)))


WILDCARD: Final = "*"
"""In the last component of a carved path, any run of characters (nothing else is special):
``DIR/*.pth`` carves every entry of ``DIR`` whose name ends in ``.pth``, existing or not, and
everything beneath it. A literal ``*`` in a name matches itself, so reading a literal path as
a pattern can only carve more."""


def is_pattern(path: str) -> bool:
    """``path`` names entries of its directory by a pattern (:data:`WILDCARD`)."""
    return WILDCARD in path.rpartition("/")[2]


@functools.lru_cache(maxsize=256)
def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in name.split(WILDCARD)), re.DOTALL)


def carved(path: str, entry: str) -> bool:
    """``path`` is ``entry`` or lies beneath it; ``entry`` may end in a pattern
    (:data:`WILDCARD`). Both are canonical and compared as given (the callers case-fold)."""
    if not is_pattern(entry):
        return path == entry or path.startswith(entry.rstrip("/") + "/")
    parent, _, name = entry.rpartition("/")
    prefix = parent.rstrip("/") + "/"
    if not path.startswith(prefix):
        return False
    first = path[len(prefix) :].split("/", 1)[0]
    return _name_pattern(name).fullmatch(first) is not None


@functools.lru_cache(maxsize=8)
def _split_carve(folded: frozenset[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The carved paths named exactly, and those that end in a pattern (a confine looks at
    the same set several times)."""
    return (
        frozenset(c for c in folded if not is_pattern(c)),
        tuple(c for c in folded if is_pattern(c)),
    )


def _ancestors(path: str) -> list[str]:
    """``path`` and every directory above it (canonical)."""
    found = [path]
    while path not in ("/", ""):
        path = os.path.dirname(path)
        found.append(path)
    return found


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
    such a filesystem is refused with ``tether.toml``. A carved path may end in a pattern
    (:func:`is_pattern`: the names Python acts on in a directory of its import path): its
    directory is walked like one that holds a missing name, and no entry that matches is
    granted. A ``root`` inside a carved path is not granted at all; one that cannot be
    listed raises :class:`LandlockError`.
    """
    return _writable_cover(root, frozenset(c.casefold() for c in carve))


@dataclass(frozen=True, slots=True)
class _Cover:
    granted: tuple[str, ...]
    walked: tuple[str, ...]
    snapshot: listings.Snapshot


_COVER_CACHE: Final = 8
"""``(root, carved)`` pairs whose cover is kept (a harness has a workspace or two)."""
_cover_cache: dict[tuple[str, frozenset[str]], _Cover] = {}


def _writable_cover(root: str, folded: frozenset[str]) -> tuple[list[str], list[str]]:
    """:func:`writable_cover` with the carved paths case-folded already. Every command pays
    for it (both backends, and bubblewrap twice: its binds and its socket roots), so a cover
    is reused while the directories walked for it are unchanged (:mod:`._listings`): an entry
    created in the root is granted to the next command, a hidden or control path created in
    it is never granted."""
    key = (root, folded)
    cached = _cover_cache.pop(key, None)
    if cached is None or not cached.snapshot.unchanged():
        built = listings.started()
        granted, walked = _list_cover(root, folded)
        # The root among them: replaced by another directory, it has another inode.
        cached = _Cover(tuple(granted), tuple(walked), listings.snapshot(walked, built))
    _cover_cache[key] = cached  # most recently used last
    while len(_cover_cache) > _COVER_CACHE:
        _cover_cache.pop(next(iter(_cover_cache)))
    return list(cached.granted), list(cached.walked)


def _list_cover(root: str, folded: frozenset[str]) -> tuple[list[str], list[str]]:
    """:func:`_writable_cover` as the filesystem stands."""
    exact, named = _split_carve(folded)
    key = root.casefold()
    under = key.rstrip("/") + "/"
    if any(a in exact for a in _ancestors(key)) or any(carved(key, c) for c in named):
        return [], []
    inside = {c for c in folded if c.startswith(under)}
    if not inside:
        return [root], []
    patterns: dict[str, list[re.Pattern[str]]] = {}
    for entry in named:
        if entry.startswith(under):
            parent, _, name = entry.rpartition("/")
            patterns.setdefault(parent, []).append(_name_pattern(name))
    # The directories on the way to a carved path (below the root): walked, not granted.
    on_the_way = {a for c in inside for a in _ancestors(os.path.dirname(c)) if a.startswith(under)}
    granted: list[str] = []
    walked: list[str] = []

    def on_path(folded_path: str) -> bool:
        return folded_path in on_the_way

    def walk(directory: str) -> None:
        walked.append(directory)
        try:
            names = sorted(os.listdir(directory))
        except OSError as err:
            if directory == root:
                raise LandlockError(err.errno, f"cannot open {root}: {err.strerror}") from err
            return
        matching = patterns.get(directory.casefold(), ())
        for name in names:
            path = os.path.join(directory, name)
            folded_path = path.casefold()
            if folded_path in inside:
                continue
            if any(p.fullmatch(name.casefold()) for p in matching):
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

    snapshot: listings.Snapshot
    """Every directory listed to find them, as it stood."""
    roots: tuple[str, ...]
    directories: tuple[bool, ...] = ()
    """Whether each of ``roots`` was a directory (which rights its rule may carry)."""


@dataclass(frozen=True, slots=True)
class _ReadLayer:
    """A built read layer (:func:`read_layer`) and the listing it was built from."""

    listing: _ReadableRoots
    ruleset: int


_READABLE_CACHE: Final = 4
"""``(abi, hidden)`` sets whose read layer is kept for reuse (a harness has one, usually)."""
_readable_cache: dict[tuple[int, tuple[str, ...]], _ReadLayer] = {}
_readable_lock = threading.Lock()


def _fresh_lock_after_fork() -> None:
    # A thread of the parent may have held the lock at fork time; it does not exist here.
    global _readable_lock
    _readable_lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_after_fork)


def _list_readable(hidden: tuple[str, ...]) -> _ReadableRoots:
    built = listings.started()
    roots, walked = _walk_readable(hidden)
    directories = tuple(os.path.isdir(root) for root in roots)
    return _ReadableRoots(listings.snapshot(walked, built), tuple(roots), directories)


_rule_calls: list[Callable[[int, int, int, int, int], int]] = []


def _rule_call() -> Callable[[int, int, int, int, int], int]:
    """``syscall(landlock_add_rule, ...)`` with fixed argument types: a read layer may hold
    a couple of hundred roots (every entry of ``/etc`` and of ``$HOME`` when a file there is
    hidden), and converting the arguments on each call is most of a rule's cost in Python."""
    if not _rule_calls:
        call = ctypes.CDLL(None, use_errno=True).syscall
        call.argtypes = (
            ctypes.c_long,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_uint32,
        )
        call.restype = ctypes.c_long
        _rule_calls.append(call)
    return _rule_calls[0]


def _grant_read(libc: _Libc, ruleset: int, entry: _ReadableRoots) -> None:
    """Read and execute beneath each of ``entry.roots`` (one that vanished since it was
    listed grants nothing; one whose kind changed is looked at again)."""
    call = _rule_call()
    rule = _PathBeneathAttr(0, -1)
    address = ctypes.addressof(rule)
    for path, directory in zip(entry.roots, entry.directories, strict=True):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as err:
            raise LandlockError(err.errno, f"cannot open {path}: {err.strerror}") from err
        try:
            rule.allowed_access = FS_READ if directory else FS_READ & _FILE_ONLY
            rule.parent_fd = fd
            if call(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, address, 0) < 0:
                # Its kind changed since the listing (a file now, say): the careful way.
                _add_rule(libc, ruleset, path, FS_READ, required=False)
        finally:
            os.close(fd)


def _create(libc: _Libc, attr: _RulesetAttr, size: int) -> int:
    return _checked(
        libc,
        "landlock_create_ruleset",
        _SYS_CREATE_RULESET,
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )


def _build_read_layer(libc: _Libc, entry: _ReadableRoots, abi: int) -> int:
    refer = FS_REFER if abi >= 2 else 0
    fd = _create(libc, _RulesetAttr(FS_READ | refer, 0, 0), 8)
    try:
        # Listing is allowed everywhere (``ls /`` must work); reading and executing only
        # outside the hidden paths. A hidden directory's entry names stay visible. Every
        # ruleset refuses a rename or link across directories unless it grants REFER (even
        # one that does not handle it): granted everywhere here, the write layer decides.
        _add_rule(libc, fd, "/", FS_READ_DIR | refer)
        _grant_read(libc, fd, entry)
        for path in DEVICES:
            _add_rule(libc, fd, path, FS_READ, required=False)
        _add_rule(libc, fd, "/dev/null", FS_READ_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_layer(hidden: Sequence[str], abi: int) -> int:
    """The read layer for ``hidden``: a ruleset that handles reading and executing only, and
    grants them beneath every readable root and on :data:`DEVICES`. It does not depend on
    the command, so it is built once and reused while none of the directories listed to find
    the roots has changed (an entry added, removed or renamed changes its directory's
    mtime): a couple of hundred rules are not paid per spawn. Returns a duplicate the caller
    closes. (Paths are listed, and descriptors closed once the rules are added: open ones
    would keep the filesystems they are on busy; a ruleset does not.)"""
    return read_layer_and_snapshot(hidden, abi)[0]


def read_layer_and_snapshot(hidden: Sequence[str], abi: int) -> tuple[int, listings.Snapshot]:
    """:func:`read_layer`, and the snapshot of what it was built from: a domain entered with
    it ahead of its command (a prepared pair) holds only while that is unchanged."""
    key = (abi, tuple(sorted(set(hidden))))
    libc = _libc()
    with _readable_lock:
        cached = _readable_cache.pop(key, None)
        if cached is None or not cached.listing.snapshot.unchanged():
            if cached is not None:
                os.close(cached.ruleset)
            listing = _list_readable(key[1])
            cached = _ReadLayer(listing, _build_read_layer(libc, listing, abi))
        _readable_cache[key] = cached  # most recently used last
        while len(_readable_cache) > _READABLE_CACHE:
            os.close(_readable_cache.pop(next(iter(_readable_cache))).ruleset)
        return os.dup(cached.ruleset), cached.listing.snapshot


def write_layer(
    spec: LandlockSpec, abi: int | None = None, *, roots: Sequence[str] | None = None
) -> int:
    """The write layer of ``spec``: a ruleset that handles every right but reading and
    executing, and grants them beneath the writable roots (``roots``: :func:`writable_roots`
    of ``spec`` when the caller has them already) and on ``/dev/null``; and, without
    network, TCP and the scopes. Creating it restricts nothing. The caller closes it."""
    abi = abi_version() if abi is None else abi
    libc = _libc()
    attr = _RulesetAttr(handled_fs(abi) & ~FS_READ, 0, 0)
    size = 8
    if abi >= NETWORK_ABI:
        size = 16
        if not spec.network:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if abi >= SCOPE_ABI:
        size = 24
        attr.scoped = SCOPE_SIGNAL | (0 if spec.network else SCOPE_ABSTRACT_UNIX_SOCKET)
    fd = _create(libc, attr, size)
    writable = writable_access(abi) & ~FS_READ
    try:
        for path in writable_roots(spec) if roots is None else roots:
            # Not through a link: an entry swapped for one since it was listed grants nothing.
            _add_rule(libc, fd, path, writable, required=False, follow=False)
        _add_rule(libc, fd, "/dev/null", FS_WRITE_FILE | (FS_TRUNCATE & attr.handled_access_fs))
        for path in PTY_MULTIPLEXERS:  # a new pseudo-terminal (its peer by TIOCGPTPEER)
            _add_rule(libc, fd, path, FS_WRITE_FILE, required=False)
    except BaseException:
        os.close(fd)
        raise
    return fd


def build_rulesets(
    spec: LandlockSpec, abi: int | None = None, *, roots: Sequence[str] | None = None
) -> tuple[int, int]:
    """The two rulesets (close-on-exec descriptors) a command enters, one on the other: the
    read layer (:func:`read_layer`, reused across commands) and the command's write layer
    (:func:`write_layer`). Nested Landlock domains allow an access only if every layer does,
    and each layer leaves alone what it does not handle, so together they grant exactly
    reading outside the hidden paths and writing inside the writable roots. Creating them
    restricts nothing; :func:`enter_domain` in the child does. The caller closes both after
    spawning."""
    abi = abi_version() if abi is None else abi
    read = read_layer(spec.hidden, abi)
    try:
        return read, write_layer(spec, abi, roots=roots)
    except BaseException:
        os.close(read)
        raise


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


# -- the command's side -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Plan:
    """What a command-to-be applies, built before it is forked so that it allocates little."""

    rulesets: tuple[int, ...]
    """Entered in order (:func:`build_rulesets`: the read layer, then the write layer)."""
    writable: tuple[str, ...]
    """:func:`writable_roots` of the spec: what the supervisor lets metadata calls change."""
    arch: str


def plan_for(rulesets: tuple[int, ...], spec: LandlockSpec) -> Plan:
    arch = syscalls.machine()
    if arch is None:
        raise LandlockError(
            errno.ENOTSUP, f"no seccomp filter for architecture {os.uname().machine}"
        )
    syscalls.prepare()
    return Plan(rulesets, writable_roots(spec), arch)


def filter_key(arch: str, network: bool, notify: bool) -> seccomp_filter.FilterKey:
    """The filter of a Landlock command: metadata rules (emulated when it has a listener),
    and unless it has network the socket rules, with no IP socket at all."""
    metadata: seccomp_filter.MetadataRule = "emulate" if notify else "refuse"
    return (arch, metadata, None if network else "none", notify)


def enter_domain(plan: Plan) -> None:
    """Enter a (new, nested) Landlock domain for each of ``plan.rulesets``, in order; needs
    ``no_new_privs`` (:func:`~._syscalls.drop_privileges`) first."""
    libc = _libc()
    for ruleset in plan.rulesets:
        result = libc.syscall(
            ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)
        )
        if result != 0:
            syscalls.fail_errno("landlock_restrict_self")


def _restrict(plan: Plan) -> None:
    syscalls.drop_privileges()
    enter_domain(plan)


def confine_and_fork(plan: Plan, key: seccomp_filter.FilterKey, rules: Rules) -> None:
    """Run in the process that will become the command (the launcher). Returns in the command
    process, ready to exec; the calling process becomes the supervisor, in a Landlock domain
    of its own (it was forked from the caller, with the caller's privileges), and the command
    enters a nested one, so the supervisor may read it and the command cannot touch the
    supervisor."""

    def command(channel: socket.socket) -> None:
        _restrict(plan)
        supervisor.offer_listener(channel, seccomp_filter.install(key))
        supervisor.send_rules(channel, rules.encode())

    supervisor.launch(
        plan.arch, before=lambda: _restrict(plan), command=command, after=lambda: None
    )


# -- launcher -------------------------------------------------------------------------------
def _parse(args: list[str]) -> tuple[LandlockSpec, SocketRules, dict[str, str], list[str]]:
    paths: dict[str, list[str]] = {"--rw": [], "--hide": [], "--ro": []}
    env: dict[str, str] = {}
    sockets = SocketRules()
    network = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            argv = args[i + 1 :]
            if not argv:
                raise ValueError("no command after --")
            writable, hidden, readonly = (tuple(paths[k]) for k in ("--rw", "--hide", "--ro"))
            return LandlockSpec(writable, hidden, network, readonly), sockets, env, argv
        if arg == "--net":
            network = True
            i += 1
        elif arg in paths and i + 1 < len(args):
            paths[arg].append(args[i + 1])
            i += 2
        elif arg == "--sockets" and i + 1 < len(args):
            sockets = SocketRules.from_json(json.loads(args[i + 1]))
            i += 2
        elif arg == "--setenv" and i + 2 < len(args):
            env[args[i + 1]] = args[i + 2]
            i += 3
        else:
            raise ValueError(f"unknown or incomplete option {arg!r}")
    raise ValueError("missing -- before the command")


def main(args: list[str]) -> NoReturn:
    try:
        spec, sockets, env, argv = _parse(args)
        plan = plan_for(build_rulesets(spec), spec)
        # A listener for the metadata calls inside writable roots, and for the socket calls.
        notify = bool(plan.writable) or not spec.network
        # Under Landlock, pathname sockets may be used inside the writable roots.
        rules = Rules(
            plan.writable, None if spec.network else replace(sockets, roots=plan.writable)
        )
        confine_and_fork(plan, filter_key(plan.arch, spec.network, notify), rules)
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
