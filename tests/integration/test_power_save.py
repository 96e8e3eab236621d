"""Power saving end to end (``controller/powersave.py``): State=CLOUD nodes whose
ResumeProgram starts a real corral-nodeagent for them and whose SuspendProgram stops
it, so the cluster grows from no agent to two under a queue and shrinks when idle;
a ResumeProgram that starts nothing leaves the node DOWN and the job requeued."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from corral import grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.security.rogue import controller_target, stamp_for_controller

ROOT = str(Path(__file__).resolve().parents[2])

#: ResumeProgram: one corral-nodeagent per node of its hostlist, detached (the
#: controller ends a program's process group when it returns), its pid kept.
RESUME = """#!{python}
import json, subprocess, sys, time
sys.path.insert(0, {root!r})
from corral import hostlist
env = json.loads({env!r})
with open({dir!r} + "/resumed", "a") as note:
    note.write(sys.argv[1] + "\\n")
time.sleep(2)  # a node's boot: long enough to see it powering up
for name in hostlist.expand(sys.argv[1]):
    log = open({dir!r} + "/log/agent-" + name + ".log", "ab")
    agent = subprocess.Popen(
        [sys.executable, "-m", "nodeagent.main", "-f", {conf!r}, "--nodes", name],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd={dir!r},
        start_new_session=True,
    )
    with open({dir!r} + "/agent-" + name + ".pid", "w") as pid:
        pid.write(str(agent.pid))
"""

#: SuspendProgram: the agents of its hostlist stopped.
SUSPEND = """#!{python}
import os, signal, sys
sys.path.insert(0, {root!r})
from corral import hostlist
with open({dir!r} + "/suspended", "a") as note:
    note.write(sys.argv[1] + "\\n")
for name in hostlist.expand(sys.argv[1]):
    path = {dir!r} + "/agent-" + name + ".pid"
    if os.path.exists(path):
        os.kill(int(open(path).read()), signal.SIGTERM)
        os.remove(path)
"""

#: ResumeFailProgram, and a ResumeProgram that does nothing but say it ran.
NOTE = """#!/bin/sh
echo "$1" >> {path}
"""


#: A ResumeProgram that keeps its SLURM_RESUME_FILE beside, then says it ran (in this
#: order: a test reads the copy once the note is there).
RESUME_NOTE = """#!/bin/sh
cat "$SLURM_RESUME_FILE" > {path}.json
echo "$1" >> {path}
"""


def _program(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def _cloud_cluster(directory: Path, settings: tuple[str, ...]) -> Cluster:
    """Two State=CLOUD nodes; nothing started yet."""
    c = Cluster(directory, nodes=2, settings=settings)
    conf = Path(c.conf)
    conf.write_text(
        "\n".join(
            line + " State=CLOUD" if line.startswith("NodeName=") else line
            for line in conf.read_text().splitlines()
        )
        + "\n"
    )
    return c


def _stop_agents(directory: Path) -> None:
    """The agents ResumeProgram started and SuspendProgram did not stop."""
    for pid_file in directory.glob("agent-*.pid"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


def _sinfo(c: Cluster) -> str:
    return c.run("sinfo", "-h", "-N", "-o", "%N %t").stdout


def _node(c: Cluster, name: str) -> str:
    return c.run("scontrol", "show", "node", name).stdout


def test_cloud_nodes_grow_under_a_queue_and_shrink_when_idle(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    resume, suspend = tmp_path / "resume", tmp_path / "suspend"
    c = _cloud_cluster(
        directory,
        (
            f"ResumeProgram={resume}",
            f"SuspendProgram={suspend}",
            "PrivateData=cloud",  # powered-down CLOUD nodes listed
            "SuspendTime=4",
            "SuspendTimeout=3",
            "ResumeTimeout=40",
            "KillWait=2",
        ),
    )
    env = json.dumps({**c.env, "PYTHONPATH": ROOT})
    fields = {"python": sys.executable, "root": ROOT, "dir": str(directory), "conf": c.conf}
    _program(resume, RESUME.format(env=env, **fields))
    _program(suspend, SUSPEND.format(**fields))
    try:
        c.start_controller()
        assert _sinfo(c) == "node1 idle~\nnode2 idle~\n"  # CLOUD: powered down, not down
        assert "State=IDLE+CLOUD+POWERED_DOWN " in _node(c, "node1")
        job = c.sbatch(
            "-N2", "--exclusive", "-o", str(directory / "out"), "--wrap", "srun hostname; sleep 2"
        )
        c.wait_for(
            lambda: c.run("squeue", "-h", "-o", "%t %R", "-j", str(job)).stdout == "CF node[1-2]\n",
            10,
            "job not CONFIGURING on its powering-up nodes",
        )
        assert _sinfo(c) == "node1 alloc#\nnode2 alloc#\n"
        resumed = directory / "resumed"
        c.wait_for(resumed.exists, 10, "ResumeProgram did not run")
        assert resumed.read_text() == "node[1-2]\n"  # one call, both nodes
        c.wait_done(job, 60)
        assert c.job(job)["state"] == "COMPLETED"
        assert (directory / "out").read_text().count("\n") == 2  # a task on each node
        # Idle for SuspendTime: SuspendProgram, POWERING_DOWN, then POWERED_DOWN.
        c.wait_for(lambda: "idle%" in _sinfo(c), 20, "nodes not powering down")
        suspended = directory / "suspended"
        c.wait_for(suspended.exists, 10, "SuspendProgram did not run")  # it runs on its own
        assert suspended.read_text() == "node[1-2]\n"
        c.wait_for(lambda: _sinfo(c) == "node1 idle~\nnode2 idle~\n", 20, "nodes not powered down")
        assert not list(directory.glob("agent-*.pid"))  # the agents are gone
        # A second queue grows it again.
        again = c.sbatch("-N1", "-o", "/dev/null", "--wrap", "true")
        c.wait_done(again, 60)
        assert c.job(again)["state"] == "COMPLETED"
        assert (directory / "resumed").read_text().count("\n") == 2
    finally:
        _stop_agents(directory)
        c.stop()


def test_a_node_not_back_within_resume_timeout_is_down_and_its_job_requeued(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "c"
    noted = tmp_path / "failed"
    resume = _program(tmp_path / "resume", RESUME_NOTE.format(path=tmp_path / "resumed"))
    fail = _program(tmp_path / "fail", NOTE.format(path=noted))
    c = _cloud_cluster(
        directory,
        (
            f"ResumeProgram={resume}",
            f"SuspendProgram={fail}",
            f"ResumeFailProgram={fail}",
            "ResumeTimeout=3",
            "PrivateData=cloud",
        ),
    )
    try:
        c.start_controller()
        job = c.sbatch("-N1", "-w", "node1", "-o", "/dev/null", "--wrap", "true")
        c.wait_for(lambda: _sinfo(c) == "node1 mix#\nnode2 idle~\n", 10, "node1 not up")
        c.wait_for(lambda: noted.exists(), 20, "ResumeFailProgram did not run")
        assert noted.read_text() == "node1\n"
        shown = _node(c, "node1")
        assert "State=DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING " in shown  # as Slurm 22.05
        assert "Reason=ResumeTimeout reached" in shown
        assert _sinfo(c) == "node1 down~\nnode2 idle~\n"
        # The job the node was resumed for, as Slurm 22.05 writes the file.
        assert (tmp_path / "resumed.json").read_text() == (
            f'{{"jobs":[{{"job_id":{job},"nodes":"node1"}}],"all_nodes":"node1"}}'
        )
        record = c.job(job)
        assert (record["state"], record["restarts"]) == ("PENDING", 1)
    finally:
        c.stop()


def _as_stranger(c: Cluster, method: str, request: Any) -> Any:
    """``method`` called over gRPC as uid 4242, who is no operator."""
    with grpctls.sync_channel(controller_target(c), load(c.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        stranger = stamp_for_controller(c, request, method, uid=4242, gid=4242)
        return getattr(stub, method)(stranger, timeout=10)


def test_power_states_by_scontrol_update_only_for_operators(tmp_path: Path) -> None:
    directory = tmp_path
    resume = _program(tmp_path / "resume", RESUME_NOTE.format(path=directory / "resumed"))
    suspend = _program(tmp_path / "suspend", NOTE.format(path=directory / "suspended"))
    c = _cloud_cluster(
        tmp_path / "c",
        (
            f"ResumeProgram={resume}",
            f"SuspendProgram={suspend}",
            "ResumeTimeout=30",
        ),
    )
    try:
        c.start_controller()
        # Without PrivateData=cloud, powered-down CLOUD nodes are listed nowhere.
        assert _sinfo(c) == ""
        missing = c.run("scontrol", "show", "node", "node1", check=False)
        assert (missing.returncode, missing.stdout) == (1, "Node node1 not found\n")
        with pytest.raises(grpc.RpcError) as refused:
            _as_stranger(c, "NodeUpdate", pb.NodeUpdateRequest(nodes="node1", state="POWER_UP"))
        assert refused.value.details() == "2002: Access/permission denied"
        assert not (directory / "resumed").exists()
        c.run("scontrol", "update", "NodeName=node2", "State=POWER_UP")
        c.wait_for(lambda: (directory / "resumed").exists(), 10, "ResumeProgram did not run")
        assert (directory / "resumed").read_text() == "node2\n"
        assert (directory / "resumed.json").read_text() == '{"jobs":[],"all_nodes":"node2"}'
        assert _sinfo(c) == "node2 idle#\n"  # powered on: listed again
        # POWER_DOWN of a node powering up runs SuspendProgram for it.
        c.run("scontrol", "update", "NodeName=node2", "State=power_down")
        c.wait_for(lambda: (directory / "suspended").exists(), 10, "SuspendProgram did not run")
        assert (directory / "suspended").read_text() == "node2\n"
        assert _sinfo(c) in ("node2 idle%\n", "")
        bad = c.run("scontrol", "update", "NodeName=node1", "State=POWER_SIDEWAYS", check=False)
        assert bad.returncode == 1
    finally:
        c.stop()
