"""A client's call goes to whichever local socket serves (corral/client.py, docs/ha.md):
past a socket nothing listens on and past a backup in standby, waiting for a
takeover while none serves; never made twice once it was sent."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from corral import errors
from corral.client import Client, recv_exact
from corral.errors import ControllerUnreachable, SlurmError
from corral.wire import codec


def serve(path: Path, answer: dict[str, object] | None, calls: list[str]) -> None:
    """A socket at ``path`` that answers each call with the frame ``answer`` (None:
    closes the connection once the call is read, as a controller killed then)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()

    def loop() -> None:
        while True:
            connection, _ = listener.accept()
            with connection:
                (size,) = struct.unpack(">I", recv_exact(connection, 4))
                calls.append(codec.decode("Frame", recv_exact(connection, size))["method"])
                if answer is not None:
                    data = codec.encode("Frame", answer)
                    connection.sendall(struct.pack(">I", len(data)) + data)

    threading.Thread(target=loop, daemon=True).start()


STANDBY = {
    "code": errors.ESLURM_IN_STANDBY_MODE,
    "error": "Slurm backup controller in standby mode",
}
PONG = {"method": "Ping", "body": codec.encode("PingReply", {"host": "ctl2"})}


def test_the_call_goes_past_a_dead_socket_and_a_standby(tmp_path: Path) -> None:
    calls: list[str] = []
    serve(tmp_path / "standby.sock", STANDBY, calls)
    serve(tmp_path / "serving.sock", PONG, calls)
    paths = [str(tmp_path / n) for n in ("dead.sock", "standby.sock", "serving.sock")]
    assert Client(paths).call("Ping")["host"] == "ctl2"
    assert calls == ["Ping", "Ping"]


def test_with_only_standbys_the_refusal_comes_after_the_failover_wait(tmp_path: Path) -> None:
    calls: list[str] = []
    serve(tmp_path / "standby.sock", STANDBY, calls)
    began = time.monotonic()
    with pytest.raises(SlurmError) as refused:
        Client([str(tmp_path / "dead.sock"), str(tmp_path / "standby.sock")], failover_s=1.5).call(
            "Ping"
        )
    assert refused.value.code == errors.ESLURM_IN_STANDBY_MODE
    assert time.monotonic() - began >= 1.5 and len(calls) >= 2


def test_a_call_cut_after_it_was_sent_is_not_made_again(tmp_path: Path) -> None:
    calls: list[str] = []
    serve(tmp_path / "killed.sock", None, calls)
    serve(tmp_path / "serving.sock", PONG, calls)
    paths = [str(tmp_path / "killed.sock"), str(tmp_path / "serving.sock")]
    with pytest.raises(ControllerUnreachable):
        Client(paths, failover_s=5).call("Submit", {})
    assert calls == ["Submit"]
