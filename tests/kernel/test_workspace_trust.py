"""Workspace trust in the kernel: what is read from a workspace, how it compares with the
user's trust record, and the records themselves. Real files, real FIFOs and links, real
record files under an isolated config dir (see ``tests/conftest.py``)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from plugin_dist import Distribution

from tether._dirs import config_dir
from tether.kernel import WORKSPACE_FILES, PluginEntry, WorkspaceTrust, WorkspaceUntrustedError
from tether.kernel._config import ConfigFileError, UnknownPluginError, load_plugins
from tether.kernel._plugin import Kernel, PluginError
from tether.kernel._printable import printable
from tether.kernel._trust_store import TrustStore, TrustStoreError
from tether.kernel._workspace_files import (
    MAX_CONFIG_BYTES,
    MAX_TOTAL_BYTES,
    UndeclaredWorkspaceFileError,
)
from tether.kernel._workspace_trust import (
    FileStatus,
    InspectedWorkspace,
    InvalidWorkspaceTrustError,
    inspect_workspace,
    parse_workspace_trust,
    record_trust,
)

HOOKS_TOML = (
    '[[plugins]]\nname = "hooks"\n'
    'config = { settings_files = [".claude/settings.json", ".claude/settings.local.json"] }\n'
)
SETTINGS = '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]}}'


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    return Path(os.path.realpath(workspace))


def plant(ws: Path, toml: str = HOOKS_TOML, settings: str | None = SETTINGS) -> None:
    (ws / "tether.toml").write_text(toml)
    if settings is not None:
        (ws / ".claude" / "settings.json").write_text(settings)


def inspect(
    ws: Path,
    trust: WorkspaceTrust = WorkspaceTrust.RECORDED,
    *,
    config: Path | None = None,
    plugins: list[PluginEntry] | None = None,
) -> InspectedWorkspace:
    return inspect_workspace(
        str(ws), config=config, plugins=plugins or [], trust=trust, store=TrustStore.for_user()
    )


def statuses(inspected: InspectedWorkspace) -> list[tuple[str, FileStatus]]:
    return [(r.key, r.status) for r in inspected.reports]


def refusal(inspected: InspectedWorkspace) -> str:
    with pytest.raises(WorkspaceUntrustedError) as info:
        inspected.require()
    assert info.value.code == "WORKSPACE_UNTRUSTED"
    return str(info.value)


# -- new, trusted, changed, removed ------------------------------------------------------------
def test_new_configuration_is_refused_naming_each_file_and_the_command(ws: Path) -> None:
    plant(ws)
    inspected = inspect(ws)
    assert statuses(inspected) == [
        ("tether.toml", FileStatus.NEW),
        (".claude/settings.json", FileStatus.NEW),
        (".claude/settings.local.json", FileStatus.ABSENT),
    ]
    assert refusal(inspected) == (
        f"workspace {ws} has configuration you have not trusted: tether.toml (new), "
        ".claude/settings.json (new). It was not loaded and nothing ran. Review it and trust "
        f"it with: tether trust --workspace {ws}"
    )


def test_a_workspace_without_configuration_needs_no_trust(ws: Path) -> None:
    inspected = inspect(ws)
    assert statuses(inspected) == [("tether.toml", FileStatus.ABSENT)]
    inspected.require()
    assert [e.name for e in inspected.entries] == []


def test_trusted_content_is_used_and_any_change_needs_trust_again(ws: Path) -> None:
    plant(ws)
    record = record_trust(inspect(ws), TrustStore.for_user())
    trusted = inspect(ws)
    trusted.require()
    assert statuses(trusted) == [
        ("tether.toml", FileStatus.TRUSTED),
        (".claude/settings.json", FileStatus.TRUSTED),
        (".claude/settings.local.json", FileStatus.ABSENT),
    ]
    assert [e.name for e in trusted.entries] == ["hooks"]
    assert trusted.record == record

    (ws / ".claude" / "settings.json").write_text(SETTINGS + " ")
    assert refusal(inspect(ws)) == (
        f"workspace {ws} has configuration you have not trusted: .claude/settings.json "
        f"(changed). It was not loaded and nothing ran. Review it and trust it with: "
        f"tether trust --workspace {ws}"
    )


def test_a_file_absent_when_trusted_is_new_when_it_appears(ws: Path) -> None:
    plant(ws)
    record_trust(inspect(ws), TrustStore.for_user())
    (ws / ".claude" / "settings.local.json").write_text("{}")
    assert statuses(inspect(ws))[2] == (".claude/settings.local.json", FileStatus.NEW)


def test_removing_a_trusted_file_needs_trust_again(ws: Path) -> None:
    """A removed guard widens a scope like an added approver: it is not silently accepted."""
    plant(ws)
    record_trust(inspect(ws), TrustStore.for_user())
    (ws / ".claude" / "settings.json").unlink()
    assert statuses(inspect(ws))[1] == (".claude/settings.json", FileStatus.REMOVED)
    (ws / "tether.toml").unlink()
    inspected = inspect(ws)
    assert statuses(inspected) == [("tether.toml", FileStatus.REMOVED)]
    assert "tether.toml (removed)" in refusal(inspected)


def test_the_record_is_private_atomic_and_keyed_by_the_canonical_path(
    ws: Path, tmp_path: Path
) -> None:
    plant(ws)
    link = tmp_path / "link-to-ws"
    link.symlink_to(ws)
    store = TrustStore.for_user()
    record = record_trust(inspect_workspace(os.path.realpath(link), store=store), store)
    assert store.directory == config_dir() / "trusted-workspaces"
    assert stat.S_IMODE(config_dir().stat().st_mode) == 0o700
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    (path,) = store.directory.iterdir()  # no temporary file left behind
    assert path == store.path_for(str(ws))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    body = json.loads(path.read_text())
    assert body == {
        "version": 1,
        "workspace": str(ws),
        "trusted_at": record.trusted_at,
        "digest": record.digest,
        "files": {
            ".claude/settings.json": record.files[".claude/settings.json"],
            ".claude/settings.local.json": "absent",
            "tether.toml": record.files["tether.toml"],
        },
    }
    assert record.files["tether.toml"].startswith("sha256:")
    assert store.remove(str(ws)) is True
    assert store.remove(str(ws)) is False
    assert statuses(inspect(ws))[0] == ("tether.toml", FileStatus.NEW)


# -- what is read, and from where ----------------------------------------------------------------
def test_plugins_see_the_checked_bytes_even_if_the_file_changes_afterwards(ws: Path) -> None:
    plant(ws)
    inspected = inspect(ws, WorkspaceTrust.ONCE)
    (ws / ".claude" / "settings.json").write_text('{"hooks": {}}')
    assert inspected.files.read(str(ws / ".claude" / "settings.json")) == SETTINGS.encode()
    assert inspected.files.read(".claude/settings.local.json") is None


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "too-large", "loop"])
def test_a_file_that_is_not_a_small_regular_file_is_never_opened_or_trusted(
    ws: Path, kind: str
) -> None:
    target = ws / "tether.toml"
    if kind == "fifo":
        os.mkfifo(target)  # opening it for reading would block forever
    elif kind == "directory":
        target.mkdir()
    elif kind == "device":
        target.symlink_to("/dev/zero")  # reading it would never end
    elif kind == "too-large":
        target.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    else:
        target.symlink_to(target)
    why = {
        "fifo": "not a regular file",
        "directory": "not a regular file",
        "device": "not a regular file",
        "too-large": f"larger than {MAX_CONFIG_BYTES} bytes",
        "loop": "Too many levels of symbolic links",
    }[kind]
    inspected = inspect(ws)
    (report,) = inspected.reports
    assert (report.status, report.snapshot.error) == (FileStatus.NEW, why)
    assert "tether.toml (new)" in refusal(inspected)
    with pytest.raises(ConfigFileError) as info:
        inspect(ws, WorkspaceTrust.ONCE).require()
    assert str(info.value) == f"tether.toml: cannot read: {why}"
    with pytest.raises(ConfigFileError):
        record_trust(inspected, TrustStore.for_user())
    assert not TrustStore.for_user().directory.exists()


def test_a_hostile_tether_toml_is_a_refusal_or_an_error_never_a_crash(ws: Path) -> None:
    plant(ws, "a = " + "[" * 100_000)
    assert "tether.toml (new)" in refusal(inspect(ws))
    with pytest.raises(ConfigFileError) as info:
        inspect(ws, WorkspaceTrust.ONCE).require()
    assert str(info.value) == "tether.toml: not valid TOML: nested too deeply"
    plant(ws, '[[plugins]]\nname = "hooks"\nconfig = { settings_files = ["/a\\u0000b"] }\n')
    with pytest.raises(ConfigFileError) as info:
        inspect(ws, WorkspaceTrust.ONCE).files.read("/a\x00b")
    assert str(info.value) == "/a\\x00b: cannot read: the path contains a NUL byte"


def test_what_one_composition_reads_is_bounded_in_total(ws: Path) -> None:
    names = [f"s{i}.json" for i in range(MAX_TOTAL_BYTES // MAX_CONFIG_BYTES + 1)]
    for name in names:
        (ws / name).write_bytes(b" " * MAX_CONFIG_BYTES)
    plant(ws, f'[[plugins]]\nname = "hooks"\nconfig = {{ settings_files = {json.dumps(names)} }}\n')
    errors = [r.snapshot.error for r in inspect(ws).reports]
    over = f"the configuration files together are larger than {MAX_TOTAL_BYTES} bytes"
    # tether.toml's own bytes leave room for one megabyte file fewer than the budget (and
    # .claude/settings.json, read last for its permissions, is over it too).
    assert errors == [None] * len(names[:-1]) + [over] * 3


def test_files_the_workspace_names_outside_it_are_part_of_its_trust(
    ws: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared.json"
    shared.write_text(SETTINGS)
    plant(ws, f'[[plugins]]\nname = "hooks"\nconfig = {{ settings_files = ["{shared}"] }}\n')
    assert statuses(inspect(ws)) == [
        ("tether.toml", FileStatus.NEW),
        (str(shared), FileStatus.NEW),
        (".claude/settings.json", FileStatus.NEW),  # optional: read for its permissions
    ]
    record_trust(inspect(ws), TrustStore.for_user())
    inspect(ws).require()
    shared.write_text('{"hooks": {}}')
    assert statuses(inspect(ws))[1] == (str(shared), FileStatus.CHANGED)


def test_a_caller_file_outside_the_workspace_is_its_own_but_a_link_into_it_is_not(
    ws: Path, tmp_path: Path
) -> None:
    own = tmp_path / "own.json"
    own.write_text(SETTINGS)
    (ws / "planted.json").write_text(SETTINGS)
    link = tmp_path / "looks-outside.json"
    link.symlink_to(ws / "planted.json")
    entry = PluginEntry(name="hooks", config={"settings_files": [str(own), str(link)]})
    inspected = inspect(ws, plugins=[entry])
    assert statuses(inspected) == [
        ("tether.toml", FileStatus.ABSENT),
        (str(link), FileStatus.NEW),
    ]
    assert [(r.key, r.named_by_workspace) for r in inspected.reports][1] == (str(link), False)
    assert inspected.files.read(str(own)) == SETTINGS.encode()


def test_a_config_the_caller_names_outside_the_workspace_replaces_the_workspaces(
    ws: Path, tmp_path: Path
) -> None:
    plant(ws)
    own = tmp_path / "own.toml"
    own.write_text('[[plugins]]\nname = "ask_tools"\nconfig = { tools = ["write"] }\n')
    inspected = inspect(ws, config=own)
    inspected.require()
    # only the workspace's Claude Code settings are read (for their permissions), optional:
    # untrusted, they stop nothing
    assert [(r.key, r.status, r.optional) for r in inspected.reports] == [
        (".claude/settings.json", FileStatus.NEW, True)
    ]
    assert [e.name for e in inspected.entries] == ["ask_tools"]


def test_a_config_inside_the_workspace_is_workspace_configuration(ws: Path) -> None:
    (ws / "conf").mkdir()
    (ws / "conf" / "tether.toml").write_text(HOOKS_TOML)
    inspected = inspect(ws, config=ws / "conf" / "tether.toml")
    assert statuses(inspected)[0] == ("conf/tether.toml", FileStatus.NEW)
    assert "conf/tether.toml (new)" in refusal(inspected)


def test_ignore_reads_nothing_of_the_workspace(ws: Path) -> None:
    plant(ws)
    entry = PluginEntry(name="hooks", config={"settings_files": [".claude/settings.json"]})
    inspected = inspect(ws, WorkspaceTrust.IGNORE, plugins=[entry])
    inspected.require()
    assert inspected.reports == ()
    assert [e.name for e in inspected.entries] == ["hooks"]
    assert inspected.files.read(str(ws / ".claude" / "settings.json")) is None


def test_an_untrusted_file_is_refused_before_its_plugins_are_even_resolved(ws: Path) -> None:
    plant(ws, '[[plugins]]\nname = "no_such_plugin"\n')
    inspected = inspect(ws)
    assert "tether.toml (new)" in refusal(inspected)
    assert inspected.problem is not None and inspected.problem.code == "UNKNOWN_PLUGIN"
    with pytest.raises(UnknownPluginError):
        inspect(ws, WorkspaceTrust.ONCE).require()


# -- the registry: any plugin that reads files declares them ------------------------------------
def test_a_third_party_plugin_declares_the_files_it_reads_and_gets_only_checked_bytes(
    ws: Path, third_party: Distribution
) -> None:
    """A later feature (here a third-party plugin reading ``.mcp.json``) joins trust by
    declaring its files: even loaded as a default, a file of its that appears is new."""
    default = PluginEntry(name=third_party.declarer)
    inspected = inspect_workspace(str(ws), defaults=[default], store=TrustStore.for_user())
    inspected.require()
    assert statuses(inspected) == [
        ("tether.toml", FileStatus.ABSENT),
        (".mcp.json", FileStatus.ABSENT),
    ]
    (ws / ".mcp.json").write_text('{"mcpServers": {}}')
    inspected = inspect_workspace(str(ws), defaults=[default], store=TrustStore.for_user())
    assert ".mcp.json (new)" in refusal(inspected)
    kernel = Kernel()
    once = inspect_workspace(
        str(ws), defaults=[default], trust=WorkspaceTrust.ONCE, store=TrustStore.for_user()
    )
    kernel.ctx.provide(WORKSPACE_FILES, once.files)
    (ws / ".mcp.json").write_text("changed after the check")
    load_plugins(kernel, [default])
    assert kernel.ctx.get(third_party.key("MCP")) == b'{"mcpServers": {}}'
    with pytest.raises(UndeclaredWorkspaceFileError):
        inspected.files.read("notes/undeclared.json")


def test_a_plugin_whose_declaration_fails_is_a_named_problem(
    ws: Path, third_party: Distribution
) -> None:
    plant(ws, f'[[plugins]]\nname = "{third_party.bad_declarer}"\n')
    inspected = inspect(ws, WorkspaceTrust.ONCE)
    with pytest.raises(PluginError) as info:
        inspected.require()
    assert str(info.value) == (
        f"plugin {third_party.bad_declarer!r}: workspace_files failed: RuntimeError('cannot list')"
    )
    assert "tether.toml (new)" in refusal(inspect(ws))


# -- records that cannot vouch ----------------------------------------------------------------
def test_records_others_can_write_are_not_trust(ws: Path) -> None:
    plant(ws)
    record_trust(inspect(ws), TrustStore.for_user())
    directory = TrustStore.for_user().directory
    directory.chmod(0o770)
    inspected = inspect(ws)
    assert statuses(inspected)[0] == ("tether.toml", FileStatus.NEW)
    message = refusal(inspected)
    assert (
        f"(the trust record cannot be used: {directory} is not private to you (owner uid "
        f"{os.geteuid()}, mode 770), so others could forge trust: make it yours and chmod go-w "
        f"{directory})"
    ) in message
    directory.chmod(0o700)
    inspect(ws).require()


def test_a_damaged_or_linked_record_is_not_trust(ws: Path, tmp_path: Path) -> None:
    plant(ws)
    store = TrustStore.for_user()
    record_trust(inspect(ws), store)
    path = store.path_for(str(ws))
    body = json.loads(path.read_text())
    body["files"]["tether.toml"] = "sha256:" + "0" * 64  # digest no longer matches
    path.write_text(json.dumps(body))
    assert "is damaged; remove it and trust the workspace again" in refusal(inspect(ws))
    elsewhere = tmp_path / "forged.json"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    assert "Too many levels of symbolic links" in refusal(inspect(ws))


def test_records_kept_inside_the_workspace_cannot_vouch_for_it(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(ws / ".config"))
    plant(ws)
    inspected = inspect(ws)
    assert (
        f"(trust records are kept in {ws}/.config/tether/trusted-workspaces, inside this "
        "workspace, where its agents can write them)"
    ) in refusal(inspected)
    with pytest.raises(TrustStoreError) as info:
        record_trust(inspected, TrustStore.for_user())
    assert info.value.code == "TRUST_STORE"
    assert not (ws / ".config").exists()


def test_a_linked_config_dir_is_followed_but_not_into_the_workspace(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "linked-config"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir(mode=0o700)
    (home / "tether").symlink_to(dotfiles)
    plant(ws)
    record_trust(inspect(ws), TrustStore.for_user())  # a dotfile manager's link works
    inspect(ws).require()
    (home / "tether").unlink()
    (ws / ".hidden").mkdir()
    (home / "tether").symlink_to(ws / ".hidden")
    assert "inside this workspace, where its agents can write them" in refusal(inspect(ws))


# -- small pieces -------------------------------------------------------------------------------
def test_printable_shows_what_a_terminal_would_hide() -> None:
    assert printable('name = "ok"') == 'name = "ok"'
    assert printable("é ü 日本") == "é ü 日本"
    assert printable("a\x1b[2Kb\rc\td") == "a\\x1b[2Kb\\rc\\td"
    assert printable("x\u202ey\u200bz\u2028") == "x\\u202ey\\u200bz\\u2028"


def test_an_unknown_trust_value_names_the_accepted_ones() -> None:
    assert parse_workspace_trust("once") is WorkspaceTrust.ONCE
    with pytest.raises(InvalidWorkspaceTrustError) as info:
        parse_workspace_trust("always")
    assert str(info.value) == "workspace trust 'always' is not one of: recorded, once, ignore"
