"""Impersonating a node agent: attaching without being one, taking over a node that
has a live agent, replaying a hello, and speaking for another node's jobs.

The cluster has three nodes; its real agent serves node1 and node2, so node3 is
free for an attacker's session. An ordinary user cannot read the cluster key,
so an attach from them is one without a credential (or with a credential they
were given for something else).
"""

from __future__ import annotations

import asyncio
import pwd
import subprocess
import time
from collections.abc import Callable
from typing import Any

from controller.agentlink import DEAD_AFTER
from corral import auth
from corral.config import load
from corral.wire import corral_pb2 as pb
from tests.integration.cluster import Cluster
from tests.security.rogue import RogueAgent, agent_hello, controller_target

SETTINGS = ("KillWait=2", "SlurmdTimeout=6")


def _cluster(make_cluster: Callable[..., Cluster]) -> Cluster:
    cluster = make_cluster(nodes=3, settings=SETTINGS, start=False)
    cluster.start_controller()
    cluster.agent = cluster._spawn("nodeagent.main", "--nodes", "node[1-2]")
    cluster.wait_for(lambda: _state(cluster, "node2") == "IDLE", 20, "agent did not attach")
    return cluster


def _state(cluster: Cluster, node: str) -> str:
    nodes = cluster.client.call("Nodes", {"names": [node]})["nodes"]
    return str(nodes[0]["state"])


async def _attempt(cluster: Cluster, hello: pb.AgentHello) -> str:
    rogue = RogueAgent(controller_target(cluster), load(cluster.conf).tls)
    try:
        await rogue.attach(hello)
        return await rogue.outcome()
    finally:
        await rogue.close()


def test_an_ordinary_user_cannot_read_the_key(cluster: Cluster, users: tuple[str, ...]) -> None:
    entry = pwd.getpwnam(users[0])
    read = subprocess.run(
        ["cat", auth.key_path(cluster.conf)],
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        check=False,
    )
    assert read.returncode != 0 and "Permission denied" in read.stderr


def test_only_an_agent_attaches_and_never_over_a_live_one(
    make_cluster: Callable[..., Cluster], users: tuple[str, ...]
) -> None:
    cluster = _cluster(make_cluster)
    user = pwd.getpwnam(users[0])
    before = _state(cluster, "node3")

    async def attacks() -> dict[str, str]:
        captured = agent_hello(cluster, "node3")
        outcome = {
            "none": await _attempt(cluster, agent_hello(cluster, "node3", uid=None)),
            "user": await _attempt(cluster, agent_hello(cluster, "node3", uid=user.pw_uid)),
            "live": await _attempt(cluster, agent_hello(cluster, "node1")),
        }
        silent = RogueAgent(
            controller_target(cluster), load(cluster.conf).tls
        )  # attached, then never heard from
        try:
            await silent.attach(captured)
            outcome["fresh"] = await silent.outcome()
            outcome["second"] = await _attempt(cluster, agent_hello(cluster, "node3"))
            await asyncio.sleep(DEAD_AFTER + 1)
            outcome["after silence"] = await _attempt(cluster, agent_hello(cluster, "node3"))
        finally:
            await silent.close()
        outcome["replayed"] = await _attempt(cluster, captured)
        return outcome

    outcome = asyncio.run(attacks())
    assert outcome["none"] == "Invalid authentication credential: none given"
    assert outcome["user"] == f"uid {user.pw_uid} is not root or SlurmUser: not an agent"
    assert outcome["live"].startswith("node node1 already has a live agent")
    assert outcome["fresh"] == "welcome"  # the control: a daemon's hello is taken
    assert outcome["second"].startswith("node node3 already has a live agent")
    assert outcome["after silence"] == "welcome"  # a dead session's nodes are taken over
    assert outcome["replayed"] == "Invalid authentication credential: replayed"
    assert before != "IDLE"
    # The real agent still serves node1: a job placed there runs and ends there.
    job = cluster.sbatch("-w", "node1", "--wrap", "true")
    assert cluster.wait_done(job)["state"] == "COMPLETED"


def test_a_session_speaks_only_for_its_own_nodes(make_cluster: Callable[..., Cluster]) -> None:
    """An authenticated session for node3 reports a job running on node1 as done (and
    its Prolog as failed, in a JobDone and in HookDones for node1 and for node3),
    reports a checkpoint of it (on node1, and on node3), and asks for node1 to be
    drained."""
    cluster = _cluster(make_cluster)
    job = cluster.sbatch("-w", "node1", "--wrap", "sleep 60")
    running = cluster.wait_state(job, {"RUNNING"})

    async def forge() -> str:
        rogue = RogueAgent(controller_target(cluster), load(cluster.conf).tls)
        try:
            await rogue.attach(agent_hello(cluster, "node3"))
            welcomed = await rogue.outcome()
            forged: dict[str, Any] = {"job_id": job, "restarts": 0}
            rogue.send(running=pb.JobRunning(**forged, pid=1))
            rogue.send(done=pb.JobDone(**forged, exit_status=0, outcome="exited"))
            rogue.send(done=pb.JobDone(**forged, outcome="prolog_failed", drain="Prolog error"))
            rogue.send(drain=pb.NodeDrain(node="node1", reason="forged"))
            for node in ("node1", "node3"):
                rogue.send(hook_done=pb.HookDone(**forged, node=node, message="rc:1"))
            rogue.send(
                step_done=pb.StepDone(job_id=job, step_id=0, node="node1", tasks=[0], statuses=[0])
            )
            marks = [
                pb.Checkpoint(job_id=job, node=n, time=int(time.time())) for n in ("node1", "node3")
            ]
            rogue.send(checkpoints=pb.Checkpoints(checkpoints=marks))
            await asyncio.sleep(1.5)
            acks = [r for r in rogue.replies if r.WhichOneof("body") == "ack_done"]
            assert acks == []  # nothing acted on, nothing acknowledged
            hooks = [r.ack_hook.node for r in rogue.replies if r.WhichOneof("body") == "ack_hook"]
            assert "node1" not in hooks
            return welcomed
        finally:
            await rogue.close()

    assert asyncio.run(forge()) == "welcome"
    time.sleep(0.5)
    assert cluster.job(job)["state"] == "RUNNING"
    assert cluster.job(job)["nodes"] == running["nodes"]
    log = cluster.log("controller")
    assert f"sent JobDone for job_id={job} placed on node1: dropped" in log
    assert "sent StepDone of" in log
    assert "(node3) asked to drain node1: dropped" in log
    assert f"agent (node3) sent HookDone of job_id={job} for node node1: dropped" in log
    assert "Prolog error" not in cluster.run("scontrol", "show", "node", "node3").stdout
    for node in ("node1", "node3"):
        assert f"(node3) sent a checkpoint of job_id={job} on node {node}: dropped" in log
    assert "Checkpointed=" not in cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "Reason=" not in cluster.run("scontrol", "show", "node", "node1").stdout
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"
