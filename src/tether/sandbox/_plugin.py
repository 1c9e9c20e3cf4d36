"""The ``sandbox`` kernel plugin: provides the :class:`SandboxProvider` as service ``sandbox``.

::

    [[plugins]]
    name = "sandbox"
    config = { backends = ["bwrap", "landlock"], protected_paths = ["/srv/tether"] }

The chain is probed on first use, not at load, so composing it costs nothing until a command
runs; ``tether doctor`` calls :func:`tether.sandbox.describe_backends` to probe it up front.

The session store's files are hidden from commands and file tools wherever the store is: the
plugin takes them from the composed ``sessions`` service, never from configuration (which
could point elsewhere), and adds the store to the list of stores every later run hides
(:mod:`tether.session._known_stores`).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tether.kernel import SESSIONS_SERVICE, AnyServiceKey, Context, ServiceKey
from tether.sandbox._provider import CHAIN, SandboxProvider
from tether.session import SessionStore
from tether.session._known_stores import remember_store
from tether.session._store_files import persistence_files, store_url_of

SANDBOX_SERVICE: Final = ServiceKey[SandboxProvider]("sandbox")


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backends: list[str] = Field(default_factory=lambda: [str(name) for name in CHAIN])
    """The backend chain, most preferred first (``bwrap``, ``landlock``)."""
    disable: list[str] | None = None
    """Backends to turn off (default: ``TETHER_SANDBOX_DISABLE``)."""
    bwrap_path: str | None = None
    """The bwrap binary (default: ``bwrap`` on ``PATH``); probed before use."""
    runner_command: str | None = None
    """A bwrap-compatible runner used instead of ``bwrap_path``; probed like bwrap, and
    refused when it lies inside the workspace."""
    landlock_fast_path: bool = True
    """Start Landlock commands through the fork server (false: the launcher, ~35 ms each)."""
    hidden_paths: list[str] = Field(default_factory=list)
    """More paths to hide from commands (credential directories are always hidden)."""
    protected_paths: list[str] = Field(default_factory=list)
    """More control paths: readable, never writable, even inside a writable workspace."""
    open_workspace_root: bool = False
    """bubblewrap only: let commands create, remove and rename entries directly in the
    workspace root, which lets them create a control file missing at start (``.git``,
    ``tether.toml``, ...); see ``docs/sandbox.md``."""
    env_allow: list[str] = Field(default_factory=list)
    """More environment variables commands keep (globs; secret-looking names never pass)."""
    allow_unix_sockets: list[str] = Field(default_factory=list)
    """Unix socket paths (absolute) commands without network may connect to, wherever they
    are (e.g. ``/var/run/docker.sock``); any other outside their writable roots is refused.
    It widens what a command reaches: it decides confinement."""

    @field_validator("allow_unix_sockets")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        relative = [v for v in value if not v.startswith("/")]
        if relative:
            raise ValueError(f"not absolute paths: {relative} (name each socket by its full path)")
        return value

    @field_validator("backends", "disable")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        unknown = [v for v in value or () if v not in CHAIN]
        if unknown:
            raise ValueError(f"unknown backend(s) {unknown} (known: {', '.join(CHAIN)})")
        return value


class SandboxPlugin:
    name = "sandbox"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = SandboxConfig

    def apply(self, ctx: Context, config: SandboxConfig) -> None:
        _remember(_persistence(ctx))
        provider = SandboxProvider(
            backends=config.backends,
            disable=config.disable,
            bwrap_path=config.bwrap_path,
            runner_command=config.runner_command,
            landlock_fast_path=config.landlock_fast_path,
            hidden_paths=config.hidden_paths,
            protected_paths=config.protected_paths,
            env_allow=config.env_allow,
            store_paths=[str(p) for p in persistence_files(_persistence(ctx))],
            open_workspace_root=config.open_workspace_root,
            allow_unix_sockets=config.allow_unix_sockets,
        )
        ctx.provide(SANDBOX_SERVICE, provider)


def _persistence(ctx: Context) -> object:
    store = ctx.get(SESSIONS_SERVICE)
    return store.persistence if isinstance(store, SessionStore) else None


def _remember(persistence: object) -> None:
    """Put the run's store on the list every run hides, before any command of this run can
    run; a list that cannot be written leaves it hidden from this run only, and says so."""
    url = store_url_of(persistence)
    if url is None:
        return
    try:
        remember_store(url)
    except OSError as err:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(
                f"tether: sandbox: cannot add the store {url} to the list of stores every run "
                f"hides ({err.strerror or err}); runs over other stores may read and change it\n"
            )


plugin: Final = SandboxPlugin()

__all__ = ["SANDBOX_SERVICE", "SandboxConfig", "SandboxPlugin", "plugin"]
