"""Fork-server pairs confined before their command is known: for what, and how.

A command's confinement does not depend on the command, only on its policy, so the harness
has the fork server confine a pair for the commands it expects (those like its recent ones)
while it waits: a bubblewrap pair runs bwrap (the namespaces, every mount, the dropped
capabilities, the filter), a Landlock pair enters its domain, and each runs the waiter
(:mod:`._waiter`) in place of the command. A spawn is then one message: the command's stdio,
argv and environment.

A prepared pair serves a command only when the command's confinement is exactly the one it
was prepared for (its :class:`Profile`), and only while nothing that confinement was derived
from has changed since (:attr:`Preparation.snapshots`, the rule of :mod:`._listings`): a bind
mount, and a Landlock rule, holds the file it found when it was made, so an entry replaced
since would be the old one inside, and a new entry or hidden path would be missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Final

from tether.sandbox import _listings as listings
from tether.sandbox._command import ConfinedCommand
from tether.sandbox._landlock_exec import (
    LandlockSpec,
    abi_version,
    read_layer_and_snapshot,
    writable_roots,
    write_layer,
)
from tether.sandbox._landlock_server import BWRAP, LANDLOCK, LANDLOCK_NET
from tether.sandbox._socket_calls import SocketRules
from tether.sandbox._supervisor import Rules
from tether.sandbox._temp_dirs import temp_dirs

TEMP: Final = ""
"""In a Landlock plan's writable roots: the private temp directory, which differs for every
command. A prepared pair has one of its own (:attr:`Preparation.temp_dir`), which the command
it takes gets as ``$TMPDIR`` instead of the one ``confine`` made for it: a confine between the
pair's preparation and its command (a hook's, say) takes directories too, so the one the next
command will take cannot be known ahead."""


@dataclass(frozen=True, slots=True)
class Profile:
    """The confinement of a command, as a prepared pair is confined for it."""

    kind: bytes
    cwd: str
    options: tuple[str, ...] = ()
    """bubblewrap: bwrap's command line up to its ``--``."""
    rules: bytes = b""
    """bubblewrap: the supervisor's rules, encoded."""
    spec: LandlockSpec | None = None
    sockets: SocketRules | None = None
    """Landlock: the socket rules, before the writable roots are known."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How to prepare pairs for commands like one seen (the template of their profiles)."""

    profile: Profile
    """The profile, with :data:`TEMP` for a Landlock command's private temp directory."""
    env: tuple[tuple[str, str], ...] = ()
    """bubblewrap: bwrap's own environment (a command's comes with its request)."""
    watch: tuple[str, ...] = ()
    """bubblewrap: :attr:`ConfinedCommand.bwrap_watch`."""


def plan_of(command: ConfinedCommand, cwd: str, rules: bytes) -> Plan | None:
    """The plan for commands like ``command`` (its profile, the private temp directory left
    open); ``None`` when it cannot be prepared for (a bwrap command line that does not end in
    ``-- COMMAND``). ``rules``: the supervisor's (bwrap)."""
    spec = command.landlock
    if spec is not None:
        kind = LANDLOCK_NET if spec.network else LANDLOCK
        writable = tuple(TEMP if w == command.temp_dir else w for w in spec.writable)
        return Plan(
            Profile(kind, cwd, spec=replace(spec, writable=writable), sockets=command.sockets)
        )
    argv, tail = command.bwrap_pair_argv, command.command
    cut = len(argv) - len(tail) - 1
    if cut < 1 or argv[cut] != "--" or tuple(argv[cut + 1 :]) != tail:
        return None
    own = Profile(BWRAP, cwd, options=tuple(argv[:cut]), rules=rules)
    return Plan(own, tuple(command.env.items()), command.bwrap_watch)


@dataclass(slots=True, eq=False)
class Preparation:
    """What a pair is told to prepare itself (``PREPARE`` and :attr:`fds`), and what must
    stand for it to serve a command then."""

    fds: list[int] = field(default_factory=list)
    """The Landlock rulesets and the body, for the message; :meth:`close` after sending."""
    snapshots: tuple[listings.Snapshot, ...] = ()
    temp_dir: str | None = None
    """The pair's private temp directory (Landlock under workspace-write): the ``$TMPDIR``
    of the command it takes. Released when the command has ended, or the pair is let go
    unused (:meth:`release`)."""

    def stands(self) -> bool:
        """Nothing the confinement was derived from has changed since."""
        return all(s.unchanged() for s in self.snapshots)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()

    def release(self, *, used: bool = True) -> None:
        """The pair is gone: its temp directory is no longer used (removed in the background;
        kept for another command when no command of the pair ran, ``used`` false). Once
        only."""
        if self.temp_dir is not None:
            if used:
                temp_dirs.release(self.temp_dir)
            else:
                temp_dirs.give_back(self.temp_dir)
            self.temp_dir = None


def preparation(plan: Plan) -> Preparation:
    """Build a pair's preparation for ``plan`` (``OSError`` when it cannot be built)."""
    template = plan.profile
    built = listings.started()  # before anything is looked at
    out = Preparation()
    try:
        if template.spec is None:
            watch = (*plan.watch, template.cwd)
            out.snapshots = (listings.snapshot(watch, built),)
            body = {"argv": list(template.options), "env": dict(plan.env), "cwd": template.cwd}
            rules = template.rules
        else:
            temp = out.temp_dir = temp_dirs.take() if TEMP in template.spec.writable else None
            spec = replace(template.spec, writable=_filled(template.spec.writable, temp))
            roots = writable_roots(spec)
            # An entry granted is watched by its directory, but the temp directory itself:
            # only this harness writes in /tmp (under Landlock no command may).
            watch = (*(os.path.dirname(r) for r in roots if r != temp), template.cwd)
            snapshot = listings.snapshot(watch, built)
            sockets = template.sockets
            rules = Rules(
                roots, None if sockets is None else replace(sockets, roots=roots)
            ).encode()
            abi = abi_version()
            read, read_snapshot = read_layer_and_snapshot(spec.hidden, abi)
            out.fds.append(read)
            out.snapshots = (snapshot, read_snapshot)
            out.fds.append(write_layer(spec, abi, roots=roots))
            body = {"argv": [], "env": {}, "cwd": template.cwd, "writable": list(roots)}
        memfd = os.memfd_create("tether-prepare", os.MFD_CLOEXEC)
        out.fds.append(memfd)
        os.write(memfd, json.dumps({**body, "rules": rules.decode()}).encode())
    except BaseException:
        out.close()
        out.release(used=False)
        raise
    return out


def _filled(writable: Iterable[str], temp: str | None) -> tuple[str, ...]:
    return tuple(temp if w == TEMP and temp is not None else w for w in writable)


__all__ = ["TEMP", "Plan", "Preparation", "Profile", "plan_of", "preparation"]
