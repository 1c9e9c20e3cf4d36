"""The paths no agent may read or change: one list for confined commands and the file tools.

Two kinds, both applied whether or not the path exists yet:

- **hidden**: neither readable nor writable. Credential stores under a home directory (and
  where well-known variables move them), tether's own data and configuration directories
  (the default store, leases, workspace trust), every file of the session store in use
  wherever it is, and ``/proc/*/environ`` and ``/proc/*/mem`` (the harness's API keys and
  memory).
- **control**: readable, never writable. The workspace's control names at its root
  (``tether.toml``, ``.claude``, ``.mcp.json``, ``.git``: what tether, Claude Code settings,
  MCP clients and git read and act on later, outside any sandbox), the code the harness
  itself runs (:func:`harness_paths`: a project ``.venv`` with tether installed in it), plus
  ``protected_paths``.

The backends turn these rules into mounts or Landlock grants (:mod:`.backends`,
:mod:`.landlock_exec`); the file tools ask :func:`rules_for` for the rules of a call.
"""

from __future__ import annotations

import contextlib
import os
import re
import site
import stat
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from tether.dirs import config_dir, data_dir
from tether.kernel.config import CONFIG_FILE
from tether.sandbox.errors import SandboxError
from tether.session.persistence import STORE_ENV, InvalidStoreUrlError
from tether.session.store_files import store_files

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
)
"""Paths under a home directory that hold secrets (keys, tokens, passwords). uid 0 inside a
sandbox can read root-only files, so they are hidden rather than left to permissions."""

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
)
"""Variables that move a credential store, and what under each value is secret (``""``: the
value itself). ``KUBECONFIG`` is a ``:``-separated list."""

_XDG_MOVES: Final = (
    (".config/", "XDG_CONFIG_HOME"),
    (".local/share/", "XDG_DATA_HOME"),
    (".cache/", "XDG_CACHE_HOME"),
)

CONTROL_NAMES: Final = (CONFIG_FILE, ".claude", ".mcp.json", ".git")
"""Entries at the workspace root that tether, Claude Code, MCP clients or git act on later,
outside any sandbox: readable by agents, never writable."""

_PACKAGE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""tether's own package directory (``.../tether``)."""


def harness_paths() -> tuple[str, ...]:
    """The code the harness runs: its interpreter's prefixes (a virtual environment), the
    site directories it imports from at start-up (``.pth`` files there run code) and tether's
    own package (an editable install's source). A command or file tool that could change
    them would change what the user's next run executes, outside any sandbox, so they are
    control paths wherever they are (they matter when they lie inside a workspace)."""
    found = [sys.prefix, sys.exec_prefix, _PACKAGE_DIR, *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return tuple(dict.fromkeys(os.path.abspath(p) for p in found))


_PROC_SECRET: Final = re.compile(r"/proc/(?:\d+|self|thread-self)(?:/task/\d+)?/(?:environ|mem)")


def homes(source: Mapping[str, str], home: str | None = None) -> list[str]:
    """The home directories to hide credentials in: ``home`` if given, else ``$HOME`` of the
    command's environment and the harness user's own home (they differ under ``sudo -E``)."""
    if home is not None:
        return [home]
    found = [os.path.expanduser("~")]
    if source.get("HOME"):
        found.append(source["HOME"])
    return list(dict.fromkeys(h for h in found if os.path.isabs(h)))


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

    def __init__(self) -> None:
        self._dirs: dict[str, str] = {}
        self._missing: set[str] = set()
        self.stats: dict[str, os.stat_result] = {}
        """The ``stat`` of each resolved path that exists."""
        self.consulted: set[str] = set()
        """Existing directories whose entries decided a resolution."""
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
        try:
            info = os.lstat(full)
        except OSError:
            self._missing.add(full)
            return full
        if stat.S_ISLNK(info.st_mode):
            self.followed = True
            return self._final(os.path.realpath(full))
        self.stats[full] = info
        return full

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


@dataclass(frozen=True, slots=True)
class PathRules:
    """The hidden and control paths in force, canonical, existing or not."""

    hidden: tuple[str, ...]
    store: tuple[str, ...] = ()
    """The subset of ``hidden`` that belongs to the session store (for clearer refusals)."""
    control_extra: tuple[str, ...] = ()
    """Control paths beyond the workspace's own names (the harness's code,
    ``protected_paths``)."""
    present: tuple[str, ...] = ()
    """The hidden paths that existed when the rules were made."""
    identities: frozenset[tuple[int, int]] = frozenset()
    """(device, inode) of each of ``present``: a hard link or bind mount of one elsewhere is
    still recognised."""
    folded: frozenset[str] = field(init=False)
    """``hidden`` case-folded: on a case-insensitive filesystem ``~/.SSH`` is ``~/.ssh``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded", frozenset(h.casefold() for h in self.hidden))

    def control(self, workspace: str) -> tuple[str, ...]:
        """The control paths of ``workspace`` (canonical), existing or not."""
        root = os.path.realpath(workspace)
        return canonical([*(os.path.join(root, n) for n in CONTROL_NAMES), *self.control_extra])

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
        """Canonical ``path`` is, or lies beneath, a control path of ``workspace``. Names at
        the root compare case-insensitively: on such a filesystem ``TETHER.TOML`` is the
        same file."""
        root = os.path.realpath(workspace)
        if below(path, root) and path != root:
            first = os.path.relpath(path, root).split(os.sep, 1)[0].casefold()
            if first in {n.casefold() for n in CONTROL_NAMES}:
                return True
        return any(below(path, c) for c in self.control_extra)

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
                "or keep the store elsewhere (--store sqlite:///ABS/PATH.db)",
                code="STORE_UNPROTECTED",
            )
        raise SandboxError(
            f"the workspace {root} lies inside {covering}, which tether hides from every "
            "command and file tool (credentials, tether's own data); choose a workspace "
            "outside it",
            code="WORKSPACE_HIDDEN",
        )


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
    stamps: tuple[tuple[str, int, int, int], ...]
    """(directory, device, inode, mtime in ns) of every directory consulted."""
    built: int


_CACHE_SIZE: Final = 8
_FRESH_NS: Final = 2_000_000_000
"""A directory changed this recently may change again within its timestamp's tick: the rules
are not reused until it has been quiet this long."""
_cache: dict[tuple[object, ...], _Cached] = {}


def _reusable(entry: _Cached) -> bool:
    try:
        for directory, dev, ino, mtime in entry.stamps:
            info = os.stat(directory)
            if (info.st_dev, info.st_ino, info.st_mtime_ns) != (dev, ino, mtime):
                return False
            if mtime > entry.built - _FRESH_NS:
                return False
    except OSError:
        return False
    return True


def path_rules(
    source: Mapping[str, str],
    *,
    home: str | None = None,
    hidden: Sequence[str] = (),
    store: Sequence[str] = (),
    protected: Sequence[str] = (),
) -> PathRules:
    """The rules for an environment: credential paths, tether's directories and the
    ``TETHER_STORE`` store it implies, plus ``hidden`` and ``store`` paths and ``protected``
    control paths.

    Resolving some forty paths costs a good part of a millisecond, paid per command, so the
    rules are kept and reused while none of the directories consulted to resolve them has
    changed (a path created, removed or replaced by a link changes its directory)."""
    key = (
        tuple(source.get(v) for v in _RELEVANT),
        os.path.expanduser("~"),
        home,
        tuple(hidden),
        tuple(store),
        tuple(protected),
    )
    cached = _cache.get(key)
    if cached is not None and _reusable(cached):
        return cached.rules
    built = time.time_ns()
    resolver = _Resolver()
    store_paths = canonical([*store, *env_store_files(source)], resolver)
    every = canonical(
        [*credential_paths(source, home=home), *tether_dirs(source, home=home), *hidden],
        resolver,
    )
    every = tuple(dict.fromkeys([*every, *store_paths]))
    present = tuple(p for p in every if p in resolver.stats)
    identities = frozenset((resolver.stats[p].st_dev, resolver.stats[p].st_ino) for p in present)
    control = canonical([*protected, *harness_paths()], resolver)
    rules = PathRules(every, store_paths, control, present, identities)
    if not resolver.followed:
        stamps = []
        for directory in sorted(resolver.consulted):
            with contextlib.suppress(OSError):
                info = os.stat(directory)
                stamps.append((directory, info.st_dev, info.st_ino, info.st_mtime_ns))
        _cache.pop(key, None)
        _cache[key] = _Cached(rules, tuple(stamps), built)
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
    "PathRuleSource",
    "PathRules",
    "below",
    "canonical",
    "credential_paths",
    "default_rules",
    "env_store_files",
    "harness_paths",
    "homes",
    "path_rules",
    "rules_for",
    "tether_dirs",
]
