"""The approval socket's protocol: how ``tether approvals answer`` hands an answer to the surface
waiting for it (``tether run --approval-from store``, ``tether chat``).

Each wait listens on its own abstract Unix socket, named at random and announced in the wait
marker (:mod:`tether.session._answer_box`; the listening side is
:mod:`tether.session._answer_wait`). Abstract sockets live in the network namespace, not in
the filesystem: bubblewrap gives a confined command a network namespace of its own, and
Landlock (ABI 6) scopes abstract sockets to the domain, so a confined command without network
cannot even connect. One that can (a command granted network) is refused by
:func:`~tether.session._peer_check.check_peer`, before the waiter reads a byte from it.

JSON lines. The waiter speaks first, once it has checked the peer: ``{"status": "ready"}``, or
``{"status": "refused", "detail"}`` and the connection closes (nothing is read from a refused
peer). A ready answerer sends an :class:`AnswerMessage` ``{"approval_id", "outcome",
"surface"}``; the waiter replies ``{"status": "accepted", "answered_by", "session", "tool_name"}``,
``{"status": "answered", "outcome", "answered_by"}`` (another answer came first) or ``{"status":
"refused", "detail", "offered"}`` (a message that is not an answer to this approval; ``offered``,
the outcomes the question takes, and still waits for). Who answered is written by the waiter from
what the kernel said (``SURFACE (user, pid N)``), never copied from the message.

This module is the one home of the message format and of what counts as an answer
(:func:`answer_outcome`): both sides, and the report of a file in the answer box that claims an
outcome, go through it. It is also the whole answering side, kept to the standard library so
that ``tether approvals answer`` starts fast: no event loop, no store (and its records are
named tuples: making dataclasses would cost that command a fifth of its start-up).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Collection, Mapping
from typing import Final, Literal, NamedTuple

from tether.errors import TetherError
from tether.session._peer_check import PeerProblem, PeerRefused, check_peer

ANSWER_WORDS: Final = {
    "allow": "allowed-once",
    "allow-session": "allowed-for-session",
    "allow-always": "allowed-always",
    "reject": "rejected",
}
"""How ``tether approvals answer`` spells each outcome an answer may give."""
ANSWERS: Final = tuple(ANSWER_WORDS.values())
"""The outcomes an answer may give (one that grants takes the narrowest scope the question
offers; the approval service refuses a grant it did not offer)."""
CLI_SURFACE: Final = "tether approvals answer"
ANSWER_SURFACES: Final = (CLI_SURFACE,)
"""The tether surfaces that answer through the socket (chat and the run prompt answer in their
own process, on the waiting side)."""
SOCKET_PREFIX: Final = "tether-approval-"
MESSAGE_LIMIT: Final = 4096
"""Bytes in one message line; a longer line is malformed."""
EXCHANGE_SECONDS: Final = 10.0
"""How long either side waits for the other's line before giving up on the connection."""

ReplyStatus = Literal["ready", "refused", "accepted", "answered"]
RefusalReason = PeerProblem | Literal["no-proof", "malformed"]
"""Why an answer counted for nothing: a :data:`~tether.session._peer_check.PeerProblem`;
``no-proof``, an answer left as a file in the answer box (answers come only through the
socket, whose peer is checked); ``malformed``, a checked peer that sent a message that is not
an answer to this approval."""


def answer_words(outcomes: Collection[str] = ANSWERS) -> str:
    """``allow|reject``: the words of ``tether approvals answer`` that give ``outcomes``."""
    return "|".join(word for word, outcome in ANSWER_WORDS.items() if outcome in outcomes)


def answer_outcome(value: object) -> str | None:
    """``value`` when it is an outcome an answer may give (:data:`ANSWERS`), else ``None``: the
    one check every answer goes through, on either side of the socket."""
    return value if isinstance(value, str) and value in ANSWERS else None


class AnswerMessage(NamedTuple):
    """What an answerer sends once the waiter is ready."""

    approval_id: str
    outcome: str
    surface: str

    def encode(self) -> bytes:
        fields = {"approval_id": self.approval_id, "outcome": self.outcome, "surface": self.surface}
        return json.dumps(fields).encode() + b"\n"

    @classmethod
    def parse(
        cls, line: bytes, approval_id: str, offered: Collection[str] = ANSWERS
    ) -> AnswerMessage | str:
        """The message, or why it is not an answer to ``approval_id``, whose question offers
        the outcomes ``offered`` (a grant where it offers none is no answer to it)."""
        try:
            raw = json.loads(line)
        except ValueError:
            return "the message is not one line of JSON"
        if not isinstance(raw, dict):
            return "the message is not a JSON object"
        if raw.get("approval_id") != approval_id:
            return "the message answers another approval"
        outcome, surface = answer_outcome(raw.get("outcome")), raw.get("surface")
        if outcome is None:
            return f"the outcome is not one of {', '.join(ANSWERS)}"
        if outcome not in offered:
            return f"this question offers no {outcome} (it takes {', '.join(offered)})"
        if surface not in ANSWER_SURFACES:
            return f"the surface is not one of {', '.join(ANSWER_SURFACES)}"
        return cls(approval_id, outcome, str(surface))


class Offer(NamedTuple):
    """An answer that counts: from a checked peer, or from the waiting surface's own user."""

    outcome: str
    answered_by: str


class Asked(NamedTuple):
    """What the waiter tells an answerer about the ask it answered (the waiting process is the
    one the wait marker names, so its word is the run's)."""

    session_id: str
    tool_name: str


class Delivered(NamedTuple):
    """An answer the waiter took: who it recorded as answering, and the ask."""

    answered_by: str
    asked: Asked | None
    """``None`` when the waiter did not say (it is not required to)."""


class RefusedAnswer(NamedTuple):
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


def already_answered(approval_id: str, outcome: object, by: object) -> ApprovalAlreadyAnsweredError:
    """``approval ID was already answered (allowed-once, by WHO): this answer came too late``;
    what the first answer was, when the waiter or its record said."""
    known = answer_outcome(outcome)
    first = f" ({known}, by {by})" if known is not None and isinstance(by, str) and by else ""
    return ApprovalAlreadyAnsweredError(
        f"approval {approval_id} was already answered{first}: this answer came too late"
    )


def address(name: str) -> str:
    return "\0" + name


def reply(status: ReplyStatus, **fields: str | list[str]) -> bytes:
    """One of the waiter's lines."""
    return json.dumps({"status": status, **fields}).encode() + b"\n"


def send_answer(name: str, expected_pid: int, message: AnswerMessage) -> Delivered:
    """Hand one answer to the waiter listening on ``name``.

    The listener must be ``expected_pid`` (the wait marker's), of this uid and namespaces;
    otherwise nothing is sent (:class:`ApprovalWaiterUntrustedError`).
    """
    approval_id = message.approval_id
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
        # more hardened than the answering shell. The pid comes from the wait marker, so this
        # check holds only while nothing but tether writes the box: the box is among the
        # store's files, which every run hides from its commands and file tools (a marker
        # planted by a process that could write there could name its own listener, swallow
        # the answer and send back a confirmation of its own).
        waiter = check_peer(sock, restrictions=False, outside_tree_of=None)
        if isinstance(waiter, PeerRefused) or waiter.pid != expected_pid:
            found = waiter.detail if isinstance(waiter, PeerRefused) else f"it is pid {waiter.pid}"
            raise ApprovalWaiterUntrustedError(
                f"approval {approval_id}: the process listening for its answer is not the run "
                f"that waits (pid {expected_pid}): {found}. Nothing was sent; check "
                "`tether approvals list`"
            )
        try:
            verdict = _read_message(sock)
            if verdict.get("status") == "ready":
                sock.sendall(message.encode())
                verdict = _read_message(sock)
        except OSError as err:
            raise ApprovalNotDeliveredError(
                f"approval {approval_id}: the waiting run (pid {expected_pid}) did not answer "
                f"({err}); run `tether approvals list` to see whether it is still pending"
            ) from err
    return _delivered(verdict, approval_id, expected_pid)


def _read_message(sock: socket.socket) -> Mapping[str, object]:
    data = b""
    while not data.endswith(b"\n") and len(data) <= MESSAGE_LIMIT:
        chunk = sock.recv(MESSAGE_LIMIT)
        if not chunk:
            break
        data += chunk
    try:
        raw = json.loads(data)
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}


def _delivered(message: Mapping[str, object], approval_id: str, pid: int) -> Delivered:
    status = message.get("status")
    if status == "accepted":
        session, tool = message.get("session"), message.get("tool_name")
        asked = Asked(session, tool) if isinstance(session, str) and isinstance(tool, str) else None
        return Delivered(str(message.get("answered_by", "")), asked)
    if status == "answered":
        raise already_answered(approval_id, message.get("outcome"), message.get("answered_by"))
    if status == "refused":
        offered = message.get("offered")
        words = answer_words(offered) if isinstance(offered, list) else ""
        step = (
            f"; it still waits: answer it with {words}"
            if words
            else ". Answer from a terminal outside every sandbox, as the user who started the run"
        )
        raise ApprovalAnswerRefusedError(
            f"the run waiting for approval {approval_id} refused this answer: "
            f"{message.get('detail')}{step}"
        )
    raise ApprovalNotDeliveredError(
        f"approval {approval_id}: the waiting run (pid {pid}) gave no usable reply; run "
        "`tether approvals list` to see whether it is still pending"
    )


__all__ = [
    "ANSWERS",
    "ANSWER_SURFACES",
    "ANSWER_WORDS",
    "CLI_SURFACE",
    "AnswerMessage",
    "ApprovalAlreadyAnsweredError",
    "ApprovalAnswerRefusedError",
    "ApprovalNotDeliveredError",
    "ApprovalWaiterUntrustedError",
    "Asked",
    "Delivered",
    "Offer",
    "RefusalReason",
    "RefusedAnswer",
    "already_answered",
    "answer_outcome",
    "answer_words",
    "reply",
    "send_answer",
]
