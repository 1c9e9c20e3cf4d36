"""The one escaping rule for text tether did not write (attack review F3): every character a
terminal would act on or draw as something else shows as its escape; a block keeps its line
breaks and tabs, a line keeps nothing that moves the cursor."""

from __future__ import annotations

import pytest

from tether.kernel._printable import needs_escape, printable, printable_block

ATTACKS = [
    ("\x1b[2K", "\\x1b[2K"),  # erase line (CSI)
    ("\x1b[1A", "\\x1b[1A"),  # cursor up
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # window title (OSC … BEL)
    ("\x1b]8;;http://x\x1b\\", "\\x1b]8;;http://x\\x1b\\"),  # hyperlink (OSC … ST)
    ("\x9b2K", "\\x9b2K"),  # CSI as one C1 control
    ("\x9d0;t\x9c", "\\x9d0;t\\x9c"),  # OSC and ST as C1 controls
    ("a\rb", "a\\rb"),
    ("a\x08b", "a\\x08b"),  # backspace
    ("\u202eabc", "\\u202eabc"),  # right-to-left override
    ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),  # isolates
    ("\u200b\ufeff", "\\u200b\\ufeff"),  # zero-width space, BOM
    ("a\u00a0b\u3000c", "a\\xa0b\\u3000c"),  # spaces that are not the space
    ("\u2028\u2029\x85", "\\u2028\\u2029\\x85"),  # line and paragraph separators, NEL
    ("\U000e0041", "\\U000e0041"),  # a tag character
    ("\ue000", "\\ue000"),  # private use
]


@pytest.mark.parametrize(("text", "shown"), ATTACKS)
def test_a_control_shows_as_its_escape(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable_block(text) == shown
    assert all(c.isprintable() for c in printable(text))


def test_ordinary_text_is_shown_as_itself() -> None:
    text = 'rm -rf "build" · é ü 日本 \\x1b [bold] $HOME'
    assert printable(text) == text
    assert printable_block(text) == text
    assert not needs_escape(" ") and needs_escape("\t")


def test_a_line_escapes_breaks_and_tabs_a_block_keeps_them() -> None:
    text = "one\ttwo\nthree\r\nfour\rfive"
    assert printable(text) == "one\\ttwo\\nthree\\r\\nfour\\rfive"
    # a block reads \r\n as a line break; a lone \r cannot return over the line
    assert printable_block(text) == "one\ttwo\nthree\nfour\\rfive"
