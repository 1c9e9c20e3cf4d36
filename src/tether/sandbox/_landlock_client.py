"""The harness's side of the fork server (:mod:`tether.sandbox._landlock_server`).

One server per harness process, started on the first supervised spawn (:func:`fork_server`)
and shared by every provider: it holds no per-session state, since each request carries its
own rulesets and rules. The harness keeps one *pair* (a supervisor and its command-to-be,
forked by the server) of each kind in use ready (:func:`kind_of`: Landlock without network,
Landlock with network, bubblewrap), so a spawn is: build the rulesets (Landlock: the reused
read layer and the command's write layer), send one message to the pair (the stdio, the
rulesets and a memfd with the request), and ask the server for the next pair.

A running command belongs to the harness's end of its pair socket (held by its
:class:`ForkedProcess`): its supervisor stops it when that end hangs up, so it never outlives
the harness, and the server is only a factory whose death or replacement leaves running
commands alone. The server exits when the harness closes the control socket or dies (every
descriptor closes then); nothing depends on which harness thread started anything.

Fail closed: a server that cannot start, dies, hangs or answers nonsense raises
:class:`~tether.sandbox._errors.SandboxUnavailableError` (the command did not run), and the next
spawn starts a fresh server.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, Any, Final

from tether.sandbox import _landlock_server as landlock_server
from tether.sandbox._command import ConfinedCommand
from tether.sandbox._errors import SandboxError
from tether.sandbox._landlock_exec import LandlockError, build_rulesets, writable_roots
from tether.sandbox._landlock_server import BWRAP, LANDLOCK, LANDLOCK_NET
from tether.sandbox._supervisor import Rules, recv_with_fds

SERVER_PATH: Final = os.path.abspath(landlock_server.__file__)
PAIR_TIMEOUT: Final = 10.0
"""Seconds the server may take to hand over a pair before it counts as hung (killed and
replaced; the spawn fails closed)."""
SPARE_PAIRS: Final = 1
"""Pairs kept ready between spawns."""
TOP_UP_DELAY: Final = 0.02
"""Seconds after a spawn before the server forks its replacement pair (sooner if the command
exits first): forking at once would compete for the CPU with the command's own start."""
_PAIR_GONE: Final = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ECONNREFUSED})
UNREPORTED: Final = -int(signal.SIGKILL)
"""``returncode`` when the supervisor died without reporting (it was killed outright)."""

Stream = int | IO[Any] | None
"""What :mod:`subprocess` takes for a standard stream, typed as it types one (``IO[Any]``:
typeshed's own type for a stream of either bytes or text, the subprocess boundary)."""


class _Unreachable(Exception):
    """The server could not hand over a pair (the message says why)."""


def kind_of(command: ConfinedCommand) -> bytes:
    """The kind of pair that spawns ``command`` (``SANDBOX_CONFIG`` for one that runs below
    no supervisor)."""
    if command.landlock is not None:
        return LANDLOCK_NET if command.landlock.network else LANDLOCK
    if command.bwrap_pair_argv and command.sockets is not None:
        return BWRAP
    raise SandboxError("the fork server only spawns supervised commands", code="SANDBOX_CONFIG")


@dataclass(slots=True, weakref_slot=True, eq=False)
class _Pair:
    kind: bytes
    pid: int
    pidfd: int
    sock: socket.socket

    def __post_init__(self) -> None:
        _held.add(self)

    def discard(self) -> None:
        """Let the pair go (the command-to-be of an unused pair sees end of file and exits; a
        running command's supervisor stops it). Idempotent."""
        self.sock.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        _held.discard(self)


class ForkedProcess:
    """A command spawned through the fork server: the parts of ``asyncio.subprocess.Process``
    that :mod:`tether.sandbox._process` and its callers use.

    ``pid`` is the supervisor's (the session leader, so also the process group id). The
    harness is not its parent: the exit status comes over the pair socket, and signals go
    through a pidfd, so a recycled pid is never signalled.
    """

    def __init__(
        self,
        pair: _Pair,
        stdout: asyncio.StreamReader | None,
        stderr: asyncio.StreamReader | None,
        on_exit: Callable[[], None],
    ) -> None:
        self.pid = pair.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._pair = pair
        self._on_exit = on_exit
        self._status = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> int:
        loop = asyncio.get_running_loop()
        try:
            message = await loop.sock_recv(self._pair.sock, 64)
        except OSError:
            message = b""
        code = UNREPORTED
        if message.startswith(b"X "):
            with contextlib.suppress(ValueError):
                code = int(message[2:])
        self.returncode = code
        self._pair.discard()  # the supervisor exits once we close our end
        self._on_exit()
        return code

    async def wait(self) -> int:
        return await asyncio.shield(self._status)

    async def communicate(self) -> tuple[bytes | None, bytes | None]:
        """Read stdout and stderr to their ends, then wait for the exit."""

        async def drain(stream: asyncio.StreamReader | None) -> bytes | None:
            return None if stream is None else await stream.read()

        out, err = await asyncio.gather(drain(self.stdout), drain(self.stderr))
        await self.wait()
        return out, err

    def send_signal(self, signo: int) -> None:
        if self.returncode is None and self._pair.pidfd >= 0:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pair.pidfd, signo)

    def kill_group(self) -> None:
        """SIGKILL to the supervisor and its process group, while the exit is unreported (the
        supervisor, and so the group id, lives until then)."""
        if self.returncode is None:
            self.send_signal(signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)


class ForkServer:
    """The harness's handle on one server process. Use :func:`fork_server`.

    Use it from one event loop at a time (as a harness does); successive loops are fine.
    """

    def __init__(self, *, python: str | None = None) -> None:
        self.python = python or sys.executable
        self.pid: int | None = None
        self._control: socket.socket | None = None
        self._spares: dict[bytes, collections.deque[_Pair]] = {
            kind: collections.deque() for kind in landlock_server.KINDS
        }
        self._waiters: dict[bytes, collections.deque[asyncio.Future[_Pair]]] = {
            kind: collections.deque() for kind in landlock_server.KINDS
        }
        self._asked = _no_pairs_asked()
        self._watching: asyncio.AbstractEventLoop | None = None
        _made.add(self)

    # -- server process ---------------------------------------------------------------------
    def _start(self) -> socket.socket:
        if self._control is not None:
            return self._control
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The server's end stays close-on-exec here (no other child of the harness may inherit
        # it); the spawn places a copy at descriptor 3, which dup2 makes inheritable. The copy
        # is numbered above 3 first, since dup2 onto itself would keep close-on-exec.
        high = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)
        try:
            self.pid = os.posix_spawn(
                self.python,
                [self.python, "-E", "-s", "-S", SERVER_PATH, "3"],
                {"PATH": os.environ.get("PATH", os.defpath)},
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_DUP2, high, 3),
                ],
                setsid=True,  # a terminal's Ctrl-C must not reach it
            )
        except OSError as err:
            ours.close()
            raise _Unreachable(f"cannot start the Landlock fork server: {err}") from err
        finally:
            os.close(high)
            theirs.close()
        ours.setblocking(False)
        self._control = ours
        self._asked = _no_pairs_asked()
        return ours

    def drop(self) -> None:
        """Forget the server without touching it (it is not ours: a forked child's copy)."""
        if self._control is not None:
            self._control.close()
        self._control = None
        self.pid = None
        self._asked = _no_pairs_asked()
        for kind in landlock_server.KINDS:
            self._spares[kind].clear()
            self._waiters[kind].clear()
        self._watching = None

    def close(self) -> None:
        """Stop the server and let the spare pairs go. Running commands are not affected:
        each lives until it exits, is stopped, or its :class:`ForkedProcess` is gone with
        the harness."""
        self._fail(None)

    def _fail(self, reason: str | None) -> None:
        """Forget the server (closing the control socket makes it exit) and fail every waiting
        spawn with ``reason``."""
        control, pid = self._control, self.pid
        self._control = None
        self.pid = None
        self._asked = _no_pairs_asked()
        for kind in landlock_server.KINDS:
            while self._spares[kind]:
                self._spares[kind].popleft().discard()
            while self._waiters[kind]:
                waiter = self._waiters[kind].popleft()
                if not waiter.done():
                    waiter.set_exception(_Unreachable(reason or "the fork server was closed"))
        if self._watching is not None and control is not None:
            with contextlib.suppress(RuntimeError, ValueError):
                self._watching.remove_reader(control.fileno())
        self._watching = None
        if control is not None:
            control.close()
        if pid is not None:
            if reason is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _reap(pid)

    # -- pairs ------------------------------------------------------------------------------
    def _ask(self, kind: bytes, count: int) -> None:
        control = self._start()
        try:
            control.send(kind * count)
        except OSError as err:
            self._fail(f"the Landlock fork server is gone: {err}")
            raise _Unreachable(f"the Landlock fork server is gone: {err}") from err
        self._asked[kind] += count

    def _receive(self) -> None:
        """Take every pair that has arrived: to the oldest waiter, else to the spares."""
        while self._control is not None:
            try:
                message, fds = recv_with_fds(self._control, 256, 2)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as err:
                self._fail(f"the Landlock fork server failed: {err}")
                return
            kind, rest = message[2:3], message[4:]
            if message.startswith(b"E ") and kind in self._asked and not fds:
                # It could not fork this pair (and goes on serving): fail one spawn only.
                self._asked[kind] -= 1
                self._give(kind, _Unreachable(rest.decode(errors="replace")))
                continue
            pid = _pair_pid(message)
            if pid is None or len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                self._fail("the Landlock fork server exited or answered nonsense")
                return
            self._asked[kind] -= 1
            pair = _Pair(kind, pid, fds[0], socket.socket(fileno=fds[1]))
            pair.sock.setblocking(False)  # the loop's sock_recv must never block the loop
            if not self._give(kind, pair):
                self._spares[kind].append(pair)
        self._unwatch()

    def _give(self, kind: bytes, outcome: _Pair | _Unreachable) -> bool:
        """Hand a pair (or the failure to make one) to the oldest spawn waiting for ``kind``."""
        waiters = self._waiters[kind]
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                if isinstance(outcome, _Pair):
                    waiter.set_result(outcome)
                else:
                    waiter.set_exception(outcome)
                return True
        return False

    def _unwatch(self) -> None:
        waiting = any(self._waiters.values())
        if self._watching is not None and not waiting and self._control is not None:
            with contextlib.suppress(RuntimeError, ValueError):
                self._watching.remove_reader(self._control.fileno())
            self._watching = None

    async def _take_pair(self, kind: bytes = LANDLOCK) -> _Pair:
        loop = asyncio.get_running_loop()
        self._start()
        self._receive()
        if self._spares[kind]:
            pair = self._spares[kind].popleft()
        else:
            waiter: asyncio.Future[_Pair] = loop.create_future()
            self._waiters[kind].append(waiter)
            missing = len(self._waiters[kind]) - self._asked[kind]
            if missing > 0:
                self._ask(kind, missing)
            control = self._start()
            if self._watching is not loop:
                if self._watching is not None:
                    with contextlib.suppress(RuntimeError, ValueError):
                        self._watching.remove_reader(control.fileno())
                loop.add_reader(control.fileno(), self._receive)
                self._watching = loop
            try:
                pair = await asyncio.wait_for(waiter, PAIR_TIMEOUT)
            except TimeoutError:
                self._fail("the Landlock fork server did not answer")
                raise _Unreachable("the Landlock fork server did not answer") from None
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters[kind].remove(waiter)
                self._unwatch()
        loop.call_later(TOP_UP_DELAY, self.top_up, kind)
        return pair

    async def ready(self, kind: bytes = LANDLOCK) -> bool:
        """Start the server if needed and wait until a pair of ``kind`` is ready, so the next
        spawn waits for nothing. False when the server cannot start (spawns then fail
        closed)."""
        try:
            self._start()
            self._receive()
            if not self._spares[kind]:
                self._spares[kind].appendleft(await self._take_pair(kind))
        except _Unreachable:
            return False
        return True

    def top_up(self, kind: bytes = LANDLOCK) -> None:
        """Ask for pairs of ``kind`` until :data:`SPARE_PAIRS` are ready or on their way."""
        if self._control is None:
            return
        ready = len(self._spares[kind]) + self._asked[kind] - len(self._waiters[kind])
        if SPARE_PAIRS - ready > 0:
            with contextlib.suppress(_Unreachable):
                self._ask(kind, SPARE_PAIRS - ready)

    # -- spawn ------------------------------------------------------------------------------
    async def spawn(
        self,
        command: ConfinedCommand,
        *,
        cwd: str | None = None,
        stdin: Stream = subprocess.DEVNULL,
        stdout: Stream = subprocess.PIPE,
        stderr: Stream = subprocess.PIPE,
    ) -> ForkedProcess:
        """Start the supervised ``command`` (Landlock, or bubblewrap without network).
        Streams as for ``subprocess`` except ``stdin=PIPE`` (not supported). Raises
        ``SandboxUnavailableError`` when the command could not be handed to a confined
        process (it did not run)."""
        kind = kind_of(command)
        if stdin == subprocess.PIPE:
            raise SandboxError("the fork server does not support stdin=PIPE", code="SANDBOX_CONFIG")
        spec = command.landlock
        argv = list(command.bwrap_pair_argv if spec is None else command.command)
        env = dict(command.env)
        if any("\0" in text for text in (*argv, *env, *env.values())):
            raise SandboxError("embedded null byte in argv or env", code="SANDBOX_CONFIG")
        request: dict[str, object] = {"argv": argv, "env": env, "cwd": cwd or os.getcwd()}
        sockets = command.sockets
        roots: tuple[str, ...] = ()
        if spec is None:
            _check_runner(command)
            rules = Rules((), sockets)
        else:
            try:
                roots = writable_roots(spec)
            except LandlockError as err:
                raise command.unavailable(f"cannot build the Landlock ruleset: {err}") from err
            request["writable"] = list(roots)
            # Under Landlock, pathname sockets may be used inside the writable roots.
            rules = Rules(roots, None if sockets is None else replace(sockets, roots=roots))
        request["rules"] = rules.encode().decode()
        body = json.dumps(request).encode()
        if len(body) > landlock_server.MAX_REQUEST:
            raise SandboxError(
                "the command and its environment are too large", code="SANDBOX_CONFIG"
            )
        rulesets: tuple[int, ...] = ()
        if spec is not None:
            try:
                rulesets = build_rulesets(spec, roots=roots)
            except LandlockError as err:
                raise command.unavailable(f"cannot build the Landlock ruleset: {err}") from err
        memfd = os.memfd_create("tether-request", os.MFD_CLOEXEC)
        try:
            os.write(memfd, body)  # a memfd takes a whole write
            with _Streams(stdin, stdout, stderr) as streams:
                fds = [*streams.child_fds, *rulesets, memfd]
                pair = await self._hand_over(kind, fds)
                try:
                    out, err_stream = await streams.readers()
                except BaseException:
                    # The command runs already: nobody would watch it, so stop it (the
                    # supervisor sweeps) rather than leave it behind.
                    with contextlib.suppress(OSError):
                        signal.pidfd_send_signal(pair.pidfd, signal.SIGTERM)
                    pair.discard()
                    raise
                return ForkedProcess(pair, out, err_stream, lambda: self.top_up(kind))
        except _Unreachable as err:
            raise command.unavailable(str(err)) from err
        finally:
            os.close(memfd)
            for ruleset in rulesets:
                os.close(ruleset)

    async def _hand_over(self, kind: bytes, fds: list[int]) -> _Pair:
        for attempt in range(2):
            pair = await self._take_pair(kind)
            try:
                socket.send_fds(pair.sock, [landlock_server.REQUEST], fds)
            except OSError as err:
                pair.discard()
                if attempt or err.errno not in _PAIR_GONE:
                    raise _Unreachable(f"cannot reach a fork-server pair: {err}") from err
                self._receive()  # the pair died (say, killed): one more try with a fresh one
                continue
            return pair
        raise AssertionError("unreachable")


def _check_runner(command: ConfinedCommand) -> None:
    """A runner that cannot be executed (``SANDBOX_UNAVAILABLE``) is found before a pair is
    spent on it; the pair fails closed too if it goes away in between."""
    runner = command.bwrap_pair_argv[0]
    # A bare name is looked up as the exec will: on the command environment's PATH.
    found = runner if "/" in runner else shutil.which(runner, path=command.env.get("PATH"))
    if found is None or not os.path.exists(found):
        reason = os.strerror(errno.ENOENT)
    elif not os.access(found, os.X_OK):
        reason = os.strerror(errno.EACCES)
    else:
        return
    raise command.unavailable(f"cannot execute the sandbox runner {runner}: {reason}")


def _no_pairs_asked() -> dict[bytes, int]:
    return dict.fromkeys(landlock_server.KINDS, 0)


def _reap(pid: int) -> None:
    """Reap the server (it exits at once when its control socket closes; one that does not
    within a second, stopped or stuck, is killed)."""
    for _ in range(100):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _pair_pid(message: bytes) -> int | None:
    """The supervisor's pid from a ``P <kind> <pid>`` message; ``None`` for anything else."""
    head, kind, pid = message.split(b" ", 2) if message.count(b" ") == 2 else (b"", b"", b"")
    ok = head == b"P" and kind in landlock_server.KINDS and pid.isdigit()
    return int(pid) if ok else None


class _Streams:
    """The command's three descriptors, and our read ends of its stdout/stderr PIPEs."""

    def __init__(self, stdin: Stream, stdout: Stream, stderr: Stream) -> None:
        self._opened: list[int] = []
        self._pipes: list[int | None] = [None, None]
        self.child_fds = [self._fd(stdin, 0, None), self._fd(stdout, 1, 0)]
        if stderr == subprocess.STDOUT:
            self.child_fds.append(self.child_fds[1])
        else:
            self.child_fds.append(self._fd(stderr, 2, 1))

    def _fd(self, stream: Stream, default: int, pipe_slot: int | None) -> int:
        if stream is None:
            return default
        if stream == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_WRONLY if pipe_slot is not None else os.O_RDONLY)
            self._opened.append(fd)
            return fd
        if stream == subprocess.PIPE and pipe_slot is not None:
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            self._opened.append(write_end)
            self._pipes[pipe_slot] = read_end
            return write_end
        return stream if isinstance(stream, int) else stream.fileno()

    async def readers(self) -> tuple[asyncio.StreamReader | None, asyncio.StreamReader | None]:
        """Stream readers for the stdout and stderr PIPEs (``None`` for other streams)."""
        loop = asyncio.get_running_loop()
        out: list[asyncio.StreamReader | None] = []
        for slot, fd in enumerate(self._pipes):
            if fd is None:
                out.append(None)
                continue
            self._pipes[slot] = None
            reader = asyncio.StreamReader(loop=loop)
            pipe = os.fdopen(fd, "rb", 0)
            try:
                await loop.connect_read_pipe(_protocol(reader), pipe)
            except BaseException:
                pipe.close()
                raise
            out.append(reader)
        return out[0], out[1]

    def __enter__(self) -> _Streams:
        return self

    def __exit__(self, *_: object) -> None:
        for fd in self._opened:
            os.close(fd)
        for pipe in self._pipes:
            if pipe is not None:
                os.close(pipe)


def _protocol(reader: asyncio.StreamReader) -> Callable[[], asyncio.StreamReaderProtocol]:
    return lambda: asyncio.StreamReaderProtocol(reader)


_servers: dict[int, ForkServer] = {}
_held: weakref.WeakSet[_Pair] = weakref.WeakSet()
"""Every pair whose socket this process holds (spare or running)."""
_made: weakref.WeakSet[ForkServer] = weakref.WeakSet()


def _drop_inherited() -> None:
    """In a forked child of the harness: close its copies of every control socket and pair
    socket. They are the parent's; a copy kept here (a multiprocessing worker, say) would keep
    the parent's commands running, and its server serving, after the parent died."""
    for pair in list(_held):
        pair.discard()
    for server in list(_made):
        server.drop()
    _servers.clear()


os.register_at_fork(after_in_child=_drop_inherited)


def fork_server() -> ForkServer:
    """This process's fork server (a forked child of the harness gets its own)."""
    pid = os.getpid()
    server = _servers.get(pid)
    if server is None:
        server = _servers[pid] = ForkServer()
    return server


__all__ = [
    "PAIR_TIMEOUT",
    "SERVER_PATH",
    "ForkServer",
    "ForkedProcess",
    "fork_server",
    "kind_of",
]
