"""A real step runner serving PMI-2 to its tasks (``--mpi=pmi2``), with a fake srun that
plays the fence: the tasks put, fence, read another node's keys and the layout, and a
PMI abort reaches srun. Tasks 2 and 3 run here (node 1 of two, two tasks each)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import stepio
from nodeagent.process import Zygote
from tests.unit.test_steprunner import Srun, spool, start, zygote

__all__ = ["spool", "zygote"]  # the fixtures these tests share with test_steprunner

#: A PMI-2 client as MPI libraries speak it, over the descriptor in PMI_FD.
CLIENT = r"""
import os, socket, sys
sock = socket.socket(fileno=int(os.environ["PMI_FD"]))
rank = int(os.environ["PMI_RANK"])
def recv(n):
    data = b""
    while len(data) < n:
        data += sock.recv(n - len(data))
    return data
def send(*pairs):
    body = "".join(f"{k}={v.replace(';', ';;')};" for k, v in pairs).encode()
    sock.sendall(f"{len(body):<6}".encode() + body)
def command(*pairs):
    send(*pairs)
    reply = recv(int(recv(6))).decode()
    return dict(p.split("=", 1) for p in reply.rstrip(";").split(";"))
sock.sendall(b"cmd=init pmi_version=2 pmi_subversion=0\n")
line = b""
while not line.endswith(b"\n"):
    line += sock.recv(1)
init = command(("cmd", "fullinit"), ("pmirank", str(rank)))
jobid = command(("cmd", "job-getid"))["jobid"]
command(("cmd", "kvs-put"), ("key", f"card{rank}"), ("value", f"at-{rank}"))
command(("cmd", "kvs-fence"))
other = command(("cmd", "kvs-get"), ("jobid", jobid), ("key", "card0"))["value"]
layout = command(("cmd", "info-getjobattr"), ("key", "PMI_process_mapping"))["value"]
print(init["rank"], init["size"], jobid, os.environ["PMI_JOBID"], other, layout, flush=True)
if sys.argv[1] == "abort" and rank == 3:
    send(("cmd", "abort"), ("isworld", "TRUE"), ("msg", "gave up"))
    sys.exit(9)
command(("cmd", "finalize"))
"""


class FenceSrun(Srun):
    """The fake srun, taking the runner's KVS, FENCE and ABORT frames too."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: dict[bytes, bytes] = {}
        self.fenced = 0
        self.aborts: list[tuple[int, int, str]] = []

    def _take(self, kind: int, number: int, payload: bytes) -> None:
        if kind == stepio.KVS:
            self.puts.update(stepio.read_pairs(payload))
        elif kind == stepio.FENCE:
            assert number == 1  # the runner's node id
            self.fenced += 1
        elif kind == stepio.ABORT:
            self.aborts.append((number, *stepio.read_abort(payload)))
        else:
            super()._take(kind, number, payload)

    def release(self) -> None:
        """srun's broadcast: node 0's puts (made up) and node 1's, then FENCE."""
        union = {b"card0": b"at-0", b"card1": b"at-1", **self.puts}
        for data in stepio.kvs_frames(0, union):
            assert self.conn is not None
            self.conn.sendall(self.reader.seal(data))
        self.send(stepio.FENCE, 0)


@pytest.fixture
def fence_srun() -> Iterator[FenceSrun]:
    fake = FenceSrun()
    yield fake
    fake.close()


@pytest.mark.parametrize("ending", ["finalize", "abort"])
def test_tasks_put_fence_and_get_over_pmi2(
    spool: Path, zygote: Zygote, fence_srun: FenceSrun, ending: str
) -> None:
    client = spool / "pmi2client.py"
    client.write_text(CLIENT)
    runner = start(
        spool, zygote, fence_srun, spool,
        argv=(sys.executable, str(client), ending), mpi="pmi2", node_tasks=[2, 2],
    )  # fmt: skip
    fence_srun.accept()
    fence_srun.pump(lambda: fence_srun.fenced == 1)  # both tasks in: the node's puts came
    assert fence_srun.puts == {b"card2": b"at-2", b"card3": b"at-3"}
    fence_srun.release()
    fence_srun.finish()
    job = f"42.{runner.stepdir.step_id}"
    for rank in (2, 3):
        line = f"{rank} 4 {job} {job} at-0 (vector,(0,2,2))\n".encode()
        assert fence_srun.out[rank] == line, fence_srun.err
    if ending == "abort":
        assert fence_srun.aborts == [(3, 1, "gave up")]
        assert runner.result().statuses == (0, 9 << 8)
    else:
        assert fence_srun.aborts == []
        assert runner.result().statuses == (0, 0)
