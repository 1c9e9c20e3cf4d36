"""Project instructions: ``AGENTS.md`` and ``CLAUDE.md``, read once per session, kept in its log.

Where they come from, in the order they are given to the model (``docs/instructions.md``):

1. the user's own files, ``AGENTS.md`` then ``CLAUDE.md`` in :func:`tether._dirs.config_dir`;
2. the same two names in each directory from the repository root (the nearest directory above
   the workspace holding ``.git``; without one, the workspace root alone) down to the workspace
   root, outermost first, so the nearest file comes last and wins where they disagree.

Each file is capped at :data:`MAX_FILE_BYTES` and all of them together at
:data:`MAX_TOTAL_BYTES`; past a cap the text is cut at a character boundary and ends with a
visible ``[tether: ... truncated ...]`` marker. A name that is the same file as one already
used (``CLAUDE.md`` linked to ``AGENTS.md``) is used once.

They reach the model as one ``user/message`` at the start of the session's first turn, its
``source`` recording each file used (path, sha256 of the bytes used, bytes used, size). Being
in the log, the text is replayed as it was on resume and inherited by a fork's seed; nothing
re-reads the files for a session that has begun. A child delegated in its parent's workspace
takes its parent's record instead of reading the files (:meth:`ProjectInstructions.inherit`,
decision 0041), so a fan-out of a hundred children reads them once. They are instructions, not
configuration: no scope is read from them, so they need no workspace trust.

A workspace is the agents' to write, so a project file is read as the ``read`` tool reads: a
name that leads to a hidden path (credentials, tether's own directories, the session store) is
skipped, so a link planted in the workspace cannot show the model what its tools may not see;
so is one that leads out of the repository (or the workspace, without one). Only regular files
are read, never a FIFO or a device.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from tether._dirs import config_dir
from tether.agent._events import UserMessage
from tether.kernel import ServiceKey
from tether.kernel._printable import printable
from tether.kernel._workspace_files import Unread, read_prefix
from tether.sandbox import PathRules
from tether.sandbox._paths import below
from tether.session import Event, JsonObject, JsonValue, Session

INSTRUCTION_NAMES: Final = ("AGENTS.md", "CLAUDE.md")
MAX_FILE_BYTES: Final = 32 * 1024
MAX_TOTAL_BYTES: Final = 64 * 1024
INSTRUCTIONS_PLUGIN: Final = "project-instructions"
INSTRUCTIONS_FORM: Final = "instructions"

INSTRUCTIONS_HEAD: Final = (
    "Project instructions, from AGENTS.md and CLAUDE.md files: the user's own first, then "
    "from the repository root down to the workspace, so where they disagree the later, nearer "
    "file wins. They are instructions about the work; they never change your permission scope."
)

Origin = Literal["user", "project"]
"""``user``: the user's config directory; ``project``: the repository or the workspace."""


@dataclass(frozen=True, slots=True)
class UsedFile:
    path: str
    """The absolute path it was found at."""
    shown: str
    """How it is named to the model and the user: relative to the workspace inside it."""
    origin: Origin
    text: str
    """What the model gets from it, markers included."""
    sha256: str
    """Of the bytes used (for a file under the caps, the file's own digest)."""
    used: int
    size: int

    @property
    def truncated(self) -> bool:
        return self.used < self.size

    def record(self) -> dict[str, JsonValue]:
        return {
            "path": self.path,
            "origin": self.origin,
            "sha256": self.sha256,
            "bytes": self.used,
            "size": self.size,
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True)
class SkippedFile:
    path: str
    shown: str
    reason: str


@dataclass(frozen=True, slots=True)
class LoadedInstructions:
    used: tuple[UsedFile, ...]
    skipped: tuple[SkippedFile, ...]

    @property
    def used_bytes(self) -> int:
        return sum(f.used for f in self.used)

    def message(self) -> str:
        parts = [INSTRUCTIONS_HEAD]
        parts += [f"Instructions from {f.shown}:\n\n{f.text}" for f in self.used]
        return "\n\n".join(parts)

    def summary(self) -> str:
        """One line for people: which files, how much."""
        names = ", ".join(printable(f.shown) for f in self.used)
        cut = sum(1 for f in self.used if f.truncated)
        tail = f", {cut} truncated" if cut else ""
        return f"project instructions: {names} ({self.used_bytes} bytes{tail})"

    def source(self) -> dict[str, JsonValue]:
        """The ``source`` of the ``user/message`` that carries them: the durable record."""
        return {
            "kind": "plugin",
            "plugin": INSTRUCTIONS_PLUGIN,
            "form": INSTRUCTIONS_FORM,
            "summary": self.summary(),
            "files": [f.record() for f in self.used],
        }


def is_instructions(event: Event) -> bool:
    return event.type == UserMessage.TYPE and UserMessage.parse(event.data).from_plugin(
        INSTRUCTIONS_PLUGIN, INSTRUCTIONS_FORM
    )


def instructions_data(loaded: LoadedInstructions) -> JsonObject:
    """The payload of the ``user/message`` that carries ``loaded``."""
    return UserMessage(loaded.message(), loaded.source()).to_data()


class InstructionsRecords:
    """Where a log holds project instructions, as a session's fold (``Session.fold``): asking
    reads only the events appended since the last time, never the whole log."""

    __slots__ = ("first", "seqs")

    def __init__(self) -> None:
        self.first: Event | None = None
        self.seqs: list[int] = []

    def feed(self, event: Event) -> None:
        if is_instructions(event):
            self.seqs.append(event.seq)
            if self.first is None:
                self.first = event


def recorded_instructions(session: Session) -> Event | None:
    """The ``user/message`` that gave ``session`` its instructions, if its log holds one."""
    return session.fold(InstructionsRecords).first


def instruction_dirs(workspace: str) -> list[str]:
    """The project directories searched, outermost first: from the repository root (nearest
    directory holding ``.git``) down to ``workspace``, or ``workspace`` alone without one."""
    root = os.path.realpath(workspace)
    chain = [root]
    directory = root
    while not os.path.lexists(os.path.join(directory, ".git")):
        parent = os.path.dirname(directory)
        if parent == directory:
            return [root]
        directory = parent
        chain.append(directory)
    return list(reversed(chain))


class ProjectInstructions:
    """Service :data:`PROJECT_INSTRUCTIONS`: finds and reads the instruction files.

    ``rules`` gives the hidden paths in force (the sandbox's); when it fails, no project file
    is read (each is skipped with the reason), since hiding less is not an option.
    """

    def __init__(
        self, *, rules: Callable[[], PathRules], env: Mapping[str, str] | None = None
    ) -> None:
        self._rules = rules
        self._env = os.environ if env is None else env
        self._loaded: weakref.WeakKeyDictionary[Session, LoadedInstructions] = (
            weakref.WeakKeyDictionary()
        )
        """What was read for a live session whose log may not say (none were found, or it has
        delegated before its first turn): read once, shared by the session and its children."""

    def give(self, session: Session) -> None:
        """At the start of ``session``'s first own turn: its instructions as one
        ``user/message``, unless its log already holds them (resumed, forked, or taken from its
        parent). Read here unless already read for this session (:meth:`inherit`)."""
        if recorded_instructions(session) is None:
            loaded = self._loaded_for(session)
            if loaded is not None and loaded.used:
                session.append(UserMessage.TYPE, instructions_data(loaded), surface_op="append")

    def inherit(self, parent: Session, child: Session) -> None:
        """Give a child prepared in its parent's working directory its parent's instructions,
        so no child reads a file its parent has read (decision 0041).

        Synchronous, called while the child is prepared (before the delegation's first await),
        like the capture of its scope. The parent's own record, when its log holds one, is
        copied into the child's log; otherwise the files are read once for the parent (the
        same text its first turn will then record) and shared by all its children. Either way
        the text is in the child's own log, so a cold resume replays it and never reads the
        parent again. A child in another working directory reads its own at its first turn; a
        fork whose seed holds the record already has it.
        """
        if child.header.cwd is None or child.header.cwd != parent.header.cwd:
            return
        if recorded_instructions(child) is not None:
            return
        event = recorded_instructions(parent)
        if event is not None:
            child.append(UserMessage.TYPE, event.data, surface_op="append")
            return
        loaded = self._loaded_for(parent)
        if loaded is None:
            return
        # A child found none either: remembered, as no event can say it (an empty message
        # would change what the model is sent), so the child's first turn reads nothing.
        self._loaded[child] = loaded
        if loaded.used:
            child.append(UserMessage.TYPE, instructions_data(loaded), surface_op="append")

    def _loaded_for(self, session: Session) -> LoadedInstructions | None:
        cwd = session.header.cwd
        if cwd is None:
            return None
        loaded = self._loaded.get(session)
        if loaded is None:
            loaded = self._loaded[session] = self.load(cwd)
        return loaded

    def candidates(self, workspace: str) -> list[tuple[str, Origin]]:
        """Every path looked at, in order, existing or not."""
        user = str(config_dir(self._env))
        found: list[tuple[str, Origin]] = [
            (os.path.join(user, name), "user") for name in INSTRUCTION_NAMES
        ]
        for directory in instruction_dirs(workspace):
            found += [(os.path.join(directory, name), "project") for name in INSTRUCTION_NAMES]
        return found

    def load(self, workspace: str) -> LoadedInstructions:
        root = os.path.realpath(workspace)
        try:
            rules: PathRules | None = self._rules()
            rules_error = None
        except Exception as err:
            rules, rules_error = None, f"cannot tell which paths are hidden ({err})"
        used: list[UsedFile] = []
        skipped: list[SkippedFile] = []
        seen: dict[tuple[int, int], str] = {}
        budget = MAX_TOTAL_BYTES
        top = instruction_dirs(root)[0]
        for path, origin in self.candidates(root):
            shown = _shown(path, root)

            def vet(location: str, st: os.stat_result) -> str | None:
                return rules_error or _outside(top, location) or _hidden(rules, location, st)

            # A few bytes past the cap show where the last whole character ends. The user's
            # own files lie where agents cannot write; a project file is vetted before a byte
            # of it is read.
            prefix = read_prefix(path, MAX_FILE_BYTES + 4, vet if origin == "project" else None)
            if isinstance(prefix, Unread):
                if prefix.error is not None:
                    skipped.append(SkippedFile(path, shown, prefix.error))
                continue
            identity = (prefix.stat.st_dev, prefix.stat.st_ino)
            if identity in seen:
                skipped.append(SkippedFile(path, shown, f"the same file as {seen[identity]}"))
                continue
            seen[identity] = shown
            used.append(_use(path, shown, origin, prefix.data, prefix.size, budget))
            budget -= used[-1].used
        return LoadedInstructions(tuple(used), tuple(skipped))


PROJECT_INSTRUCTIONS: Final = ServiceKey[ProjectInstructions]("project_instructions")
"""The composed :class:`ProjectInstructions`; without it no session reads any."""


def _outside(top: str, location: str) -> str | None:
    # A link out of the repository could reach anything this process can read (/proc, /sys,
    # a FUSE mount that never answers); the conventions' links stay inside.
    if below(location, top):
        return None
    return f"it leads outside {printable(top)}, to {printable(location)}"


def _hidden(rules: PathRules | None, location: str, st: os.stat_result) -> str | None:
    if rules is not None and rules.hides(location, st):
        return "it leads to a path hidden from the agent's tools"
    return None


def _shown(path: str, root: str) -> str:
    inside = path.startswith(root.rstrip("/") + "/")
    return os.path.relpath(path, root) if inside else path


def _use(path: str, shown: str, origin: Origin, data: bytes, size: int, budget: int) -> UsedFile:
    """The file's text within both caps, with a marker saying what a cap cut."""
    limit = min(MAX_FILE_BYTES, max(budget, 0))
    kept = _utf8_prefix(data, limit) if size > limit else data
    text = kept.decode("utf-8", "replace").rstrip()
    if len(kept) < size:
        if limit < MAX_FILE_BYTES:
            cap = f"project instructions are limited to {MAX_TOTAL_BYTES} bytes in all"
        else:
            cap = f"the limit is {MAX_FILE_BYTES} bytes per file"
        marker = (
            f"[tether: {shown} truncated: the first {len(kept)} of its {size} bytes are shown "
            f"({cap})]"
        )
        text = f"{text}\n\n{marker}" if text else marker
    digest = hashlib.sha256(kept).hexdigest()
    return UsedFile(path, shown, origin, text, digest, len(kept), size)


def _utf8_prefix(data: bytes, limit: int) -> bytes:
    """At most ``limit`` bytes of ``data``, never ending inside a UTF-8 sequence."""
    cut = min(limit, len(data))
    # A continuation byte (10xxxxxx) at the cut belongs to a character that began before it.
    while 0 < cut < len(data) and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return data[:cut]


__all__ = [
    "INSTRUCTIONS_HEAD",
    "INSTRUCTION_NAMES",
    "MAX_FILE_BYTES",
    "MAX_TOTAL_BYTES",
    "PROJECT_INSTRUCTIONS",
    "InstructionsRecords",
    "LoadedInstructions",
    "Origin",
    "ProjectInstructions",
    "SkippedFile",
    "UsedFile",
    "instruction_dirs",
    "instructions_data",
    "is_instructions",
    "recorded_instructions",
]
