"""OS confinement for commands the model runs: bubblewrap, then Landlock, never nothing.

:class:`SandboxProvider` (service ``sandbox``) turns an argv and a
:class:`~tether.policy.SandboxExecutionPolicy` into a :class:`ConfinedCommand`; :func:`spawn`
starts it in its own process group and :func:`stop` takes everything it started down. With no
usable backend a restricted mode raises :class:`SandboxUnavailableError` (``SANDBOX_UNAVAILABLE``)
and nothing runs. ``tether doctor`` prints :func:`describe_backends`. See ``docs/sandbox.md``.
"""

from tether.sandbox._command import BackendName, ConfinedCommand, Enforcement
from tether.sandbox._control_names import (
    control_component,
    git_dir_made_by,
    git_dir_on_path,
    made_git_dir,
)
from tether.sandbox._errors import SandboxError, SandboxUnavailableError
from tether.sandbox._paths import PathRules, rules_for
from tether.sandbox._plugin import SANDBOX_SERVICE
from tether.sandbox._process import CommandProcess, kill, spawn, stop
from tether.sandbox._provider import SandboxProvider, unconfined

__all__ = [
    "SANDBOX_SERVICE",
    "BackendName",
    "CommandProcess",
    "ConfinedCommand",
    "Enforcement",
    "PathRules",
    "SandboxError",
    "SandboxProvider",
    "SandboxUnavailableError",
    "control_component",
    "git_dir_made_by",
    "git_dir_on_path",
    "kill",
    "made_git_dir",
    "rules_for",
    "spawn",
    "stop",
    "unconfined",
]
