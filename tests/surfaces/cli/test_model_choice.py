"""The recorded model choice (``surfaces/cli/_model_choice.py``): what of a ``session/model``
payload is read, and how the command line's flags combine with it."""

from __future__ import annotations

import pytest

from tether.surfaces.cli._model_choice import ModelChoice


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"model": "work", "stream": False, "model_timeout": 7}, ModelChoice("work", False, 7.0)),
        ({"model": " ", "stream": "no", "model_timeout": True}, ModelChoice()),
        ({"model": 3, "model_timeout": -1}, ModelChoice()),
        ({"model_timeout": float("inf")}, ModelChoice()),
        ({}, ModelChoice()),
    ],
)
def test_only_a_well_formed_record_is_read(data: dict[str, object], expected: ModelChoice) -> None:
    assert ModelChoice.parse(data) == expected


def test_the_command_line_wins_setting_by_setting() -> None:
    recorded = ModelChoice("work", False, 30.0)
    assert ModelChoice(None, None, 5.0).over(recorded) == ModelChoice("work", False, 5.0)
    assert ModelChoice("other").over(recorded) == ModelChoice("other", False, 30.0)
    assert not ModelChoice()
    assert ModelChoice("work", False, 30.0).to_data() == {
        "model": "work",
        "stream": False,
        "model_timeout": 30.0,
    }
