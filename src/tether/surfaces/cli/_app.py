"""The ``tether`` command's entry point (``tether = tether.surfaces.cli._app:main``).

``tether approvals answer ID DECISION`` is typed in another terminal while an agent waits,
so when an approval waits under that id it is answered on a fast path that loads no
command-line framework (:mod:`._answer_command`). Every other command line goes to the app
(:mod:`._typer_app`), imported only then.
"""

from __future__ import annotations

import sys

from tether.surfaces.cli._answer_command import answer_from_command_line


def main() -> None:
    """Console-script entry point."""
    argv = sys.argv[1:]
    status = answer_from_command_line(argv)
    if status is not None:
        raise SystemExit(status)
    # Imported only now: the fast path above must not load the command-line framework.
    from tether.surfaces.cli._typer_app import run

    run(argv)
