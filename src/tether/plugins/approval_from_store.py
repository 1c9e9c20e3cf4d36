"""``approval_from_store``: wait for ``tether approvals answer`` from any process.

The answerer for headless runs that still want a human (``tether run --approval-from store``):
each request waits, without a timeout of its own (the approval service's timeout applies),
until an answer for its approval id appears in the store's answer box.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import Context, Next
from tether.policy.approval import Answer, ApprovalRequest, register_answerer
from tether.session.answer_box import AnswerBox


class ApprovalFromStoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    store: str = Field(min_length=1)
    """The store URL whose answer box to watch (the run's own store)."""


def asked_id(request: ApprovalRequest) -> str | None:
    asker = request.origin.child if request.origin is not None else request.agent
    asked = asker.session.last("approval/asked")
    return str(asked.data.get("id")) if asked is not None else None


class ApprovalFromStorePlugin:
    name = "approval_from_store"
    requires: tuple[str, ...] = ()
    config_model = ApprovalFromStoreConfig

    def apply(self, ctx: Context, config: ApprovalFromStoreConfig) -> None:
        box = AnswerBox.for_store(config.store)

        async def answer(request: ApprovalRequest, next_: Next) -> object:
            approval_id = asked_id(request)
            if approval_id is None:
                return await next_()
            boxed = await box.wait(approval_id, request.signal)
            return Answer(boxed.outcome, boxed.by)

        register_answerer(ctx, answer)


plugin: Final = ApprovalFromStorePlugin()
