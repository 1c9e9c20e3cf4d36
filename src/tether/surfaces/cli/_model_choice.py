"""The model a user chose for a root session, recorded in its log and reused on resume.

``session/model {model, stream?, model_timeout?}`` is written once, into a new root session
before its first turn, when the user named a model (``--model`` or ``TETHER_MODEL``) or a
model setting (``--no-stream``, ``--model-timeout``). It is ``ignorable``: a reader that does
not know it loads the session all the same.

On resume the recorded name is resolved through the user's configuration exactly as
``--model NAME`` would be (``Harness.open(model=...)``): a log holds only a name, never a
``base_url`` or a key, so a recorded choice (or an imported session's) cannot make tether
call a server the user's configuration does not define. A flag given on the resuming command
line wins over the record.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tether.session._events import Event
from tether.session._session import Session
from tether.surfaces.cli._common import opened_store
from tether.surfaces.cli._id_prefix import resolve_session_id

MODEL_EVENT = "session/model"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    model: str | None = None
    """A model spec (``KIND:TARGET``) or a configured model's name."""
    stream: bool | None = None
    """``False`` for ``--no-stream``; ``None``: the model's configuration decides."""
    model_timeout: float | None = None

    def __bool__(self) -> bool:
        return self.model is not None or self.stream is not None or self.model_timeout is not None

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {}
        if self.model is not None:
            data["model"] = self.model
        if self.stream is not None:
            data["stream"] = self.stream
        if self.model_timeout is not None:
            data["model_timeout"] = self.model_timeout
        return data

    @classmethod
    def parse(cls, data: Mapping[str, object]) -> ModelChoice:
        """What of a recorded choice is well formed; anything else reads as not recorded."""
        model, stream, timeout = data.get("model"), data.get("stream"), data.get("model_timeout")
        return cls(
            model if isinstance(model, str) and model.strip() else None,
            stream if isinstance(stream, bool) else None,
            float(timeout)
            if isinstance(timeout, int | float)
            and not isinstance(timeout, bool)
            and math.isfinite(timeout)
            and timeout > 0
            else None,
        )

    def over(self, recorded: ModelChoice) -> ModelChoice:
        """This (the command line's) choice, each unset part taken from ``recorded``."""
        return ModelChoice(
            self.model if self.model is not None else recorded.model,
            self.stream if self.stream is not None else recorded.stream,
            self.model_timeout if self.model_timeout is not None else recorded.model_timeout,
        )


def record_model_choice(session: Session, choice: ModelChoice) -> None:
    if choice:
        session.append(MODEL_EVENT, choice.to_data(), ignorable=True)


def recorded_model_choice(events: Sequence[Event]) -> ModelChoice:
    """The last recorded choice of a session's own events (none: an empty choice)."""
    for event in reversed(events):
        if event.type == MODEL_EVENT:
            return ModelChoice.parse(event.data)
    return ModelChoice()


async def resume_target(store: str, wanted: str, workspace: str) -> tuple[str, ModelChoice]:
    """The session ``wanted`` names (id, unique prefix or ``last``) and its recorded choice,
    read before the harness opens so the resumed session's model is the one composed."""
    # Opened as the run will open it: resuming in a fresh store is SESSION_NOT_FOUND.
    async with opened_store(store) as persistence:
        session_id = await resolve_session_id(persistence, wanted, workspace=workspace)
        stored = await persistence.inspect(session_id)
    own = stored.events[stored.header.seed_length or 0 :]
    return session_id, recorded_model_choice(own)


async def model_for_run(
    store: str,
    resume: str | None,
    workspace: str,
    model: str | None,
    stream: bool | None,
    model_timeout: float | None,
) -> tuple[ModelChoice, str | None, ModelChoice]:
    """What ``run`` and ``chat`` compose: the choice a new root records (the command line's,
    ``TETHER_MODEL`` standing in for ``--model``), the session to resume (resolved from an id,
    a prefix or ``last``), and the choice to open the harness with (the command line's, each
    unset part taken from the resumed session's record)."""
    chosen = ModelChoice(model or os.environ.get("TETHER_MODEL"), stream, model_timeout)
    if resume is None:
        return chosen, None, ModelChoice(model, stream, model_timeout)
    resume, recorded = await resume_target(store, resume, workspace)
    return chosen, resume, ModelChoice(model, stream, model_timeout).over(recorded)
