"""Permission presets: named (sandbox mode, approval policy) pairs, the user-facing knob.

A preset is a label over the two knobs, never a third source of truth: the effective policy is
always the ``sandbox/mode`` and ``approval/policy`` folds. The session's current preset is
derived: a last ``permission/preset`` that still matches the knobs wins,
else the first table row that matches, else ``custom`` (reserved, never a row).

New root sessions are pinned at creation, so a session's permissions are facts in its own log
and a resume under a different deployment default cannot change them (``docs/design.md`` §2,
principle 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, ConfigDict, model_validator

from tether.kernel import SESSIONS_SERVICE, Context, ServiceKey
from tether.policy._approval import APPROVAL_SERVICE, fold_approval_policy
from tether.policy._errors import (
    InvalidPolicyEventError,
    PolicyServiceUnavailableError,
    PresetTableError,
    UnknownPresetError,
)
from tether.policy._events import PermissionPresetSet
from tether.policy._modes import (
    ApprovalPolicy,
    SandboxMode,
    parse_approval_policy,
    parse_sandbox_mode,
)
from tether.policy._protocols import HasSession
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE, fold_sandbox_mode
from tether.session import Event, Session, SessionStore

if TYPE_CHECKING:
    from tether.policy._approval import ApprovalService
    from tether.policy._sandbox_policy import SandboxPolicyService

PERMISSION_PRESETS_SERVICE: Final[ServiceKey[PermissionPresetsService]] = ServiceKey(
    "permission_presets"
)
CUSTOM_PRESET: Final = "custom"
"""The derived name of a knob combination that matches no row; reserved, so never selectable."""
DEFAULT_PRESET: Final = "workspace-write"


@dataclass(frozen=True, slots=True)
class Preset:
    """A row: the two knobs, and whether the model is told to plan rather than act. Rows are
    compared by their knobs only: the plan instruction is no third source of truth."""

    sandbox: SandboxMode
    approval: ApprovalPolicy
    plan: bool = field(default=False, compare=False)
    """The session's model is told to plan and not act (``plan``'s runtime context)."""
    summary: str = field(default="", compare=False)
    """What the row is for, in a few words (``/permission`` shows it)."""


PresetTable = Mapping[str, Preset]
"""Rows in priority order: on a tie, the first matching row is the derived name."""

DEFAULT_PRESET_TABLE: Final[PresetTable] = MappingProxyType(
    {
        "workspace-write": Preset(
            SandboxMode.WORKSPACE_WRITE,
            ApprovalPolicy.ASK,
            summary="edit the workspace and run commands there; ask for anything wider",
        ),
        "read-only": Preset(
            SandboxMode.READ_ONLY,
            ApprovalPolicy.ASK,
            summary="read anything, change nothing; ask for anything wider",
        ),
        "plan": Preset(
            SandboxMode.READ_ONLY,
            ApprovalPolicy.ASK,
            plan=True,
            summary="read-only, and the model plans the task instead of doing it",
        ),
        "danger-full-access": Preset(
            SandboxMode.DANGER_FULL_ACCESS,
            ApprovalPolicy.NEVER,
            summary="no sandbox and no questions",
        ),
    }
)
"""The presets (``docs/guide-permissions.md``, "Presets", maps them to Codex's and Claude
Code's). ``read-only`` comes before ``plan``: a session whose knobs are read-only and ask
derives ``read-only`` unless its last label is ``plan``."""

PLAN_CONTEXT_NAME: Final = "permission:plan"
PLAN_CONTEXT_ORDER: Final = 117
PLAN_TEXT: Final = (
    "Plan mode: the user wants a plan before any change. Read and search what you need (the "
    "sandbox is read-only in this mode), then reply with a concrete, step-by-step plan for the "
    "task, naming the files and commands involved, and stop there. Do not try to change files "
    "or run commands that change anything, and do not request sandbox escalation: the user "
    "switches to another permission preset when the plan should be carried out."
)


def validate_table(table: PresetTable) -> PresetTable:
    """A read-only copy of ``table``, or :class:`PresetTableError`."""
    if not table:
        raise PresetTableError("a preset table needs at least one row")
    rows: dict[str, Preset] = {}
    for name, row in table.items():
        if not isinstance(name, str) or not name:
            raise PresetTableError(f"preset names must be non-empty strings, got {name!r}")
        if name == CUSTOM_PRESET:
            raise PresetTableError(
                f"{CUSTOM_PRESET!r} is reserved for knob combinations that match no preset"
            )
        if not isinstance(row, Preset):
            raise PresetTableError(f"preset {name!r} must be a Preset, got {row!r}")
        rows[name] = row
    return MappingProxyType(rows)


def _label_of(event: Event) -> str | None:
    # A stored label is only ever a hint over the knobs, which stay the truth: one that does not
    # fit is read as no label, and the preset is derived from the knobs alone.
    try:
        return PermissionPresetSet.from_data(event.data).preset
    except InvalidPolicyEventError:
        return None


def _append_label(session: Session, name: str) -> Event:
    event = PermissionPresetSet(name)
    return session.append(event.TYPE, event.to_data())


def _derive(
    table: PresetTable,
    last_preset: str | None,
    mode: SandboxMode | None,
    policy: ApprovalPolicy | None,
) -> str:
    if mode is None or policy is None:
        return CUSTOM_PRESET
    knobs = Preset(mode, policy)
    if last_preset is not None and table.get(last_preset) == knobs:
        return last_preset
    return next((name for name, row in table.items() if row == knobs), CUSTOM_PRESET)


def derive_preset(
    events: Iterable[Event],
    table: PresetTable = DEFAULT_PRESET_TABLE,
    *,
    sandbox_default: SandboxMode | None = None,
    approval_default: ApprovalPolicy | None = None,
) -> str:
    """The current preset name of a log (pure).

    The knobs are the ``sandbox/mode`` and ``approval/policy`` folds, falling back to the given
    deployment defaults; a knob with neither is unknown and derives ``custom``.
    """
    events = tuple(events)
    last_preset: str | None = None
    for event in events:
        if event.type == PermissionPresetSet.TYPE:
            last_preset = _label_of(event)
    mode = fold_sandbox_mode(events) or sandbox_default
    policy = fold_approval_policy(events) or approval_default
    return _derive(table, last_preset, mode, policy)


class PermissionPresetsService:
    """Service ``permission_presets``. Uses ``sandbox_policy`` and ``approval`` (looked up at
    the moment of use) for every knob write, so their validation and notices apply."""

    def __init__(
        self,
        ctx: Context,
        *,
        default: str = DEFAULT_PRESET,
        table: PresetTable = DEFAULT_PRESET_TABLE,
    ) -> None:
        self._ctx = ctx
        self.table = validate_table(table)
        if default not in self.table:
            raise UnknownPresetError(
                f"default preset {default!r} is not in the table (presets: {', '.join(self.table)})"
            )
        self.default = default

    def preset(self, name: str) -> Preset:
        row = self.table.get(name)
        if row is None:
            raise UnknownPresetError(
                f"unknown permission preset {name!r} (presets: {', '.join(self.table)})"
            )
        return row

    def context_text(self, agent: HasSession | None) -> str:
        """The ``permission:plan`` contribution: :data:`PLAN_TEXT` while the agent's session
        is in a preset that plans (``""`` otherwise, and for a delegated child, which never
        takes knobs from presets: docs/decisions/0012)."""
        if agent is None or agent.session.header.delegation_depth > 0:
            return ""
        try:
            row = self.table.get(self.current(agent.session))
        except PolicyServiceUnavailableError:
            return ""
        return PLAN_TEXT if row is not None and row.plan else ""

    def current(self, session: Session) -> str:
        """The session's derived preset name (``custom`` when the knobs match no row)."""
        sandbox, approval = self._services()
        last = session.last(PermissionPresetSet.TYPE)
        return _derive(
            self.table,
            None if last is None else _label_of(last),
            sandbox.override_of(session) or sandbox.default_mode,
            approval.effective_policy(session),
        )

    def set_preset(self, agent: HasSession, name: str) -> bool:
        """Select ``name`` for the agent's session. Writes ``permission/preset`` only if the
        derived preset changes, ``sandbox/mode`` only if the effective mode changes, and switches
        approval through ``approval.set_policy`` (which queues the user notice). ``False`` when
        nothing was written (re-selecting the current preset)."""
        row = self.preset(name)
        sandbox, approval = self._services()
        session = agent.session
        changed = False
        if self.current(session) != name:
            _append_label(session, name)
            changed = True
        if (sandbox.override_of(session) or sandbox.default_mode) is not row.sandbox:
            sandbox.set_sandbox_mode(session, row.sandbox)
            changed = True
        if approval.set_policy(agent, row.approval):
            changed = True
        return changed

    def pin_preset(
        self,
        session: Session,
        name: str,
        *,
        sandbox: SandboxMode | str | None = None,
        approval: ApprovalPolicy | str | None = None,
    ) -> list[Event]:
        """Write the permission facts of preset ``name`` into a session not yet published (a
        new root started with ``--permission``), with ``sandbox`` or ``approval`` in place of
        the row's knob where given. The label is written only when the knobs still fit a row
        (``name`` preferred), never as ``custom``. No notice: no agent has seen other knobs."""
        row = self.preset(name)
        services = self._services()
        knobs = Preset(
            row.sandbox if sandbox is None else parse_sandbox_mode(sandbox),
            row.approval if approval is None else parse_approval_policy(approval),
        )
        label = _derive(self.table, name, knobs.sandbox, knobs.approval)
        appended = [] if label == CUSTOM_PRESET else [_append_label(session, label)]
        appended.append(services[0].set_sandbox_mode(session, knobs.sandbox))
        appended.append(services[1].set_approval_policy(session, knobs.approval))
        return appended

    def pin_initial(self, session: Session) -> list[Event]:
        """Give the session whichever of its three permission facts it lacks.

        A fresh session gets ``permission/preset``, ``sandbox/mode`` and ``approval/policy`` of
        the default preset. A seeded or partial one (a resume, a fork, a subagent that carries
        its delegation pins) keeps every fact it has: missing knobs come from the default
        preset, and a missing ``permission/preset`` is written only when the resulting knobs
        match a row (the default preferred on a tie), never as ``custom``.
        """
        sandbox, approval = self._services()
        default = self.table[self.default]
        mode = sandbox.override_of(session)
        policy = approval.override_of(session)
        appended: list[Event] = []
        delegated = session.header.delegation_depth > 0
        if session.last(PermissionPresetSet.TYPE) is None and not (delegated and mode is None):
            knobs = Preset(mode or default.sandbox, policy or default.approval)
            name = _derive(self.table, self.default, knobs.sandbox, knobs.approval)
            if name != CUSTOM_PRESET:
                appended.append(_append_label(session, name))
        if session.header.delegation_depth > 0:
            # A delegated child's knobs come only from its delegation events: filling one from
            # the deployment's default preset could give it a mode its parent never had.
            return appended
        if mode is None:
            appended.append(sandbox.set_sandbox_mode(session, default.sandbox))
        if policy is None:
            appended.append(approval.set_approval_policy(session, default.approval))
        return appended

    def attach(self, store: SessionStore) -> Callable[[], None]:
        """Pin every session the store creates from now on, and every one already live."""

        def pin(session: Session) -> None:
            self.pin_initial(session)  # raising vetoes the session: fail closed at creation

        detach = store.on_created(pin)
        try:
            for session in store.live():
                self.pin_initial(session)
        except BaseException:
            detach()
            raise
        return detach

    def _services(self) -> tuple[SandboxPolicyService, ApprovalService]:
        sandbox = self._ctx.get(SANDBOX_POLICY_SERVICE)
        approval = self._ctx.get(APPROVAL_SERVICE)
        if sandbox is None or approval is None:
            missing = SANDBOX_POLICY_SERVICE if sandbox is None else APPROVAL_SERVICE
            raise PolicyServiceUnavailableError(
                f"permission presets need the {missing.name!r} service, which is not composed"
            )
        return sandbox, approval


# -- plugin ------------------------------------------------------------------------------
class PresetRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sandbox: SandboxMode
    approval: ApprovalPolicy
    plan: bool = False
    summary: str = ""


class PermissionPresetsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: str = DEFAULT_PRESET
    """The preset new sessions are pinned to."""
    table: dict[str, PresetRow] | None = None
    """Rows in priority order (default: workspace-write, read-only, plan, danger-full-access)."""

    @model_validator(mode="after")
    def _check(self) -> PermissionPresetsConfig:
        try:
            table = validate_table(self.preset_table())
        except PresetTableError as err:
            raise ValueError(str(err)) from err
        if self.default not in table:
            raise ValueError(
                f"default preset {self.default!r} is not in the table (presets: {', '.join(table)})"
            )
        return self

    def preset_table(self) -> PresetTable:
        if self.table is None:
            return DEFAULT_PRESET_TABLE
        return {
            name: Preset(row.sandbox, row.approval, row.plan, row.summary)
            for name, row in self.table.items()
        }


class PermissionPresetsPlugin:
    """Provides ``permission_presets`` and pins sessions' initial permissions.

    Unlike the reference, it does not refuse to load over a non-confining executor: every
    enforcement point fails closed on its own (docs/decisions/0025).
    """

    name = "permission_presets"
    requires = (SANDBOX_POLICY_SERVICE, APPROVAL_SERVICE, SESSIONS_SERVICE)
    config_model = PermissionPresetsConfig

    def apply(self, ctx: Context, config: PermissionPresetsConfig) -> None:
        service = PermissionPresetsService(ctx, default=config.default, table=config.preset_table())
        ctx.provide(PERMISSION_PRESETS_SERVICE, service)
        ctx.context(PLAN_CONTEXT_NAME, PLAN_CONTEXT_ORDER, service.context_text)
        store = ctx.get(SESSIONS_SERVICE)
        if not isinstance(store, SessionStore):
            raise PolicyServiceUnavailableError(
                f"permission presets need a SessionStore as service {SESSIONS_SERVICE.name!r}, "
                f"got {store!r}"
            )
        ctx.effect(service.attach(store))


permission_presets_plugin: Final = PermissionPresetsPlugin()

__all__ = [
    "CUSTOM_PRESET",
    "DEFAULT_PRESET",
    "DEFAULT_PRESET_TABLE",
    "PERMISSION_PRESETS_SERVICE",
    "PLAN_CONTEXT_NAME",
    "PLAN_CONTEXT_ORDER",
    "PLAN_TEXT",
    "PermissionPresetsConfig",
    "PermissionPresetsPlugin",
    "PermissionPresetsService",
    "Preset",
    "PresetRow",
    "PresetTable",
    "derive_preset",
    "permission_presets_plugin",
    "validate_table",
]
