"""The calls that make a name or change a file, which a supervisor checks and performs for a
confined command. Standard library only.

The command's filter (:mod:`._seccomp_filter`) hands the supervisor every ``mkdir``,
``mknod``, ``symlink``, ``link`` and ``rename`` (and their ``*at`` forms), every ``bind``
(a Unix socket's path is a name too: a socket named ``refs`` is enough for git to take its
directory for a repository), and every ``open``/``openat``/``creat`` that may create or change
a file. For each, the supervisor
copies the arguments out of the caller once, resolves the directory that holds the name in
the caller's view of the filesystem (:class:`.Caller`), decides on that descriptor and the
name it copied, and performs the call itself relative to that directory, so a path swapped
by another thread after the check changes nothing; an ``open`` returns the descriptor it
opened, installed in the caller (``SECCOMP_IOCTL_NOTIF_ADDFD``). It never answers
``SECCOMP_USER_NOTIF_FLAG_CONTINUE`` for the command's own calls.

Refused, at any depth and in every directory a command may write (:mod:`._control_names`):

* a name that is a control name (``.git``, ``.claude``, ``.codex``, ``tether.toml``, ...,
  case-insensitively), made by any of the calls (for ``rename``, the new name; both names
  of an exchange);
* creating or changing anything inside an existing control path (``sub/.git/config``) or
  inside a directory git takes for a git directory (``HEAD`` beside ``objects`` and
  ``refs``), and a hard link to a file there (it would be the same file under another name);
* a name that would make its directory such a git directory (``HEAD``, ``objects``,
  ``refs``, ``commondir``). Checked before and again after the call: two commands racing to
  complete the set each see the other's entry, and the second removes its own.

The kernel's checks hold for what the supervisor does, as it acts through the caller's own
mounts with the same uid and no capability, but one: whether an entry a ``rename`` moves or
replaces is a mount point is checked only in the mount namespace of the process that makes
the call, so the supervisor checks that itself (``EBUSY``).

Where a control name counts from: the writable root the path lies in (:class:`Places`), so a
workspace inside ``~/.codex/...`` is not refused whole. What the supervisor performs stays
inside what the sandbox grants: under bubblewrap it acts through the caller's own mounts
(read-only binds and masks refuse as they would refuse the command); under Landlock, whose
domain the fork server's supervisor is not in, it changes only what lies beneath the
writable roots (or :data:`WRITABLE_DEVICES`), as Landlock would.

bubblewrap sets its sandbox up below the same filter: its own calls (``mkdir`` of its mount
points, ``/dev``) come from its one clone before that has forked the command's process, when
no code of the command's runs anywhere; those the kernel makes as asked
(:class:`RunnerSetup`).

A refusal is ``EROFS`` under bubblewrap and ``EACCES`` under Landlock: each backend's own
denial, which the harness reports as a sandbox denial.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import secrets
import stat
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

if __package__:
    from tether.sandbox import _seccomp_filter as seccomp_filter
    from tether.sandbox import _syscalls as syscalls
    from tether.sandbox._caller import AT_FDCWD, Caller, beneath
    from tether.sandbox._control_names import (
        completes_git_dir,
        control_component,
        entries_at,
        is_control_name,
        is_git_dir,
        made_git_dir,
    )
    from tether.sandbox._socket_calls import AF_UNIX, SO_DOMAIN, SOCKADDR_MAX, socket_option
else:  # loaded by the fork server or a launcher: this directory is on sys.path
    import _seccomp_filter as seccomp_filter  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _caller import AT_FDCWD, Caller, beneath  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _control_names import (  # type: ignore[import-not-found,no-redef,unused-ignore]
        completes_git_dir,
        control_component,
        entries_at,
        is_control_name,
        is_git_dir,
        made_git_dir,
    )
    from _socket_calls import AF_UNIX, SO_DOMAIN, SOCKADDR_MAX, socket_option  # type: ignore[import-not-found,no-redef,unused-ignore]

_CLONE_FS = 0x200
_AT_SYMLINK_FOLLOW = 0x400
_AT_EMPTY_PATH = 0x1000
_RENAME_EXCHANGE = 1 << 1
_O_TMPFILE_BIT = 0o20000000
_KEPT_OPEN = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_CREAT | os.O_EXCL
"""Flags of the caller's ``open`` that do not go to the reopening of an existing file."""
_SYMLINK_HOPS = 40
"""How many symbolic links an ``open`` follows before ``ELOOP`` (the kernel's limit)."""
_CALLER_FD = re.compile(rb"/(?:dev/fd|proc/(?:self|thread-self)/fd)/(\d+)")
_STDIO: Final = {b"/dev/stdin": 0, b"/dev/stdout": 1, b"/dev/stderr": 2}
_UNLINKED = " (deleted)"
PTY_MULTIPLEXERS: Final = ("/dev/ptmx", "/dev/pts/ptmx")
"""Where a new pseudo-terminal is made, opened for reading and writing (``posix_openpt``).
Its other end comes by ``ioctl(TIOCGPTPEER)`` on the new one (glibc's ``openpty``, and so
Python's ``os.openpty``, ``pty`` and ``script``), never by a path: Landlock does not grant
``/dev/pts`` itself, where every terminal of the user's uid is (a shell in another window, a
``sudo`` prompt)."""
WRITABLE_DEVICES: Final = ("/dev/null", *PTY_MULTIPLEXERS)
"""What a Landlock command may open for writing outside its writable roots (and the other
ends of the pseudo-terminals it made: :class:`_Terminals`)."""
_TIOCGPTN: Final = 0x80045430
_PTY_SLAVE_MAJORS: Final = range(136, 144)
"""The device numbers of the other ends of Unix 98 pseudo-terminals (``/dev/pts/N``)."""


class _Terminals:
    """The pseudo-terminals a Landlock command made through :data:`PTY_MULTIPLEXERS` (this
    supervisor serves one command). Landlock refuses the other end's ``ioctl(TIOCGPTPEER)``
    (the kernel opens the peer by its path in ``/dev/pts``, which is not granted), and glibc
    then opens ``/dev/pts/N`` by name, for writing: that open comes here, and is performed
    only if ``/dev/pts/N`` is the other end of one of the command's own (the same ``devpts``
    and number), never a terminal of the user's. The new one's own end is held while the
    command runs, so that its number cannot pass to another terminal; at most :data:`LIMIT`
    (the oldest let go first: its other end can then no longer be opened by name)."""

    LIMIT: Final = 64

    def __init__(self) -> None:
        self._held: dict[tuple[int, int], int] = {}

    def made(self, master: int, devpts: int) -> None:
        """``master``, just opened for the command on the ``devpts`` (its ``st_dev``)."""
        number = bytearray(4)
        try:
            fcntl.ioctl(master, _TIOCGPTN, number)
        except OSError:
            return  # not a multiplexer after all: nothing to open by name
        key = (devpts, int.from_bytes(number, sys.byteorder))
        old = self._held.pop(key, None)
        if old is not None:
            os.close(old)
        self._held[key] = os.dup(master)
        while len(self._held) > self.LIMIT:
            os.close(self._held.pop(next(iter(self._held))))

    def owns(self, info: os.stat_result) -> bool:
        """``info`` is the other end of one the command made."""
        major, minor = os.major(info.st_rdev), os.minor(info.st_rdev)
        if not stat.S_ISCHR(info.st_mode) or major not in _PTY_SLAVE_MAJORS:
            return False
        number = (major - _PTY_SLAVE_MAJORS.start) * 256 + minor
        return (info.st_dev, number) in self._held


_terminals: Final = _Terminals()


@dataclass(frozen=True, slots=True)
class Places:
    """Where the supervisor acts for a command, and how it refuses."""

    roots: tuple[str, ...]
    """The command's writable roots, in its view: control names count from the one a path
    lies in; a path in none is the backend's to refuse (or a private one: bubblewrap's
    ``/dev``)."""
    writable: tuple[str, ...] | None
    """Landlock: what the supervisor may change (beneath these and :data:`WRITABLE_DEVICES`
    only); ``None`` under bubblewrap, whose mounts refuse the rest."""
    refusal: int
    """The errno of a refusal: ``EROFS`` (bubblewrap) or ``EACCES`` (Landlock)."""
    setup: RunnerSetup | None = None
    """bubblewrap: its own calls while it sets the command up. ``None``: every call is the
    command's (Landlock)."""


class RunnerSetup:
    """bubblewrap setting up the command's sandbox below the filter. ``runner`` (the
    supervisor's child: bwrap, or a ``runner_command`` that execs it) clones one process,
    which makes bubblewrap's mount points, then forks the command's process and stays as the
    sandbox's init. So a call from the runner before it has a child, or from that one clone
    before it has a child, is the runner's own, made before the command exists: no code of
    the command's runs anywhere, nothing can change the call's arguments, and it is made as
    asked. Once the clone has a child, its calls are the command's (the command can ptrace
    it: tested), and so is every other call. From the first call that is not the runner's
    own, no more are looked for. (A "runner" that runs the command in its own process
    instead, confining nothing, fails the backend's probe: its write is not refused.)"""

    def __init__(self, runner: int) -> None:
        self.runner = runner
        self.done = False
        self._setter = -1
        self._children = -1
        """``/proc/SETTER/task/SETTER/children``, open: read again for each call."""

    def is_setting_up(self, tid: int) -> bool:
        """Whether the call of thread ``tid`` is bubblewrap's own (see the class); once not,
        never again. (The caller of a call still waiting cannot have been replaced by
        another process of that tid, so what is read here is the caller's as long as the
        answer finds its call.)"""
        if self.done:
            return False
        if tid == self.runner and not _children(tid):
            return True  # the runner, before it has started anything
        if self._setter < 0:
            clones = _children(self.runner)
            if len(clones) == 1:
                self._setter = clones[0]
                with contextlib.suppress(OSError):
                    path = f"/proc/{self._setter}/task/{self._setter}/children"
                    self._children = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        if tid != self._setter or self._children < 0 or _has_child(self._children):
            self.done = True
            if self._children >= 0:
                os.close(self._children)
                self._children = -1
        return not self.done


def _children(tid: int) -> list[int]:
    """The children of thread ``tid`` (none when it is gone)."""
    try:
        with open(f"/proc/{tid}/task/{tid}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def _has_child(children: int) -> bool:
    """Whether the ``children`` file open at ``children`` lists any (unreadable: yes)."""
    try:
        return bool(os.pread(children, 64, 0).strip())
    except OSError:
        return True


@dataclass(frozen=True, slots=True)
class _Status:
    umask: int
    tgid: int
    """In the caller's own PID namespace (``/proc/self`` there)."""
    tid: int


def _status(tid: int) -> _Status:
    with open(f"/proc/{tid}/status", "rb") as f:
        text = f.read()

    def field(key: bytes) -> bytes:
        at = text.find(b"\n" + key + b":")
        if at < 0:
            raise ValueError(f"no {key!r} in /proc/{tid}/status")
        start = at + len(key) + 2
        return text[start : text.find(b"\n", start)].strip()

    return _Status(
        int(field(b"Umask"), 8),
        int(field(b"NStgid").split()[-1]),
        int(field(b"NSpid").split()[-1]),
    )


class _Refused(OSError):
    """A refusal of the rule (not the kernel's): reported with :attr:`Places.refusal`."""


_prepared: list[bool] = []


def serve(
    listener: int,
    notification: seccomp_filter.Notification,
    name: str,
    arch: str,
    places: Places | None,
) -> None:
    """Answer one notified call ``name``: refuse it, or perform it and answer with its
    result (a blocking ``open``, of a FIFO or a device, on a thread of its own)."""
    nid = notification.id
    if places is None:  # the rules have not arrived: the command is not running yet
        seccomp_filter.respond(listener, nid, errno.EACCES)
        return
    if not _prepared:
        os.umask(0)  # the caller's umask is applied to each mode (read per call)
        _prepared.append(True)
    if places.setup is not None and places.setup.is_setting_up(notification.pid):
        seccomp_filter.let_runner_continue(listener, nid)
        return
    caller = Caller(arch, notification.pid, lambda: seccomp_filter.still_waiting(listener, nid))
    call = _Call(caller, notification.args, places)
    try:
        result = call.perform(name)
    except OSError as err:
        call.close()
        if err.errno != errno.ESRCH:  # ESRCH: the caller is gone, nobody waits for an answer
            seccomp_filter.respond(listener, nid, _errno(err, places))
        return
    except Exception:  # whatever went wrong, the call is refused, never let through
        call.close()
        seccomp_filter.respond(listener, nid, errno.EACCES)
        return
    if isinstance(result, _Opening):
        if result.blocks:
            threading.Thread(
                target=_finish_open, args=(listener, nid, call, result), daemon=True,
                name="tether-open",
            ).start()  # fmt: skip
        else:
            _finish_open(listener, nid, call, result)
        return
    call.close()
    seccomp_filter.respond(listener, nid, 0, result)


def _errno(err: OSError, places: Places) -> int:
    if isinstance(err, _Refused):
        return places.refusal
    if err.errno == errno.ELOOP:
        return errno.EACCES  # a magic link (/proc/self/fd/N) inside a path: refused
    return err.errno or errno.EACCES


@dataclass(slots=True)
class _Opening:
    """An ``open`` to finish: reopen ``target`` (a descriptor of ours) with ``flags``, or
    hand ``opened`` over as it is."""

    flags: int
    cloexec: bool
    target: int = -1
    opened: int = -1
    blocks: bool = False
    devpts: int = -1
    """A new pseudo-terminal (:data:`PTY_MULTIPLEXERS`, under Landlock): the ``st_dev`` of
    the ``devpts`` it is made on (:class:`_Terminals`)."""


def _finish_open(listener: int, nid: int, call: _Call, opening: _Opening) -> None:
    fd = opening.opened
    try:
        if fd < 0:
            call.caller.check()
            fd = os.open(f"/proc/self/fd/{opening.target}", opening.flags)
            if opening.devpts >= 0:
                _terminals.made(fd, opening.devpts)
    except OSError as err:
        call.close()
        seccomp_filter.respond(listener, nid, err.errno or errno.EACCES)
        return
    except Exception:  # (perhaps on a thread: nothing may reach the command's stderr)
        call.close()
        seccomp_filter.respond(listener, nid, errno.EACCES)
        return
    call.close()
    try:
        seccomp_filter.send_fd(listener, nid, fd, opening.cloexec)
    except OSError as err:
        if err.errno == errno.EINVAL:  # no ADDFD_FLAG_SEND (before Linux 5.14): refused
            seccomp_filter.respond(listener, nid, errno.ENOSYS)
    finally:
        os.close(fd)


class _Call:
    """One notified call: its arguments read from the caller, the descriptors it holds."""

    def __init__(self, caller: Caller, args: tuple[int, ...], places: Places) -> None:
        self.caller = caller
        self.args = args
        self._status: _Status | None = None
        self.places = places
        self.held: list[int] = []

    @property
    def status(self) -> _Status:
        """The caller's umask and ids (read when first needed: a call that makes nothing new
        and names no ``/proc/self`` needs none). Read through the tid: checked with the rest
        before anything is done."""
        if self._status is None:
            try:
                self._status = _status(self.caller.tid)
            except (ValueError, IndexError) as err:
                raise OSError(errno.EACCES, "the caller's status is unreadable") from err
        return self._status

    def close(self) -> None:
        for fd in self.held:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.held.clear()
        self.caller.close()

    def hold(self, fd: int) -> int:
        self.held.append(fd)
        return fd

    def string(self, address: int) -> bytes:
        if not address:
            raise OSError(errno.EFAULT, "bad address")
        return self.caller.read_string(address)

    def dirfd(self, index: int) -> int:
        return syscalls.int32(self.args[index])

    def perform(self, name: str) -> int | _Opening:
        a = self.args
        if name == "bind":
            return self.bind(syscalls.int32(a[0]), a[1], syscalls.int32(a[2]))
        if name in ("open", "openat", "creat"):
            at = self.dirfd(0) if name == "openat" else AT_FDCWD
            path = self.string(a[1] if name == "openat" else a[0])
            if name == "creat":
                flags, mode = os.O_CREAT | os.O_WRONLY | os.O_TRUNC, a[1]
            else:
                flags, mode = (a[2], a[3]) if name == "openat" else (a[1], a[2])
            return self.open(at, path, syscalls.int32(flags), mode)
        if name in ("mkdir", "mkdirat"):
            at, where, mode = (AT_FDCWD, *a[0:2]) if name == "mkdir" else (self.dirfd(0), *a[1:3])
            parent, entry = self.new_entry(at, self.string(where))
            perm = mode & 0o7777 & ~self.status.umask
            return self.made(parent, entry, lambda: os.mkdir(entry, perm, dir_fd=parent))
        if name in ("mknod", "mknodat"):
            at, where, mode, dev = (
                (AT_FDCWD, *a[0:3]) if name == "mknod" else (self.dirfd(0), *a[1:4])
            )
            parent, entry = self.new_entry(at, self.string(where))
            kind = stat.S_IFMT(mode) or stat.S_IFREG
            perm = mode & 0o7777 & ~self.status.umask
            return self.made(
                parent, entry, lambda: os.mknod(entry, kind | perm, dev & 0xFFFFFFFF, dir_fd=parent)
            )
        if name in ("symlink", "symlinkat"):
            target = self.string(a[0])
            at, where = (AT_FDCWD, a[1]) if name == "symlink" else (self.dirfd(1), a[2])
            parent, entry = self.new_entry(at, self.string(where))
            return self.made(parent, entry, lambda: os.symlink(target, entry, dir_fd=parent))
        if name in ("link", "linkat"):
            if name == "link":
                old_at, old, new_at, new, flags = AT_FDCWD, a[0], AT_FDCWD, a[1], 0
            else:
                old_at, old, new_at, new = self.dirfd(0), a[1], self.dirfd(2), a[3]
                flags = syscalls.int32(a[4])
            source = self.link_source(old_at, old, flags)
            parent, entry = self.new_entry(new_at, self.string(new))
            return self.made(
                parent,
                entry,
                lambda: os.link(f"/proc/self/fd/{source}", entry, dst_dir_fd=parent),
            )
        # rename, renameat, renameat2
        if name == "rename":
            old_at, old, new_at, new, flags = AT_FDCWD, a[0], AT_FDCWD, a[1], 0
        else:
            old_at, old, new_at, new = self.dirfd(0), a[1], self.dirfd(2), a[3]
            flags = syscalls.int32(a[4]) if name == "renameat2" else 0
        return self.rename(old_at, self.string(old), new_at, self.string(new), flags)

    # -- where names go -----------------------------------------------------------------
    def new_entry(self, at: int, path: bytes) -> tuple[int, bytes]:
        """The directory (a descriptor) that gets a new entry named by ``path``, and the
        entry's name, once the rules allow it there."""
        parent, entry = self.caller.split(self.caller.base(at), path)
        self.hold(parent)
        self.check_new(parent, entry)
        return parent, entry

    def check_new(self, parent: int, entry: bytes) -> None:
        name = entry.rstrip(b"/")
        if is_control_name(name):
            raise _Refused(self.places.refusal, "a control name")
        self.check_inside(os.readlink(f"/proc/self/fd/{parent}"), parent)
        if completes_git_dir(name, entries_at(parent)):
            raise _Refused(self.places.refusal, "it would make a git directory")

    def check_inside(self, where: str, directory: int | None, parent: int | None = None) -> None:
        """Refuse changes at ``where``, the real path of a directory that gets an entry
        (``directory``: its descriptor) or of a file that is changed (``parent``: the
        descriptor of its directory, when at hand): outside what Landlock grants, or in a
        control path or a git directory below the writable root it lies in."""
        places = self.places
        if places.writable is not None and not (
            beneath(where, places.writable) or (directory is None and where in WRITABLE_DEVICES)
        ):
            raise OSError(errno.EACCES, "outside the writable roots")
        root = _root_of(where, places.roots)
        if root is None:
            return
        below = where[len(root) :].strip("/")
        parts = below.split("/") if below else []
        if control_component(parts) is not None:
            raise _Refused(places.refusal, "inside a control path")
        if directory is not None:
            start, levels = directory, len(parts)
        elif not parts:
            return  # the file is a root itself
        elif parent is not None:
            start, levels = parent, len(parts) - 1
        else:
            start, levels = self.parent_of(where), len(parts) - 1
        if _in_git_dir(start, levels):
            raise _Refused(places.refusal, "inside a git directory")

    def parent_of(self, where: str) -> int:
        """A descriptor (held) of the directory that holds ``where`` for the caller."""
        place = self.caller.in_view(os.path.dirname(where))
        return self.hold(self.caller.lookup(self.caller.root, place, _DIRECTORY))

    def made(self, parent: int, entry: bytes, make: Callable[[], object]) -> int:
        """Make ``entry`` in ``parent``; undone when it completed a git directory meanwhile
        (another command made the rest in between)."""
        self.caller.check()  # everything read from the caller was its own
        make()
        self.undo_git_dir(parent, entry.rstrip(b"/"))
        return 0

    def undo_git_dir(self, parent: int, name: bytes) -> None:
        if not made_git_dir(name, parent):
            return
        _remove(parent, name)
        raise _Refused(self.places.refusal, "it made a git directory")

    # -- open ----------------------------------------------------------------------------
    def open(self, at: int, path: bytes, flags: int, mode: int) -> _Opening:
        creating = bool(flags & os.O_CREAT)
        cloexec = bool(flags & os.O_CLOEXEC)
        reopen = (flags & ~_KEPT_OPEN) | os.O_NOCTTY | os.O_CLOEXEC
        base = self.caller.base(at)
        for _ in range(_SYMLINK_HOPS):
            number = _caller_fd(path)
            if number is not None:
                return self.reopen_caller_fd(number, reopen, cloexec)
            path = self.own_proc(path)
            if flags & _O_TMPFILE_BIT:
                directory = self.hold(self.caller.lookup(base, path, _DIRECTORY))
                self.check_inside(os.readlink(f"/proc/self/fd/{directory}"), directory)
                perm = mode & 0o7777 & ~self.status.umask
                self.caller.check()
                opened = os.open(".", flags | os.O_NOCTTY | os.O_CLOEXEC, perm, dir_fd=directory)
                return _Opening(reopen, cloexec, opened=opened)
            parent, entry = self.caller.split(base, path)
            self.hold(parent)
            name = entry.rstrip(b"/")
            if name in (b"", b".", b".."):
                if creating:
                    raise OSError(errno.EISDIR, "is a directory")
                target = self.hold(self.caller.lookup(base, path, _PATH))
                return self.reopen(target, reopen, cloexec)
            try:
                target = self.hold(os.open(name, _PATH | os.O_NOFOLLOW, dir_fd=parent))
            except FileNotFoundError:
                if not creating or name != entry:
                    raise
                self.check_new(parent, entry)
                create = flags | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
                perm = mode & 0o7777 & ~self.status.umask
                self.caller.check()
                try:
                    opened = os.open(name, create, perm, dir_fd=parent)
                except FileExistsError:
                    continue  # made meanwhile: look again
                try:
                    self.undo_git_dir(parent, name)
                except BaseException:
                    os.close(opened)
                    raise
                return _Opening(reopen, cloexec, opened=opened)
            info = os.fstat(target)
            if stat.S_ISLNK(info.st_mode):
                if creating and flags & os.O_EXCL:
                    raise OSError(errno.EEXIST, "exists")
                if flags & os.O_NOFOLLOW:
                    raise OSError(errno.ELOOP, "a symbolic link")
                path = os.readlink(name, dir_fd=parent)
                base = parent
                continue
            if creating and flags & os.O_EXCL:
                raise OSError(errno.EEXIST, "exists")
            if creating and stat.S_ISDIR(info.st_mode):
                raise OSError(errno.EISDIR, "is a directory")
            return self.reopen(target, reopen, cloexec, parent=parent)
        raise OSError(errno.ELOOP, "too many symbolic links")

    def reopen(
        self, target: int, flags: int, cloexec: bool, *, parent: int | None = None
    ) -> _Opening:
        """Open the existing ``target`` (an ``O_PATH`` descriptor of ours) again with the
        caller's ``flags``, once the rules allow changing it."""
        info = os.fstat(target)
        where = os.readlink(f"/proc/self/fd/{target}")
        landlock = self.places.writable is not None
        if stat.S_ISDIR(info.st_mode):
            self.check_inside(where, target)
        elif where.startswith("/") and not (landlock and _terminals.owns(info)):
            self.check_inside(where, None, parent)
        if where.startswith("/proc/") and not where.startswith(f"/proc/{self.status.tgid}/"):
            # Through the caller's /proc another process's files (the supervisor's own, under
            # Landlock) would be changed for it.
            raise OSError(errno.EACCES, "another process's /proc files")
        blocks = (stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode)) and not (
            flags & os.O_NONBLOCK
        )
        devpts = -1
        if landlock and where in PTY_MULTIPLEXERS and stat.S_ISCHR(info.st_mode):
            # /dev/ptmx makes one on the devpts at /dev/pts; /dev/pts/ptmx on its own.
            devpts = os.stat("/dev/pts").st_dev if where == "/dev/ptmx" else info.st_dev
        return _Opening(flags, cloexec, target=target, blocks=blocks, devpts=devpts)

    def reopen_caller_fd(self, number: int, flags: int, cloexec: bool) -> _Opening:
        """``/dev/fd/N`` and its kind: the caller's own descriptor ``N``, opened again."""
        ours = self.hold(self.caller.take_fd(number))
        where = os.readlink(f"/proc/self/fd/{ours}")
        if not where.startswith("/"):  # a pipe, a socket, an anonymous inode: no place
            return _Opening(flags, cloexec, target=ours, blocks=not flags & os.O_NONBLOCK)
        return self.reopen(ours, flags, cloexec)

    def own_proc(self, path: bytes) -> bytes:
        """``/proc/self`` and ``/proc/thread-self`` as the caller means them (for the
        supervisor they would be its own, or nothing under bubblewrap)."""
        if not path.startswith(b"/proc/"):
            return path
        for link in (b"/proc/self", b"/proc/thread-self"):
            if path == link or path.startswith(link + b"/"):
                ids = self.status
                real = b"/proc/%d" % ids.tgid
                if link == b"/proc/thread-self":
                    real += b"/task/%d" % ids.tid
                return real + path[len(link) :]
        return path

    # -- bind ----------------------------------------------------------------------------
    def bind(self, fd: int, address: int, length: int) -> int:
        """``bind`` of the caller's socket ``fd``, performed on that socket (the same open
        file description) with the address copied once: a Unix socket's path is a new entry,
        checked and made as every other (by its last component, from the directory that
        holds it); any other address names nothing and is bound as given."""
        if length < 0 or length > SOCKADDR_MAX:
            raise OSError(errno.EINVAL, "bad address length")
        given = self.caller.read(address, length)
        sock = self.hold(self.caller.take_fd(fd))
        path = _socket_path(sock, given)
        arch = self.caller.arch
        if path is None:
            self.caller.check()
            _bind(arch, sock, given)
            return 0
        parent, entry = self.new_entry(AT_FDCWD, path)
        umask = self.status.umask
        return self.made(parent, entry, lambda: _bind_in(arch, sock, parent, entry, umask))

    # -- link and rename ------------------------------------------------------------------
    def link_source(self, at: int, old_address: int, flags: int) -> int:
        """The file a ``link`` names as its source (a descriptor of ours), once the rules
        allow linking it: not a file inside a control path or a git directory."""
        old = self.caller.read_string(old_address) if old_address else b""
        number = _caller_fd(old) if flags & _AT_SYMLINK_FOLLOW else None
        if old == b"" and flags & _AT_EMPTY_PATH:
            source = self.caller.base(at)
        elif number is not None:
            source = self.hold(self.caller.take_fd(number))
        else:
            follow = 0 if flags & _AT_SYMLINK_FOLLOW else os.O_NOFOLLOW
            source = self.hold(
                self.caller.lookup(self.caller.base(at), self.own_proc(old), _PATH | follow)
            )
        where = os.readlink(f"/proc/self/fd/{source}")
        info = os.fstat(source)
        if stat.S_ISDIR(info.st_mode):
            raise OSError(errno.EPERM, "a directory")
        if info.st_nlink == 0 and where.endswith(_UNLINKED):
            where = where[: -len(_UNLINKED)]  # an O_TMPFILE file: where it was made
        if self.places.writable is not None and not beneath(where, self.places.writable):
            raise OSError(errno.EXDEV, "from outside the writable roots")  # Landlock's answer
        if where.startswith("/"):
            self.check_inside(where, None)
        return source

    def rename(self, old_at: int, old: bytes, new_at: int, new: bytes, flags: int) -> int:
        old_parent, old_entry = self.caller.split(self.caller.base(old_at), old)
        self.hold(old_parent)
        new_parent, new_entry = self.new_entry(new_at, new)
        if flags & _RENAME_EXCHANGE:
            self.check_new(old_parent, old_entry)  # the old name gets the other entry
        elif self.places.writable is not None and not beneath(
            os.readlink(f"/proc/self/fd/{old_parent}"), self.places.writable
        ):
            raise OSError(errno.EACCES, "outside the writable roots")
        _refuse_mount_points((old_parent, old_entry), (new_parent, new_entry))
        self.caller.check()
        result = syscalls.syscall(
            self.caller.arch, "renameat2", ctypes.c_int(old_parent), ctypes.c_char_p(old_entry),
            ctypes.c_int(new_parent), ctypes.c_char_p(new_entry), ctypes.c_uint(flags),
        )  # fmt: skip
        if result < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self.undo_git_dir(new_parent, new_entry.rstrip(b"/"))
        if flags & _RENAME_EXCHANGE:
            self.undo_git_dir(old_parent, old_entry.rstrip(b"/"))
        return 0


_PATH = os.O_PATH | os.O_CLOEXEC
_DIRECTORY = _PATH | os.O_DIRECTORY


def _refuse_mount_points(*entries: tuple[int, bytes]) -> None:
    """``EBUSY``, as the kernel says, when an entry a rename moves or replaces is a mount
    point in the caller's view (bubblewrap's read-only bind of an existing control path, its
    mask over a hidden one). The kernel checks that only in the mount namespace of the
    process making the call, and the supervisor is not in the command's: without this, it
    could rename the file under a bind away on the host."""
    for parent, entry in entries:
        name = entry.rstrip(b"/")
        if name in (b"", b".", b".."):
            continue  # the kernel refuses these itself
        try:
            found = os.open(name, _PATH | os.O_NOFOLLOW, dir_fd=parent)  # crosses a mount
        except FileNotFoundError:
            continue
        try:
            if syscalls.mount_id(found) != syscalls.mount_id(parent):
                raise OSError(errno.EBUSY, "a mount point")
        finally:
            os.close(found)


def _socket_path(sock: int, address: bytes) -> bytes | None:
    """The path a ``bind`` of ``sock`` to ``address`` names (the kernel's reading: up to the
    first NUL), or ``None`` when it names none: a socket of another family (its own, which the
    caller cannot change), an abstract name, an autobind, an address the kernel refuses.
    ``ENOTSOCK`` when ``sock`` is no socket."""
    if socket_option(sock, SO_DOMAIN) != AF_UNIX or len(address) <= 2:
        return None
    if int.from_bytes(address[:2], "little") != AF_UNIX or address[2] == 0:
        return None
    return address[2:].split(b"\0", 1)[0]


def _bind(arch: str, sock: int, address: bytes) -> None:
    result = syscalls.syscall(
        arch, "bind", ctypes.c_int(sock), ctypes.c_char_p(address), ctypes.c_uint(len(address))
    )
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _bind_in(arch: str, sock: int, parent: int, entry: bytes, umask: int) -> None:
    """Bind ``sock`` to ``entry`` in the directory ``parent`` (a descriptor), with the
    caller's ``umask``. A socket's path has no descriptor-relative form: it is resolved from
    the binding thread's working directory, so a thread of its own (``unshare(CLONE_FS)``:
    its working directory and umask are its own) moves into ``parent`` and binds there."""
    failed: list[OSError] = []

    def work() -> None:
        try:
            if syscalls.syscall(arch, "unshare", ctypes.c_long(_CLONE_FS)) < 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
            os.umask(umask)
            os.fchdir(parent)
            _bind(arch, sock, AF_UNIX.to_bytes(2, "little") + entry)
        except OSError as err:
            failed.append(err)

    worker = threading.Thread(target=work, name="tether-bind", daemon=True)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]


def _caller_fd(path: bytes) -> int | None:
    """The descriptor number ``path`` names when it is one of the caller's own
    (``/dev/fd/N``, ``/proc/self/fd/N``, ``/dev/stderr``), else ``None``."""
    if path in _STDIO:
        return _STDIO[path]
    match = _CALLER_FD.fullmatch(path)
    return int(match.group(1)) if match and len(match.group(1)) < 10 else None


def _root_of(where: str, roots: tuple[str, ...]) -> str | None:
    """The deepest of ``roots`` that ``where`` lies in (or is)."""
    found = [r for r in roots if beneath(where, (r,))]
    return max(found, key=len) if found else None


def _in_git_dir(directory: int, levels: int) -> bool:
    """Whether ``directory`` or one of its ``levels`` parents is a git directory."""
    fd = directory
    opened: list[int] = []
    try:
        for level in range(levels + 1):
            if is_git_dir(entries_at(fd)):
                return True
            if level < levels:
                fd = os.open("..", _DIRECTORY, dir_fd=fd)
                opened.append(fd)
        return False
    finally:
        for each in opened:
            os.close(each)


def _remove(parent: int, name: bytes) -> None:
    """Take ``name`` out of ``parent``: removed, or (a directory something was put in
    meanwhile) renamed aside."""
    try:
        if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            os.rmdir(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)
    except OSError:
        aside = name + b".tether-refused-" + secrets.token_hex(4).encode()
        os.rename(name, aside, src_dir_fd=parent, dst_dir_fd=parent)


__all__ = ["PTY_MULTIPLEXERS", "WRITABLE_DEVICES", "Places", "RunnerSetup", "serve"]
