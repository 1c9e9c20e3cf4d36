"""OS confinement for commands the model runs: bubblewrap, then Landlock, never nothing.

:class:`SandboxProvider` (service ``sandbox``) turns an argv and a
:class:`~tether.policy.SandboxExecutionPolicy` into a :class:`ConfinedCommand`; :func:`spawn`
starts it in its own process group and :func:`stop` takes everything it started down. With no
usable backend a restricted mode raises :class:`SandboxUnavailableError` (``SANDBOX_UNAVAILABLE``)
and nothing runs. ``tether doctor`` prints :func:`describe_backends`. See ``docs/sandbox.md``.
"""

from tether.sandbox.backends import BwrapBackend, LandlockBackend, Probe, Profile
from tether.sandbox.command import BackendName, ConfinedCommand, Enforcement, RunnerFailureRule
from tether.sandbox.environment import (
    DEFAULT_ENV_ALLOW,
    confined_env,
    is_secret_name,
    unconfined_env,
)
from tether.sandbox.errors import SandboxError, SandboxUnavailableError
from tether.sandbox.paths import (
    CONTROL_NAMES,
    CREDENTIAL_PATHS,
    PathRules,
    default_rules,
    path_rules,
    rules_for,
)
from tether.sandbox.plugin import SANDBOX_SERVICE
from tether.sandbox.process import STOP_GRACE, CommandProcess, kill, kill_group, spawn, stop
from tether.sandbox.provider import (
    CHAIN,
    DISABLE_ENV,
    BackendReport,
    BackendStatus,
    SandboxProvider,
    describe_backends,
    unconfined,
)

__all__ = [
    "CHAIN",
    "CONTROL_NAMES",
    "CREDENTIAL_PATHS",
    "DEFAULT_ENV_ALLOW",
    "DISABLE_ENV",
    "SANDBOX_SERVICE",
    "STOP_GRACE",
    "BackendName",
    "BackendReport",
    "BackendStatus",
    "BwrapBackend",
    "CommandProcess",
    "ConfinedCommand",
    "Enforcement",
    "LandlockBackend",
    "PathRules",
    "Probe",
    "Profile",
    "RunnerFailureRule",
    "SandboxError",
    "SandboxProvider",
    "SandboxUnavailableError",
    "confined_env",
    "default_rules",
    "describe_backends",
    "is_secret_name",
    "kill",
    "kill_group",
    "path_rules",
    "rules_for",
    "spawn",
    "stop",
    "unconfined",
    "unconfined_env",
]
