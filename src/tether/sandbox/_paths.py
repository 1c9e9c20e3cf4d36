"""The paths no agent may read or change: one list for confined commands and the file tools.

Two kinds, both applied whether or not the path exists yet:

- **hidden**: neither readable nor writable. Credential stores and histories under a home
  directory (and where well-known variables move them), for uid 0 the system's password
  hashes and SSH host keys, tether's own data and configuration directories (the default
  store, leases, workspace trust), every file of the session store in use wherever it is,
  and ``/proc/*/environ``, ``/proc/*/mem``, ``/proc/kmsg`` and ``/proc/kcore`` (the
  harness's API keys and memory, the kernel's log and memory).
- **control**: readable, never writable. The workspace's control names
  (:mod:`._control_names`: ``tether.toml``, ``.claude``, ``.codex``, ``.mcp.json``, ``.git``,
  hook managers' files: what tether, Claude Code and Codex settings, MCP clients and git read
  and act on later, outside any sandbox), at its root whether they exist or not, and at any
  depth, with what git takes for a git directory by its content,
  what the root's git configuration points at inside the workspace (:func:`git_controls`),
  the code the harness itself runs (:func:`harness_paths`: a project ``.venv`` with tether
  installed in it), the names Python acts on in every directory of the harness's import path
  (:data:`IMPORT_NAMES`), plus ``protected_paths``.

The backends turn these rules into mounts or Landlock grants (:mod:`._backends`,
:mod:`._landlock_exec`); the file tools ask :func:`rules_for` for the rules of a call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
import site
import stat
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from tether._dirs import config_dir, data_dir
from tether.sandbox import _listings as listings
from tether.sandbox._control_names import CONTROL_NAMES, control_component, git_dir_on_path
from tether.sandbox._errors import SandboxError
from tether.sandbox._landlock_exec import carved
from tether.session._known_stores import known_store_files, known_stores_file
from tether.session._store_files import store_files
from tether.session.persistence._factory import STORE_ENV, InvalidStoreUrlError

CREDENTIAL_PATHS: Final = (
    ".ssh",
    ".aws",
    ".azure",
    ".oci",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".config/git/credentials",
    ".config/containers/auth.json",
    ".config/rclone/rclone.conf",
    ".gnupg",
    ".docker",
    ".kube",
    ".password-store",
    ".local/share/keyrings",
    ".netrc",
    ".authinfo",
    ".authinfo.gpg",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".cache/huggingface/token",
    ".huggingface/token",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".pulumi/credentials.json",
    ".databrickscfg",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".config/github-copilot",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    # Histories: passwords and tokens typed on command lines and into REPLs.
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".node_repl_history",
    ".rediscli_history",
)
"""Paths under a home directory that hold secrets (keys, tokens, passwords). uid 0 inside a
sandbox can read root-only files, so they are hidden rather than left to permissions."""

SYSTEM_CREDENTIALS: Final = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
)
"""Secrets of the system that only uid 0 can read (password hashes and their backups, SSH
host keys; any other ``/etc/ssh/ssh_host_*_key`` found is added): hidden when the harness
runs as root, whose commands are uid 0 without capabilities and could read them."""

CREDENTIAL_ENV: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("XDG_RUNTIME_DIR", ("containers/auth.json",)),
    ("DOCKER_CONFIG", ("",)),
    ("KUBECONFIG", ("",)),
    ("REGISTRY_AUTH_FILE", ("",)),
    ("CARGO_HOME", ("credentials", "credentials.toml")),
    ("HF_HOME", ("token",)),
    ("HF_TOKEN_PATH", ("",)),
    ("AWS_SHARED_CREDENTIALS_FILE", ("",)),
    ("AWS_CONFIG_FILE", ("",)),
    ("GOOGLE_APPLICATION_CREDENTIALS", ("",)),
    ("CLOUDSDK_CONFIG", ("",)),
    ("AZURE_CONFIG_DIR", ("",)),
    ("GH_CONFIG_DIR", ("",)),
    ("GNUPGHOME", ("",)),
    ("PASSWORD_STORE_DIR", ("",)),
    ("NETRC", ("",)),
    ("NPM_CONFIG_USERCONFIG", ("",)),
    ("CLAUDE_CONFIG_DIR", (".credentials.json",)),
    ("CODEX_HOME", ("auth.json",)),
    ("HISTFILE", ("",)),
    ("PYTHON_HISTORY", ("",)),
    ("PSQL_HISTORY", ("",)),
    ("MYSQL_HISTFILE", ("",)),
    ("NODE_REPL_HISTORY", ("",)),
)
"""Variables that move a credential store, and what under each value is secret (``""``: the
value itself). ``KUBECONFIG`` is a ``:``-separated list."""

_XDG_MOVES: Final = (
    (".config/", "XDG_CONFIG_HOME"),
    (".local/share/", "XDG_DATA_HOME"),
    (".cache/", "XDG_CACHE_HOME"),
)

IMPORT_NAMES: Final = (
    "sitecustomize",
    "sitecustomize.*",
    "usercustomize",
    "usercustomize.*",
    "__pycache__/sitecustomize.*",
    "__pycache__/usercustomize.*",
    "*.pth",
    "*.dist-info",
    "*.egg-info",
    "*.egg-link",
)
"""What Python or ``importlib.metadata`` act on in a directory of the import path: the
modules every start imports (as source, bytecode, an extension module or a package, and the
cached bytecode of an existing source), ``.pth`` files, and distributions' metadata (entry
points: console scripts, tether's plugins). Control paths in every directory that was on
``sys.path`` at start-up, whether they exist or not (``*``: :data:`~._landlock_exec.WILDCARD`),
so that an agent can still edit the code there, but not what the next start runs."""

_PACKAGE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""tether's own package directory (``.../tether``)."""


def _startup_import_path() -> tuple[str, ...]:
    try:
        cwd = os.getcwd()
    except OSError:  # a removed working directory: "" finds nothing then
        cwd = ""
    found = (os.path.join(cwd, p) if cwd or os.path.isabs(p) else "" for p in sys.path)
    return tuple(dict.fromkeys(os.path.normpath(p) for p in found if os.path.isabs(p)))


STARTUP_IMPORT_PATH: tuple[str, ...] = _startup_import_path()
"""``sys.path`` as the harness started (absolute; ``""`` is the working directory then): the
import path its next start will have too, for the same command line and environment."""


def harness_paths() -> tuple[str, ...]:
    """The code the harness runs: its interpreter's prefixes (a virtual environment) and the
    base installation's (``sys.base_prefix``), the standard library, the site directories it
    imports from at start-up (``.pth`` files there run code) and tether's own package (an
    editable install's source). A command or file tool that could change them would change
    what the user's next run executes, outside any sandbox, so they are control paths
    wherever they are (they matter when they lie inside a workspace)."""
    found = [
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        *_stdlib(),
        _PACKAGE_DIR,
        *site.getsitepackages(),
    ]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return tuple(dict.fromkeys(os.path.abspath(p) for p in found if p))


@functools.lru_cache(maxsize=1)
def _stdlib() -> tuple[str, ...]:
    # Fixed for the interpreter's life, and sysconfig takes a good tenth of a millisecond.
    return (
        sysconfig.get_path("stdlib"),
        sysconfig.get_path("platstdlib"),
        os.path.dirname(os.__file__),
    )


def import_path_controls(
    resolver: _Resolver | None = None, entries: Sequence[str] | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The control paths of the import path (``entries``, default
    :data:`STARTUP_IMPORT_PATH`) outside the harness's own code (wholly control already):
    each entry that is a file (a zip archive Python imports from) itself, and for every
    other entry, existing or not, its :data:`IMPORT_NAMES`. Returns (paths, patterns): the
    entries resolved, the names joined to them as written."""
    resolver = resolver or _Resolver()
    kept = canonical(harness_paths(), resolver)
    files: list[str] = []
    patterns: list[str] = []
    for entry in canonical(STARTUP_IMPORT_PATH if entries is None else entries, resolver):
        if any(below(entry, k) for k in kept):
            continue
        info = resolver.stats.get(entry)
        if info is not None and not stat.S_ISDIR(info.st_mode):
            files.append(entry)
            continue
        # Joined, not resolved: listing the entry itself would tie the rules' reuse to a
        # directory that may change often (the working directory, /tmp).
        patterns += [os.path.join(entry, name) for name in IMPORT_NAMES]
    return tuple(files), tuple(dict.fromkeys(patterns))


def shadowing_import_path(workspace: str, entries: Sequence[str] | None = None) -> list[str]:
    """The directories of the import path (``entries``, default :data:`STARTUP_IMPORT_PATH`)
    that come before the site directories and lie inside ``workspace``, outside the
    harness's own code: every module there shadows the installed ones (tether's dependencies
    among them), so what an agent writes there runs unconfined at the next start. ``python -m
    ...`` (or ``-c``) run from inside the workspace puts it first; so does a ``PYTHONPATH``
    entry inside it."""
    root = os.path.realpath(workspace)
    path = list(STARTUP_IMPORT_PATH if entries is None else entries)
    sites = {os.path.abspath(p) for p in site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        sites.add(os.path.abspath(site.getusersitepackages()))
    first_site = next((i for i, p in enumerate(path) if os.path.abspath(p) in sites), len(path))
    kept = canonical(harness_paths())
    found = []
    for entry in canonical(path[:first_site]):
        if below(entry, root) and not any(below(entry, k) for k in kept):
            found.append(entry)
    return found


_PROC_SECRET: Final = re.compile(
    r"/proc/(?:(?:\d+|self|thread-self)(?:/task/\d+)?/(?:environ|mem)|kmsg|kcore)"
)
"""The harness's environment (API keys) and memory, the kernel's log (a read as root also
consumes it) and memory. Commands cannot reach them (another PID namespace or Landlock's
ptrace rule; ``kmsg`` and ``kcore`` need capabilities they no longer have), so only the
file tools, which run in the harness, check them."""


@functools.lru_cache(maxsize=4)
def _password_home(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_dir or None
    except KeyError:
        return None


def real_home() -> str | None:
    """The effective user's home as the password database has it: ``$HOME`` (and so
    ``~``) may point elsewhere (``sudo -E``, CI), and the credentials are still here."""
    return _password_home(os.geteuid())


def homes(source: Mapping[str, str], home: str | None = None) -> list[str]:
    """The home directories to hide credentials in: ``home`` if given, else the harness's
    ``~`` (its ``$HOME``), its effective user's real home (:func:`real_home`) and ``$HOME``
    of the command's environment (they differ under ``sudo -E``)."""
    if home is not None:
        return [home]
    found = [os.path.expanduser("~"), real_home() or ""]
    if source.get("HOME"):
        found.append(source["HOME"])
    return list(dict.fromkeys(h for h in found if os.path.isabs(h)))


def system_credentials() -> list[str]:
    """:data:`SYSTEM_CREDENTIALS` and every SSH host key found, when the harness is uid 0
    (for another user they are unreadable anyway)."""
    if os.geteuid() != 0:
        return []
    found = list(SYSTEM_CREDENTIALS)
    with contextlib.suppress(OSError):
        found += [
            os.path.join("/etc/ssh", name)
            for name in sorted(os.listdir("/etc/ssh"))
            if name.startswith("ssh_host_") and name.endswith("_key")
        ]
    return list(dict.fromkeys(found))


def credential_paths(source: Mapping[str, str], *, home: str | None = None) -> list[str]:
    """Where credentials are or would be (absolute, not resolved), for each home and for
    the variables of :data:`CREDENTIAL_ENV` and the XDG base directories in ``source``."""
    found = [os.path.join(h, rel) for h in homes(source, home) for rel in CREDENTIAL_PATHS]
    for prefix, variable in _XDG_MOVES:
        base = source.get(variable, "")
        if os.path.isabs(base):
            found += [
                os.path.join(base, rel[len(prefix) :])
                for rel in CREDENTIAL_PATHS
                if rel.startswith(prefix)
            ]
    for variable, secrets in CREDENTIAL_ENV:
        values = source.get(variable, "").split(":" if variable == "KUBECONFIG" else "\0")
        found += [
            os.path.join(value, rel) if rel else value
            for value in values
            if os.path.isabs(value)
            for rel in secrets
        ]
    return found


def tether_dirs(source: Mapping[str, str], *, home: str | None = None) -> list[str]:
    """tether's data directory (the default store, its leases) and configuration directory
    (workspace trust), as ``source`` places them and at each home's default."""
    found: list[str] = []
    for variable, where in (("XDG_DATA_HOME", data_dir), ("XDG_CONFIG_HOME", config_dir)):
        if source.get(variable):
            found.append(str(where(source)))
        found += [str(where({"HOME": h})) for h in homes(source, home)]
    return found


def env_store_files(source: Mapping[str, str]) -> list[str]:
    """The files of the store ``TETHER_STORE`` names (none when it is unset or invalid: a
    harness then refuses to open it anyway)."""
    url = source.get(STORE_ENV, "").strip()
    if not url:
        return []
    try:
        return [str(p) for p in store_files(url)]
    except InvalidStoreUrlError:
        return []


class _Resolver:
    """``os.path.realpath`` for many paths that share directories: each directory is
    resolved once, and a missing component ends the lookups (the rest stays as written)."""

    def __init__(self, canonical: str | None = None) -> None:
        """``canonical``: a directory the caller resolved already, taken as is (its own
        directories are then not consulted: a busy ``/tmp`` above a workspace decides
        nothing about the names inside it)."""
        self._dirs: dict[str, str] = {} if canonical is None else {canonical: canonical}
        self._missing: set[str] = set()
        self.stats: dict[str, os.stat_result] = {}
        """The ``stat`` of each resolved path that exists."""
        self.consulted: set[str] = set()
        """Existing directories whose entries decided a resolution."""
        self.looked: dict[str, list[listings.Found]] = {}
        """The entries looked up in each of ``consulted``, and what was there."""
        self.followed = False
        """A symbolic link was followed (its target's directories are not in ``consulted``)."""

    def resolve(self, path: str) -> str:
        if ".." in path.split("/"):
            self.followed = True
            return self._final(os.path.realpath(path))
        parent, name = os.path.split(os.path.normpath(path))
        if not name:
            return parent
        base = self._dirs.get(parent)
        if base is None:
            base = self._dirs[parent] = self.resolve(parent)
        full = os.path.join(base, name)
        if base in self._missing:
            self._missing.add(full)
            return full
        self.consulted.add(base)
        looked = self.looked.setdefault(base, [])
        try:
            info = os.lstat(full)
        except OSError:
            looked.append((full, None))
            self._missing.add(full)
            return full
        looked.append((full, (info.st_dev, info.st_ino)))  # (a link: not kept, see below)
        if stat.S_ISLNK(info.st_mode):
            self.followed = True
            return self._final(os.path.realpath(full))
        self.stats[full] = info
        return full

    def lookups(self, listed: Iterable[str] = ()) -> dict[str, tuple[listings.Found, ...]]:
        """:attr:`looked`, for :attr:`listings.Snapshot.lookups`, but for the directories
        ``listed`` (whose every entry counts)."""
        skip = set(listed)
        return {d: tuple(found) for d, found in self.looked.items() if d not in skip}

    def _final(self, path: str) -> str:
        with contextlib.suppress(OSError):
            self.stats[path] = os.stat(path)
        return path


def canonical(paths: Iterable[str], resolver: _Resolver | None = None) -> tuple[str, ...]:
    """Absolute paths resolved as the filesystem stands (a missing tail stays as written),
    without duplicates or ``/``, in their first order."""
    resolve = (resolver or _Resolver()).resolve
    out = (resolve(p) for p in paths if p and os.path.isabs(p))
    return tuple(dict.fromkeys(p for p in out if p != "/"))


def below(path: str, top: str) -> bool:
    """``path`` is ``top`` or lies beneath it (both canonical)."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def _root_controls(root: str) -> list[str]:
    """:data:`CONTROL_NAMES` in canonical ``root``, resolved: only the names whose first
    component exists there need a look. Kept while the root and the directories looked into
    stand (:mod:`._listings`), unless a link was followed on the way."""
    cached = _root_cache.pop(root, None)
    if cached is not None and cached.snapshot.unchanged():
        _root_cache[root] = cached
        return list(cached.paths)
    built = listings.started()
    try:
        present = {name.casefold() for name in os.listdir(root)}
    except OSError:
        present = set()
    resolver = _Resolver(root)
    found = [
        resolver.resolve(os.path.join(root, name))
        if name.split("/", 1)[0].casefold() in present
        else os.path.join(root, name)
        for name in CONTROL_NAMES
    ]
    if not resolver.followed:
        consulted = [root, *sorted(resolver.consulted)]
        snapshot = listings.snapshot(consulted, built, resolver.lookups(listed=[root]))
        _root_cache[root] = _RootCached(tuple(found), snapshot)
        while len(_root_cache) > _CACHE_SIZE:
            _root_cache.pop(next(iter(_root_cache)))
    return found


@dataclass(frozen=True, slots=True)
class _RootCached:
    paths: tuple[str, ...]
    snapshot: listings.Snapshot


_root_cache: dict[str, _RootCached] = {}


@dataclass(frozen=True, slots=True)
class PathRules:
    """The hidden and control paths in force, canonical, existing or not."""

    hidden: tuple[str, ...]
    store: tuple[str, ...] = ()
    """The subset of ``hidden`` that belongs to a session store, this run's or one another run
    used (for clearer refusals, and :meth:`SandboxProvider.check_workspace`)."""
    control_extra: tuple[str, ...] = ()
    """Control paths beyond the workspace's own names (the harness's code,
    ``protected_paths``)."""
    present: tuple[str, ...] = ()
    """The hidden paths that existed when the rules were made."""
    identities: frozenset[tuple[int, int]] = frozenset()
    """(device, inode) of each of ``present``: a hard link or bind mount of one elsewhere is
    still recognised."""
    patterns: tuple[str, ...] = ()
    """Control paths that name entries by a pattern (:data:`IMPORT_NAMES` in each directory
    of the import path; :func:`~._landlock_exec.is_pattern`)."""
    folded: frozenset[str] = field(init=False)
    """``hidden`` case-folded: on a case-insensitive filesystem ``~/.SSH`` is ``~/.ssh``."""
    _folded_patterns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded", frozenset(h.casefold() for h in self.hidden))
        object.__setattr__(self, "_folded_patterns", tuple(p.casefold() for p in self.patterns))

    def control(self, workspace: str) -> tuple[str, ...]:
        """The control paths of ``workspace`` (canonical), existing or not: its root's names,
        what its git configuration points at (:func:`git_controls`), the harness's code and
        ``protected_paths``, and the import path's :attr:`patterns`."""
        root = os.path.realpath(workspace)
        found = [*_root_controls(root), *git_controls(root), *self.control_extra]
        return tuple(dict.fromkeys(p for p in [*found, *self.patterns] if p != "/"))

    def hiding(self, path: str) -> str | None:
        """The hidden path that covers canonical ``path``, if any."""
        if _PROC_SECRET.fullmatch(path.removesuffix(" (deleted)")):
            return path
        key = path.casefold()
        return next((h for h in self.hidden if below(key, h.casefold())), None)

    def hides(self, path: str, st: os.stat_result | None = None) -> bool:
        """Canonical ``path`` (with its ``stat`` when at hand) is hidden."""
        if st is not None and (st.st_dev, st.st_ino) in self.identities:
            return True
        return self.hiding(path) is not None

    def hides_entry(self, path: str, st: os.stat_result) -> bool:
        """:meth:`hides` for an entry of a directory that is not hidden itself (a tree walk
        never enters one), so only the entry's own path and identity can match: one lookup
        instead of a comparison with every hidden path."""
        if (st.st_dev, st.st_ino) in self.identities or path.casefold() in self.folded:
            return True
        return path.startswith("/proc/") and self.hiding(path) is not None

    def controls(self, path: str, workspace: str) -> bool:
        """Canonical ``path`` is, or lies beneath, a control path of ``workspace``: a
        control name at any depth below its root, or a directory there that git takes for a
        git directory (:mod:`._control_names`), what its git configuration points at, the
        harness's code, ``protected_paths`` and the import path's names. Names compare
        case-insensitively: on such a filesystem ``TETHER.TOML`` is the same file. A file
        where a directory of the import path is missing (a zip archive Python would import
        from) is refused too."""
        root = os.path.realpath(workspace)
        if below(path, root) and path != root:
            rel = os.path.relpath(path, root)
            if control_component(rel.split("/")) is not None or git_dir_on_path(path, root):
                return True
        if any(below(path, c) for c in self.control_extra):
            return True
        key = path.casefold()
        for pattern in self._folded_patterns:
            if carved(key, pattern) or key == pattern.rpartition("/")[0]:
                return True
        return any(below(path, c) for c in git_controls(root))

    def refuse_workspace(self, workspace: str) -> None:
        """Raise when ``workspace`` lies inside a hidden path: no command could see it under
        bubblewrap, and no file tool could read it."""
        root = os.path.realpath(workspace)
        covering = self.hiding(root)
        if covering is None:
            return
        if covering in self.store:
            raise SandboxError(
                f"the workspace {root} lies inside the session store's {covering}, which "
                "every command and file tool must not see; use a workspace outside the store, "
                "or keep the store elsewhere (--store sqlite:////ABS/PATH.db)",
                code="STORE_UNPROTECTED",
            )
        raise SandboxError(
            f"the workspace {root} lies inside {covering}, which tether hides from every "
            "command and file tool (credentials, tether's own data); choose a workspace "
            "outside it",
            code="WORKSPACE_HIDDEN",
        )


# -- git ---------------------------------------------------------------------------------------
_GIT_PATHS: Final = frozenset({("core", "hookspath"), ("include", "path"), ("includeif", "path")})
"""Keys whose value is a path (``includeIf`` under any condition: the conditions are not
evaluated, every one counts)."""
_GIT_COMMANDS: Final = frozenset(
    {
        ("core", "fsmonitor"),
        ("core", "pager"),
        ("core", "editor"),
        ("core", "sshcommand"),
        ("core", "askpass"),
        ("sequence", "editor"),
        ("diff", "external"),
        ("diff", "textconv"),
        ("diff", "command"),
        ("filter", "clean"),
        ("filter", "smudge"),
        ("filter", "process"),
        ("merge", "driver"),
        ("gpg", "program"),
        ("credential", "helper"),
    }
)
"""Keys whose value is a command git runs on its own (a hook-like ``core.fsmonitor``, the
pager and editor, filter, diff and merge drivers, the signing program, a credential helper;
``(section, key)``, any subsection): each word of it that names a path inside the worktree
counts."""
_GIT_BOOLEANS: Final = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0"})
_GIT_INCLUDE_DEPTH: Final = 10
"""How deep git follows includes (its own limit)."""
_GIT_ESCAPES: Final = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}
_WORDS: Final = re.compile(r"[^\s;|&(){}<>`'\"=$]+")


def _git_value(text: str, i: int) -> tuple[str, int]:
    """A value as git reads it from ``text[i:]`` (after the ``=``): quotes removed, escapes
    and line continuations applied, a comment outside quotes ending it, outer whitespace
    dropped and inner runs kept."""
    out: list[str] = []
    spaces = ""
    quoted = False
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            break
        if not quoted and c in "#;":
            while i < n and text[i] != "\n":
                i += 1
            break
        if c == "\\":
            following = text[i + 1 : i + 2]
            if following == "\n":
                i += 2
                continue
            if text[i + 1 : i + 3] == "\r\n":
                i += 3
                continue
            if out:
                out.append(spaces)
            spaces = ""
            out.append(_GIT_ESCAPES.get(following, following))
            i += 2
            continue
        if c == '"':
            quoted = not quoted
            i += 1
            continue
        if not quoted and c in " \t\r":
            spaces += " "
            i += 1
            continue
        if out:
            out.append(spaces)
        spaces = ""
        out.append(c)
        i += 1
    return "".join(out), i


def _git_header(text: str, i: int) -> tuple[str, int]:
    """The section name (lower-cased) of the header at ``text[i] == "["``, and where its
    line goes on (a key may follow on the same line); the subsection is skipped."""
    n = len(text)
    i += 1
    name_start = i
    while i < n and (text[i].isalnum() or text[i] in "-."):
        i += 1
    name = text[name_start:i].lower().split(".", 1)[0]
    while i < n and text[i] in " \t":
        i += 1
    if i < n and text[i] == '"':
        i += 1
        while i < n and text[i] not in '"\n':
            i += 2 if text[i] == "\\" else 1
        i += 1
    while i < n and text[i] not in "]\n":
        i += 1
    return name, i + 1


def git_config_entries(text: str) -> list[tuple[str, str, str | None]]:
    """(section, key, value) of every entry of a git configuration file, section and key
    lower-cased (a subsection is dropped: every one counts the same here), ``None`` for a key
    without ``=`` (true). Parsed here rather than by running git, which would run what the
    configuration names (``core.fsmonitor``) and may be absent; lines git would reject are
    skipped."""
    entries: list[tuple[str, str, str | None]] = []
    section = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c in "#;":
            while i < n and text[i] != "\n":
                i += 1
        elif c == "[":
            section, i = _git_header(text, i)
        elif c.isalpha():
            start = i
            while i < n and (text[i].isalnum() or text[i] == "-"):
                i += 1
            key = text[start:i].lower()
            while i < n and text[i] in " \t":
                i += 1
            if i < n and text[i] == "=":
                value, i = _git_value(text, i + 1)
                entries.append((section, key, value))
            else:
                entries.append((section, key, None))
        else:
            while i < n and text[i] != "\n":
                i += 1
    return entries


def _read_small(path: str, limit: int = 1 << 20) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _inside(path: str, root: str) -> bool:
    return below(path, root) and path != root


@dataclass(frozen=True, slots=True)
class _GitCached:
    paths: tuple[str, ...]
    snapshot: listings.Snapshot
    """Every file consulted (``.git``, a ``gitdir:`` file's target, the configuration files
    and their includes)."""


_git_cache: dict[str, _GitCached] = {}


def git_controls(root: str) -> tuple[str, ...]:
    """What the workspace's git repository makes git run or read outside any sandbox, where
    it lies inside the workspace (canonical ``root``), existing or not: the directory a
    ``gitdir:`` file in ``root/.git`` names (and its common directory), and the paths its
    configuration (``config``, ``config.worktree`` and what they include) gives for
    ``core.hooksPath`` (a relocated hooks directory such as husky's ``.husky``), the
    included files themselves, and the words of the commands git runs on its own
    (:data:`_GIT_COMMANDS`, ``core.fsmonitor`` among them).

    Kept and reused while none of the files consulted has changed (same device, inode,
    mtime and size; one changed in the last two seconds is read again), so that a change of
    the configuration takes effect at the next command."""
    cached = _git_cache.get(root)
    if cached is not None and cached.snapshot.unchanged():
        return cached.paths
    built = listings.started()
    consulted: list[str] = []
    found: list[str] = []
    dotgit = os.path.join(root, ".git")
    consulted.append(dotgit)
    gitdir: str | None = None
    if os.path.isdir(dotgit):
        gitdir = dotgit
    elif os.path.isfile(dotgit):
        line = (_read_small(dotgit, 4096) or "").split("\n", 1)[0].strip()
        if line.startswith("gitdir:"):
            gitdir = os.path.normpath(os.path.join(root, line[len("gitdir:") :].strip()))
    if gitdir is not None:
        common_file = os.path.join(gitdir, "commondir")
        consulted.append(common_file)
        common = (_read_small(common_file, 4096) or "").strip()
        commondir = os.path.normpath(os.path.join(gitdir, common)) if common else gitdir
        found += [d for d in (gitdir, commondir) if d != dotgit]
        configs = [os.path.join(commondir, "config"), os.path.join(gitdir, "config.worktree")]
        if commondir != gitdir:
            configs.append(os.path.join(gitdir, "config"))
        seen: set[str] = set()
        pending = [(path, 0) for path in configs]
        while pending:
            path, depth = pending.pop(0)
            if path in seen:
                continue
            seen.add(path)
            consulted.append(path)
            content = _read_small(path)
            if content is None:
                continue
            for section, key, value in git_config_entries(content):
                if value is None:
                    continue
                if (section, key) in _GIT_PATHS:
                    target = os.path.expanduser(value)
                    if section.startswith("include"):
                        target = os.path.join(os.path.dirname(path), target)
                        if depth < _GIT_INCLUDE_DEPTH:
                            pending.append((os.path.normpath(target), depth + 1))
                    found.append(os.path.join(root, target))
                elif (section, key) in _GIT_COMMANDS and value.lower() not in _GIT_BOOLEANS:
                    # git runs the value itself, or through the shell when it holds a space
                    # or another metacharacter: both readings count.
                    command = value.lstrip("!")
                    for word in (command, *_WORDS.findall(command)):
                        found.append(os.path.join(root, os.path.expanduser(word)))
    resolver = _Resolver()
    paths = tuple(p for p in canonical(found, resolver) if _inside(p, root))
    _git_cache.pop(root, None)
    _git_cache[root] = _GitCached(paths, listings.snapshot(consulted, built))
    while len(_git_cache) > _CACHE_SIZE:
        _git_cache.pop(next(iter(_git_cache)), None)
    return paths


_RELEVANT: Final = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    STORE_ENV,
    *(variable for variable, _ in CREDENTIAL_ENV),
)
"""The variables the rules depend on."""


@dataclass(frozen=True, slots=True)
class _Cached:
    rules: PathRules
    snapshot: listings.Snapshot
    """Every directory consulted."""


_CACHE_SIZE: Final = 8
_cache: dict[tuple[object, ...], _Cached] = {}


def path_rules(
    source: Mapping[str, str],
    *,
    home: str | None = None,
    hidden: Sequence[str] = (),
    store: Sequence[str] = (),
    protected: Sequence[str] = (),
) -> PathRules:
    """The rules for an environment: credential paths, tether's directories, the
    ``TETHER_STORE`` store it implies and every store tether's runs have used
    (:mod:`tether.session._known_stores`), plus ``hidden`` and ``store`` paths and
    ``protected`` control paths.

    Resolving some forty paths costs a good part of a millisecond, paid per command, so the
    rules are kept and reused while none of the directories consulted to resolve them has
    changed (a path created, removed or replaced by a link changes its directory)."""
    key = (
        tuple(source.get(v) for v in _RELEVANT),
        os.path.expanduser("~"),
        real_home(),
        os.geteuid(),
        STARTUP_IMPORT_PATH,
        home,
        tuple(hidden),
        tuple(store),
        tuple(protected),
    )
    cached = _cache.get(key)
    if cached is not None and cached.snapshot.unchanged():
        return cached.rules
    built = listings.started()
    resolver = _Resolver()
    store_paths = canonical(
        [*store, *env_store_files(source), *known_store_files(source)], resolver
    )
    every = canonical(
        [
            *credential_paths(source, home=home),
            *system_credentials(),
            *tether_dirs(source, home=home),
            *hidden,
        ],
        resolver,
    )
    # A store added to the list changes the list's file: the rules are worked out again.
    resolver.consulted.add(str(known_stores_file(source)))
    every = tuple(dict.fromkeys([*every, *store_paths]))
    present = tuple(p for p in every if p in resolver.stats)
    identities = frozenset((resolver.stats[p].st_dev, resolver.stats[p].st_ino) for p in present)
    archives, patterns = import_path_controls(resolver)
    control = canonical([*protected, *harness_paths(), *archives], resolver)
    rules = PathRules(every, store_paths, control, present, identities, patterns)
    if not resolver.followed:
        _cache.pop(key, None)
        snapshot = listings.snapshot(sorted(resolver.consulted), built, resolver.lookups())
        _cache[key] = _Cached(rules, snapshot)
        while len(_cache) > _CACHE_SIZE:
            _cache.pop(next(iter(_cache)), None)
    return rules


def default_rules(env: Mapping[str, str] | None = None) -> PathRules:
    """The rules without a sandbox service: computed from ``env`` (default ``os.environ``)."""
    return path_rules(os.environ if env is None else env)


@runtime_checkable
class PathRuleSource(Protocol):
    """What the ``sandbox`` service offers the file tools: the rules it confines commands by."""

    def path_rules(self) -> PathRules: ...


def rules_for(service: object | None) -> PathRules:
    """The rules a file tool applies: the ``sandbox`` service's when it is composed, else the
    defaults from the environment, so a missing service never means fewer hidden paths."""
    if isinstance(service, PathRuleSource):
        return service.path_rules()
    return default_rules()


__all__ = [
    "CONTROL_NAMES",
    "CREDENTIAL_ENV",
    "CREDENTIAL_PATHS",
    "IMPORT_NAMES",
    "STARTUP_IMPORT_PATH",
    "SYSTEM_CREDENTIALS",
    "PathRuleSource",
    "PathRules",
    "below",
    "canonical",
    "credential_paths",
    "default_rules",
    "env_store_files",
    "git_config_entries",
    "git_controls",
    "harness_paths",
    "homes",
    "import_path_controls",
    "path_rules",
    "real_home",
    "rules_for",
    "shadowing_import_path",
    "system_credentials",
    "tether_dirs",
]
