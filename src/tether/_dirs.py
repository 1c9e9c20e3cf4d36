"""tether's own directories in the user's home: where it keeps data and configuration.

One home for these locations, because several layers need them: the session store (its
default database lives in the data directory), chat (its input history), workspace trust (its
records live in the configuration directory) and the sandbox, which hides both directories
from every confined command and file tool. Nothing here creates a directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

APP: Final = "tether"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or str(Path.home()))


def _xdg(env: Mapping[str, str], name: str, fallback: tuple[str, ...]) -> Path:
    # Per the XDG spec a relative value is invalid and must be ignored.
    value = env.get(name, "")
    base = Path(value) if value and os.path.isabs(value) else _home(env).joinpath(*fallback)
    return base / APP


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/tether``, else ``~/.local/share/tether`` (the default store's home)."""
    return _xdg(os.environ if env is None else env, "XDG_DATA_HOME", (".local", "share"))


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/tether``, else ``~/.config/tether`` (user configuration, trust)."""
    return _xdg(os.environ if env is None else env, "XDG_CONFIG_HOME", (".config",))


__all__ = ["APP", "config_dir", "data_dir"]
