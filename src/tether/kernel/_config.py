"""Plugins from configuration: ``tether.toml`` and the ``tether.plugins`` entry-point group.

``tether.toml``::

    [[plugins]]
    name = "root_approvals"
    config = { guarded = ["bash", "write"] }

A name resolves through the ``tether.plugins`` entry-point group, which is also how tether's own
built-ins are registered (see ``pyproject.toml``), so a third-party plugin is loaded exactly
like a built-in one. An unknown name, a malformed file, or an invalid config fails loudly.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether._dirs import config_dir
from tether.kernel._plugin import Kernel, PluginError, PluginHandle

ENTRY_POINT_GROUP = "tether.plugins"
CONFIG_FILE = "tether.toml"
"""The workspace configuration file's name (at the workspace root)."""


class ConfigFileError(PluginError):
    code = "CONFIG_FILE"


class UnknownPluginError(PluginError):
    code = "UNKNOWN_PLUGIN"


class PluginEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    config: dict[str, object] = Field(default_factory=dict)


class AgentSettings(BaseModel):
    """``[agent]`` in ``tether.toml``: the system prompt and the limits (``docs/instructions.md``).
    A value the caller passes (``Harness.open``, a ``tether run`` flag) wins over these."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    system_prompt_file: str | None = Field(default=None, min_length=1)
    """Replaces tether's system prompt; relative to the directory of the ``tether.toml``."""
    append_system_prompt: str | None = None
    max_steps: int | None = Field(default=None, ge=1)
    max_turns: int | None = Field(default=None, ge=1)


class TetherConfig(BaseModel):
    """The parsed ``tether.toml``. Sections other surfaces own are kept verbatim."""

    model_config = ConfigDict(extra="allow")
    plugins: list[PluginEntry] = Field(default_factory=list)
    agent: AgentSettings = Field(default_factory=AgentSettings)


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The user's configuration file: ``$XDG_CONFIG_HOME/tether/tether.toml``."""
    return config_dir(os.environ if env is None else env) / CONFIG_FILE


def read_user_config(env: Mapping[str, str] | None = None) -> TetherConfig | None:
    """The user's configuration file, parsed (``None`` when there is none)."""
    path = user_config_path(env)
    return read_config(path) if path.exists() else None


def read_config(path: Path) -> TetherConfig:
    """Read and parse a ``tether.toml`` the caller named (a workspace's own file is read
    through :mod:`tether.kernel._workspace_trust` instead, which checks it first)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigFileError(f"{path}: cannot read: {err}") from err
    return parse_config(data, str(path))


def parse_config(data: bytes, source: str) -> TetherConfig:
    """Parse the bytes of a ``tether.toml``; ``source`` names it in errors."""
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigFileError(f"{source}: cannot read: not UTF-8 ({err})") from err
    except tomllib.TOMLDecodeError as err:
        raise ConfigFileError(f"{source}: not valid TOML: {err}") from err
    except RecursionError:
        raise ConfigFileError(f"{source}: not valid TOML: nested too deeply") from None
    try:
        return TetherConfig.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigFileError(f"{source}: {where}: {first['msg']}") from err


def available_plugins() -> dict[str, str]:
    """Plugin name → ``module:attr`` for every registered entry point."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def resolve_plugin(name: str) -> object:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                return ep.load()
            except Exception as err:  # a broken third-party plugin must name itself
                raise PluginError(f"plugin {name!r} ({ep.value}) failed to import: {err}") from err
    known = ", ".join(sorted(available_plugins())) or "none"
    raise UnknownPluginError(f"unknown plugin {name!r} (available: {known})")


def load_plugins(kernel: Kernel, entries: Sequence[PluginEntry]) -> list[PluginHandle]:
    """Load plugins in order; on any failure, unload the ones this call loaded."""
    handles: list[PluginHandle] = []
    try:
        for entry in entries:
            handles.append(kernel.load(resolve_plugin(entry.name), entry.config))
    except BaseException:
        for handle in reversed(handles):
            handle.dispose()
        raise
    return handles
