"""GPU grants as typed fields of the signed launch messages (issue 15, point 4).

The controller puts each launch's GPUs (whole, by the node's index) and its shares
of GPUs in ``GpuGrant``; the agent builds the device fence and the MPS setup from
that alone. The environment keeps the variables the job's programs need, but a
GPU it names and the grant does not is never opened to the job.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from controller.agentlink import AgentLink
from controller.gpushare import Shares
from controller.launchmsg import gpu_grant
from controller.model import Job, Payload, Step
from corral import config
from corral.wire import corral_pb2 as pb
from nodeagent.devcgroup import CHAR, DeviceGuard
from nodeagent.gpubinding import granted, mps_gpu
from nodeagent.mps import MpsServers
from nodeagent.runkinds import launch_spec, step_spec
from nodeagent.spool import LaunchSpec, StepSpec
from tests.unit.scenario import running

#: The node's GPUs 0..3 as device files: links to devices every host has, each with
#: its own number (/dev/zero 1:5, /dev/full 1:7, /dev/random 1:8, /dev/urandom 1:9).
DEVICES = ("zero", "full", "random", "urandom")
MINORS = (5, 7, 8, 9)
#: Everything a forged or stale environment could name to widen the fence.
FORGED = {
    "SLURM_JOB_GPUS": "0,1,2,3",
    "SLURM_STEP_GPUS": "0-3",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1024M",
    "SLURM_SHARDS_ON_NODE": "1",
}


def guard(tmp_path: Path) -> DeviceGuard:
    gpus = []
    for index, name in enumerate(DEVICES):
        link = tmp_path / f"gpu{index}"
        os.symlink(f"/dev/{name}", link)
        gpus.append((index, (str(link),)))
    return DeviceGuard(str(tmp_path / "cgroups"), {"n1": gpus})


def refused(deny: list[list[int]]) -> set[int]:
    """The GPUs (by index) whose device files ``deny`` refuses."""
    assert all(kind == CHAR and major == 1 for kind, major, _ in deny), deny
    return {MINORS.index(minor) for _, _, minor in deny}


def job_launch(**fields: object) -> pb.LaunchJob:
    return pb.LaunchJob(job_id=5, node="n1", uid=1000, gid=1000, user="u", **fields)


def step_launch(**fields: object) -> pb.LaunchStep:
    return pb.LaunchStep(job_id=5, step_id=2, node="n1", tasks=[0], user="u", **fields)


# ------------------------------------------------------------------ the agent


def test_a_forged_environment_does_not_widen_the_fence(tmp_path: Path) -> None:
    """The launch's environment names every GPU and a share; its grant gives GPU 1:
    the job may open GPU 1 and no other, and runs under no MPS server."""
    devices = guard(tmp_path)
    grant = pb.GpuGrant(gpus=[1])
    spec = launch_spec(job_launch(environment=FORGED, grant=grant), "h", "/c", devices)
    assert refused(spec.deny_devices) == {0, 2, 3}
    assert spec.gpus == [1] and spec.mps_gpu is None
    assert spec.cgroup.endswith("n1/job_5/step_batch")
    assert spec.environment == FORGED  # what the job sees is left as it came
    step = step_spec(step_launch(environment=FORGED, grant=grant), devices)
    assert refused(step.deny_devices) == {0, 2, 3} and step.gpus == [1]
    assert step.cgroup.endswith("n1/job_5/step_2")


def test_a_launch_without_a_grant_gets_no_gpu(tmp_path: Path) -> None:
    """A controller that sets no grant (an older one) fails closed: every GPU of the
    node is refused, whatever the environment says."""
    devices = guard(tmp_path)
    spec = launch_spec(job_launch(environment=FORGED), "h", "/c", devices)
    assert refused(spec.deny_devices) == {0, 1, 2, 3} and spec.gpus == []
    step = step_spec(step_launch(environment=FORGED), devices)
    assert refused(step.deny_devices) == {0, 1, 2, 3} and step.gpus == []


def test_a_grant_gives_its_gpus_and_those_it_shares(tmp_path: Path) -> None:
    devices = guard(tmp_path)
    grant = pb.GpuGrant(gpus=[0], shared=[3], mps_percentage=25)
    spec = launch_spec(job_launch(grant=grant), "h", "/c", devices)
    assert refused(spec.deny_devices) == {1, 2}
    assert spec.gpus == [0, 3] and spec.mps_gpu == 3
    everything = pb.GpuGrant(gpus=[0, 1, 2, 3])
    assert launch_spec(job_launch(grant=everything), "h", "/c", devices).cgroup == ""


def test_only_a_share_under_mps_names_a_server() -> None:
    assert mps_gpu(pb.GpuGrant(shared=[2], mps_percentage=50)) == 2
    assert mps_gpu(pb.GpuGrant(shared=[2], pinned_mem_mib=1024, mps_percentage=25)) == 2
    assert mps_gpu(pb.GpuGrant(shared=[2], shards=2)) is None  # time slices: no MPS
    assert mps_gpu(pb.GpuGrant(gpus=[2])) is None
    assert mps_gpu(pb.GpuGrant()) is None
    assert granted(pb.GpuGrant(gpus=[0, 1], shared=[1, 3])) == {0, 1, 3}


def test_no_share_under_mps_starts_no_server(tmp_path: Path) -> None:
    servers = MpsServers(tmp_path)
    assert servers.acquire("n1", 5, None) == {}
    servers.adopt("n1", 5, None)
    assert not (tmp_path / "mps").exists()


def test_launch_descriptions_keep_the_grant() -> None:
    spec = LaunchSpec(1, 0, "n1", 0, 0, "root", gpus=[1, 3], mps_gpu=3)
    assert LaunchSpec.from_json(spec.to_json()) == spec
    step = StepSpec(1, 2, "n1", 0, 0, "root", gpus=[2])
    assert StepSpec.from_json(step.to_json()) == step
    # One an agent wrote before grants were typed reads as no GPUs and no server.
    old = json.loads(spec.to_json())
    del old["gpus"], old["mps_gpu"]
    assert LaunchSpec.from_json(json.dumps(old)) == LaunchSpec(1, 0, "n1", 0, 0, "root")


# ------------------------------------------------------------------ the controller


def test_a_grant_carries_the_whole_gpus_and_the_shares() -> None:
    shares = Shares(gpus=(2,), mps_percentage=25, pinned_mib=10240, shards=3)
    grant = gpu_grant((0, 1), shares)
    assert list(grant.gpus) == [0, 1] and list(grant.shared) == [2]
    assert (grant.mps_percentage, grant.pinned_mem_mib, grant.shards) == (25, 10240, 3)
    assert not gpu_grant((), Shares()).HasField("shards")
    assert gpu_grant((), Shares()) == pb.GpuGrant()


SLURM_CONF = """\
ClusterName=pod
SlurmctldHost=ctl
GresTypes=gpu,mps
NodeName=n[1-2] CPUs=8 Gres=gpu:4,mps:400
PartitionName=p Nodes=ALL Default=YES
"""


class Link:
    """An AgentLink whose store and agents are stand-ins: what it sends, per node."""

    def __init__(self, tmp_path: Path, shares: dict[int, Shares]) -> None:
        (tmp_path / "slurm.conf").write_text(SLURM_CONF)
        store = SimpleNamespace(
            conf=config.load(str(tmp_path / "slurm.conf")),
            payload=lambda job: Payload(script="#!/bin/sh\n", environment=tuple(FORGED.items())),
            shares=lambda job, index: shares.get(index, Shares()),
            time_limit_at_launch=lambda job: -1,
            nodes={},  # none in power saving: launches go out at once
        )
        verifier = SimpleNamespace(ttl=60)
        self.link = AgentLink(store, b"k" * 32, verifier, lambda: None)
        self.sent: dict[str, list[pb.ControllerMessage]] = {"n1": [], "n2": []}
        for node, out in self.sent.items():
            self.link.sessions[node] = SimpleNamespace(send=out.append)


def gpu_job(**fields: object) -> Job:
    """Job 5, running on n1 and n2."""
    return running(5, ("n1", "n2"), num_tasks=2, **fields)


def test_a_job_with_gpus_always_carries_its_grant(tmp_path: Path) -> None:
    """The batch launch's grant names the GPUs SLURM_JOB_GPUS does, from the same
    allocation; the submitter's variables do not reach it."""
    shares = {0: Shares(gpus=(3,), mps_percentage=50)}
    link = Link(tmp_path, shares)
    link.link.launch(gpu_job(gpus=((1, 2), (0,))))
    launch = link.sent["n1"][0].launch
    assert list(launch.grant.gpus) == [1, 2]
    assert launch.environment["SLURM_JOB_GPUS"] == "1,2"
    assert list(launch.grant.shared) == [3] and launch.grant.mps_percentage == 50
    assert launch.environment["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    # A job with no GPUs is granted none, whatever its submitter's environment said.
    # The submitter's CUDA_VISIBLE_DEVICES stays in its environment, for its programs.
    link = Link(tmp_path, {})
    link.link.launch(gpu_job())
    plain = link.sent["n1"][0].launch
    assert plain.grant == pb.GpuGrant() and "SLURM_JOB_GPUS" not in plain.environment
    assert plain.environment["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


def test_each_node_of_a_step_carries_its_grant(tmp_path: Path) -> None:
    link = Link(tmp_path, {1: Shares(gpus=(2,), shards=1)})
    job = gpu_job(gpus=((1, 2), (0, 3)))
    request = pb.StepCreateRequest(job_id=5, argv=["true"], environment=FORGED)
    link.link.launch_step(job, Step(1, "s", ("n1", "n2"), (1, 1), (1, 1), 0), request)
    first, second = (link.sent[node][0].launch_step for node in ("n1", "n2"))
    assert list(first.grant.gpus) == [1, 2] and first.environment["SLURM_STEP_GPUS"] == "1,2"
    assert list(second.grant.gpus) == [0, 3] and list(second.grant.shared) == [2]
    assert second.grant.shards == 1 and not first.grant.HasField("shards")
    # A step that asked for GPUs gets those on each node, in its grant as in its variables.
    asked = Step(2, "s", ("n1", "n2"), (1, 1), (1, 1), 0, gpus=((2,), (3,)))
    link.link.launch_step(job, asked, request)
    first, second = (link.sent[node][1].launch_step for node in ("n1", "n2"))
    assert list(first.grant.gpus) == [2] and first.environment["SLURM_STEP_GPUS"] == "2"
    assert list(second.grant.gpus) == [3] and second.environment["SLURM_STEP_GPUS"] == "3"


@pytest.mark.parametrize("whole", [(), (0,), (0, 1, 2, 3)])
def test_the_controllers_grant_is_what_the_agent_fences(
    tmp_path: Path, whole: tuple[int, ...]
) -> None:
    """End to end without a wire: the controller's LaunchJob, read by the agent,
    refuses exactly the GPUs the job was not given."""
    link = Link(tmp_path, {})
    link.link.launch(gpu_job(gpus=(whole, ()) if whole else ()))
    launch = link.sent["n1"][0].launch
    spec = launch_spec(launch, "h", "/c", guard(tmp_path))
    assert refused(spec.deny_devices) == {0, 1, 2, 3} - set(whole)
