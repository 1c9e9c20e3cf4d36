"""What a command inherits from the harness's environment: an allowlist, never a secret.

API keys must never reach a command the model runs (a command that prints its environment
would copy them into the session log). Restricted modes start from an empty environment and
keep an allowlist; ``danger-full-access`` keeps everything except names that look like
secrets. Both drop every secret-looking name, even one a caller or operator allowlisted.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Final

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


@functools.lru_cache(maxsize=16)
def _allowlist(patterns: tuple[str, ...]) -> re.Pattern[str]:
    # One compiled alternation instead of a glob match per pattern per variable: this runs for
    # every variable of the harness's environment at every confine.
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def confined_env(
    source: Mapping[str, str],
    *,
    allow: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a command in a restricted mode: the allowlist (defaults plus
    ``allow``) taken from ``source``, then ``extra``, minus every secret-looking name."""
    allowed = _allowlist((*DEFAULT_ENV_ALLOW, *allow)).match
    env = {k: source[k] for k in source if allowed(k)}  # (os.environ decodes what it gives)
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


__all__ = [
    "DEFAULT_ENV_ALLOW",
    "FALLBACK_PATH",
    "confined_env",
    "is_secret_name",
    "unconfined_env",
]
