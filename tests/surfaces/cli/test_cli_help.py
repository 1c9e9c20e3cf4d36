"""Help and error rendering of the real ``tether`` console script: ``-h`` everywhere, no
``<bool>`` metavar on flags, no reStructuredText markup, multi-line error help kept
multi-line."""

from __future__ import annotations

import os

import pytest

from cli_support import tether

COMMANDS = [
    ("run",),
    ("chat",),
    ("demo",),
    ("doctor",),
    ("trust",),
    ("sessions",),
    ("sessions", "list"),
    ("sessions", "show"),
    ("sessions", "tree"),
    ("sessions", "narrow"),
    ("sessions", "export"),
    ("sessions", "import"),
    ("sessions", "fsck"),
    ("approvals", "list"),
    ("approvals", "answer"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_h_is_help_without_bool_metavars_or_markup(command: tuple[str, ...]) -> None:
    short, long = tether(*command, "-h"), tether(*command, "--help")
    assert (short.returncode, short.stderr) == (0, "")
    assert short.stdout == long.stdout
    assert short.stdout.startswith(f"Usage: tether {' '.join(command)} ")
    assert "-h, --help  " in short.stdout or "-h, --help" in short.stdout
    for noise in ("<bool>", "``", ":func:", ":mod:", ":class:", "╭"):
        assert noise not in short.stdout, noise


def test_flags_show_no_value() -> None:
    text = tether("run", "-h").stdout
    assert "  -c, --continue  " in text
    assert "  --json  " in text
    assert "  --output-format FORMAT  " in text


def test_multi_line_error_help_keeps_its_lines(tmp_path: os.PathLike[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_MODEL"}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    store = f"sqlite:///{tmp_path}/s.db"
    proc = tether("run", "--model", "bogus", "--store", store, "--workspace", str(tmp_path), "x",
                  env=env)  # fmt: skip
    assert proc.returncode == 1
    first, *rest = proc.stderr.splitlines()
    assert first.startswith("tether: MODEL_CONFIG: invalid model spec 'bogus': ")
    assert rest[0] == (
        "  Choose a model with --model SPEC, the TETHER_MODEL environment variable, or a "
        "default in tether.toml:"
    )
    assert rest[1].startswith("    scripted:PATH ")
    assert all(line.startswith("  ") for line in rest)
