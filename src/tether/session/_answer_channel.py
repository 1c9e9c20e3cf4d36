"""The approval socket: how ``tether approvals answer`` hands an answer to the waiting run.

Each wait listens on its own abstract Unix socket, named at random and announced in the wait
marker (:mod:`tether.session._answer_box`). Abstract sockets live in the network namespace, not
in the filesystem: bubblewrap gives a confined command a network namespace of its own, and
Landlock (ABI 6) scopes abstract sockets to the domain, so a confined command without network
cannot even connect. One that can (a command granted network) is refused by
:func:`~tether.session._peer_check.check_peer`, before the waiter reads a byte from it.

JSON lines. The waiter speaks first, once it has checked the peer: ``{"status": "ready"}``, or
``{"status": "refused", "detail"}`` and the connection closes (nothing is read from a refused
peer). A ready answerer sends ``{"approval_id", "outcome", "surface"}``; the waiter replies
``{"status": "accepted", "answered_by"}``, ``{"status": "answered"}`` (another answer came
first) or ``{"status": "refused", "detail"}`` (a message that is not an answer to this
approval). Who answered is written by the waiter from what the kernel said
(``SURFACE (user, pid N)``), never copied from the message.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from tether.errors import TetherError
from tether.session._peer_check import Peer, PeerProblem, PeerRefused, check_peer

ANSWERS: Final = ("allowed-once", "allowed-for-session", "allowed-always", "rejected")
CLI_SURFACE: Final = "tether approvals answer"
ANSWER_SURFACES: Final = (CLI_SURFACE,)
"""The tether surfaces that answer through the socket (chat answers in its own process)."""
SOCKET_PREFIX: Final = "tether-approval-"
MESSAGE_LIMIT: Final = 4096
"""Bytes in one message line; a longer line is malformed."""
EXCHANGE_SECONDS: Final = 10.0
"""How long either side waits for the other's line before giving up on the connection."""
BACKLOG: Final = 16

RefusalReason = PeerProblem | Literal["no-proof", "malformed"]
"""Why an answer counted for nothing: a :data:`~tether.session._peer_check.PeerProblem`;
``no-proof``, an answer left as a file in the answer box (answers come only through the
socket, whose peer is checked); ``malformed``, a checked peer that sent a message that is not
an answer to this approval."""


@dataclass(frozen=True, slots=True)
class Offer:
    """An answer from a checked peer."""

    outcome: str
    answered_by: str


@dataclass(frozen=True, slots=True)
class RefusedAnswer:
    """One answer that counted for nothing (recorded as ``approval/answer-refused``)."""

    via: Literal["socket", "answer-box"]
    reason: RefusalReason
    detail: str
    pid: int | None = None
    file: str | None = None
    """For ``answer-box``: the file's name in the box."""
    claimed_outcome: str | None = None
    """The outcome it tried to give, when it named one of :data:`ANSWERS`."""

    def fields(self) -> dict[str, str | int]:
        out: dict[str, str | int] = {"via": self.via, "reason": self.reason, "detail": self.detail}
        for key, value in (
            ("pid", self.pid),
            ("file", self.file),
            ("claimed_outcome", self.claimed_outcome),
        ):
            if value is not None:
                out[key] = value
        return out


class ApprovalNotDeliveredError(TetherError):
    """The answer could not be handed to the waiting run (nothing was decided)."""

    code = "APPROVAL_NOT_DELIVERED"


class ApprovalWaiterUntrustedError(TetherError):
    """The process listening for the answer is not one an answer may be given to."""

    code = "APPROVAL_WAITER_UNTRUSTED"


class ApprovalAnswerRefusedError(TetherError):
    """The waiting run refused this answer: it did not come from an unconfined surface."""

    code = "APPROVAL_ANSWER_REFUSED"


class ApprovalAlreadyAnsweredError(TetherError):
    code = "APPROVAL_ALREADY_ANSWERED"


def address(name: str) -> str:
    return "\0" + name


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


OfferHandler = Callable[[Offer], bool]
"""Takes a checked answer; ``False`` when an answer was already taken (first one wins)."""
RefusalHandler = Callable[[RefusedAnswer], None]


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    approval_id: str,
    take: OfferHandler,
    refuse: RefusalHandler,
) -> None:
    """One connection: check the peer, read its answer, reply. A peer that goes away or never
    speaks ends it quietly: nothing is taken from it."""
    try:
        sock = writer.get_extra_info("socket")
        peer = check_peer(sock, restrictions=True, outside_tree_of=os.getpid())
        if isinstance(peer, PeerRefused):
            refuse(RefusedAnswer("socket", peer.problem, peer.detail, pid=peer.pid))
            _reply(writer, {"status": "refused", "detail": peer.detail})
            return
        _reply(writer, {"status": "ready"})
        async with asyncio.timeout(EXCHANGE_SECONDS):
            line = await reader.readline()
        offer = _parse_offer(line, approval_id, peer)
        if isinstance(offer, str):
            refuse(RefusedAnswer("socket", "malformed", offer, pid=peer.pid))
            _reply(writer, {"status": "refused", "detail": offer})
        elif take(offer):
            _reply(writer, {"status": "accepted", "answered_by": offer.answered_by})
        else:
            _reply(writer, {"status": "answered"})
    except (OSError, TimeoutError, ValueError):
        pass
    finally:
        writer.close()


def _parse_offer(line: bytes, approval_id: str, peer: Peer) -> Offer | str:
    """The offer, or why the message is not an answer to ``approval_id``."""
    try:
        raw = json.loads(line)
    except ValueError:
        return "the message is not one line of JSON"
    if not isinstance(raw, dict):
        return "the message is not a JSON object"
    if raw.get("approval_id") != approval_id:
        return "the message answers another approval"
    outcome, surface = raw.get("outcome"), raw.get("surface")
    if outcome not in ANSWERS:
        return f"the outcome is not one of {', '.join(ANSWERS)}"
    if surface not in ANSWER_SURFACES:
        return f"the surface is not one of {', '.join(ANSWER_SURFACES)}"
    return Offer(str(outcome), f"{surface} ({_user(peer.uid)}, pid {peer.pid})")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _reply(writer: asyncio.StreamWriter, message: dict[str, str]) -> None:
    # write() hands the line to the transport at once and close() flushes it: nothing here
    # awaits, so a taken answer is acknowledged even if the wait ends right after.
    writer.write(json.dumps(message).encode() + b"\n")


def send_answer(name: str, expected_pid: int, approval_id: str, outcome: str, surface: str) -> str:
    """Hand one answer to the waiter listening on ``name``; the ``answered_by`` it recorded.

    The listener must be ``expected_pid`` (the wait marker's), of this uid and namespaces;
    otherwise nothing is sent (:class:`ApprovalWaiterUntrustedError`).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(EXCHANGE_SECONDS)
        try:
            sock.connect(address(name))
        except OSError as err:
            raise ApprovalNotDeliveredError(
                f"approval {approval_id}: the waiting run's socket is gone ({err.strerror}); "
                "it was answered meanwhile, or its process stopped waiting"
            ) from err
        # The waiter's restrictions are not compared with ours: a run may legitimately be
        # more hardened than the answering shell. A listener that is not the marker's process
        # could at most swallow the answer; the run then ends the ask unavailable.
        waiter = check_peer(sock, restrictions=False, outside_tree_of=None)
        if isinstance(waiter, PeerRefused) or waiter.pid != expected_pid:
            found = waiter.detail if isinstance(waiter, PeerRefused) else f"it is pid {waiter.pid}"
            raise ApprovalWaiterUntrustedError(
                f"approval {approval_id}: the process listening for its answer is not the run "
                f"that waits (pid {expected_pid}): {found}. Nothing was sent; check "
                "`tether approvals list`"
            )
        request = {"approval_id": approval_id, "outcome": outcome, "surface": surface}
        try:
            verdict = _read_line(sock)
            if _status(verdict) == "ready":
                sock.sendall(json.dumps(request).encode() + b"\n")
                verdict = _read_line(sock)
        except OSError as err:
            raise ApprovalNotDeliveredError(
                f"approval {approval_id}: the waiting run (pid {expected_pid}) did not answer "
                f"({err}); run `tether approvals list` to see whether it is still pending"
            ) from err
    return _answered_by(verdict, approval_id, expected_pid)


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n") and len(data) <= MESSAGE_LIMIT:
        chunk = sock.recv(MESSAGE_LIMIT)
        if not chunk:
            break
        data += chunk
    return data


def _message(line: bytes) -> dict[str, object]:
    try:
        raw = json.loads(line)
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}


def _status(line: bytes) -> object:
    return _message(line).get("status")


def _answered_by(reply: bytes, approval_id: str, pid: int) -> str:
    message = _message(reply)
    status = message.get("status")
    if status == "accepted":
        return str(message.get("answered_by", ""))
    if status == "answered":
        raise ApprovalAlreadyAnsweredError(f"approval {approval_id} was already answered")
    if status == "refused":
        raise ApprovalAnswerRefusedError(
            f"the run waiting for approval {approval_id} refused this answer: "
            f"{message.get('detail')}. Answer from a terminal outside every sandbox, as the "
            "user who started the run"
        )
    raise ApprovalNotDeliveredError(
        f"approval {approval_id}: the waiting run (pid {pid}) gave no usable reply; run "
        "`tether approvals list` to see whether it is still pending"
    )


__all__ = [
    "ANSWERS",
    "ANSWER_SURFACES",
    "CLI_SURFACE",
    "ApprovalAlreadyAnsweredError",
    "ApprovalAnswerRefusedError",
    "ApprovalNotDeliveredError",
    "ApprovalWaiterUntrustedError",
    "Offer",
    "RefusalReason",
    "RefusedAnswer",
    "listen",
    "send_answer",
    "serve_connection",
]
