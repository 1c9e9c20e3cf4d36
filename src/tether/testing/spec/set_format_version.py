"""``set_format_version``: a header claiming a newer format is refused, on every read."""

from __future__ import annotations

from tether.session._header import SESSION_FORMAT_VERSION, FormatVersionError
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import closed_turn

spec = Spec(Capability.SET_FORMAT_VERSION)


@spec.check()
async def format_version_mismatch_is_refused(trial: Trial) -> None:
    persistence = trial.persistence
    await trial.stored(closed_turn(0))
    await trial.set_format_version("s-1", SESSION_FORMAT_VERSION + 1)
    with raises(FormatVersionError) as caught:
        await persistence.load("s-1")
    assert caught.error.code == "UNSUPPORTED_FORMAT_VERSION"
    with raises(FormatVersionError):
        await persistence.inspect("s-1")
