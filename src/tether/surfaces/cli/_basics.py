"""What every command needs that the command-line framework does not: the store a ``--store``
value names, text on stdout, and the one-line error on stderr.

Kept free of that framework so that the fast path of ``tether approvals answer``
(:mod:`._answer_command`) behaves exactly as the other commands without loading it.
"""

from __future__ import annotations

import os
import sys

from tether.kernel._printable import printable
from tether.session.persistence._factory import default_store_url


def store_url(store: str | None) -> str:
    """The ``--store`` value, else the environment's default (``TETHER_STORE`` or data dir)."""
    return store if store else default_store_url(os.environ)


def error_line(message: str) -> None:
    """``tether: <first line>``, then any further lines of help, each indented by two spaces.

    Scripts match the first line (``tether: CODE: ...``); the help after it (a model spec's
    forms, say) stays laid out as written. A message may quote a model's or a workspace's
    text: every line is escaped, so none can forge a ``tether:`` line or move the cursor.
    """
    first, *rest = message.splitlines() or [""]
    lines = [f"tether: {printable(first)}", *(f"  {printable(line)}" for line in rest)]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def write_text(text: str) -> None:
    """Write UTF-8 to stdout whatever the locale says: session payloads are Unicode."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a replaced stdout (CliRunner, IDEs) takes str
        stream.write(text)
    else:
        stream.flush()
        buffer.write(text.encode("utf-8"))
    stream.flush()


__all__ = ["error_line", "store_url", "write_text"]
