"""sattach's connections to a step runner: copies of what srun hears, and stdin.

A runner's one srun connection (``nodeagent/steprunner.py``) is the step's life:
when it goes, the tasks end. sattach's are not: the agent asks the runner
(``StepDir.request_attach``) to connect to sattach's socket with sattach's key,
and from then on every frame the runner sends srun is sealed for each attached
sattach too (output, exits, DONE). What sattach sends back is read for the
tasks' stdin (IN frames, each naming its task or every task; sattach's end of
input closes their stdin, as on Slurm 22.05) only. An attacher that cannot take a
frame within ``SEND_TIMEOUT`` or hangs up is dropped, nothing else: it must never
hold the tasks' output back from srun, nor end the step.

Standard library and the step protocol only: the runner imports this.
"""

from __future__ import annotations

import socket

from corral import stepcipher, stepio

#: Seconds an attacher may take to accept a frame before it is dropped.
SEND_TIMEOUT = 2.0
#: Seconds to reach sattach's socket: the runner's loop waits meanwhile, so less
#: than srun's 10 (sattach listens before it asks; a socket that does not answer
#: soon is not sattach's).
CONNECT_TIMEOUT = 5.0


class Attacher:
    """One sattach's connection: its socket and sealed session."""

    def __init__(self, sock: socket.socket, session: stepcipher.Session) -> None:
        self.sock = sock
        self.session = session

    def send(self, frames: bytes) -> bool:
        """Seal and send ``frames``; False if sattach is gone or too slow."""
        try:
            self.sock.sendall(self.session.seal(frames))
        except OSError:
            return False
        return True

    def stdin(self) -> tuple[list[tuple[int, bytes]], bool]:
        """The (task, stdin bytes; empty: its end) of the IN frames sattach sent
        (one read), and whether it is still attached."""
        try:
            frames = stepio.recv_frames(self.sock, self.session)
        except BlockingIOError:
            return [], True
        except (OSError, stepio.ProtocolError):
            return [], False
        if frames is None:
            return [], False
        return [(task, data) for kind, task, data in frames if kind == stepio.IN], True

    def close(self) -> None:
        self.sock.close()


def connect(host: str, port: int, key_hex: str, node_id: int, ntasks: int) -> Attacher:
    """Connect to sattach and open the sealed session (its HELLO, as srun gets);
    OSError or ValueError if it cannot be."""
    key = bytes.fromhex(key_hex)
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
    except socket.gaierror:  # sattach's host name does not resolve here: it is this host
        sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session, opening = stepcipher.runner_session(key, node_id, ntasks)
        sock.sendall(opening)
        sock.settimeout(SEND_TIMEOUT)
    except BaseException:
        sock.close()
        raise
    return Attacher(sock, session)
