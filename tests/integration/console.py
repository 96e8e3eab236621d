"""A client command on a pseudo-terminal of its own, driven as a person at a keyboard.

The test holds both sides of the terminal: the command's session leads on it
(its controlling terminal, so that it is the foreground job and gets SIGWINCH
when the test resizes it), the test reads what it shows and types into it, and
reads the terminal's settings before and after, as a user's shell would find them.
"""

from __future__ import annotations

import os
import re
import select
import struct
import subprocess
import termios
import time
from fcntl import ioctl
from pathlib import Path

WINSIZE = struct.Struct("HHHH")


class Console:
    """``argv`` run with a terminal of ``rows`` x ``cols`` as its stdin, stdout and stderr."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: Path, rows: int = 24, cols: int = 80
    ) -> None:
        self.main, self.side = os.openpty()
        self.resize(rows, cols)
        self.settings = termios.tcgetattr(self.side)  # the user's terminal, as found
        self.shown = b""
        self._seen = 0
        self.proc = subprocess.Popen(
            argv,
            stdin=self.side,
            stdout=self.side,
            stderr=self.side,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=lambda: ioctl(0, termios.TIOCSCTTY, 0),  # its controlling terminal
        )

    def resize(self, rows: int, cols: int) -> None:
        """Resize the terminal: its foreground job gets SIGWINCH, as from a window."""
        ioctl(self.main, termios.TIOCSWINSZ, WINSIZE.pack(rows, cols, 0, 0))

    def send(self, data: bytes) -> None:
        os.write(self.main, data)

    def expect(self, pattern: bytes, timeout: float = 60) -> re.Match[bytes]:
        """The first match of ``pattern`` in what the terminal shows after the last
        match; AssertionError, with what it showed, if none comes within ``timeout``."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            found = compiled.search(self.shown, self._seen)
            if found:
                self._seen = found.end()
                return found
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"no {pattern!r} in {self.shown[self._seen :]!r}")

    def _read(self, timeout: float) -> bool:
        if not select.select([self.main], [], [], timeout)[0]:
            return False
        try:
            self.shown += os.read(self.main, 65536)
        except OSError:  # EIO: nothing holds the other side any more
            return False
        return True

    def wait(self, timeout: float = 60) -> int:
        """The command's exit status, what it showed until then read."""
        status = self.proc.wait(timeout)
        while self._read(0):
            pass
        return status

    def current_settings(self) -> list[object]:
        return termios.tcgetattr(self.side)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.main)
        os.close(self.side)
