"""The session header: fields, stored form, format version and strict loading."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tether.session import SESSION_FORMAT_VERSION, SessionHeader, SessionMeta
from tether.session._header import FormatVersionError, InvalidHeaderError


def full() -> SessionHeader:
    return SessionHeader(
        id="child-1",
        created_at=1_700_000_000_123,
        cwd="/work/project",
        parent_session="parent-1",
        seed_length=42,
        origin="subagent",
        delegation_depth=2,
        agent_preset="reviewer",
    )


FULL_DICT = {
    "type": "session",
    "version": 0,
    "id": "child-1",
    "created_at": 1_700_000_000_123,
    "cwd": "/work/project",
    "parent_session": "parent-1",
    "seed_length": 42,
    "origin": "subagent",
    "delegation_depth": 2,
    "agent_preset": "reviewer",
}


def test_format_version_is_pinned_at_zero() -> None:
    assert SESSION_FORMAT_VERSION == 0
    assert SessionHeader(id="s", created_at=1).version == 0


def test_every_field_in_the_stored_form() -> None:
    assert full().to_dict() == FULL_DICT
    assert list(full().to_dict()) == list(FULL_DICT)


def test_every_field_round_trips() -> None:
    assert SessionHeader.from_dict(full().to_dict()) == full()
    assert SessionHeader.from_dict(json.loads(json.dumps(full().to_dict()))) == full()


def test_minimal_header_writes_delegation_depth_zero() -> None:
    header = SessionHeader(id="s", created_at=5)
    assert header.delegation_depth == 0
    assert header.cwd is None
    assert header.parent_session is None
    assert header.seed_length is None
    assert header.origin is None
    assert header.agent_preset is None
    assert header.to_dict() == {
        "type": "session",
        "version": 0,
        "id": "s",
        "created_at": 5,
        "delegation_depth": 0,
    }
    assert SessionHeader.from_dict(header.to_dict()) == header


def test_header_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        full().cwd = "/elsewhere"  # type: ignore[misc]


def test_with_id_keeps_everything_else() -> None:
    renamed = full().with_id("other")
    assert renamed.id == "other"
    assert dataclasses.replace(renamed, id="child-1") == full()


def test_from_meta() -> None:
    meta = SessionMeta(cwd="/w", parent_session="p", seed_length=3, agent_preset="x")
    header = SessionHeader.from_meta("new", 77, meta)
    assert header == SessionHeader(
        id="new", created_at=77, cwd="/w", parent_session="p", seed_length=3, agent_preset="x"
    )
    assert SessionHeader.from_meta("bare", 1, SessionMeta()).to_dict() == {
        "type": "session",
        "version": 0,
        "id": "bare",
        "created_at": 1,
        "delegation_depth": 0,
    }


# -- field validation -------------------------------------------------------------------------


@pytest.mark.parametrize("cwd", ["relative/path", "", "./here", "~/home"])
def test_cwd_must_be_absolute(cwd: str) -> None:
    with pytest.raises(InvalidHeaderError) as info:
        SessionHeader(id="s", created_at=1, cwd=cwd)
    assert info.value.code == "INVALID_HEADER"
    assert str(info.value) == f"cwd must be an absolute path, got {cwd!r}"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("id", "", "session id must be a non-empty string, got ''"),
        ("id", 3, "session id must be a non-empty string, got 3"),
        ("created_at", 1.5, "created_at must be integer epoch ms: 1.5"),
        ("created_at", True, "created_at must be integer epoch ms: True"),
        ("parent_session", 5, "parent_session must be a string"),
        ("seed_length", 0, "seed_length must be a positive integer: 0"),
        ("seed_length", True, "seed_length must be a positive integer: True"),
        ("origin", "fork", "origin must be 'subagent' when present: 'fork'"),
        ("delegation_depth", -1, "delegation_depth must be >= 0: -1"),
        ("delegation_depth", None, "delegation_depth must be >= 0: None"),
        ("delegation_depth", True, "delegation_depth must be >= 0: True"),
        ("agent_preset", 1, "agent_preset must be a string"),
        ("cwd", 5, "cwd must be an absolute path, got 5"),
    ],
)
def test_invalid_fields_are_refused(field: str, value: object, message: str) -> None:
    kwargs: dict[str, object] = {"id": "s", "created_at": 1, field: value}
    with pytest.raises(InvalidHeaderError) as info:
        SessionHeader(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_constructing_another_version_is_refused() -> None:
    with pytest.raises(FormatVersionError) as info:
        SessionHeader(id="s", created_at=1, version=1)
    assert info.value.code == "UNSUPPORTED_FORMAT_VERSION"


# -- loading ----------------------------------------------------------------------------------


def stored(**changes: object) -> dict[str, object]:
    raw: dict[str, object] = dict(FULL_DICT)
    for key, value in changes.items():
        if value is ...:
            raw.pop(key, None)
        else:
            raw[key] = value
    return raw


def test_version_1_is_refused_on_load() -> None:
    with pytest.raises(FormatVersionError) as info:
        SessionHeader.from_dict(stored(version=1))
    assert info.value.code == "UNSUPPORTED_FORMAT_VERSION"
    assert str(info.value) == (
        "session 'child-1' has format version 1; this tether reads only version 0 "
        "(no migration exists)"
    )


def test_missing_version_is_refused_on_load() -> None:
    with pytest.raises(FormatVersionError) as info:
        SessionHeader.from_dict(stored(version=...))
    assert str(info.value) == "session header has no format version"


@pytest.mark.parametrize("version", [True, False, "0", 0.0, None, -1])
def test_version_must_be_the_integer_zero(version: object) -> None:
    with pytest.raises(FormatVersionError):
        SessionHeader.from_dict(stored(version=version))


def test_a_newer_version_is_reported_as_such_even_with_new_fields() -> None:
    # A newer format is likely to add fields; the user should learn about the version.
    raw = stored(version=1, owner="alice")
    del raw["delegation_depth"]
    with pytest.raises(FormatVersionError):
        SessionHeader.from_dict(raw)


def test_unknown_fields_are_refused_on_load() -> None:
    with pytest.raises(InvalidHeaderError) as info:
        SessionHeader.from_dict(stored(owner="alice", zeta=1))
    assert str(info.value) == "session header has unknown fields: ['owner', 'zeta']"


def test_delegation_depth_is_required_on_disk() -> None:
    with pytest.raises(InvalidHeaderError) as info:
        SessionHeader.from_dict(stored(delegation_depth=...))
    assert str(info.value) == "session header has no delegation_depth (required on disk)"


@pytest.mark.parametrize("kind", [..., "event", None])
def test_type_must_be_session(kind: object) -> None:
    with pytest.raises(InvalidHeaderError) as info:
        SessionHeader.from_dict(stored(type=kind))
    assert str(info.value) == "session header must have type 'session'"


@pytest.mark.parametrize("raw", [[], "header", None])
def test_header_must_be_an_object(raw: object) -> None:
    with pytest.raises(InvalidHeaderError):
        SessionHeader.from_dict(raw)


@pytest.mark.parametrize(
    "changes",
    [
        {"id": ...},
        {"created_at": ...},
        {"cwd": "relative"},
        {"origin": "fork"},
        {"seed_length": 0},
        {"delegation_depth": -1},
    ],
)
def test_invalid_stored_fields_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidHeaderError):
        SessionHeader.from_dict(stored(**changes))


def test_optional_fields_may_be_absent_on_load() -> None:
    raw = {"type": "session", "version": 0, "id": "s", "created_at": 1, "delegation_depth": 0}
    header = SessionHeader.from_dict(raw)
    assert header == SessionHeader(id="s", created_at=1)
