"""The sandbox provider: one backend chain, probed once, and ``confine``.

::

    provider = SandboxProvider()                        # bwrap, then Landlock
    cmd = provider.confine(["bash", "-c", "make test"], policy)
    proc = await tether.sandbox.spawn(cmd, cwd=policy.workspace_root)

The chain is probed lazily, at most once per backend per provider, and the first usable
backend is kept for the provider's lifetime. A restricted mode with no usable backend raises
:class:`SandboxUnavailableError` and never runs anything; ``danger-full-access`` needs no
backend and runs the plain argv (environment still scrubbed of secrets).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from tether.policy import SandboxExecutionPolicy, SandboxMode, parse_sandbox_mode
from tether.sandbox import _listings as listings
from tether.sandbox._backends import (
    Backend,
    BwrapBackend,
    Coverage,
    LandlockBackend,
    Probe,
    Profile,
    check_runner,
)
from tether.sandbox._command import BackendName, ConfinedCommand, Enforcement
from tether.sandbox._environment import confined_env, unconfined_env
from tether.sandbox._errors import SandboxError, SandboxUnavailableError
from tether.sandbox._paths import PathRules, path_rules, shadowing_import_path

log = logging.getLogger(__name__)

DISABLE_ENV: Final = "TETHER_SANDBOX_DISABLE"
"""Comma-separated backend names an operator (or a test) turns off, e.g. ``bwrap,landlock``."""

CHAIN: Final[tuple[BackendName, ...]] = ("bwrap", "landlock")
"""The Linux chain, most preferred first."""

BackendStatus = Literal["chosen", "available", "rejected", "disabled"]
"""A backend's standing in one provider.

- ``chosen``: the first usable backend; every confined command uses it.
- ``available``: usable, but a backend earlier in the chain was chosen.
- ``rejected``: its probe failed (``reason`` says why).
- ``disabled``: turned off by configuration or ``TETHER_SANDBOX_DISABLE``; not probed.
"""


@dataclass(frozen=True, slots=True)
class BackendReport:
    """One row of ``tether doctor``'s sandbox section."""

    name: BackendName
    status: BackendStatus
    reason: str
    enforcement: Enforcement | None = None
    enforces: Coverage = ()
    """What it enforces, aspect by aspect (a usable backend only)."""


def _parse_names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(item.strip() for item in items if item.strip())


def _check_names(names: Iterable[str], what: str) -> None:
    unknown = [n for n in names if n not in CHAIN]
    if unknown:
        raise SandboxError(
            f"{what}: unknown sandbox backend(s) {', '.join(unknown)} (known: {', '.join(CHAIN)})",
            code="SANDBOX_CONFIG",
        )


class SandboxProvider:
    """Service ``sandbox``: confines commands under a :class:`SandboxExecutionPolicy`.

    ``backends``: the chain to try, in order (default bwrap then Landlock). ``disable``:
    names to turn off (default: ``TETHER_SANDBOX_DISABLE`` from ``environ``). ``bwrap_path``
    or ``runner_command`` (which wins): the bwrap binary, or a bwrap-compatible runner; either
    is probed like bwrap itself. ``landlock_fast_path``: start Landlock commands through the
    fork server rather than the launcher process. ``hidden_paths``, ``protected_paths``,
    ``env_allow``: additions to the hidden paths (:mod:`tether.sandbox._paths`), to the
    control paths (readable, never writable), and to the environment allowlist.
    ``store_paths``: the session store's files, hidden like credentials. ``open_workspace_root``:
    under bubblewrap, bind the workspace root writable as a whole (see ``docs/sandbox.md``).
    ``allow_unix_sockets``: socket paths (absolute) a command without network may connect to
    wherever they are, like Claude Code's ``allowUnixSockets``. ``home``: the home directory
    whose credentials are hidden (default: the harness user's and the command environment's
    ``$HOME``). ``environ``: the environment commands derive from (default ``os.environ`` at
    the moment of each ``confine``).
    """

    def __init__(
        self,
        *,
        backends: Sequence[str] = CHAIN,
        disable: str | Iterable[str] | None = None,
        bwrap_path: str | None = None,
        runner_command: str | None = None,
        landlock_fast_path: bool = True,
        hidden_paths: Sequence[str] = (),
        protected_paths: Sequence[str] = (),
        env_allow: Sequence[str] = (),
        store_paths: Sequence[str] = (),
        open_workspace_root: bool = False,
        allow_unix_sockets: Sequence[str] = (),
        home: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        chain = _parse_names(backends)
        relative = [p for p in allow_unix_sockets if not os.path.isabs(p)]
        if relative:
            raise SandboxError(
                f"allow_unix_sockets: {', '.join(relative)} is not an absolute path "
                "(name each socket by its full path, e.g. /var/run/docker.sock)",
                code="SANDBOX_CONFIG",
            )
        _check_names(chain, "backends")
        if disable is None:
            source = os.environ if environ is None else environ
            disable = source.get(DISABLE_ENV, "")
        disabled = _parse_names(disable)
        _check_names(disabled, DISABLE_ENV if isinstance(disable, str) else "disable")
        self.chain: tuple[str, ...] = chain
        self.disabled: frozenset[str] = frozenset(disabled)
        self._backends: dict[str, Backend] = {
            "bwrap": BwrapBackend(runner_command or bwrap_path),
            "landlock": LandlockBackend(fast_path=landlock_fast_path),
        }
        self.hidden_extra = tuple(os.path.abspath(p) for p in hidden_paths)
        self.protected_extra = tuple(os.path.abspath(p) for p in protected_paths)
        self.store_paths = tuple(os.path.abspath(p) for p in store_paths)
        self._explicit_runner = (runner_command or bwrap_path) is not None
        self.open_workspace_root = open_workspace_root
        self.env_allow = tuple(env_allow)
        self.unix_sockets = tuple(allow_unix_sockets)
        self.home = home
        self._environ = environ
        self._probes: dict[str, Probe] = {}
        self._chosen: str | None = None
        self._resolved = False
        self._lock = threading.Lock()

    # -- backend selection ----------------------------------------------------------------
    def _probe(self, name: str) -> Probe:
        probe = self._probes.get(name)
        if probe is None:
            probe = self._backends[name].probe()
            self._probes[name] = probe
        return probe

    def backend_name(self) -> BackendName | None:
        """The chosen backend (probing the chain the first time), or ``None``."""
        with self._lock:
            if not self._resolved:
                for name in self.chain:
                    if name not in self.disabled and self._probe(name).ok:
                        self._chosen = name
                        break
                self._resolved = True
            chosen = self._chosen
        return "bwrap" if chosen == "bwrap" else "landlock" if chosen == "landlock" else None

    @property
    def confining(self) -> bool:
        """True when restricted modes can run commands (a backend was chosen)."""
        return self.backend_name() is not None

    def enforcement(self) -> Enforcement:
        name = self.backend_name()
        return "none" if name is None else self._probes[name].enforcement

    def reasons(self) -> dict[str, str]:
        """Why each backend of the chain is not the chosen one (empty for the chosen)."""
        chosen = self.backend_name()
        out: dict[str, str] = {}
        for report in self.reports():
            if report.name != chosen:
                out[report.name] = report.reason
        return out

    def reports(self) -> list[BackendReport]:
        """Every backend of the chain, probed (once each), for ``tether doctor``."""
        chosen = self.backend_name()
        rows: list[BackendReport] = []
        for name in CHAIN:
            key: BackendName = "bwrap" if name == "bwrap" else "landlock"
            if name not in self.chain:
                rows.append(BackendReport(key, "disabled", "not in the configured chain"))
                continue
            if name in self.disabled:
                rows.append(BackendReport(key, "disabled", f"disabled by {DISABLE_ENV}/config"))
                continue
            with self._lock:
                probe = self._probe(name)
            if not probe.ok:
                rows.append(BackendReport(key, "rejected", probe.reason))
                continue
            enforces = self._backends[name].coverage()
            if name == chosen:
                rows.append(BackendReport(key, "chosen", probe.reason, probe.enforcement, enforces))
            else:
                reason = f"{probe.reason}; not used: {chosen} comes first"
                rows.append(BackendReport(key, "available", reason, probe.enforcement, enforces))
        return rows

    # -- confine --------------------------------------------------------------------------
    def confine(
        self,
        argv: Sequence[str],
        policy: SandboxExecutionPolicy,
        *,
        env: Mapping[str, str] | None = None,
        network: bool = False,
        extra_env: Mapping[str, str] | None = None,
    ) -> ConfinedCommand:
        """``argv`` confined to ``policy``. ``env``: the environment to derive the command's
        from (default: the provider's); ``extra_env`` is added after the allowlist (secret
        names are dropped from both). ``network``: allow network access (default: none).

        Raises :class:`SandboxUnavailableError` for a restricted mode that no backend can
        enforce; nothing has been run then.
        """
        with listings.one_moment():
            return self._confine(argv, policy, env=env, network=network, extra_env=extra_env)

    def _confine(
        self,
        argv: Sequence[str],
        policy: SandboxExecutionPolicy,
        *,
        env: Mapping[str, str] | None,
        network: bool,
        extra_env: Mapping[str, str] | None,
    ) -> ConfinedCommand:
        if not argv:
            raise SandboxError("confine needs a non-empty argv", code="SANDBOX_CONFIG")
        mode = parse_sandbox_mode(policy.mode)
        source = (
            env if env is not None else (os.environ if self._environ is None else self._environ)
        )
        if mode is SandboxMode.DANGER_FULL_ACCESS:
            return unconfined(argv, env=source, extra_env=extra_env, network=True)
        # Before the chain is probed: probing a runner inside the workspace would run it.
        self.check_runners(policy.workspace_root)
        name = self.backend_name()
        if name is None:
            reasons = self.reasons()
            detail = "; ".join(f"{k}: {v}" for k, v in reasons.items()) or "no backend configured"
            raise SandboxUnavailableError(
                f"no sandbox backend can enforce {mode.value} mode ({detail}); "
                "the command was not run",
                mode=mode.value,
                reasons=reasons,
            )
        workspace = listings.real_path(policy.workspace_root)
        if not os.path.isdir(workspace):
            raise SandboxUnavailableError(
                f"cannot confine to workspace {policy.workspace_root}: not a directory; "
                "the command was not run",
                mode=mode.value,
                reasons={name: "workspace root missing"},
            )
        backend = self._backends[name]
        check_runner(backend.runner_files(), workspace)
        rules = self.path_rules(source)
        rules.refuse_workspace(workspace)
        profile = Profile(
            mode=mode,
            workspace=workspace,
            env=confined_env(source, allow=self.env_allow, extra=extra_env),
            hidden=rules.hidden,
            control=rules.control(workspace),
            network=network,
            open_root=self.open_workspace_root,
            # Real paths, as the supervisor finds a socket (/var/run is a link to /run).
            unix_sockets=tuple(dict.fromkeys(os.path.realpath(p) for p in self.unix_sockets)),
        )
        return backend.confine(argv, profile)

    # -- paths ----------------------------------------------------------------------------
    def path_rules(self, env: Mapping[str, str] | None = None) -> PathRules:
        """The hidden and control paths commands are confined by, and the file tools apply
        (derived from ``env``, default the provider's environment)."""
        source = (
            env if env is not None else (os.environ if self._environ is None else self._environ)
        )
        return path_rules(
            source,
            home=self.home,
            hidden=self.hidden_extra,
            store=self.store_paths,
            protected=self.protected_extra,
        )

    def check_workspace(self, workspace: str) -> None:
        """Refuse, before anything runs, a workspace whose store or hidden paths this
        provider cannot keep out of reach: the workspace inside a hidden path (the store's
        directory among them), or, with ``open_workspace_root`` under bubblewrap, store
        files directly in the workspace root (a command could create the missing ones, a
        ``-journal`` that SQLite would replay among them). A runner inside the workspace is
        refused or its backend rejected before it is ever probed.

        What the user should know at start goes to the log as a warning (``tether run``
        prints it on stderr): a ``bwrap`` on ``PATH`` that is not used because it lies in the
        workspace, and import-path directories inside the workspace that come before the
        site directories (``python -m ...`` run from there), where every module shadows the
        harness's own."""
        root = os.path.realpath(workspace)
        for reason in self.check_runners(root):
            log.warning("sandbox: bwrap is not used: %s", reason)
        shadowing = shadowing_import_path(root)
        if shadowing:
            log.warning(
                "sandbox: Python's import path starts with %s, inside the workspace: what an "
                "agent writes there runs unconfined at tether's next start; start tether with "
                "its own command (not python -m from inside the workspace, nor a PYTHONPATH "
                "there)",
                ", ".join(shadowing),
            )
        rules = self.path_rules()
        rules.refuse_workspace(root)
        at_root = [p for p in rules.store if os.path.dirname(p) == root]
        if at_root and self.open_workspace_root and self.backend_name() == "bwrap":
            raise SandboxError(
                f"session store files lie directly in the workspace root {root} and "
                "open_workspace_root is on, so a confined command could create the missing "
                f"ones ({', '.join(os.path.basename(p) for p in at_root)}); keep the store "
                "outside the workspace (--store sqlite:////ABS/PATH.db) or turn "
                "open_workspace_root off",
                code="STORE_UNPROTECTED",
            )

    def check_runners(self, workspace: str) -> list[str]:
        """Reject, before anything is probed, each runner of the chain that a command
        confined to ``workspace`` could rewrite: it is never run, not even to probe it. An
        explicitly configured one is an error (``SANDBOX_CONFIG``); one merely found
        (``bwrap`` on ``PATH``: an activated project ``.venv``, ``node_modules/.bin``, a
        ``bin`` that direnv adds) rejects its backend, with the reason. Returns the reasons
        ``bwrap`` found on ``PATH`` was rejected for now (empty when it was not, or was
        already probed). ``tether run`` (:meth:`check_workspace`) and ``tether doctor`` call
        this first."""
        if all(name in self.disabled or name in self._probes for name in self.chain):
            return []  # each was checked (and probed) already
        root = os.path.realpath(workspace)
        rejected: list[str] = []
        with self._lock:
            for name in self.chain:
                if name in self.disabled or name in self._probes:
                    continue
                try:
                    check_runner(self._backends[name].runner_files(), root)
                except SandboxError as err:
                    if name == "bwrap" and self._explicit_runner:
                        raise
                    self._probes[name] = Probe(False, str(err))
                    if name == "bwrap":
                        rejected.append(str(err))
        return rejected


def unconfined(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    network: bool = True,
) -> ConfinedCommand:
    """``danger-full-access``: the plain argv, with secret-looking variables removed."""
    if not argv:
        raise SandboxError("confine needs a non-empty argv", code="SANDBOX_CONFIG")
    return ConfinedCommand(
        argv=tuple(argv),
        env=unconfined_env(os.environ if env is None else env, extra=extra_env),
        mode=SandboxMode.DANGER_FULL_ACCESS,
        backend="none",
        enforcement="none",
        denial_signatures=(),
        runner_failure_rules=(),
        command=tuple(argv),
        network=network,
    )


def describe_backends(
    provider: SandboxProvider | None = None, *, workspace: str | None = None
) -> list[BackendReport]:
    """The chosen backend and why each other one was not chosen (for ``tether doctor``).

    Without ``provider``, a default one is built (honouring ``TETHER_SANDBOX_DISABLE``).
    With ``workspace``, runners a command confined there could rewrite are rejected first
    (:meth:`SandboxProvider.check_runners`), exactly as ``tether run`` does: a planted
    ``bwrap`` on ``PATH`` is never probed, which would run it unconfined.
    """
    provider = provider or SandboxProvider()
    if workspace is not None:
        provider.check_runners(workspace)
    return provider.reports()


__all__ = [
    "CHAIN",
    "DISABLE_ENV",
    "BackendReport",
    "BackendStatus",
    "SandboxProvider",
    "describe_backends",
    "unconfined",
]
