"""``tether chat``: the interactive terminal surface (see :mod:`.app`)."""

from __future__ import annotations

from tether.surfaces.cli.chat.app import ChatApp, TerminalWriter, chat_command
from tether.surfaces.cli.summary import RunSummary, format_summary, summarize

__all__ = ["ChatApp", "RunSummary", "TerminalWriter", "chat_command", "format_summary", "summarize"]
