"""What can go wrong before or during a replay, as errors the CLI prints.

Hierarchy::

    CorralError                      (corral.errors)
    └── SimError                     a replay that cannot run: a bad setting, a policy
        │                            the core does not have, a missing optional extra
        └── TraceError(path)         a trace that cannot be read: missing, not gzip;
                                     str() is "path: message"

``cli/boundary.py`` prints any ``CorralError`` as ``corral sim: error: <message>``
and exits 1, so a bad trace never shows a traceback. A malformed line is no error:
the replay skips and counts it (``swf.Trace.malformed``).
"""

from __future__ import annotations

from corral.errors import CorralError


class SimError(CorralError):
    """A replay that cannot run as asked."""


class TraceError(SimError):
    """A trace file that cannot be read at all."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
