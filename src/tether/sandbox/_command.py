"""What ``confine`` returns: the command to spawn instead, and how to read its failures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tether.policy import SandboxMode
from tether.sandbox._errors import SandboxUnavailableError
from tether.sandbox._landlock_exec import LandlockSpec
from tether.sandbox._socket_calls import SocketRules
from tether.sandbox._temp_dirs import temp_dirs

BackendName = Literal["bwrap", "landlock", "none"]
"""A confinement backend.

- ``bwrap``: bubblewrap namespaces (read-only bind of ``/``, private ``/tmp``, no network,
  PID namespace, every capability dropped). Preferred.
- ``landlock``: the Landlock LSM applied in the child (no namespaces needed).
- ``none``: nothing confines; only ``danger-full-access`` commands use it.
"""

Enforcement = Literal["full", "partial", "none"]
"""How completely the backend enforces the mode's file rules.

- ``full``: every file effect the mode forbids is refused.
- ``partial``: some are not (Landlock below ABI 3 cannot refuse ``truncate`` outside).
- ``none``: the command is not confined (``danger-full-access``).
"""


@dataclass(frozen=True, slots=True)
class RunnerFailureRule:
    """The runner itself failed (the command never ran): its exit status is ``exit_code``
    and the first line of stderr starts with ``line_prefix``. Outranks a denial signature."""

    exit_code: int
    line_prefix: str
    description: str

    def matches(self, returncode: int | None, stderr: str) -> bool:
        if returncode != self.exit_code:
            return False
        first = next((line for line in stderr.splitlines() if line.strip()), "")
        return first.startswith(self.line_prefix)


@dataclass(frozen=True, slots=True)
class ConfinedCommand:
    """A command ready to spawn under one policy.

    ``argv`` and ``env`` are self-contained: a caller that spawns ``argv`` with ``env`` (in its
    own session, ``close_fds``) gets the confined command. :func:`tether.sandbox.spawn` does
    that and may use a faster equivalent (the same confinement applied by a pair from the fork
    server, :mod:`tether.sandbox._landlock_server`, instead of the launcher in ``argv``).
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    mode: SandboxMode
    backend: BackendName
    enforcement: Enforcement
    denial_signatures: tuple[str, ...]
    """stderr substrings that mean a file effect was refused by this backend."""
    runner_failure_rules: tuple[RunnerFailureRule, ...]
    command: tuple[str, ...]
    """The original argv, unconfined (for display, and for the Landlock fast path)."""
    runner: str | None = None
    """argv[0] of the runner program, if any: failing to execute it is an infrastructure
    failure, not the command's."""
    network: bool = False
    landlock: LandlockSpec | None = None
    """Set for the Landlock backend: the spec :func:`tether.sandbox.spawn` applies in the
    child (and the supervisor that sweeps what the command leaves behind)."""
    sockets: SocketRules | None = None
    """Set for a confined command without network: where its supervisor lets it connect and
    send (see :mod:`tether.sandbox._socket_calls`). Under Landlock the roots are its writable
    roots, filled in where the ruleset is built."""
    bwrap_argv: tuple[str, ...] = ()
    """Bubblewrap below a supervisor: the bwrap command line the supervisor's command execs
    (``argv`` is the same behind the launcher)."""
    bwrap_pair_argv: tuple[str, ...] = ()
    """What a fork-server pair execs instead: ``bwrap_argv`` joining the network namespace
    the pair made ahead of time (:func:`tether.sandbox._bwrap_exec.private_network`) rather
    than making one. Only such a pair may run it."""
    bwrap_watch: tuple[str, ...] = ()
    """The directories holding the paths ``bwrap_pair_argv`` mounts on or binds from. A
    sandbox the fork server set up ahead of time with the same command line serves this
    command only if none of them has changed since before it was set up: a bind mount holds
    the file it found then, so an entry replaced since would be the old one inside."""
    fast_path: bool = False
    """Spawn through the fork server instead of the launcher in ``argv``."""
    temp_dir: str | None = field(default=None, compare=False)
    """A private temp directory made for this command (released by :meth:`close`). A pair
    prepared ahead (:mod:`._prepared`) gives the command it takes its own instead."""
    denial_note: str | None = None
    """What to tell the model after a denial, beyond the marker (set while the workspace
    root is not writable itself: nothing can be created, removed or renamed directly in it)."""

    @property
    def confined(self) -> bool:
        return self.backend != "none"

    @property
    def supervised(self) -> bool:
        """A supervisor process stands between the harness and the command (Landlock, and
        bubblewrap without network): stop it with SIGTERM so it can kill everything below it,
        not with SIGKILL."""
        return self.landlock is not None or self.sockets is not None

    def runner_failure(self, returncode: int | None, stderr: str) -> str | None:
        """Why the runner failed, or ``None`` when the command itself ran."""
        for rule in self.runner_failure_rules:
            if rule.matches(returncode, stderr):
                first = next((line for line in stderr.splitlines() if line.strip()), "")
                return f"{rule.description}: {first.strip()}"
        return None

    def unavailable(self, reason: str) -> SandboxUnavailableError:
        """The error for a sandbox that could not start this command (it did not run)."""
        return SandboxUnavailableError(
            f"{reason}; the command was not run",
            mode=self.mode.value,
            reasons={self.backend: reason},
        )

    def denied(self, stderr: str) -> bool:
        """True when ``stderr`` carries one of this backend's denial signatures."""
        return any(sig in stderr for sig in self.denial_signatures)

    def close(self) -> None:
        """Release what was made for this command: its private temp directory, removed in
        the background (:mod:`._temp_dirs`)."""
        if self.temp_dir is not None:
            temp_dirs.release(self.temp_dir)


__all__ = ["BackendName", "ConfinedCommand", "Enforcement", "RunnerFailureRule"]
