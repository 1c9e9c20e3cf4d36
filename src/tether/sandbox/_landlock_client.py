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
import atexit
import collections
import contextlib
import errno
import fcntl
import json
import os
import select
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
from tether.sandbox import _waiter
from tether.sandbox._command import ConfinedCommand
from tether.sandbox._errors import SandboxError
from tether.sandbox._landlock_exec import LandlockError, build_rulesets, writable_roots
from tether.sandbox._landlock_server import BWRAP, LANDLOCK, LANDLOCK_NET
from tether.sandbox._prepared import Plan, Preparation, Profile, plan_of, preparation
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
READY_ROUNDS: Final = 5
"""How often :meth:`ForkServer.ready` prepares a pair again that no longer stands (a directory
it was prepared from changes under it: another process's work in it, say)."""
PREPARED_PLANS: Final = 2
"""Plans (:mod:`._prepared`) the harness keeps a pair prepared for: the most recently used
(a session's own, and its children's in another mode, say)."""
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

    def alive(self) -> bool:
        """Its supervisor has not exited (its pidfd is not readable yet)."""
        if self.pidfd < 0:
            return False
        readable, _, _ = select.select([self.pidfd], [], [], 0)
        return not readable

    def discard(self) -> None:
        """Let the pair go (the command-to-be of an unused pair sees end of file and exits; a
        running command's supervisor stops it). Idempotent."""
        self.sock.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        _held.discard(self)


@dataclass(slots=True, eq=False)
class _Prepared:
    """A pair told to prepare itself (``PREPARE``)."""

    pair: _Pair
    preparation: Preparation
    ready: bool = False
    """Its waiter said READY: the pair is confined and waits for its command."""

    def discard(self) -> None:
        """Let it go unused (its temp directory, still empty, goes back to the pool)."""
        self.pair.discard()
        self.preparation.release(used=False)


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
        self._plans: collections.OrderedDict[Profile, Plan] = collections.OrderedDict()
        """The recent plans by their template, most recently used last."""
        self._prepared: dict[Profile, _Prepared] = {}
        """A pair prepared for each plan (by its template)."""
        self._unpreparable: set[Profile] = set()
        """Templates whose pairs could not be prepared (not tried again)."""
        self.prepared_taken = 0
        """Commands a prepared pair took (what tests and ``bench/sandbox.py`` count)."""
        self.prepared_stale = 0
        """Prepared pairs let go when their command came, since something they were prepared
        from had changed."""
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
        self._plans.clear()
        self._prepared.clear()
        self._unpreparable.clear()

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
        for prepared in self._prepared.values():
            prepared.discard()
        self._prepared.clear()
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

    def _arrived(self) -> None:
        """The loop's reader of the control socket: :meth:`_receive`, then prepare spares
        (never while a spawn takes its pair: it would take a spare the spawn needs)."""
        self._receive()
        self._prepare_spares()

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
        waiting = any(self._waiters.values()) or any(self._asked.values())
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
            self._watch(loop, self._start())
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
        """Start the server if needed and wait until a pair of ``kind`` is ready, and every
        recent plan of that kind has a prepared pair ready, so the next spawn waits for
        nothing. False when the server cannot start (spawns then fail closed)."""
        try:
            self._start()
            self._receive()
            for _ in range(READY_ROUNDS):
                for plan in self._unprepared(kind):
                    self._prepare(plan, await self._take_pair(kind))
                stale = False
                for template, prepared in list(self._prepared.items()):
                    if template.kind != kind:
                        continue
                    if not await self._settle(template, prepared):
                        self._prepared.pop(template, None)
                        prepared.discard()
                    elif not prepared.preparation.stands():
                        self._prepared.pop(template, None)
                        prepared.discard()
                        stale = True  # prepared again in the next round
                if not stale:
                    break
            if not self._spares[kind]:
                self._spares[kind].appendleft(await self._take_pair(kind))
        except _Unreachable:
            return False
        return True

    def top_up(self, kind: bytes = LANDLOCK) -> None:
        """Ask for pairs of ``kind`` until :data:`SPARE_PAIRS` are ready or on their way, and
        one more for each recent plan of that kind without a prepared pair."""
        if self._control is None:
            return
        wanted = SPARE_PAIRS + len(self._unprepared(kind))
        ready = len(self._spares[kind]) + self._asked[kind] - len(self._waiters[kind])
        if wanted - ready > 0:
            with contextlib.suppress(_Unreachable):
                self._ask(kind, wanted - ready)
        self._prepare_spares()
        self._watch_arrivals()

    def _top_up_later(self, kind: bytes) -> None:
        """:meth:`top_up` in :data:`TOP_UP_DELAY` (a command exited): preparing a pair
        must not delay the harness's taking of the result."""
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().call_later(TOP_UP_DELAY, self.top_up, kind)

    def _watch_arrivals(self) -> None:
        """Take pairs as they arrive (:meth:`_receive`) while any is on its way, so that a
        pair is prepared as soon as it is there, not when the next command needs it."""
        control = self._control
        if control is None or not any(self._asked.values()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not in a loop: pairs are taken at the next spawn
        self._watch(loop, control)

    def _watch(self, loop: asyncio.AbstractEventLoop, control: socket.socket) -> None:
        """Read the control socket from ``loop`` (:meth:`_arrived`), and from no other."""
        if self._watching is not loop:
            if self._watching is not None:
                with contextlib.suppress(RuntimeError, ValueError):
                    self._watching.remove_reader(control.fileno())
            loop.add_reader(control.fileno(), self._arrived)
            self._watching = loop

    # -- prepared pairs (_prepared.py) --------------------------------------------------------
    def _unprepared(self, kind: bytes | None = None) -> list[Plan]:
        """The recent plans (of ``kind``) without a prepared pair."""
        return [
            plan
            for template, plan in self._plans.items()
            if template not in self._prepared
            and template not in self._unpreparable
            and kind in (None, template.kind)
        ]

    def _prepare_spares(self) -> None:
        """Prepare a spare pair for each recent plan without one (the next spare comes with
        the next :meth:`top_up`)."""
        for plan in self._unprepared():
            spares = self._spares[plan.profile.kind]
            if spares:
                self._prepare(plan, spares.popleft())

    def _prepare(self, plan: Plan, pair: _Pair) -> None:
        """Have ``pair`` confine itself for ``plan`` now and wait for its command (unless a
        pair is prepared for it already: then ``pair`` stays a spare)."""
        if plan.profile in self._prepared:
            self._spares[pair.kind].appendleft(pair)
            return
        try:
            built = preparation(plan)
        except (OSError, ValueError):
            # Its workspace is gone, say: a spare still, and the plan not tried again.
            self._spares[pair.kind].appendleft(pair)
            self._note_unpreparable(plan.profile)
            return
        try:
            socket.send_fds(pair.sock, [landlock_server.PREPARE], built.fds)
        except OSError:
            _Prepared(pair, built).discard()  # it died, say: the next top-up brings another
            return
        finally:
            built.close()
        self._prepared[plan.profile] = _Prepared(pair, built)

    def _note_unpreparable(self, template: Profile) -> None:
        self._unpreparable.add(template)
        if len(self._unpreparable) > 4 * PREPARED_PLANS:
            self._unpreparable.clear()  # bounded: they are tried again in time

    def _remember(self, plan: Plan) -> None:
        """Make ``plan`` the most recent; forget (and let go the prepared pair of) the least
        recent beyond :data:`PREPARED_PLANS`."""
        self._plans.pop(plan.profile, None)
        self._plans[plan.profile] = plan
        while len(self._plans) > PREPARED_PLANS:
            old, _ = self._plans.popitem(last=False)
            stale = self._prepared.pop(old, None)
            if stale is not None:
                stale.discard()

    async def _settle(self, template: Profile, prepared: _Prepared) -> bool:
        """Wait until ``prepared`` is confined (its waiter said READY). False when it never
        will be (its supervisor reported an exit instead: bwrap failed, say; that plan is not
        prepared again), did not within :data:`PAIR_TIMEOUT`, or ended since."""
        sock = prepared.pair.sock
        if not prepared.ready:
            loop = asyncio.get_running_loop()
            try:
                message = await asyncio.wait_for(loop.sock_recv(sock, 64), PAIR_TIMEOUT)
            except (TimeoutError, OSError):
                message = b""
            prepared.ready = message == _waiter.READY
            if not prepared.ready:
                self._note_unpreparable(template)
                return False
        try:  # anything after READY: the supervisor's report, or its end
            sock.recv(64, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            # Nothing yet; but a supervisor killed outright reports nothing, and what it
            # supervised (bwrap's sandbox) may not be gone yet.
            return prepared.pair.alive()
        except OSError:
            return False
        return False

    async def _spawn_prepared(
        self, plan: Plan, command: ConfinedCommand, streams: tuple[Stream, Stream, Stream]
    ) -> ForkedProcess | None:
        """Hand ``command`` to the pair prepared for its plan, if there is one and nothing it
        was prepared from has changed since; ``None`` when there is none (nothing ran).
        Either way its plan is prepared for next. A Landlock command gets the pair's own
        private temp directory (:data:`._prepared.TEMP`)."""
        template = plan.profile
        prepared = self._prepared.pop(template, None)
        self._remember(plan)
        if prepared is None:
            return None
        try:
            usable = await self._settle(template, prepared)
        except BaseException:
            prepared.discard()
            raise
        if usable and not prepared.preparation.stands():
            self.prepared_stale += 1
            usable = False
        env = dict(command.env)
        temp = prepared.preparation.temp_dir
        if temp is not None:
            env["TMPDIR"] = temp
        body = _waiter.encode(list(command.command), env)
        if not usable or len(body) > landlock_server.MAX_REQUEST:
            prepared.discard()
            return None  # the usual way (which refuses a request too large)
        pair = prepared.pair
        memfd = os.memfd_create("tether-request", os.MFD_CLOEXEC)
        try:
            os.write(memfd, body)
            with _Streams(*streams) as opened:
                try:
                    socket.send_fds(pair.sock, [_waiter.REQUEST], [*opened.child_fds, memfd])
                except OSError:
                    prepared.discard()  # it died since: the usual way
                    return None
                self.prepared_taken += 1
                asyncio.get_running_loop().call_later(TOP_UP_DELAY, self.top_up, pair.kind)
                return await self._started(pair, opened, pair.kind, prepared.preparation)
        finally:
            os.close(memfd)

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
        where = cwd or os.getcwd()
        sockets = command.sockets
        rules = Rules((), sockets)
        if spec is None:
            _check_runner(command)
        plan = plan_of(command, where, rules.encode() if spec is None else b"")
        if plan is not None:
            process = await self._spawn_prepared(plan, command, (stdin, stdout, stderr))
            if process is not None:
                return process
        # The usual way: a pair that confines itself now.
        request: dict[str, object] = {"argv": argv, "env": env, "cwd": where}
        roots: tuple[str, ...] = ()
        if spec is not None:
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
                return await self._started(pair, streams, kind)
        except _Unreachable as err:
            raise command.unavailable(str(err)) from err
        finally:
            os.close(memfd)
            for ruleset in rulesets:
                os.close(ruleset)

    async def _started(
        self, pair: _Pair, streams: _Streams, kind: bytes, prepared: Preparation | None = None
    ) -> ForkedProcess:
        """The process of a command ``pair`` has been handed (``prepared``: what the pair was
        prepared with, released once the command has ended)."""

        def ended() -> None:
            if prepared is not None:
                prepared.release()
            self._top_up_later(kind)

        try:
            out, err_stream = await streams.readers()
        except BaseException:
            # The command runs already: nobody would watch it, so stop it (the supervisor
            # sweeps) rather than leave it behind.
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pair.pidfd, signal.SIGTERM)
            pair.discard()
            if prepared is not None:
                prepared.release()  # popped from the prepared ones: nothing else would
            raise
        return ForkedProcess(pair, out, err_stream, ended)

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


def _release_prepared() -> None:
    """At exit: the private temp directories of pairs prepared for commands that will not
    come (the pairs themselves end with this process)."""
    for server in list(_made):
        for prepared in server._prepared.values():
            prepared.preparation.release()


atexit.register(_release_prepared)  # before the pool's own exit (registered at its import)


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
