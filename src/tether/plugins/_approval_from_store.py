"""``approval_from_store``: wait for ``tether approvals answer`` from another terminal.

The answerer for headless runs that still want a human (``tether run --approval-from store``).
Each request listens on its own approval socket, announced in the store's answer box
(:mod:`tether.session._answer_box`), until an unconfined ``tether approvals answer`` answers or
``timeout_seconds`` pass (then ``unavailable``, by the approval service's deadline rule).

While it waits, stderr says how to answer, and ends with what would run: an escalation's
mode, then the command or path in full, escaped (:func:`tether.plugins._headline.action_text`).
Every answer that counts for nothing (a file written into the answer box, a connection from a
confined or a run-started process) is recorded on the asking session's log, between the audit
pair, as ``approval/answer-refused {id, via, reason, detail, pid?, file?, claimed_outcome?}``,
and reported on stderr; the wait goes on.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Collection
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether._dirs import data_dir
from tether.errors import TetherError
from tether.kernel import SESSIONS_SERVICE, AnyServiceKey, Context, Next, PluginConfigError
from tether.kernel._printable import printable
from tether.plugins._headline import SEPARATOR, action_text
from tether.policy._approval import (
    Answer,
    ApprovalReply,
    ApprovalRequest,
    AskedAction,
    answer_within,
    register_answerer,
)
from tether.policy._events import ApprovalAnswerRefused, ApprovalAsked
from tether.policy._modes import ApprovalOutcome
from tether.session import Session, SessionStore
from tether.session._answer_box import AnswerBox
from tether.session._answer_channel import Asked, Offer, RefusedAnswer, answer_words
from tether.session._answer_wait import wait_for_answer
from tether.session._store_files import store_url_of
from tether.session.persistence._factory import store_location

DEFAULT_TIMEOUT_SECONDS: Final = 900.0


class ApprovalFromStoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    store: str | None = Field(default=None, min_length=1)
    """The run's own store URL (the default). Another store is refused: only the run's own
    store, answer box included, is hidden from the run's commands and file tools."""
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT_SECONDS, ge=0, allow_inf_nan=False)
    """How long one ask waits for an answer before it resolves ``unavailable``; 0 waits
    until answered."""


def asking_session(request: ApprovalRequest) -> Session:
    """The session whose log holds the audit pair (the child, for a routed question)."""
    return (request.origin.child if request.origin is not None else request.agent).session


def asked_id(request: ApprovalRequest) -> str | None:
    asked = asking_session(request).last(ApprovalAsked.TYPE)
    return ApprovalAsked.from_data(asked.data).id if asked is not None else None


def record_refusal(session: Session, approval_id: str, refusal: RefusedAnswer) -> None:
    """``approval/answer-refused`` on the asking session's log, between the audit pair: the
    one record of an answer that counted for nothing, whichever surface waited."""
    refused_event = ApprovalAnswerRefused(approval_id, refusal)
    session.append(refused_event.TYPE, refused_event.to_data())


def run_store_url(ctx: Context) -> str | None:
    """The URL of the run's store (``sessions`` service), or ``None`` for a store tether
    cannot name: its answer box is beside it, and nobody could find a wait in another."""
    sessions = ctx.get(SESSIONS_SERVICE)
    return store_url_of(sessions.persistence) if isinstance(sessions, SessionStore) else None


def answer_command(approval_id: str, store: str, outcomes: Collection[str]) -> str:
    """What to type in another terminal to give one of ``outcomes`` (what the question
    offers); ``--store`` unless the store is the default one."""
    command = f"tether approvals answer {approval_id} {answer_words(outcomes)}"
    scheme, path = store_location(store)
    if (scheme, path) != ("sqlite", data_dir() / "tether.db"):
        command += f" --store {shlex.quote(store)}"
    return command


def wait_hint(approval_id: str, action: AskedAction, command: str, limit: str) -> str:
    """``approval ID ("bash") waits for an answer; from another terminal: COMMAND (LIMIT) ·
    escalate to MODE · Command: …``: what the ask would run comes last, the command or path in
    full and escaped, so nothing after it can be taken for it."""
    text = (
        f'approval {approval_id} ("{printable(action.tool)}") waits for an answer; from '
        f"another terminal: {command} ({limit})"
    )
    what = action_text(action)
    return f"{text}{SEPARATOR}{what}" if what else text


def _say(text: str) -> None:
    # One line per fact: scripts and humans read a headless run's stderr line by line, and a
    # fact may quote what a confined command wrote (a file name in the answer box), so it is
    # escaped whole. The line is advice: a closed stderr must not turn an ask into a failure.
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"tether: {printable(text)}\n")
        sys.stderr.flush()


class ApprovalFromStorePlugin:
    name = "approval_from_store"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = ApprovalFromStoreConfig

    def apply(self, ctx: Context, config: ApprovalFromStoreConfig) -> None:
        store = _own_store(ctx, config.store)
        box = AnswerBox.for_store(store)
        seconds = config.timeout_seconds or None

        async def answer(request: ApprovalRequest, next_: Next[ApprovalReply]) -> ApprovalReply:
            approval_id = asked_id(request)
            if approval_id is None:
                return await next_()
            session = asking_session(request)

            def refused(refusal: RefusedAnswer) -> None:
                record_refusal(session, approval_id, refusal)
                _say(f"refused an answer to approval {approval_id}: {refusal.detail}")

            limit = (
                f"unanswered, it resolves unavailable in {seconds:g} s"
                if seconds is not None
                else "it waits until answered"
            )
            hint = wait_hint(
                approval_id,
                AskedAction.of(request),
                answer_command(approval_id, store, request.outcomes()),
                limit,
            )
            try:
                got = await answer_within(
                    seconds,
                    wait_for_answer(
                        box,
                        approval_id,
                        on_refused=refused,
                        on_waiting=lambda: _say(hint),
                        signal=request.signal,
                        asked=Asked(session.id, request.tool_name),
                        offered=request.outcomes(),
                    ),
                    request.tool_name,
                )
            except TetherError as err:
                _say(f"approval {approval_id} cannot wait for an answer: {err.code}: {err}")
                return ApprovalOutcome.UNAVAILABLE
            if isinstance(got, Offer):
                return Answer(got.outcome, got.answered_by)
            _say(f"approval {approval_id} was not answered within {seconds:g} s: unavailable")
            return got

        register_answerer(ctx, answer)


def _own_store(ctx: Context, configured: str | None) -> str:
    """The URL of the run's store (``sessions`` service); a configured one must name it."""
    own = run_store_url(ctx)
    if own is None:
        raise PluginConfigError(
            "approval_from_store needs the run's session store to be a sqlite:// or jsonl:// "
            "store (its answer box lives beside it)"
        )
    if configured is not None and store_location(configured) != store_location(own):
        raise PluginConfigError(
            f"approval_from_store: store {configured!r} is not the run's store {own!r}; only "
            "the run's own answer box is hidden from its commands (leave store out)"
        )
    return own


plugin: Final = ApprovalFromStorePlugin()
