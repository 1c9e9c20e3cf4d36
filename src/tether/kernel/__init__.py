"""The plugin kernel: services, listeners (emit/waterfall), plugins and disposal."""

from tether.kernel.config import (
    CONFIG_FILE,
    ENTRY_POINT_GROUP,
    ConfigFileError,
    PluginEntry,
    TetherConfig,
    UnknownPluginError,
    available_plugins,
    load_plugins,
    read_config,
    resolve_plugin,
)
from tether.kernel.context import Context, Disposable, Next, Runtime, ServiceConflictError
from tether.kernel.plugin import (
    DuplicatePluginError,
    FunctionPlugin,
    Kernel,
    Plugin,
    PluginConfigError,
    PluginError,
    PluginHandle,
    PluginRequirementError,
)
from tether.kernel.prompt import PromptPart, PromptRegistry, PromptText

__all__ = [
    "CONFIG_FILE",
    "ENTRY_POINT_GROUP",
    "ConfigFileError",
    "Context",
    "Disposable",
    "DuplicatePluginError",
    "FunctionPlugin",
    "Kernel",
    "Next",
    "Plugin",
    "PluginConfigError",
    "PluginEntry",
    "PluginError",
    "PluginHandle",
    "PluginRequirementError",
    "PromptPart",
    "PromptRegistry",
    "PromptText",
    "Runtime",
    "ServiceConflictError",
    "TetherConfig",
    "UnknownPluginError",
    "available_plugins",
    "load_plugins",
    "read_config",
    "resolve_plugin",
]
