"""What a command inherits: a scrubbed environment, hidden credentials, protected data.

API keys must never reach a command the model runs (a command that prints its environment
would copy them into the session log). Restricted modes start from an empty environment and
keep an allowlist; ``danger-full-access`` keeps everything except names that look like
secrets. Both drop every secret-looking name, even one a caller or operator allowlisted.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from typing import Final

from tether.dirs import data_dir

DEFAULT_ENV_ALLOW: Final = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "NO_COLOR",
)
"""Variables a confined command keeps (``*`` is a glob). ``TMPDIR`` is set by the backend."""

FALLBACK_PATH: Final = "/usr/local/bin:/usr/bin:/bin"

_SECRET: Final = re.compile(
    r"(_KEY|_KEYS|_TOKEN|_TOKENS|^KEY|^TOKEN)$|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|"
    r"ACCESS_?KEY|PRIVATE_?KEY|SESSION_?TOKEN|AUTH_?TOKEN",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """True for names like ``DEEPSEEK_API_KEY``, ``GITHUB_TOKEN``, ``DB_PASSWORD``,
    ``AWS_SECRET_ACCESS_KEY``: never passed to a command, whatever the mode."""
    return bool(_SECRET.search(name))


def _allowed(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def confined_env(
    source: Mapping[str, str],
    *,
    allow: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a command in a restricted mode: the allowlist (defaults plus
    ``allow``) taken from ``source``, then ``extra``, minus every secret-looking name."""
    patterns = (*DEFAULT_ENV_ALLOW, *allow)
    env = {k: v for k, v in source.items() if _allowed(k, patterns)}
    env.update(extra or {})
    env.setdefault("PATH", FALLBACK_PATH)
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def unconfined_env(
    source: Mapping[str, str], *, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment under ``danger-full-access``: everything but secret-looking names.

    The mode lifts file confinement; it does not hand the model tether's API keys.
    """
    env = dict(source)
    env.update(extra or {})
    return {k: v for k, v in env.items() if not is_secret_name(k)}


CREDENTIAL_PATHS: Final = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".gnupg",
    ".docker",
    ".kube",
    ".password-store",
    ".local/share/keyrings",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
)
"""Paths under a home directory hidden from confined commands (uid 0 inside a sandbox can
still *read* root-only files, so they are hidden rather than left to permissions)."""


def homes(source: Mapping[str, str], home: str | None = None) -> list[str]:
    """The home directories to hide credentials in: ``home`` if given, else ``$HOME`` of the
    command's environment and the harness user's own home (they differ under ``sudo -E``)."""
    if home is not None:
        return [home]
    found = [os.path.expanduser("~")]
    if source.get("HOME"):
        found.append(source["HOME"])
    return list(dict.fromkeys(h for h in found if os.path.isabs(h)))


def hidden_paths(
    source: Mapping[str, str], *, home: str | None = None, extra: Iterable[str] = ()
) -> list[str]:
    """Existing credential paths (canonical), in a stable order, to hide from commands."""
    candidates = [os.path.join(h, rel) for h in homes(source, home) for rel in CREDENTIAL_PATHS]
    candidates += list(extra)
    found: list[str] = []
    for path in candidates:
        if os.path.lexists(path):
            real = os.path.realpath(path)
            if real != "/" and real not in found:
                found.append(real)
    return found


def tether_data_dirs(source: Mapping[str, str], *, home: str | None = None) -> list[str]:
    """tether's own data directory (the default session store lives there): read-only for
    every confined command, so a command cannot rewrite the audit trail. Both the command
    environment's view and each home directory's default are covered."""
    found = [str(data_dir(source))] if source.get("XDG_DATA_HOME") else []
    found += [str(data_dir({"HOME": h})) for h in homes(source, home)]
    return list(dict.fromkeys(found))


__all__ = [
    "CREDENTIAL_PATHS",
    "DEFAULT_ENV_ALLOW",
    "FALLBACK_PATH",
    "confined_env",
    "hidden_paths",
    "homes",
    "is_secret_name",
    "tether_data_dirs",
    "unconfined_env",
]
