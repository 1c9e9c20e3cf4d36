"""The plugin kernel: services, listeners (emit/waterfall), plugins and disposal."""

from tether.kernel._config import CONFIG_FILE, ENTRY_POINT_GROUP, PluginEntry
from tether.kernel._context import (
    Context,
    Disposable,
    KeyConflictError,
    NotAKeyError,
    Runtime,
    ServiceConflictError,
    ServiceMissingError,
)
from tether.kernel._keys import (
    AnyServiceKey,
    Gather,
    GatherListener,
    Next,
    Notice,
    NoticeListener,
    ServiceKey,
    Waterfall,
    WaterfallListener,
)
from tether.kernel._plugin import (
    FunctionPlugin,
    Plugin,
    PluginConfigError,
    PluginError,
    PluginHandle,
    PluginRequirementError,
)
from tether.kernel._prompt import PromptPart, PromptText
from tether.kernel._sessions import SESSIONS_SERVICE
from tether.kernel._tasks import TaskScope
from tether.kernel._workspace_files import WORKSPACE_FILES, DeclaresFiles
from tether.kernel._workspace_trust import WorkspaceTrust, WorkspaceUntrustedError

__all__ = [
    "CONFIG_FILE",
    "ENTRY_POINT_GROUP",
    "SESSIONS_SERVICE",
    "WORKSPACE_FILES",
    "AnyServiceKey",
    "Context",
    "DeclaresFiles",
    "Disposable",
    "FunctionPlugin",
    "Gather",
    "GatherListener",
    "KeyConflictError",
    "Next",
    "NotAKeyError",
    "Notice",
    "NoticeListener",
    "Plugin",
    "PluginConfigError",
    "PluginEntry",
    "PluginError",
    "PluginHandle",
    "PluginRequirementError",
    "PromptPart",
    "PromptText",
    "Runtime",
    "ServiceConflictError",
    "ServiceKey",
    "ServiceMissingError",
    "TaskScope",
    "Waterfall",
    "WaterfallListener",
    "WorkspaceTrust",
    "WorkspaceUntrustedError",
]
