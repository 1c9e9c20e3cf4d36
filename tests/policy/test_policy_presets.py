"""Permission presets (``permission-presets.spec``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from policy_support import (
    MemoryPersistence,
    ToyAgent,
    approval_of,
    compose,
    layout,
    presets_of,
    sandbox_of,
)

from cli_support import sqlite_store
from script_support import script
from tether import Harness
from tether.kernel import PluginConfigError, PluginRequirementError
from tether.kernel._config import resolve_plugin
from tether.kernel._plugin import Kernel
from tether.policy import (
    PERMISSION_PRESETS_SERVICE,
    ApprovalPolicy,
    PermissionPresetsService,
    Preset,
    SandboxMode,
)
from tether.policy._errors import (
    PolicyServiceUnavailableError,
    PresetTableError,
    UnknownPresetError,
)
from tether.policy._presets import (
    CUSTOM_PRESET,
    DEFAULT_PRESET_TABLE,
    PLAN_TEXT,
    derive_preset,
    permission_presets_plugin,
    validate_table,
)
from tether.session import Event, Session, SessionHeader, SessionMeta, SessionStore
from tether.session.persistence._factory import open_persistence

RO, WW, DFA = SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE, SandboxMode.DANGER_FULL_ACCESS
ASK, NEVER = ApprovalPolicy.ASK, ApprovalPolicy.NEVER
NOTICE_SOURCE = {"kind": "plugin", "plugin": "approval"}


def log(*items: tuple[str, dict[str, Any]]) -> list[Event]:
    return [Event.make(kind, seq, 0, data) for seq, (kind, data) in enumerate(items)]


def mode(m: str) -> tuple[str, dict[str, Any]]:
    return ("sandbox/mode", {"mode": m})


def policy(p: str) -> tuple[str, dict[str, Any]]:
    return ("approval/policy", {"policy": p})


def preset(name: str) -> tuple[str, dict[str, Any]]:
    return ("permission/preset", {"preset": name})


def pinned(name: str, m: str, p: str) -> list[tuple[str, object]]:
    return [
        ("permission/preset", {"preset": name}),
        ("sandbox/mode", {"mode": m}),
        ("approval/policy", {"policy": p}),
    ]


def full_kernel(
    store: SessionStore | None = None, **presets_config: Any
) -> tuple[Kernel, SessionStore]:
    store = store or SessionStore()
    kernel = compose(store=store, sandbox={}, approval={}, presets=presets_config)
    return kernel, store


TIE_TABLE = {"first": Preset(WW, ASK), "second": Preset(WW, ASK), "yolo": Preset(DFA, NEVER)}


# -- derivation --------------------------------------------------------------------------------
def test_the_default_table() -> None:
    assert dict(DEFAULT_PRESET_TABLE) == {
        "workspace-write": Preset(WW, ASK),
        "read-only": Preset(RO, ASK),
        "plan": Preset(RO, ASK),
        "danger-full-access": Preset(DFA, NEVER),
    }
    assert list(DEFAULT_PRESET_TABLE) == [
        "workspace-write",
        "read-only",
        "plan",
        "danger-full-access",
    ]
    assert [row.plan for row in DEFAULT_PRESET_TABLE.values()] == [False, False, True, False]


def test_read_only_is_derived_unless_the_last_label_is_plan() -> None:
    assert derive_preset(log(mode("read-only"), policy("ask"))) == "read-only"
    assert derive_preset(log(preset("plan"), mode("read-only"), policy("ask"))) == "plan"
    assert derive_preset(log(preset("plan"), mode("workspace-write"), policy("ask"))) == (
        "workspace-write"
    )


async def test_plan_tells_the_model_to_plan_and_switching_away_stops_it() -> None:
    kernel, store = full_kernel()
    agent = ToyAgent(store.create("s1"))
    service = presets_of(kernel)
    assert service.context_text(agent) == ""
    assert service.set_preset(agent, "plan")
    assert layout(agent.session, 3) == [
        ("permission/preset", {"preset": "plan"}),
        ("sandbox/mode", {"mode": "read-only"}),
    ]
    assert service.current(agent.session) == "plan"
    assert service.context_text(agent) == PLAN_TEXT
    assert sandbox_of(kernel).resolve(agent.session).mode is RO
    # read-only has the same knobs: only the label changes, and the model stops planning
    assert service.set_preset(agent, "read-only")
    assert layout(agent.session)[-1] == ("permission/preset", {"preset": "read-only"})
    assert service.context_text(agent) == ""
    # a delegated child never plans from presets
    child = ToyAgent(store.create("c1", meta=SessionMeta(delegation_depth=1)))
    child.session.append("permission/preset", {"preset": "plan"})
    assert service.context_text(child) == ""


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (log(mode("workspace-write"), policy("ask")), "workspace-write"),
        (log(mode("danger-full-access"), policy("never")), "danger-full-access"),
        (log(mode("read-only"), policy("ask")), "read-only"),
        (log(mode("read-only"), policy("never")), CUSTOM_PRESET),
        (log(mode("workspace-write"), policy("never")), CUSTOM_PRESET),
        (log(mode("danger-full-access"), policy("ask")), CUSTOM_PRESET),
        # The newest knob event wins.
        (log(mode("read-only"), policy("never"), mode("danger-full-access")), "danger-full-access"),
        # A recorded preset that no longer matches the knobs is ignored...
        (
            log(preset("danger-full-access"), mode("workspace-write"), policy("ask")),
            "workspace-write",
        ),
        (log(preset("workspace-write"), mode("read-only"), policy("ask")), "read-only"),
        # ...and one naming no row never wins.
        (log(preset("gone"), mode("workspace-write"), policy("ask")), "workspace-write"),
    ],
)
def test_derivation_over_the_default_table(events: list[Event], expected: str) -> None:
    assert derive_preset(events) == expected


def test_ties_go_to_the_recorded_preset_else_the_first_row() -> None:
    knobs = [mode("workspace-write"), policy("ask")]
    assert derive_preset(log(*knobs), TIE_TABLE) == "first"
    assert derive_preset(log(preset("second"), *knobs), TIE_TABLE) == "second"
    assert derive_preset(log(*knobs, preset("second")), TIE_TABLE) == "second"
    assert derive_preset(log(preset("second"), preset("first"), *knobs), TIE_TABLE) == "first"
    # The tie mate stops matching once the knobs move.
    assert derive_preset(log(preset("second"), *knobs, mode("read-only")), TIE_TABLE) == "custom"


def test_missing_knobs_fall_back_to_the_defaults_else_custom() -> None:
    assert derive_preset([]) == CUSTOM_PRESET
    assert derive_preset([], sandbox_default=WW, approval_default=ASK) == "workspace-write"
    assert derive_preset(log(policy("never")), sandbox_default=DFA, approval_default=ASK) == (
        "danger-full-access"
    )
    assert derive_preset(log(mode("danger-full-access")), approval_default=NEVER) == (
        "danger-full-access"
    )
    assert derive_preset(log(mode("danger-full-access"))) == CUSTOM_PRESET


def test_custom_is_reserved() -> None:
    with pytest.raises(PresetTableError, match="reserved") as info:
        validate_table({"custom": Preset(RO, ASK)})
    assert info.value.code == "INVALID_PRESET_TABLE"
    with pytest.raises(PluginConfigError, match="reserved"):
        full_kernel(table={"custom": {"sandbox": "read-only", "approval": "ask"}}, default="custom")
    kernel, store = full_kernel()
    agent = ToyAgent(store.create("s1"))
    with pytest.raises(UnknownPresetError) as unknown:
        presets_of(kernel).set_preset(agent, "custom")
    assert unknown.value.code == "UNKNOWN_PRESET"
    assert str(unknown.value) == (
        "unknown permission preset 'custom' (presets: workspace-write, read-only, plan, danger-full-access)"
    )
    # A log that records "custom" (a foreign writer) still derives from the knobs.
    assert derive_preset(log(preset("custom"), mode("workspace-write"), policy("ask"))) == (
        "workspace-write"
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"default": "nope"}, "default preset 'nope' is not in the table"),
        ({"table": {}}, "at least one row"),
        ({"table": {"x": {"sandbox": "rw", "approval": "ask"}}}, "read-only"),
        ({"table": {"x": {"sandbox": "read-only", "approval": "maybe"}}}, "'ask' or 'never'"),
        ({"table": {"x": {"sandbox": "read-only"}}}, "approval"),
    ],
)
def test_bad_configs_are_rejected_at_load(config: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginConfigError, match=message):
        full_kernel(**config)


def test_loading_requires_its_services() -> None:
    kernel = compose(sandbox={}, approval={})
    with pytest.raises(PluginRequirementError, match="sessions"):
        kernel.load(permission_presets_plugin)
    kernel = compose(store=SessionStore(), sandbox={})
    with pytest.raises(PluginRequirementError, match="approval"):
        kernel.load(permission_presets_plugin)


# -- set_preset --------------------------------------------------------------------------------
def test_set_writes_the_preset_and_the_changed_knobs() -> None:
    kernel, store = full_kernel()
    agent = ToyAgent(store.create("s1"))
    start = len(agent.session)
    assert presets_of(kernel).set_preset(agent, "danger-full-access") is True
    assert layout(agent.session, start) == pinned(
        "danger-full-access", "danger-full-access", "never"
    )
    assert agent.notices == [
        ('The approval policy changed from "ask" to "never" (changed by the user).', NOTICE_SOURCE)
    ]
    assert presets_of(kernel).current(agent.session) == "danger-full-access"


def test_set_writes_only_the_knobs_that_change() -> None:
    table = {
        "review": {"sandbox": "read-only", "approval": "ask"},
        "locked": {"sandbox": "read-only", "approval": "never"},
        "build": {"sandbox": "workspace-write", "approval": "never"},
    }
    kernel, store = full_kernel(table=table, default="review")
    service = presets_of(kernel)
    agent = ToyAgent(store.create("s1"))
    assert layout(agent.session) == pinned("review", "read-only", "ask")
    assert service.set_preset(agent, "locked") is True
    assert layout(agent.session, 3) == [
        ("permission/preset", {"preset": "locked"}),
        ("approval/policy", {"policy": "never"}),
    ]
    assert service.set_preset(agent, "build") is True
    assert layout(agent.session, 5) == [
        ("permission/preset", {"preset": "build"}),
        ("sandbox/mode", {"mode": "workspace-write"}),
    ]
    assert len(agent.notices) == 1  # only the approval switch is announced


def test_selecting_a_tie_mate_writes_only_the_preset() -> None:
    table = {
        name: {"sandbox": row.sandbox, "approval": row.approval} for name, row in TIE_TABLE.items()
    }
    kernel, store = full_kernel(table=table, default="first")
    agent = ToyAgent(store.create("s1"))
    assert presets_of(kernel).set_preset(agent, "second") is True
    assert layout(agent.session, 3) == [("permission/preset", {"preset": "second"})]
    assert presets_of(kernel).current(agent.session) == "second"
    assert agent.notices == []


def test_reselecting_is_a_no_op() -> None:
    kernel, store = full_kernel()
    agent = ToyAgent(store.create("s1"))
    service = presets_of(kernel)
    before = len(agent.session)
    assert service.set_preset(agent, "workspace-write") is False
    assert len(agent.session) == before
    service.set_preset(agent, "danger-full-access")
    after = len(agent.session)
    assert service.set_preset(agent, "danger-full-access") is False
    assert len(agent.session) == after
    assert len(agent.notices) == 1


def test_set_after_a_raw_knob_change_restores_the_preset() -> None:
    kernel, store = full_kernel()
    agent = ToyAgent(store.create("s1"))
    sandbox = sandbox_of(kernel)
    sandbox.set_sandbox_mode(agent.session, "danger-full-access")
    service = presets_of(kernel)
    assert service.current(agent.session) == CUSTOM_PRESET
    start = len(agent.session)
    assert service.set_preset(agent, "workspace-write") is True
    assert layout(agent.session, start) == [
        ("permission/preset", {"preset": "workspace-write"}),
        ("sandbox/mode", {"mode": "workspace-write"}),
    ]


# -- pinning -----------------------------------------------------------------------------------
async def test_new_sessions_pin_three_facts_durably() -> None:
    persistence = MemoryPersistence()
    _kernel, store = full_kernel(SessionStore(persistence))
    session = store.create("s1")
    assert layout(session) == pinned("workspace-write", "workspace-write", "ask")
    await store.flush(session)
    assert persistence.stored_types("s1") == [
        "permission/preset",
        "sandbox/mode",
        "approval/policy",
    ]


def test_the_configured_default_preset_is_pinned() -> None:
    _kernel, store = full_kernel(default="danger-full-access")
    assert layout(store.create("s1")) == pinned("danger-full-access", "danger-full-access", "never")


def test_the_default_wins_a_tie_when_pinning() -> None:
    table = {
        name: {"sandbox": row.sandbox, "approval": row.approval} for name, row in TIE_TABLE.items()
    }
    kernel, store = full_kernel(table=table, default="second")
    session = store.create("s1")
    assert layout(session) == pinned("second", "workspace-write", "ask")
    assert presets_of(kernel).current(session) == "second"


async def test_seeded_sessions_are_preserved(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    kernel, store = full_kernel(SessionStore(open_persistence(url)))
    parent = ToyAgent(store.create("parent"))
    presets_of(kernel).set_preset(parent, "danger-full-access")
    child = await store.fork("parent", child_id="child")
    assert [e.type for e in child.events[child.first_live_seq :]] == ["session/end-seed"]
    assert presets_of(kernel).current(child) == "danger-full-access"

    await store.close()
    reopened_store = SessionStore(open_persistence(url))
    compose(store=reopened_store, sandbox={}, approval={}, presets={})
    resumed = await reopened_store.open("parent")
    assert [e.type for e in resumed.events[resumed.first_live_seq :]] == ["session/end-seed"]
    assert presets_of(kernel).current(resumed) == "danger-full-access"
    await reopened_store.close()


def test_a_delegated_child_keeps_its_pins_and_gains_no_custom_preset() -> None:
    kernel, store = full_kernel()
    sandbox = sandbox_of(kernel)
    approval = approval_of(kernel)
    child = store.prepare("child")
    store.enter(child)
    sandbox.set_sandbox_mode(child, "read-only", source="delegation")
    approval.set_approval_policy(child, "never", source="delegation")
    store.announce(child)
    assert layout(child) == [
        ("sandbox/mode", {"mode": "read-only", "source": "delegation"}),
        ("approval/policy", {"policy": "never", "source": "delegation"}),
    ]
    assert presets_of(kernel).current(child) == CUSTOM_PRESET


def test_a_delegated_child_matching_a_row_gains_the_preset() -> None:
    kernel, store = full_kernel()
    child = store.prepare("child")
    store.enter(child)
    sandbox_of(kernel).set_sandbox_mode(child, "danger-full-access", "delegation")
    approval_of(kernel).set_approval_policy(child, "never", "delegation")
    store.announce(child)
    assert layout(child)[2:] == [("permission/preset", {"preset": "danger-full-access"})]


def test_a_partial_session_gains_only_the_missing_facts() -> None:
    kernel, store = full_kernel()
    partial = store.prepare("partial")
    store.enter(partial)
    sandbox_of(kernel).set_sandbox_mode(partial, "workspace-write")
    store.announce(partial)
    assert layout(partial) == [
        ("sandbox/mode", {"mode": "workspace-write"}),
        ("permission/preset", {"preset": "workspace-write"}),
        ("approval/policy", {"policy": "ask"}),
    ]
    narrow = store.prepare("narrow")
    store.enter(narrow)
    sandbox_of(kernel).set_sandbox_mode(narrow, "read-only")
    store.announce(narrow)
    assert layout(narrow)[1:] == [
        ("permission/preset", {"preset": "read-only"}),
        ("approval/policy", {"policy": "ask"}),
    ]
    custom = store.prepare("custom")
    store.enter(custom)
    sandbox_of(kernel).set_sandbox_mode(custom, "danger-full-access")
    store.announce(custom)
    assert layout(custom)[1:] == [("approval/policy", {"policy": "ask"})]


def test_a_seeded_session_without_knobs_gains_them() -> None:
    _kernel, store = full_kernel()
    seed = log(("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": "completed"}))
    session = store.create("s1", seed=seed)
    assert layout(session, session.first_live_seq) == [
        ("session/end-seed", {}),
        *pinned("workspace-write", "workspace-write", "ask"),
    ]


def test_pin_initial_is_idempotent() -> None:
    kernel, store = full_kernel()
    session = store.create("s1")
    assert presets_of(kernel).pin_initial(session) == []
    assert len(session) == 3


def test_a_remount_pins_live_sessions() -> None:
    store = SessionStore()
    kernel = compose(store=store, sandbox={}, approval={})
    early = store.create("early")
    assert len(early) == 0
    handle = kernel.load(permission_presets_plugin, {"default": "danger-full-access"})
    assert layout(early) == pinned("danger-full-access", "danger-full-access", "never")
    handle.dispose()
    assert kernel.ctx.get(PERMISSION_PRESETS_SERVICE) is None
    between = store.create("between")
    assert len(between) == 0  # unmounted: no longer subscribed
    kernel.load(permission_presets_plugin)
    assert layout(between) == pinned("workspace-write", "workspace-write", "ask")
    assert len(early) == 3  # already pinned: untouched
    assert layout(store.create("late")) == pinned("workspace-write", "workspace-write", "ask")


def test_creation_fails_closed_when_a_knob_service_is_gone() -> None:
    kernel, store = full_kernel()
    handle = kernel.plugin("approval")
    assert handle is not None
    handle.dispose()
    with pytest.raises(PolicyServiceUnavailableError, match="approval") as info:
        store.create("s1")
    assert info.value.code == "POLICY_SERVICE_UNAVAILABLE"
    assert store.get("s1") is None


def test_a_direct_service_validates_its_table() -> None:
    ctx = Kernel().ctx
    with pytest.raises(PresetTableError, match="at least one row"):
        PermissionPresetsService(ctx, table={})
    with pytest.raises(UnknownPresetError, match="default preset 'x'"):
        PermissionPresetsService(ctx, default="x")
    with pytest.raises(PolicyServiceUnavailableError):
        PermissionPresetsService(ctx).pin_initial(Session(SessionHeader("s1", 0)))


def test_registered_as_an_entry_point() -> None:
    assert resolve_plugin("permission_presets") is permission_presets_plugin


@pytest.mark.parametrize(
    ("knobs", "current", "layout"),
    [
        ({}, "plan", [("permission/preset", {"preset": "plan"})]),
        # a replaced knob that fits another row is labelled by it; one that fits none, by none
        (
            {"sandbox": "workspace-write"},
            "workspace-write",
            [("permission/preset", {"preset": "workspace-write"})],
        ),
        ({"approval": "never"}, CUSTOM_PRESET, []),
    ],
)
async def test_harness_opens_a_root_in_a_named_preset(
    tmp_path: Path,
    knobs: dict[str, str],
    current: str,
    layout: list[tuple[str, dict[str, str]]],
) -> None:
    (tmp_path / "ws").mkdir()
    model = script(tmp_path / "script.json", [{"text": "a plan"}])
    async with Harness.open(
        workspace=tmp_path / "ws",
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        permission="plan",
        **knobs,
    ) as harness:
        result = await harness.run("plan it")
        session = harness.store.get(result.session_id)
        assert session is not None
        assert harness.ctx.require(PERMISSION_PRESETS_SERVICE).current(session) == current
    assert [(e.type, dict(e.data)) for e in session.events[: len(layout) + 2]] == [
        *layout,
        ("sandbox/mode", {"mode": knobs.get("sandbox", "read-only")}),
        ("approval/policy", {"policy": knobs.get("approval", "ask")}),
    ]


async def test_harness_refuses_an_unknown_preset_before_any_session(tmp_path: Path) -> None:
    model = script(tmp_path / "script.json", [{"text": "never asked"}])
    with pytest.raises(UnknownPresetError) as raised:
        async with Harness.open(
            workspace=tmp_path,
            model=f"scripted:{model}",
            store=sqlite_store(tmp_path),
            permission="bypassPermissions",
        ):
            pass
    assert str(raised.value) == (
        "unknown permission preset 'bypassPermissions' (presets: workspace-write, read-only, "
        "plan, danger-full-access)"
    )
