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

Every new root session looks for them anew, so a file changed since the last session is the
one its session records. A harness that starts many sessions in one workspace looks them up
each time but opens a file only when it changed: the bytes of each file read are kept while
its device, inode, type, size and times stand exactly as they were when it was read, and it
had been still for two seconds by then (decision 0059).

A workspace is the agents' to write, so a project file is read as the ``read`` tool reads: a
name that leads to a hidden path (credentials, tether's own directories, the session store) is
skipped, so a link planted in the workspace cannot show the model what its tools may not see;
so is one that leads out of the repository (or the workspace, without one). Only regular files
are read, never a FIFO or a device.
"""

from __future__ import annotations

import hashlib
import os
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from tether._dirs import config_dir
from tether.agent._events import UserMessage
from tether.kernel import ServiceKey
from tether.kernel._printable import printable
from tether.kernel._real_path import real_path
from tether.kernel._workspace_files import Prefix, Unread, read_prefix
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
    return _project_dirs(real_path(workspace))


def _project_dirs(root: str) -> list[str]:
    """:func:`instruction_dirs` of a canonical ``root``."""
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
        self._files: dict[str, _ReadFile] = {}
        """The files read, by path: their bytes are used again while the file stands exactly
        as it was read (:meth:`_read`), so a new session in the same workspace opens none."""
        self._user_dirs: dict[tuple[str | None, str | None], str] = {}

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
        return self._candidates(instruction_dirs(workspace))

    def _candidates(self, dirs: list[str]) -> list[tuple[str, Origin]]:
        user = self._user_dir()
        found: list[tuple[str, Origin]] = [(f"{user}/{name}", "user") for name in INSTRUCTION_NAMES]
        for directory in dirs:
            base = directory.rstrip("/")  # the filesystem root is "/"
            found += [(f"{base}/{name}", "project") for name in INSTRUCTION_NAMES]
        return found

    def _user_dir(self) -> str:
        """The user's configuration directory (``config_dir``), worked out once for each value
        of the two variables it depends on."""
        key = (self._env.get("XDG_CONFIG_HOME"), self._env.get("HOME"))
        found = self._user_dirs.get(key)
        if found is None:
            found = self._user_dirs[key] = str(config_dir(self._env)).rstrip("/")
        return found

    def load(self, workspace: str) -> LoadedInstructions:
        root = real_path(workspace)
        dirs = _project_dirs(root)
        top = dirs[0]
        rules = _Rules(self._rules)
        used: list[UsedFile] = []
        skipped: list[SkippedFile] = []
        seen: dict[tuple[int, int], str] = {}
        budget = MAX_TOTAL_BYTES
        for path, origin in self._candidates(dirs):
            shown = _shown(path, root)

            def vet(location: str, st: os.stat_result) -> str | None:
                hidden, problem = rules.get()
                return problem or _outside(top, location) or _hidden(hidden, location, st)

            # The user's own files lie where agents cannot write; a project file is vetted
            # before a byte of it is read (or its bytes used again).
            prefix = self._read(path, vet if origin == "project" else None)
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

    def _read(
        self, path: str, vet: Callable[[str, os.stat_result], str | None] | None
    ) -> Prefix | Unread:
        """:func:`read_prefix` of ``path`` (a few bytes past the cap show where the last whole
        character ends), or the bytes read from it before, when it is still the very file they were
        read from: the same device and inode, type, size, modification and change times (and for a
        project file, no link); and its change time was older than :data:`SETTLED_NS` when it was
        read, so no second change could have left its times as they were (the change time is set by
        the kernel alone, to the moment of the change, even by ``utimensat``). Either way ``vet``
        sees the file as it is now, before its bytes are used."""
        kept = self._files.get(path)
        if kept is not None:
            try:
                # A project file is vetted where it leads: used again only when it is no link
                # (its directory is canonical, so it then leads where it is): its type in the
                # identity says so.
                info: os.stat_result | None = os.lstat(path) if vet else os.stat(path)
            except OSError:
                info = None
            if info is not None and _identity(info) == kept.identity:
                refusal = vet(path, info) if vet is not None else None
                if refusal is not None:
                    return Unread(refusal)
                return Prefix(kept.data, kept.size, path, info)
            del self._files[path]
        started = time.time_ns()
        prefix = read_prefix(path, MAX_FILE_BYTES + 4, vet)
        if isinstance(prefix, Prefix) and prefix.stat.st_ctime_ns < started - SETTLED_NS:
            self._files[path] = _ReadFile(_identity(prefix.stat), prefix.data, prefix.size)
            while len(self._files) > _FILES_KEPT:
                del self._files[next(iter(self._files))]
        return prefix


SETTLED_NS: Final = 2_000_000_000
"""A file changed this shortly before it was read may change again within its timestamps'
tick, leaving them as they were: its bytes are not used again, it is read anew each time
until it has stood still this long."""

_FILES_KEPT: Final = 64
"""Files whose bytes are kept (the oldest goes first): a few workspaces' worth."""


@dataclass(frozen=True, slots=True)
class _ReadFile:
    identity: tuple[int, ...]
    data: bytes
    size: int


def _identity(info: os.stat_result) -> tuple[int, ...]:
    return (
        info.st_dev,
        info.st_ino,
        info.st_mode,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


class _Rules:
    """The hidden paths in force, asked for once per load and only when a project file
    exists (a workspace without one never needs them); when asking fails, no project file
    is read, since hiding less is not an option."""

    __slots__ = ("_answer", "_source")

    def __init__(self, source: Callable[[], PathRules]) -> None:
        self._source = source
        self._answer: tuple[PathRules | None, str | None] | None = None

    def get(self) -> tuple[PathRules | None, str | None]:
        """The rules, or ``None`` and why they cannot be known."""
        if self._answer is None:
            try:
                self._answer = (self._source(), None)
            except Exception as err:
                self._answer = (None, f"cannot tell which paths are hidden ({err})")
        return self._answer


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
    # Both are normalised (a canonical directory and a name): inside, the rest of the path is
    # its path relative to the root.
    base = root.rstrip("/") + "/"
    return path[len(base) :] if path.startswith(base) else path


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
