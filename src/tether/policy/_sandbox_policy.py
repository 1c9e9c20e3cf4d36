"""The sandbox policy home: ``sandbox/mode`` events, resolution, and the ``sandbox:policy`` context.

A session's mode is a last-event-wins fold over its ``sandbox/mode`` events.
:meth:`SandboxPolicyService.resolve` turns that fold, an optional per-call grant and the
deployment default into the :class:`SandboxExecutionPolicy` a tool stamps on one call, so
executors never read session state. :meth:`SandboxPolicyService.set_sandbox_mode` is the only
write path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import AnyServiceKey, Context, ServiceKey
from tether.kernel._real_path import real_path
from tether.policy._errors import InvalidModeError, InvalidPolicyConfigError, InvalidSourceError
from tether.policy._events import SandboxModeSet
from tether.policy._modes import PolicySource, SandboxMode, parse_policy_source, parse_sandbox_mode
from tether.policy._protocols import HasSession
from tether.session import Event, Session

SANDBOX_POLICY_SERVICE: Final[ServiceKey[SandboxPolicyService]] = ServiceKey("sandbox_policy")
SANDBOX_CONTEXT_NAME: Final = "sandbox:policy"
SANDBOX_CONTEXT_ORDER: Final = 110

# Deliberately capability-neutral: a label alone made models refuse
# work pre-emptively, so the text tells them to try the tool and follow its denial guidance.
_TRY_THE_TOOL = (
    "Do not refuse a task from this label alone: try the tool and follow its denial and "
    "escalation guidance."
)


@dataclass(frozen=True, slots=True)
class SandboxExecutionPolicy:
    """The policy one call runs under. It travels with the call, not with the provider, so two
    callers may confine under different modes at the same moment."""

    mode: SandboxMode
    workspace_root: str
    """Canonical (realpath) workspace root."""
    session_id: str | None = None


def fold_sandbox_mode(events: Iterable[Event]) -> SandboxMode | None:
    """The mode of the last ``sandbox/mode`` event, or ``None``. Never the deployment default.

    A stored event with a mode outside the vocabulary raises :class:`InvalidModeError`: guessing
    could widen what a resumed session may do.
    """
    last: Event | None = None
    for event in events:
        if event.type == SandboxModeSet.TYPE:
            last = event
    return None if last is None else _mode_of(last)


def _mode_of(event: Event) -> SandboxMode:
    try:
        return SandboxModeSet.from_data(event.data).mode
    except (InvalidModeError, InvalidSourceError) as err:
        raise type(err)(f"sandbox/mode event #{event.seq}: {err}") from err


class SandboxPolicyService:
    """Service ``sandbox_policy``.

    ``default_mode`` is the deployment default (used only when neither a grant nor the session
    says otherwise). ``workspace_root`` is used when a session header has no ``cwd``; a relative
    root is pinned against the process cwd at construction.
    """

    def __init__(
        self,
        default_mode: SandboxMode | str = SandboxMode.READ_ONLY,
        workspace_root: str | None = None,
    ) -> None:
        self.default_mode = parse_sandbox_mode(default_mode)
        if workspace_root is not None and (
            not isinstance(workspace_root, str) or not workspace_root
        ):
            raise InvalidPolicyConfigError(
                f"workspace_root must be a non-empty path, got {workspace_root!r}"
            )
        self.workspace_root = os.path.abspath(workspace_root or os.getcwd())

    # -- reading -------------------------------------------------------------------------
    def override_of(self, session: Session) -> SandboxMode | None:
        """The session's own mode (its last ``sandbox/mode``), or ``None``."""
        last = session.last(SandboxModeSet.TYPE)
        return None if last is None else _mode_of(last)

    def resolve(
        self, session: Session | None = None, granted_mode: SandboxMode | str | None = None
    ) -> SandboxExecutionPolicy:
        """Precedence: ``granted_mode`` (one approved call) > session override > default."""
        if granted_mode is not None:
            mode = parse_sandbox_mode(granted_mode)
        else:
            override = None if session is None else self.override_of(session)
            mode = self.default_mode if override is None else override
        cwd = session.header.cwd if session is not None else None
        root = real_path(cwd or self.workspace_root)
        return SandboxExecutionPolicy(mode, root, None if session is None else session.id)

    # -- writing -------------------------------------------------------------------------
    @staticmethod
    def set_sandbox_mode(
        session: Session, mode: SandboxMode | str, source: PolicySource | None = None
    ) -> Event:
        """Append exactly one ``sandbox/mode {mode, source?}``: the only way to change a mode.

        It takes effect on the next confined call and the next context assembly; no notice is
        injected for sandbox switches. It needs no service state, so a delegation can record a
        capped child's mode (``source="delegation"``) even where no sandbox policy service is
        composed.
        """
        event = SandboxModeSet(parse_sandbox_mode(mode), parse_policy_source(source))
        return session.append(event.TYPE, event.to_data())

    # -- runtime context -----------------------------------------------------------------
    def context_text(self, agent: HasSession | None) -> str:
        """The ``sandbox:policy`` contribution for ``agent`` (``""`` when agentless)."""
        if agent is None:
            return ""
        return sandbox_context_text(self.resolve(agent.session))


def sandbox_context_text(policy: SandboxExecutionPolicy) -> str:
    """The runtime-context sentence for one resolved policy. It depends only on the mode and the
    canonical workspace root, so it is byte-stable while those are (TMPDIR never enters it)."""
    prefix = f"Current tether file policy: {policy.mode.value}."
    if policy.mode is SandboxMode.READ_ONLY:
        return (
            f"{prefix} Commands and file tools run under a sandbox that cannot modify files. "
            f"{_TRY_THE_TOOL}"
        )
    if policy.mode is SandboxMode.WORKSPACE_WRITE:
        root = json.dumps(policy.workspace_root, ensure_ascii=False)
        return (
            f"{prefix} Commands and file tools may modify files under the session workspace: "
            f"{root}. Some platform temp areas may also be writable. {_TRY_THE_TOOL}"
        )
    return f"{prefix} The sandbox does not restrict file modifications."


# -- plugin ------------------------------------------------------------------------------
class SandboxPolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: SandboxMode = SandboxMode.READ_ONLY
    """The deployment default mode."""
    workspace_root: str | None = Field(default=None, min_length=1)
    """Workspace root for sessions without a ``cwd`` (default: the process cwd at load)."""


class SandboxPolicyPlugin:
    """Provides ``sandbox_policy`` and the ``sandbox:policy`` runtime context (order 110)."""

    name = "sandbox_policy"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = SandboxPolicyConfig

    def apply(self, ctx: Context, config: SandboxPolicyConfig) -> None:
        service = SandboxPolicyService(config.mode, config.workspace_root)
        ctx.provide(SANDBOX_POLICY_SERVICE, service)
        ctx.context(SANDBOX_CONTEXT_NAME, SANDBOX_CONTEXT_ORDER, service.context_text)


sandbox_policy_plugin: Final = SandboxPolicyPlugin()

__all__ = [
    "SANDBOX_CONTEXT_NAME",
    "SANDBOX_CONTEXT_ORDER",
    "SANDBOX_POLICY_SERVICE",
    "SandboxExecutionPolicy",
    "SandboxPolicyConfig",
    "SandboxPolicyPlugin",
    "SandboxPolicyService",
    "fold_sandbox_mode",
    "sandbox_context_text",
    "sandbox_policy_plugin",
]
