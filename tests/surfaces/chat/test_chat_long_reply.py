"""The chat shows the root agent's whole final reply, however long (it was cut at 4,000
characters)."""

from __future__ import annotations

from pathlib import Path

from chat_support import open_chat, root_steps


async def test_a_long_final_reply_is_shown_whole(tmp_path: Path) -> None:
    text = "\n".join(f"line {n:04d} " + "y" * 60 for n in range(120))  # about 8,400 characters
    async with open_chat(tmp_path, [root_steps({"text": text})]) as chat:
        shown = await chat.turn("write a lot")
        await chat.quit()
    assert len(text) > 8000
    lines = shown.splitlines()
    assert lines[: text.count("\n") + 1] == text.splitlines()
    assert "…" not in shown
