"""The plugin kernel: services, listeners (emit/waterfall), plugins and disposal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tether._lazy_names import lazy_names

if TYPE_CHECKING:
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

_HOMES: Final[dict[str, str]] = {
    "AnyServiceKey": "tether.kernel._keys",
    "CONFIG_FILE": "tether.kernel._config",
    "Context": "tether.kernel._context",
    "DeclaresFiles": "tether.kernel._workspace_files",
    "Disposable": "tether.kernel._context",
    "ENTRY_POINT_GROUP": "tether.kernel._config",
    "FunctionPlugin": "tether.kernel._plugin",
    "Gather": "tether.kernel._keys",
    "GatherListener": "tether.kernel._keys",
    "KeyConflictError": "tether.kernel._context",
    "Next": "tether.kernel._keys",
    "NotAKeyError": "tether.kernel._context",
    "Notice": "tether.kernel._keys",
    "NoticeListener": "tether.kernel._keys",
    "Plugin": "tether.kernel._plugin",
    "PluginConfigError": "tether.kernel._plugin",
    "PluginEntry": "tether.kernel._config",
    "PluginError": "tether.kernel._plugin",
    "PluginHandle": "tether.kernel._plugin",
    "PluginRequirementError": "tether.kernel._plugin",
    "PromptPart": "tether.kernel._prompt",
    "PromptText": "tether.kernel._prompt",
    "Runtime": "tether.kernel._context",
    "SESSIONS_SERVICE": "tether.kernel._sessions",
    "ServiceConflictError": "tether.kernel._context",
    "ServiceKey": "tether.kernel._keys",
    "ServiceMissingError": "tether.kernel._context",
    "TaskScope": "tether.kernel._tasks",
    "WORKSPACE_FILES": "tether.kernel._workspace_files",
    "Waterfall": "tether.kernel._keys",
    "WaterfallListener": "tether.kernel._keys",
    "WorkspaceTrust": "tether.kernel._workspace_trust",
    "WorkspaceUntrustedError": "tether.kernel._workspace_trust",
}
"""Where each name is defined (its one home): imported from there on first use
(:mod:`tether._lazy_names`)."""

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

__getattr__ = lazy_names(__name__, _HOMES)
