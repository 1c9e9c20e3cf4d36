"""The supervisor of one confined command, on either backend. Standard library only.

A confined command runs below a *supervisor*: a child subreaper (whatever the command starts
stays below it), not dumpable, without capabilities, that forks it and waits. It serves the
command's seccomp filter (:mod:`._seccomp_filter`): the metadata calls Landlock cannot refuse
(below), the calls that make a name or change a file (:mod:`._creation_calls`: no control
name at any depth) and the socket calls of a command without network
(:mod:`._socket_calls`). When the
command exits, or the supervisor is told to stop (SIGTERM, SIGINT, SIGHUP, or its owner
hanging up), it kills every process left below it, including ones that called ``setsid``
(they were reparented to it).

The command installs its filter and offers the supervisor the listener
(:func:`offer_listener`), which takes it with ``pidfd_getfd`` (:func:`take_listener`): passing
it in a message would need the ``sendmsg`` the filter has just handed to the supervisor. Once
its confinement is in place, the command sends the :class:`Rules` the supervisor applies
(:func:`send_rules`). Until the rules arrive every served call is refused.

Metadata (Landlock): ``chmod``/``fchmod``/``fchmodat``/``fchmodat2``/``utimensat`` are
performed by the supervisor, which opens the target itself (``O_PATH``, from the caller's cwd
or dirfd), checks that the opened file is under a writable root, and changes it through that
descriptor, so a path swapped after the check cannot redirect it.

Failures to confine print one ``tether-landlock: ...`` line on stderr and exit 125 (the
backends' runner-failure rule): the command never ran.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import errno
import fcntl
import json
import os
import resource
import select
import signal
import socket
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, NoReturn

if __package__:
    from tether.sandbox import _creation_calls as creation_calls
    from tether.sandbox import _seccomp_filter as seccomp_filter
    from tether.sandbox import _socket_calls as socket_calls
    from tether.sandbox import _syscalls as syscalls
    from tether.sandbox._caller import Caller, beneath
    from tether.sandbox._socket_calls import SocketRules
else:  # loaded by the fork server or a launcher: this directory is on sys.path
    import _creation_calls as creation_calls  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _seccomp_filter as seccomp_filter  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _socket_calls as socket_calls  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _caller import Caller, beneath  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _socket_calls import SocketRules  # type: ignore[import-not-found,no-redef,unused-ignore]

LAUNCHER_EXIT: Final = 125
"""Exit status when the command could not be confined (it never ran)."""
LAUNCHER_PREFIX: Final = "tether-landlock: "
"""Prefix of the one stderr line written before exiting with ``LAUNCHER_EXIT``."""

SIGNALS: Final = frozenset({signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
"""What a supervisor waits for (blocked from :func:`become_supervisor` until it does)."""

_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_NAMES: Final = {
    arch: {nr: name for name, nr in numbers.items()} for arch, numbers in syscalls.SYSCALLS.items()
}
_AT_EMPTY_PATH = 0x1000


@dataclass(frozen=True, slots=True)
class Rules:
    """What the supervisor may perform for the command."""

    writable: tuple[str, ...] = ()
    """The writable roots. Landlock: what the metadata and creation calls may change (its write
    layer's). bubblewrap: where control names count from (with network; without, the socket
    rules' roots say it)."""
    sockets: SocketRules | None = None
    """Socket calls, for a command without network (``None``: every one is refused)."""

    def encode(self) -> bytes:
        sockets = None if self.sockets is None else self.sockets.to_json()
        return json.dumps({"writable": list(self.writable), "sockets": sockets}).encode()

    @classmethod
    def decode(cls, body: bytes) -> Rules:
        """Rules from :meth:`encode`; ``ValueError`` for anything else."""
        data = json.loads(body)
        writable = data.get("writable") if isinstance(data, dict) else None
        if not isinstance(writable, list) or not all(isinstance(w, str) for w in writable):
            raise ValueError("rules: writable must be a list of paths")
        sockets = data.get("sockets")
        return cls(tuple(writable), None if sockets is None else SocketRules.from_json(sockets))


# -- the hand-over channel (command -> supervisor) ---------------------------------------------
def handover_channel() -> tuple[socket.socket, socket.socket]:
    """The supervisor's and the command's ends of the hand-over channel."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def offer_listener(channel: socket.socket, listener: int) -> None:
    """In the command: let the supervisor take the filter's listener (-1: none), and wait
    until it has (it must not be closed before). The command is dumpable from now on (as it
    will be after ``exec``), or the supervisor could not take it."""
    if listener >= 0:
        syscalls.set_dumpable(True)
    channel.send(b"L%d" % listener)
    if channel.recv(16) != b"K":
        raise OSError(errno.EPROTO, "the supervisor could not take the filter's listener")
    if listener >= 0:
        os.close(listener)


def take_listener(channel: socket.socket, command: int, arch: str) -> int:
    """In the supervisor: the listener :func:`offer_listener` offers from ``command`` (its
    child), or -1 when there is none (or the command died first)."""
    offer = channel.recv(16)
    if not offer.startswith(b"L"):
        return -1
    number = int(offer[1:])
    listener = -1
    if number >= 0:
        pidfd = os.pidfd_open(command)
        try:
            listener = syscalls.pidfd_getfd(arch, pidfd, number)
        finally:
            os.close(pidfd)
    channel.send(b"K")
    return listener


def send_rules(channel: socket.socket, rules: bytes) -> None:
    """Send the supervisor its rules, as :meth:`Rules.encode` made them (a pair forwards
    them as the harness sent them: decoding them first would delay every command)."""
    channel.send(b"R" + rules)


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


class _Handover:
    """The supervisor's end of the hand-over channel, and the rules that came over it
    (decoded when first needed: most commands make no call the supervisor serves)."""

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.open = True
        self.received = False
        """The rules came."""
        self._encoded: bytes | None = None
        self._rules: Rules | None = None

    @property
    def rules(self) -> Rules | None:
        """``None`` until they arrive, or when they are malformed: every call is refused."""
        if self._encoded is not None:
            encoded, self._encoded = self._encoded, None
            try:
                self._rules = Rules.decode(encoded)
            except ValueError:
                self._rules = None
        return self._rules

    def read(self, block: bool = True) -> bool:
        """Take one message; False at end of file, or when ``block`` is false and nothing is
        waiting."""
        try:
            body = self.sock.recv(1 << 20, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            body = b""
        if body.startswith(b"R") and not self.received:
            # A command's rules arrive once: a later message never replaces them (new rules
            # would start a new bubblewrap setup, whose calls the filter lets through).
            self._encoded, self._rules = body[1:], None
            self.received = True
        if not body:
            self.open = False
            self.sock.close()
        return bool(body)


# -- the supervising process ------------------------------------------------------------------
def become_supervisor() -> tuple[tuple[socket.socket, socket.socket], set[int]]:
    """Make this process the supervisor of a command it is about to fork: a child subreaper,
    not dumpable (a process of the same uid can neither ptrace it nor open its /proc files,
    whatever the backend), with :data:`SIGNALS` blocked until :func:`supervise` handles
    them. Returns the hand-over channel (supervisor's end first) and the signal mask to
    restore in the command."""
    syscalls.become_subreaper()
    syscalls.set_dumpable(False)
    channel = handover_channel()
    return channel, signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


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


def supervise(
    command: int, handover: int, arch: str, listener: int, owner: int = -1, *, bwrap: bool = False
) -> int | None:
    """Wait for the command (a child of this process), serving its filter's ``listener``
    (-1: none), until it exits or this process is told to stop (SIGTERM, SIGINT, SIGHUP, or
    ``owner`` hanging up); then kill everything left below. Returns the command's wait
    status, or ``None`` when stopped first.

    ``handover``: the descriptor :func:`send_rules` writes to from the command. ``owner``: a
    socket whose peer owns the command (only its hang-up is watched, never its data, which
    may be the command's to read). ``bwrap``: the command is bubblewrap, which sets up the
    command's sandbox below the filter (:class:`~._creation_calls.Places`).
    """
    status: int | None = None
    channel = _Handover(handover)
    places = _PlacesFor(command, bwrap)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    for signo in SIGNALS:
        signal.signal(signo, _note_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    poller = select.poll()
    poller.register(wake_r, select.POLLIN)
    poller.register(handover, select.POLLIN)
    if listener >= 0:
        poller.register(listener, select.POLLIN)
    if owner >= 0:
        poller.register(owner, 0)  # POLLHUP and POLLERR are always reported
    reap = True  # a signal came (SIGCHLD among them): look for exited children
    while status is None and not _stop_requested:
        if reap:
            reap = False
            try:
                status = _reap(command)
            except ChildProcessError:
                break
            if status is not None:
                break
        for fd, events in poller.poll():
            if fd == wake_r:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 512)
                reap = True
            elif fd == owner:
                _stop_requested.append(signal.SIGHUP)  # the harness is gone: stop
            elif fd == handover:
                if not channel.read():
                    poller.unregister(fd)
            elif events & select.POLLIN:
                # Rules sent before the exec must be known before any call is served (they
                # come once: after them, only the end of the channel).
                while not channel.received and channel.open and channel.read(block=False):
                    pass
                _serve(fd, arch, channel.rules, places)
            else:
                poller.unregister(fd)  # the listener hung up: no process uses the filter
    sweep()
    return status


def _reap(command: int) -> int | None:
    """Reap every exited child; the wait status of ``command`` when it is one of them.
    ``ChildProcessError`` when no child is left."""
    while True:
        pid, wait_status = os.waitpid(-1, os.WNOHANG)
        if pid == command:
            return wait_status
        if pid == 0:
            return None


class _PlacesFor:
    """Where the supervisor acts for creation calls, from the rules that came (worked out
    once for them)."""

    def __init__(self, command: int, bwrap: bool) -> None:
        self.command = command
        self.bwrap = bwrap
        self._for: tuple[Rules, creation_calls.Places] | None = None

    def __call__(self, rules: Rules | None) -> creation_calls.Places | None:
        if rules is None:
            return None
        if self._for is None or self._for[0] is not rules:
            self._for = rules, self._places(rules)
        return self._for[1]

    def _places(self, rules: Rules) -> creation_calls.Places:
        if not self.bwrap:  # Landlock: the writable roots are what the supervisor may change
            return creation_calls.Places(rules.writable, rules.writable, errno.EACCES)
        sockets = rules.sockets  # without network, the writable roots are the sockets'
        where = () if sockets is None else (*sockets.roots, *(p for p, _ in sockets.private))
        roots = (*rules.writable, *where)
        setup = creation_calls.RunnerSetup(self.command)  # the command-to-be is bwrap now
        return creation_calls.Places(roots, None, errno.EROFS, setup)


def _serve(
    listener: int,
    arch: str,
    rules: Rules | None,
    places: Callable[[Rules | None], creation_calls.Places | None],
) -> None:
    """Answer one notification: perform the call for the command, or refuse it."""
    notification = seccomp_filter.receive(listener)
    if notification is None:
        return  # the caller died, or a spurious wake-up
    name = _NAMES[arch].get(notification.nr, "")
    if name in seccomp_filter.CREATION_CALLS:
        creation_calls.serve(listener, notification, name, arch, places(rules))
        return
    if name in seccomp_filter.SOCKET_CALLS:
        socket_calls.serve(
            listener, notification, name, arch, None if rules is None else rules.sockets
        )
        return
    if name not in seccomp_filter.EMULATED:
        seccomp_filter.respond(listener, notification.id, errno.EPERM)
        return
    try:
        error = _metadata(
            listener, notification, name, arch, () if rules is None else rules.writable
        )
    except OSError as err:
        error = err.errno or errno.EPERM
    except Exception:
        error = errno.EPERM
    if error >= 0:  # < 0: the notification went stale, nobody is waiting for an answer
        seccomp_filter.respond(listener, notification.id, error)


def _metadata(
    listener: int,
    notification: seccomp_filter.Notification,
    name: str,
    arch: str,
    writable: tuple[str, ...],
) -> int:
    args = notification.args
    caller = Caller(arch, notification.pid, lambda: True)  # checked once the target is open
    try:
        times: bytes | None = None
        if name == "chmod":
            dirfd, path_addr, mode, flags = _AT_FDCWD, args[0], args[1], 0
        elif name == "fchmod":
            dirfd, path_addr, mode, flags = syscalls.int32(args[0]), 0, args[1], 0
        elif name in ("fchmodat", "fchmodat2"):
            dirfd, path_addr, mode = syscalls.int32(args[0]), args[1], args[2]
            flags = args[3] if name == "fchmodat2" else 0
        else:  # utimensat(dirfd, path, times, flags)
            dirfd, path_addr, mode, flags = syscalls.int32(args[0]), args[1], 0, args[3]
            if args[2]:
                times = caller.read(args[2], 32)
        path = caller.read_string(path_addr) if path_addr else None
        target = _open_target(caller, dirfd, path, flags)
    finally:
        caller.close()
    try:
        # Everything read from the caller is in hand: make sure it is still the same caller,
        # still waiting (its pid cannot have been reused in between).
        if not seccomp_filter.still_waiting(listener, notification.id):
            return -1
        where = os.readlink(f"/proc/self/fd/{target}")
        if not beneath(where, writable):
            return errno.EACCES
        if stat.S_ISLNK(os.fstat(target).st_mode):
            return errno.EOPNOTSUPP
        proc_path = f"/proc/self/fd/{target}"
        if name == "utimensat":
            return _utimensat(proc_path, times)
        os.chmod(proc_path, mode & 0o7777)
        return 0
    finally:
        os.close(target)


def _open_target(caller: Caller, dirfd: int, path: bytes | None, flags: int) -> int:
    """An ``O_PATH`` descriptor of what the caller's call would have operated on."""
    base = f"/proc/self/fd/{caller.cwd}" if dirfd == _AT_FDCWD else f"/proc/{caller.tid}/fd/{dirfd}"
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


def _utimensat(path: str, times: bytes | None) -> int:
    buf = ctypes.create_string_buffer(times, 32) if times is not None else None
    result = syscalls.libc().utimensat(_AT_FDCWD, path.encode(), buf, 0)
    return ctypes.get_errno() if result != 0 else 0


# -- ending ---------------------------------------------------------------------------------------
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


def exit_like(status: int | None) -> NoReturn:
    """Exit as the command did (143, SIGTERM's, when stopped first)."""
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


def launch(
    arch: str,
    *,
    before: Callable[[], None],
    command: Callable[[socket.socket], None],
    after: Callable[[], None],
    bwrap: bool = False,
) -> None:
    """The launchers' fork: returns in the command, ready to exec; the calling process
    becomes its supervisor and never returns (it exits as the command did).

    ``before`` runs in the supervisor before the fork (the command inherits what it does),
    ``command`` in the command with its end of the hand-over channel (install the filter,
    :func:`offer_listener`, :func:`send_rules`), ``after`` in the supervisor once it holds
    the listener. ``bwrap``: the command execs bubblewrap (:func:`supervise`)."""
    syscalls.die_with_parent(signal.SIGTERM, os.getppid(), LAUNCHER_EXIT)
    before()
    channel, old_mask = become_supervisor()
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        syscalls.die_with_parent(signal.SIGKILL, me, LAUNCHER_EXIT)
        channel[0].close()
        command(channel[1])
        channel[1].close()
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return
    channel[1].close()
    status: int | None = None
    try:
        listener = take_listener(channel[0], pid, arch)
        after()
        kept = isolate_fds([channel[0].detach(), *([listener] if listener >= 0 else [])])
        status = supervise(pid, kept[0], arch, kept[1] if listener >= 0 else -1, bwrap=bwrap)
    except BaseException:
        with contextlib.suppress(BaseException):
            sweep()
        os._exit(LAUNCHER_EXIT)
    exit_like(status)


def fail(err: BaseException) -> NoReturn:
    """The command could not be confined: say why on stderr, exit :data:`LAUNCHER_EXIT`."""
    with contextlib.suppress(BaseException):
        os.write(2, f"{LAUNCHER_PREFIX}{err}\n".encode())
    os._exit(LAUNCHER_EXIT)


__all__ = [
    "LAUNCHER_EXIT",
    "LAUNCHER_PREFIX",
    "SIGNALS",
    "Rules",
    "become_supervisor",
    "children",
    "exit_like",
    "fail",
    "handover_channel",
    "isolate_fds",
    "launch",
    "max_fd",
    "offer_listener",
    "recv_with_fds",
    "send_rules",
    "supervise",
    "sweep",
    "take_listener",
]
