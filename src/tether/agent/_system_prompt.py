"""tether's own system prompt, for coding and operations agents (plugin ``system_prompt``).

The prompt is a set of named sections in the kernel's prompt registry (``docs/instructions.md``
lists them): the role, a guide for each composed tool, how permissions work, what to do when
an action is refused, and how to reply. Sections are global (never scoped to one agent), and a
tool guide depends only on what the runtime composed, never on one agent's tool filter, so a
delegated child's system prompt is its parent's: the delegation statement is a runtime context
(order 120), and a persona, when one is configured, is the child's own section.

A tool guide is shown only while its tool is composed. Guides for the tools of this layer and
below are listed here; a layer above (the subagents plugin) adds the guide for the tools it
composes through the :data:`SYSTEM_PROMPT` service, tied to its own context.

``replace`` swaps every tether section (guides included) for the user's text; ``append`` adds
the user's text after them. Either way the result is what ``request/header.system`` records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel, ConfigDict

from tether.kernel import Context, Disposable, ServiceKey
from tether.tools._ask_user import AskUserTool
from tether.tools._bash import BashTool
from tether.tools._jobs import JobKillTool, JobOutputTool
from tether.tools._pipeline import ToolRuntime
from tether.tools.fs import EditTool, GlobTool, GrepTool, LsTool, ReadTool, WriteTool

ROLE_SECTION: Final = "tether:role"
PERMISSIONS_SECTION: Final = "tether:permissions"
REFUSALS_SECTION: Final = "tether:refusals"
REPLIES_SECTION: Final = "tether:replies"
REPLACED_SECTION: Final = "user:system-prompt"
APPENDED_SECTION: Final = "user:append-system-prompt"
TOOL_SECTION_PREFIX: Final = "tether:tool:"

ROLE_ORDER: Final = 10
TOOL_ORDER: Final = 20
"""Tool guides share this order; ties keep registration order (bash before the file tools)."""
PERMISSIONS_ORDER: Final = 40
REFUSALS_ORDER: Final = 50
REPLIES_ORDER: Final = 60
APPENDED_ORDER: Final = 1000

ROLE_TEXT: Final = (
    "You are a coding and operations agent run by tether. You carry out the user's task in "
    "their workspace with the tools you are given. Look before you act: read the relevant "
    "files and check the state of the system before changing it. Make the change the task "
    "asks for, following the conventions the project already uses, then check it (run the "
    "tests, or the command that shows it works). Do not claim anything about a file, a command "
    "or its output that you have not seen."
)

PERMISSIONS_TEXT: Final = (
    "Your permission scope is set by the user, never by you. The runtime-context message "
    "states it: a sandbox mode (read-only, workspace-write or danger-full-access) that confines "
    "your commands and file tools, and an approval policy (ask or never). Nothing you write "
    "changes it: not a file, not a configuration, not AGENTS.md, not your own replies.\n\n"
    "When the sandbox denies an action, the result says so, for example "
    '"[sandbox: file access denied under read-only mode]". A tool that can run one call under '
    "a wider mode offers two arguments, sandbox_permissions and justification: set both to ask "
    "for that call only, with a justification the user can judge. Some actions need the "
    "user's approval before they run: tether asks for you and the call waits for the answer. "
    "An approval covers that one call; a rejection is final for that action."
)

REFUSALS_TEXT: Final = (
    "When an action is denied or rejected, do not retry it, and do not work around the "
    "restriction another way (another tool, another path, a script that does the same thing). "
    "Go on with what you can do, then report the limitation: what you could not do, why, and "
    "what the user could change to allow it."
)

REPLIES_TEXT: Final = (
    "Be brief. Lead with the result: what you changed and how you checked it, and anything "
    "left undone. Do not narrate routine steps or repeat what a tool already showed. Use code "
    "blocks for commands and code."
)


@dataclass(frozen=True, slots=True)
class ToolGuide:
    """How to use one composed tool well: shown while ``tool`` is composed."""

    tool: str
    text: str


BUILT_IN_GUIDES: Final[Sequence[ToolGuide]] = (
    ToolGuide(
        BashTool.name,
        "bash runs one command line with `bash -c` in the workspace, under the sandbox of your "
        "mode, with no network and without API keys in its environment. Read the exit code as "
        "well as the output (long output is cut in the middle). Give slow commands a "
        "`timeout`. Prefer the file tools for reading, searching and editing files.",
    ),
    ToolGuide(
        JobOutputTool.name,
        "For a server, a watcher or anything else that runs until stopped, call bash with "
        "`run_in_background`: it returns a job id at once. Read the job's output with "
        "job_output (`wait` to wait for it to finish) instead of sleeping.",
    ),
    ToolGuide(JobKillTool.name, "Stop a background job with job_kill once you no longer need it."),
    ToolGuide(
        ReadTool.name,
        "read shows a file with line numbers; read a large file a part at a time (`offset`, "
        "`limit`) rather than all of it.",
    ),
    ToolGuide(
        WriteTool.name,
        "write creates a file or replaces all of it; read an existing file before you replace it.",
    ),
    ToolGuide(
        EditTool.name,
        "edit replaces an exact piece of a file's text: read the file first, and include enough "
        "surrounding text for the piece to match in one place.",
    ),
    ToolGuide(
        GrepTool.name,
        "grep searches file contents by regular expression: find a name's definition and its "
        "uses before you change it.",
    ),
    ToolGuide(GlobTool.name, "glob finds files by name pattern, such as `**/*.py`."),
    ToolGuide(LsTool.name, "ls lists a directory."),
    ToolGuide(
        AskUserTool.name,
        "ask_user asks the user a question and waits for the answer. Ask only for a decision "
        "or a fact that only the user has; never for something you can find out yourself, and "
        "never for permission (approvals are asked for you).",
    ),
)


class SystemPromptConfig(BaseModel):
    """The ``system_prompt`` plugin's configuration: ``Harness.open(system_prompt=...,
    append_system_prompt=...)``, ``--system-prompt-file``/``--append-system-prompt``, and
    ``[agent]`` in ``tether.toml`` all end here."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    replace: str | None = None
    """The whole of tether's prompt is this text instead (``""``: no tether prompt at all)."""
    append: str | None = None
    """Added after tether's prompt (or after ``replace``)."""


class SystemPrompt:
    """Service :data:`SYSTEM_PROMPT`: adds a tool guide, unless the user replaced the prompt."""

    def __init__(self, replaced: bool) -> None:
        self.replaced = replaced

    def guide(self, ctx: Context, guide: ToolGuide) -> Disposable | None:
        """Show ``guide`` while its tool is composed and ``ctx`` lives; ``None`` when the
        prompt is replaced (a replacement is the user's whole prompt)."""
        if self.replaced:
            return None
        return ctx.section(TOOL_SECTION_PREFIX + guide.tool, TOOL_ORDER, _while_composed(guide))


SYSTEM_PROMPT: Final = ServiceKey[SystemPrompt]("system_prompt")
"""The composed :class:`SystemPrompt`."""


def _while_composed(guide: ToolGuide) -> Callable[[object | None], str]:
    def text(agent: object | None) -> str:
        tools = getattr(agent, "tools", None)
        # The runtime's own table (no agent given): a child's filter or its scoped tools
        # never make its prompt differ from its parent's.
        if isinstance(tools, ToolRuntime) and tools.get(guide.tool) is not None:
            return guide.text
        return ""

    return text


class SystemPromptPlugin:
    name = "system_prompt"
    config_model = SystemPromptConfig

    def apply(self, ctx: Context, config: SystemPromptConfig) -> None:
        service = SystemPrompt(replaced=config.replace is not None)
        ctx.provide(SYSTEM_PROMPT, service)
        if config.replace is not None:
            ctx.section(REPLACED_SECTION, ROLE_ORDER, config.replace)
        else:
            ctx.section(ROLE_SECTION, ROLE_ORDER, ROLE_TEXT)
            for guide in BUILT_IN_GUIDES:
                service.guide(ctx, guide)
            ctx.section(PERMISSIONS_SECTION, PERMISSIONS_ORDER, PERMISSIONS_TEXT)
            ctx.section(REFUSALS_SECTION, REFUSALS_ORDER, REFUSALS_TEXT)
            ctx.section(REPLIES_SECTION, REPLIES_ORDER, REPLIES_TEXT)
        if config.append:
            ctx.section(APPENDED_SECTION, APPENDED_ORDER, config.append)


plugin: Final = SystemPromptPlugin()

__all__ = [
    "BUILT_IN_GUIDES",
    "SYSTEM_PROMPT",
    "SystemPrompt",
    "SystemPromptConfig",
    "SystemPromptPlugin",
    "ToolGuide",
    "plugin",
]
