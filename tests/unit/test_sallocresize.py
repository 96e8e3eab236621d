"""``salloc --elastic`` tells its command of a resize as the agents tell a batch
script: the resize file's lines, then the signal, once per change (cli/sallocresize.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from cli.sallocresize import RESIZE_ENV, Resizes
from corral.wire import corral_pb2 as pb
from nodeagent.resizes import script as resizes_script

REPLY = {
    "state": "RUNNING",
    "nodes": "n[1-2]",
    "resize_time": 1767225600,
    "environment": {"SLURM_NNODES": "2", "SLURM_JOB_CPUS_PER_NODE": "4(x2)"},
}
#: A command that records the signals it gets.
LISTENER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGWINCH, lambda *_: print('WINCH', flush=True))\n"
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)


def test_a_new_size_is_written_then_signalled_once() -> None:
    resizes = Resizes(12, signal.SIGWINCH, 0)
    child = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        path = resizes.environment()[RESIZE_ENV]
        assert not os.path.exists(path)  # absent until the first change
        assert resizes.heard(REPLY, child)
        assert child.stdout.readline() == "WINCH\n"
        with open(path, encoding="ascii") as written:
            agents = resizes_script(
                pb.ResizeJob(
                    job_id=12,
                    resize_time=1767225600,
                    nodes=["n1", "n2"],
                    nodelist="n[1-2]",
                    cpus_per_node="4(x2)",
                )
            )
            assert written.read() == agents  # the lines a batch script's agent writes
        assert not resizes.heard(REPLY, child)  # the same change: told once
        assert not resizes.heard({**REPLY, "resize_time": 0}, child)  # never resized
        assert os.stat(resizes.dir).st_mode & 0o777 == 0o700
    finally:
        child.kill()
        child.wait()
        resizes.close()
    assert not os.path.exists(resizes.dir)
