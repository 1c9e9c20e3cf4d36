"""Workspace trust: the workspace's configuration takes effect only with content the user
trusted (``docs/guide-permissions.md``, "Workspace trust"; ``docs/decisions/0029``).

:func:`inspect_workspace` reads, before any plugin loads, every configuration file the
composition would read from the workspace: ``tether.toml`` (or a ``config`` file inside the
workspace), each file a plugin declares (:class:`~tether.kernel._workspace_files.DeclaresFiles`)
that lies inside the workspace or was named by the workspace's own configuration, and, when they
exist, the Claude Code settings files whose permission rules apply once trusted
(:data:`PERMISSION_SETTINGS_FILES`: optional, so untrusted they are unused, not refused). Each
file's state is compared with the user's trust record (:mod:`tether.kernel._trust_store`):

- ``trusted``: it has the content the user trusted; ``absent``: it does not exist, and did
  not when the user trusted the workspace (or nobody ever did);
- ``new``: it exists, and did not when trusted (or nothing is trusted); ``changed``: its
  content differs; ``removed``: it existed when trusted and is gone (removing a guard widens
  a scope as surely as adding an approver).

:meth:`InspectedWorkspace.require` then applies the caller's :class:`WorkspaceTrust`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

from tether.errors import TetherError
from tether.kernel._config import (
    CONFIG_FILE,
    AgentSettings,
    ConfigFileError,
    PluginEntry,
    TetherConfig,
    parse_config,
    read_config,
    resolve_plugin,
)
from tether.kernel._plugin import PluginError, validate_config
from tether.kernel._printable import printable
from tether.kernel._trust_store import TrustRecord, TrustStore, TrustStoreError
from tether.kernel._workspace_files import (
    ABSENT,
    MAX_TOTAL_BYTES,
    DeclaresFiles,
    FileSnapshot,
    WorkspaceFiles,
    locate,
    read_file,
)


class WorkspaceTrust(StrEnum):
    """How a composition treats the workspace's configuration."""

    RECORDED = "recorded"
    """It takes effect only when the user trusted this exact content (``tether trust``);
    otherwise opening fails with ``WORKSPACE_UNTRUSTED``."""
    ONCE = "once"
    """The caller vouches for the current content, for this composition only; nothing is
    recorded (``tether run --trust-workspace``)."""
    IGNORE = "ignore"
    """It is not used: ``tether.toml`` is not read and a workspace file a plugin declares
    reads as absent (``tether chat`` when the user declines)."""


class FileStatus(StrEnum):
    """A workspace configuration file compared with the user's trust record."""

    TRUSTED = "trusted"
    ABSENT = "absent"
    NEW = "new"
    CHANGED = "changed"
    REMOVED = "removed"

    @property
    def needs_trust(self) -> bool:
        return self in (FileStatus.NEW, FileStatus.CHANGED, FileStatus.REMOVED)


class InvalidWorkspaceTrustError(TetherError):
    code = "INVALID_WORKSPACE_TRUST"


def parse_workspace_trust(value: WorkspaceTrust | str) -> WorkspaceTrust:
    try:
        return WorkspaceTrust(value)
    except ValueError:
        known = ", ".join(t.value for t in WorkspaceTrust)
        raise InvalidWorkspaceTrustError(
            f"workspace trust {value!r} is not one of: {known}"
        ) from None


def trust_command_line(workspace: str) -> str:
    """The command that reviews and trusts ``workspace``, ready to show and to paste."""
    return printable(f"tether trust --workspace {shlex.quote(workspace)}")


class WorkspaceUntrustedError(TetherError):
    """The workspace has configuration the user has not trusted with this content."""

    code = "WORKSPACE_UNTRUSTED"

    def __init__(
        self,
        workspace: str,
        files: Sequence[tuple[str, FileStatus]],
        *,
        reason: str | None = None,
        remedies: Sequence[str] = (),
    ) -> None:
        self.workspace = workspace
        self.files = tuple(files)
        self.reason = reason
        self.remedies = (trust_command_line(workspace), *remedies)
        remedy, *more = (printable(r) for r in self.remedies)
        listed = ", ".join(f"{printable(key)} ({status})" for key, status in self.files)
        why = f" ({printable(reason)})" if reason else ""
        also = "".join(f"; or {r}" for r in more)
        super().__init__(
            f"workspace {printable(workspace)} has configuration you have not trusted: "
            f"{listed}{why}. It was not loaded and nothing ran. Review it and trust it with: "
            f"{remedy}{also}"
        )

    def also(self, remedy: str) -> WorkspaceUntrustedError:
        """The same refusal with one more way out (a surface's own flag)."""
        return WorkspaceUntrustedError(
            self.workspace,
            self.files,
            reason=self.reason,
            remedies=(*self.remedies[1:], remedy),
        )


@dataclass(frozen=True, slots=True)
class UsedConfig:
    """The ``tether.toml`` a composition uses, parsed: the workspace's own (or a ``config``
    inside it), or a file outside the workspace that the caller named."""

    key: str
    config: TetherConfig
    in_workspace: bool
    """True when the workspace's agents can change it (then it was subject to trust)."""


PERMISSION_SETTINGS_FILES: Final = (".claude/settings.json", ".claude/settings.local.json")
"""Claude Code settings files whose ``permissions`` rules a composition applies once they are
trusted (``policy/_rule_sources.py``). They are optional: while untrusted they are not used
(and a run says so), but they do not stop the run."""


@dataclass(frozen=True, slots=True)
class FileReport:
    snapshot: FileSnapshot
    status: FileStatus
    named_by_workspace: bool
    """True for ``tether.toml`` and the files its plugins name; false for a workspace file
    that the caller's own configuration names."""
    optional: bool = False
    """Read only for what it adds when trusted (:data:`PERMISSION_SETTINGS_FILES`): an
    untrusted one is left unused rather than refused."""

    @property
    def key(self) -> str:
        return self.snapshot.key


@dataclass(frozen=True, slots=True)
class InspectedWorkspace:
    """What a composition would read from a workspace, and how it compares with trust."""

    root: str
    entries: tuple[PluginEntry, ...]
    """Every plugin the composition loads, in order: defaults not configured otherwise, the
    configuration's (none of the workspace's under ``ignore``), then the caller's."""
    files: WorkspaceFiles
    """The snapshots, as the ``workspace_files`` service serves them."""
    reports: tuple[FileReport, ...]
    record: TrustRecord | None
    trust: WorkspaceTrust
    distrust: str | None = None
    """Why the user's trust record cannot vouch for this workspace (unreadable, kept inside
    the workspace), when it cannot."""
    problem: TetherError | None = None
    """Why the configuration cannot be used even if trusted (a malformed ``tether.toml``, an
    unknown plugin): raised once trust is settled."""
    config: UsedConfig | None = None
    """The configuration file read (none under ``ignore``); sections beyond ``plugins``
    (``[model]``, ``[models.*]``) are for their owners, once :meth:`require` passed."""
    agent: AgentSettings = field(default_factory=AgentSettings)
    """The configuration's ``[agent]`` section (empty under ``ignore`` or without one)."""
    system_prompt_path: str | None = None
    """The absolute path of ``agent.system_prompt_file``, read with the other files."""

    def system_prompt(self) -> str | None:
        """The text of ``[agent] system_prompt_file`` as checked, or ``None`` without one.
        Raises ``CONFIG_FILE`` when it is missing, unreadable or not UTF-8."""
        if self.system_prompt_path is None:
            return None
        shown = printable(self.agent.system_prompt_file or self.system_prompt_path)
        return prompt_file_text(
            f"[agent] system_prompt_file {shown}", self.files.read(self.system_prompt_path)
        )

    def untrusted(self) -> list[FileReport]:
        """The files whose content is not trusted and that stop a run (under ``recorded``)."""
        return [r for r in self.reports if r.status.needs_trust and not r.optional]

    def needing_trust(self) -> list[FileReport]:
        """Every file whose content is not trusted, optional ones included."""
        return [r for r in self.reports if r.status.needs_trust]

    def usable(self, report: FileReport) -> bool:
        """Whether the composition uses ``report``'s content: trusted (or vouched for once),
        and the workspace's configuration not ignored."""
        if self.trust is WorkspaceTrust.IGNORE:
            return False
        return self.trust is WorkspaceTrust.ONCE or not report.status.needs_trust

    def config_in_force(self) -> UsedConfig | None:
        """The configuration file a composition would use: ``None`` when there is none, or
        when it is the workspace's and its content is not trusted (or cannot be used)."""
        if self.problem is not None:
            return None
        if self.trust is WorkspaceTrust.RECORDED and self.untrusted():
            return None if self.config is not None and self.config.in_workspace else self.config
        return self.config

    def permission_settings(self) -> list[FileReport]:
        """The Claude Code settings files read for their ``permissions`` (present or not)."""
        return [r for r in self.reports if r.key in PERMISSION_SETTINGS_FILES]

    def present(self) -> list[FileReport]:
        return [r for r in self.reports if r.snapshot.state != ABSENT]

    def require(self) -> None:
        """Raise unless the composition may use what was read: ``WORKSPACE_UNTRUSTED`` for
        untrusted files (under ``recorded``), then the configuration's own problem."""
        untrusted = self.untrusted()
        if self.trust is WorkspaceTrust.RECORDED and untrusted:
            raise WorkspaceUntrustedError(
                self.root, [(r.key, r.status) for r in untrusted], reason=self.distrust
            )
        if self.problem is not None:
            raise self.problem


def inspect_workspace(
    root: str,
    *,
    config: str | os.PathLike[str] | None = None,
    defaults: Sequence[PluginEntry] = (),
    plugins: Sequence[PluginEntry] = (),
    trust: WorkspaceTrust = WorkspaceTrust.RECORDED,
    store: TrustStore,
) -> InspectedWorkspace:
    """Read the configuration a composition over canonical workspace ``root`` would use.

    ``config``: a ``tether.toml`` the caller names instead of the workspace's own; one outside
    the workspace is the caller's file and is read as such. ``defaults`` load unless a
    configured plugin has the same name; ``plugins`` are the caller's. Never raises for what
    the workspace contains: problems are reported in the result (see
    :meth:`InspectedWorkspace.require`).
    """
    ignore = trust is WorkspaceTrust.IGNORE
    read = _Snapshots()
    problem: TetherError | None = None
    named: list[tuple[PluginEntry, bool]] = []
    used: UsedConfig | None = None
    prompt_path: str | None = None
    key, path, inside = locate(root, os.fspath(config) if config is not None else CONFIG_FILE)
    if config is not None and not inside:
        used = UsedConfig(path, read_config(Path(path)), in_workspace=False)
        named += [(entry, False) for entry in used.config.plugins]
    elif not ignore:
        try:
            data = read.file(key, path, named_by_workspace=True).require()
            if data is not None:
                used = UsedConfig(key, parse_config(data, key), in_workspace=True)
                named += [(entry, True) for entry in used.config.plugins]
        except TetherError as err:
            problem = err
    agent = used.config.agent if used is not None else AgentSettings()
    if agent.system_prompt_file is not None:
        # Read now with the configuration that names it, so trust covers its content too.
        prompt_path = os.path.join(os.path.dirname(path), agent.system_prompt_file)
        prompt_key, prompt_path, prompt_inside = locate(root, prompt_path)
        if prompt_inside or inside:
            read.file(prompt_key, prompt_path, named_by_workspace=inside)
    named += [(entry, False) for entry in plugins]
    configured = {entry.name for entry, _ in named}
    ordered = [(d, False) for d in defaults if d.name not in configured] + named
    for entry, from_workspace in ordered:
        try:
            declared = _declared(entry, root)
        except TetherError as err:
            problem = problem or err
            continue
        for file in declared:
            key, path, inside = locate(root, file)
            if (inside and not ignore) or from_workspace:
                read.file(key, path, named_by_workspace=from_workspace)
    if not ignore:
        for file in PERMISSION_SETTINGS_FILES:
            # An absent one is left out of the record: were it to appear, it would be new,
            # and a new optional file is not used until trusted.
            key, path, _ = locate(root, file)
            read.file(key, path, named_by_workspace=True, optional=True, keep_absent=False)
    record, distrust = _record(store, root)
    reports = tuple(
        FileReport(snapshot, _status(snapshot, record), from_workspace, optional)
        for snapshot, from_workspace, optional in read.files.values()
    )
    return InspectedWorkspace(
        root=root,
        entries=tuple(entry for entry, _ in ordered),
        files=WorkspaceFiles(root, {k: s for k, (s, _, _) in read.files.items()}, ignored=ignore),
        reports=reports,
        record=record,
        trust=trust,
        distrust=distrust,
        problem=problem,
        config=used,
        agent=agent,
        system_prompt_path=prompt_path,
    )


def record_trust(inspected: InspectedWorkspace, store: TrustStore) -> TrustRecord:
    """Record that the user trusts exactly what ``inspected`` read. Configuration that could
    not be used anyway (malformed, unreadable) is refused rather than trusted."""
    if inspected.problem is not None:
        raise inspected.problem
    for report in inspected.reports:
        report.snapshot.require()
    return store.put(inspected.root, {r.key: r.snapshot.state for r in inspected.reports})


class _Snapshots:
    """The files read so far, by key, with whether the workspace named them and whether they
    are optional; at most :data:`MAX_TOTAL_BYTES` together (thousands of large files must not
    exhaust memory)."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[FileSnapshot, bool, bool]] = {}
        self._total = 0

    def file(
        self,
        key: str,
        path: str,
        *,
        named_by_workspace: bool,
        optional: bool = False,
        keep_absent: bool = True,
    ) -> FileSnapshot:
        if key in self.files:
            return self.files[key][0]  # read for a plugin first: required, as that plugin needs
        snapshot = read_file(key, path)
        if snapshot.state == ABSENT and not keep_absent:
            return snapshot
        self._total += len(snapshot.content or b"")
        if self._total > MAX_TOTAL_BYTES:
            why = f"the configuration files together are larger than {MAX_TOTAL_BYTES} bytes"
            snapshot = FileSnapshot(key, path, None, why)
        self.files[key] = (snapshot, named_by_workspace, optional)
        return snapshot


def _declared(entry: PluginEntry, root: str) -> Sequence[str]:
    plugin = resolve_plugin(entry.name)
    if not isinstance(plugin, DeclaresFiles):
        return ()
    config = validate_config(plugin, entry.name, entry.config)
    try:
        files = plugin.workspace_files(config, root)
    except Exception as err:  # a third-party plugin's bug must name it, and read nothing
        raise PluginError(f"plugin {entry.name!r}: workspace_files failed: {err!r}") from err
    if isinstance(files, str) or not all(isinstance(f, str) for f in files):
        raise PluginError(f"plugin {entry.name!r}: workspace_files must return a list of paths")
    return files


def _record(store: TrustStore, root: str) -> tuple[TrustRecord | None, str | None]:
    if store.inside(root):
        return None, (
            f"trust records are kept in {store.directory}, inside this workspace, where its "
            "agents can write them"
        )
    try:
        return store.get(root), None
    except TrustStoreError as err:
        return None, f"the trust record cannot be used: {err}"


def _status(snapshot: FileSnapshot, record: TrustRecord | None) -> FileStatus:
    trusted: Mapping[str, str] = record.files if record is not None else {}
    was = trusted.get(snapshot.key, ABSENT)
    now = snapshot.state
    if now == was and now != "unreadable":
        return FileStatus.ABSENT if now == ABSENT else FileStatus.TRUSTED
    if now == ABSENT:
        return FileStatus.REMOVED
    return FileStatus.NEW if was == ABSENT else FileStatus.CHANGED


def prompt_file_text(named: str, data: bytes | None) -> str:
    """The text of a system-prompt file as read (``named``: how the user named it, escaped);
    ``CONFIG_FILE`` when it was missing or is not UTF-8. One rule for the configuration's
    ``system_prompt_file`` and the command line's ``--system-prompt-file``."""
    if data is None:
        raise ConfigFileError(f"{named}: no such file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigFileError(f"{named}: not UTF-8 ({err})") from err


__all__ = [
    "PERMISSION_SETTINGS_FILES",
    "FileReport",
    "FileStatus",
    "InspectedWorkspace",
    "InvalidWorkspaceTrustError",
    "UsedConfig",
    "WorkspaceTrust",
    "WorkspaceUntrustedError",
    "inspect_workspace",
    "parse_workspace_trust",
    "prompt_file_text",
    "record_trust",
    "trust_command_line",
]
