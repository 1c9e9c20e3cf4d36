"""``tether chat``: the interactive terminal surface (see :mod:`.app`)."""

from __future__ import annotations
