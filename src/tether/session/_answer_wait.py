"""Waiting for an approval's answer from another process: the listening side of the answer box.

A :class:`BoxWait` is one approval that can be answered from anywhere while it lasts. On entry
it watches the box, reports any file already there that claims to answer it, listens on a new
approval socket (:mod:`tether.session._answer_channel`) and announces it in the wait marker
(:mod:`tether.session._answer_box`). An answer wakes it at once: the connection arrives on
the event loop, the peer is checked (:func:`~tether.session._peer_check.check_peer`), and the
first answer that counts settles :attr:`BoxWait.decided`. The surface that waits may settle
that same future itself (a key pressed in ``tether chat``): whichever comes first is the
answer, and a later one is told so.

Nothing in the box is an answer. A file named for this approval (``<id>.json``, the format of
earlier versions, or anything ``<id>.*`` that is not this wait's own marker) is reported as a
refused answer when it appears: the kernel says so (inotify, :mod:`tether.session._dir_watch`);
nothing looks on a timer unless inotify is unavailable (:data:`SCAN_SECONDS`). On exit the
marker is removed and a taken answer recorded, so later answerers learn they came too late.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import socket
from collections.abc import Callable, Collection
from pathlib import Path
from types import TracebackType
from typing import Final

from tether._signals import AbortedError, AbortSignal, cancel_and_wait, race
from tether.session._answer_box import (
    AnswerBox,
    BoxedAnswer,
    FileIdentity,
    WaitMarker,
    file_identity,
    host_name,
    read_small_json,
)
from tether.session._answer_channel import (
    ANSWERS,
    EXCHANGE_SECONDS,
    MESSAGE_LIMIT,
    SOCKET_PREFIX,
    AnswerMessage,
    Asked,
    Offer,
    RefusedAnswer,
    address,
    answer_outcome,
    reply,
)
from tether.session._dir_watch import DirWatch
from tether.session._peer_check import PeerRefused, check_peer
from tether.session._session import wall_clock_ms

SCAN_SECONDS: Final = 0.25
"""Without inotify only: how often a waiter looks for answer files in the box (to report
them, never to take them)."""
SETTLE_SECONDS: Final = 0.05
"""How long a waiter lets a file planted for its approval be written before it looks (a file
is created empty, then written): the report then says what the file claimed."""
REFUSALS_RECORDED: Final = 20
"""Refused answers reported per wait; the last one reported says that later ones are not."""
BACKLOG: Final = 16

RefusalHandler = Callable[[RefusedAnswer], None]

NO_PROOF: Final = (
    "a file in the answer box is never an answer: answers come only from "
    "`tether approvals answer`, through the waiting run's socket"
)


class BoxWait:
    """One approval, answerable from another process while the ``async with`` lasts."""

    def __init__(
        self,
        box: AnswerBox,
        approval_id: str,
        *,
        on_refused: RefusalHandler,
        asked: Asked | None = None,
        decided: asyncio.Future[Offer] | None = None,
        offered: Collection[str] = ANSWERS,
    ) -> None:
        """``asked`` is told to the answerer that is accepted; ``decided`` is the future the
        waiting surface settles itself when its own user answers (one is made otherwise);
        ``offered``, the outcomes the question takes (an answer giving another is refused, and
        the question keeps waiting)."""
        self.box = box
        box.path(approval_id)  # refuses what cannot name an approval
        self.approval_id = approval_id
        self.asked = asked
        self.offered = offered
        self._given = decided
        self._refusals = _Refusals(on_refused)
        self._seen: set[tuple[str, FileIdentity]] = set()
        self._ours: FileIdentity | None = None
        self._watch: DirWatch | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._looking: asyncio.Task[None] | None = None
        self.scans = 0
        """How many times the box was looked at (entries listed or named ones checked):
        once on entry, then once per change the kernel reported about this approval."""
        self._decided: asyncio.Future[Offer] | None = None

    @property
    def decided(self) -> asyncio.Future[Offer]:
        assert self._decided is not None, "the wait has not begun"
        return self._decided

    def take(self, offer: Offer) -> bool:
        """Settle the wait with ``offer``; ``False`` when an answer was already taken."""
        if self.decided.done():
            return False
        self.decided.set_result(offer)
        return True

    async def answer(self) -> Offer:
        """The first answer taken (a failure to report a refused answer ends the wait)."""
        looking = self._looking
        assert looking is not None, "the wait has not begun"
        either: set[asyncio.Future[Offer] | asyncio.Task[None]] = {self.decided, looking}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not self.decided.done():
            looking.result()  # it only ever ends by failing: raise that
        return self.decided.result()

    async def __aenter__(self) -> BoxWait:
        self._decided = self._given or asyncio.get_running_loop().create_future()
        self.box.prepare()
        # The watch begins before the first look, so nothing planted in between is missed.
        self._watch = DirWatch.open(self.box.directory)
        try:
            await self._scan(None)
            sock, name = listen()
            self._server = await asyncio.start_unix_server(
                self._serve, sock=sock, limit=MESSAGE_LIMIT
            )
            self._ours = self.box.write_marker(
                self.approval_id, WaitMarker(os.getpid(), host_name(), name)
            )
            self._looking = asyncio.ensure_future(self._look())
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        decided = self.decided
        if decided.done() and not decided.cancelled():
            offer = decided.result()
            if answer_outcome(offer.outcome) is not None:
                # Recorded before the marker goes: an answerer never finds neither.
                self.box.leave_answered(
                    self.approval_id, BoxedAnswer(offer.outcome, offer.answered_by, wall_clock_ms())
                )
        await self._close()

    async def _close(self) -> None:
        # What must not be left behind goes first, with nothing awaited: a second
        # cancellation while the tasks below stop must not leave the marker up.
        if self._ours is not None:
            self.box.remove_marker(self.approval_id, self._ours)
        if self._server is not None:
            self._server.close()
        tasks = [*self._connections, *([self._looking] if self._looking is not None else [])]
        for task in tasks:
            task.cancel()
        try:
            for task in tasks:
                await cancel_and_wait(task)
        finally:
            if self._watch is not None:
                self._watch.close()  # once nothing reads it

    # -- files in the box --------------------------------------------------------------------
    async def _look(self) -> None:
        """Report files that claim to answer, as the kernel says they appear."""
        watch = self._watch
        while True:
            if watch is None or watch.lost:
                await asyncio.sleep(SCAN_SECONDS)
                await self._scan(None)
                continue
            names = await watch.changed()
            mine = None if names is None else self._mine(names)
            if mine == {self._marker_name} and self._marker_is_ours():
                continue  # this wait's own marker being written
            if mine == set():
                continue
            await asyncio.sleep(SETTLE_SECONDS)
            later = watch.read_now()
            if mine is not None and later is not None:
                await self._scan(sorted(mine | self._mine(later)))
            else:
                await self._scan(None)

    def _mine(self, names: list[str]) -> set[str]:
        return {n for n in names if n.startswith(f"{self.approval_id}.")}

    @property
    def _marker_name(self) -> str:
        return self.box.path(self.approval_id).name

    def _marker_is_ours(self) -> bool:
        try:
            return file_identity(self.box.path(self.approval_id).lstat()) == self._ours
        except OSError:
            return False

    async def _scan(self, names: list[str] | None) -> None:
        self.scans += 1
        # In a thread: the box may be on a slow filesystem.
        found = await asyncio.to_thread(self._claims, names)
        for refused in found:
            self._refusals.add(refused)

    def _claims(self, names: list[str] | None) -> list[RefusedAnswer]:
        """Each file among ``names`` (``None``: every entry) that claims to answer this
        approval, once per file."""
        prefix = f"{self.approval_id}."
        if names is None:
            try:
                names = [n for n in os.listdir(self.box.directory) if n.startswith(prefix)]
            except OSError:
                return []
        found = []
        marker = self._marker_name
        for name in sorted(set(names)):
            path = self.box.directory / name
            try:
                st = path.lstat()
            except OSError:
                continue
            key = (name, file_identity(st))
            if key in self._seen or (name == marker and key[1] == self._ours):
                continue
            self._seen.add(key)
            found.append(
                RefusedAnswer(
                    "answer-box", "no-proof", NO_PROOF, file=name, claimed_outcome=_claimed(path)
                )
            )
        return found

    # -- the socket --------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: check the peer, read its answer, reply. A peer that goes away or
        never speaks ends it quietly: nothing is taken from it."""
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            peer = check_peer(
                writer.get_extra_info("socket"), restrictions=True, outside_tree_of=os.getpid()
            )
            if isinstance(peer, PeerRefused):
                self._refusals.add(RefusedAnswer("socket", peer.problem, peer.detail, peer.pid))
                writer.write(reply("refused", detail=peer.detail))
                return
            # write() hands each line to the transport at once and close() flushes it:
            # nothing here awaits after a take, so it is acknowledged even if the wait ends.
            writer.write(reply("ready"))
            async with asyncio.timeout(EXCHANGE_SECONDS):
                line = await reader.readline()
            message = AnswerMessage.parse(line, self.approval_id, self.offered)
            if isinstance(message, str):
                self._refusals.add(RefusedAnswer("socket", "malformed", message, peer.pid))
                writer.write(reply("refused", detail=message, offered=list(self.offered)))
                return
            offer = Offer(message.outcome, f"{message.surface} ({_user(peer.uid)}, pid {peer.pid})")
            if self.take(offer):
                asked = self.asked
                about = {"session": asked.session_id, "tool_name": asked.tool_name} if asked else {}
                writer.write(reply("accepted", answered_by=offer.answered_by, **about))
            else:
                first = self.decided.result()
                writer.write(
                    reply("answered", outcome=first.outcome, answered_by=first.answered_by)
                )
        except (OSError, TimeoutError, ValueError):
            pass
        finally:
            writer.close()
            self._connections.discard(task)


async def wait_for_answer(
    box: AnswerBox,
    approval_id: str,
    *,
    on_refused: RefusalHandler,
    on_waiting: Callable[[], None] | None = None,
    signal: AbortSignal | None = None,
    asked: Asked | None = None,
    offered: Collection[str] = ANSWERS,
) -> Offer:
    """Wait until a checked surface answers (cancellable through ``signal`` or the task).
    ``on_waiting`` runs once the marker is up (an answer can be given from then on). Every
    answer that counts for nothing goes to ``on_refused`` (at most :data:`REFUSALS_RECORDED`
    of them) and never ends the wait."""
    async with BoxWait(
        box, approval_id, on_refused=on_refused, asked=asked, offered=offered
    ) as waiting:
        if on_waiting is not None:
            on_waiting()
        try:
            return await race(signal, waiting.answer())
        except AbortedError:
            raise asyncio.CancelledError from None


def listen() -> tuple[socket.socket, str]:
    """A listening socket under a fresh random name (the name, without the leading NUL)."""
    while True:
        name = SOCKET_PREFIX + secrets.token_hex(16)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(address(name))
        except OSError:
            sock.close()  # taken (by chance, or by someone who guessed 128 random bits)
            continue
        sock.listen(BACKLOG)
        sock.setblocking(False)
        return sock, name


class _Refusals:
    def __init__(self, handler: RefusalHandler) -> None:
        self.handler = handler
        self.count = 0

    def add(self, refused: RefusedAnswer) -> None:
        self.count += 1
        if self.count < REFUSALS_RECORDED:
            self.handler(refused)
        elif self.count == REFUSALS_RECORDED:
            self.handler(
                refused._replace(
                    detail=refused.detail + " (later refused answers to this "
                    "approval are not recorded)"
                )
            )


def _claimed(path: Path) -> str | None:
    raw = read_small_json(path)
    return answer_outcome(raw.get("outcome")) if isinstance(raw, dict) else None


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


__all__ = ["NO_PROOF", "SCAN_SECONDS", "BoxWait", "RefusalHandler", "listen", "wait_for_answer"]
