"""What can go wrong before or during a replay, as errors the CLI prints.

Hierarchy::

    CorralError                      (corral.errors)
    └── SimError                     a replay that cannot run: a bad setting, a policy
        │                            the core does not have, a missing optional extra
        └── TraceError(path, line)   a trace that cannot be read: missing, not gzip,
                                     a malformed line; str() is "path:line: message"

``cli/boundary.py`` prints any ``CorralError`` as ``corral sim: error: <message>``
and exits 1, so a bad trace never shows a traceback.
"""

from __future__ import annotations

from corral.errors import CorralError


class SimError(CorralError):
    """A replay that cannot run as asked."""


class TraceError(SimError):
    """A trace that cannot be read; ``line`` is 0 when the whole file is at fault."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")
        self.path = path
        self.line = line
