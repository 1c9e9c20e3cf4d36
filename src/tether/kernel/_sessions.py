"""The session store as a kernel service (``sessions``).

The store lives in the session layer, which sits below the kernel and cannot name a kernel
key; its key is declared here, the lowest layer that can, so that policy, the sandbox and
every layer above look it up by one typed key.
"""

from __future__ import annotations

from typing import Final

from tether.kernel._keys import ServiceKey
from tether.session import SessionStore

SESSIONS_SERVICE: Final = ServiceKey[SessionStore]("sessions")

__all__ = ["SESSIONS_SERVICE"]
