"""srun --pty: srun's own terminal while task 0 runs on a remote one.

As Slurm's srun does (22.05, src/srun/srun.c and srun_pty.c), srun reads its
terminal's size from its stdout (``TIOCGWINSZ``): where that is no terminal it
says so and runs the step without one. Otherwise the size travels with the step
(SLURM_PTY_WIN_ROW, SLURM_PTY_WIN_COL: the remote terminal starts at it) and
srun's stdin goes raw (``cfmakeraw``) for as long as the step runs: every byte
typed, Ctrl-C, Ctrl-Z and Ctrl-D included, reaches task 0's terminal, whose line
discipline makes of them what a local terminal would (SIGINT for the foreground
job, job control, end of file). srun's own messages meanwhile end in CR LF, as
Slurm's log does in raw mode, and the saved settings come back when the step
ends, however it ends (srun catches the signals that would end it). A SIGWINCH
makes srun send the new size to the node of task 0 (``stepio.WINSIZE``, sealed
with the rest of the step's I/O; Slurm opens a separate, unauthenticated port for
it, which is what SLURM_PTY_PORT names there: here it is srun's I/O port).

Only srun's --pty imports this module (``termios`` and ``io`` cost its start).
"""

from __future__ import annotations

import io
import os
import struct
import sys
import termios
from fcntl import ioctl

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from typing import Any, TextIO

#: ``struct winsize``: rows, columns, and two pixel sizes.
_WINSIZE = struct.Struct("HHHH")


def window_size(fd: int) -> tuple[int, int]:
    """(rows, columns) of the terminal ``fd`` is on; OSError where it is on none."""
    rows, cols, _, _ = _WINSIZE.unpack(ioctl(fd, termios.TIOCGWINSZ, bytes(_WINSIZE.size)))
    return rows, cols


def cfmakeraw(mode: list[Any]) -> list[Any]:
    """glibc's (and Slurm's) ``cfmakeraw`` on a ``tcgetattr`` list: no input or output
    processing, no echo, no line editing, no signal characters, 8 bits, reads that
    return each byte as it comes."""
    iflag, oflag, cflag, lflag, ispeed, ospeed, cc = mode
    iflag &= ~(
        termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP
        | termios.INLCR | termios.IGNCR | termios.ICRNL | termios.IXON
    )  # fmt: skip
    oflag &= ~termios.OPOST
    lflag &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
    cflag = (cflag & ~(termios.CSIZE | termios.PARENB)) | termios.CS8
    cc = list(cc)
    cc[termios.VMIN], cc[termios.VTIME] = 1, 0
    return [iflag, oflag, cflag, lflag, ispeed, ospeed, cc]


class Terminal:
    """srun's terminal under --pty: its size, and raw mode for the step's time."""

    def __init__(self, size: tuple[int, int]) -> None:
        self.size = size
        self._saved: list[Any] | None = None
        self._stderr: TextIO | None = None  # srun's, while a CR LF one stands in
        self._wrapper: io.TextIOWrapper | None = None

    def environment(self, io_port: int) -> dict[str, str]:
        """What Slurm's srun adds to the tasks' environment under --pty."""
        rows, cols = self.size
        return {
            "SLURM_PTY_PORT": str(io_port),
            "SLURM_PTY_WIN_ROW": str(rows),
            "SLURM_PTY_WIN_COL": str(cols),
        }

    def resized(self) -> tuple[int, int] | None:
        """The size now, if it changed since last read (SIGWINCH); else None."""
        try:
            size = window_size(sys.stdout.fileno())
        except OSError:
            return None
        if size == self.size:
            return None
        self.size = size
        return size

    def raw(self) -> None:
        """Put srun's stdin in raw mode (where it is a terminal), and its messages in CR LF."""
        try:
            self._saved = termios.tcgetattr(0)
            termios.tcsetattr(0, termios.TCSANOW, cfmakeraw(self._saved))
        except termios.error:  # stdin is not the terminal: nothing to set, as in Slurm
            self._saved = None
        self._stderr = sys.stderr
        sys.stderr.flush()
        self._wrapper = io.TextIOWrapper(
            sys.stderr.buffer, errors="backslashreplace", newline="\r\n", line_buffering=True
        )
        sys.stderr = self._wrapper

    def restore(self) -> None:
        """The settings srun found; Slurm's line where they cannot be set back."""
        if self._wrapper is not None and self._stderr is not None:
            self._wrapper.flush()
            self._wrapper.detach()  # srun's stderr stays open
            sys.stderr = self._stderr
            self._wrapper = self._stderr = None
        if self._saved is not None:
            try:
                termios.tcsetattr(0, termios.TCSANOW, self._saved)
            except termios.error as exc:
                print(f"tcsetattr: {os.strerror(exc.args[0])}", file=sys.stderr)
            self._saved = None


def open_terminal(prog: str) -> Terminal | None:
    """srun's terminal for --pty, or None, with Slurm's two lines, where srun's stdout
    is not a terminal (the step then runs without one)."""
    try:
        size = window_size(sys.stdout.fileno())
    except OSError as exc:
        print(f"{prog}: error: ioctl(TIOCGWINSZ): {exc.strerror}", file=sys.stderr)
        print(f"{prog}: error: Not using a pseudo-terminal, disregarding --pty option",
              file=sys.stderr)  # fmt: skip
        return None
    return Terminal(size)
