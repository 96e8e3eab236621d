"""controller.launchmsg: every LaunchJob field is a copied Job attribute or a named
computation, and the message carries each."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scenario import running

from controller import launchmsg
from controller.gpushare import Shares
from controller.model import Job, Payload
from corral.config import parse
from corral.wire import corral_pb2 as pb

CONF = """\
ClusterName=test
SlurmctldHost=ctl
KillWait=7
JobFileAppend=1
NodeName=n[1-2] CPUs=4 RealMemory=1000
PartitionName=p Nodes=ALL Default=YES
"""
PAYLOAD = Payload(script="#!/bin/sh\ntrue\n", argv=("a", "b"))
ENV = {"SLURM_JOB_NODELIST": "n[1-2]", "A": "1"}


def _launch(job: Job, tmp_path: Path) -> pb.LaunchJob:
    conf = parse(CONF, str(tmp_path / "slurm.conf"))
    return launchmsg.launch_job(job, PAYLOAD, ENV, 42, conf, Shares())


def test_every_wire_field_is_copied_or_computed_and_only_one() -> None:
    wire = {field.name for field in pb.LaunchJob.DESCRIPTOR.fields}
    copied = set(launchmsg.COPIED)
    assert not copied & launchmsg.COMPUTED
    assert sorted(copied | launchmsg.COMPUTED) == sorted(wire)


def test_copied_fields_name_job_attributes() -> None:
    attributes = {field.name for field in dataclasses.fields(Job)}
    assert set(launchmsg.COPIED.values()) <= attributes


def test_the_computations_give_exactly_the_computed_fields(tmp_path: Path) -> None:
    conf = parse(CONF, str(tmp_path / "slurm.conf"))
    job = running(5, ("n1", "n2"))
    assert set(launchmsg.computed(job, PAYLOAD, ENV, 42, conf, Shares())) == launchmsg.COMPUTED


def test_the_message_carries_the_job_and_the_computations(tmp_path: Path) -> None:
    job = running(
        5,
        ("n2", "n1"),
        work_dir="/w",
        std_out="o",
        restarts=2,
        signal_num=10,
        cpu_ids=((2, 3), (0,)),
    )
    launch = _launch(job, tmp_path)
    for field, attribute in launchmsg.COPIED.items():
        if field != "array_task_id":
            assert getattr(launch, field) == getattr(job, attribute), field
    assert not launch.HasField("array_task_id")
    assert (launch.node, launch.script, list(launch.argv)) == ("n2", PAYLOAD.script, ["a", "b"])
    assert dict(launch.environment) == ENV and launch.node_list == "n[1-2]"
    assert (launch.append, launch.time_limit, launch.kill_wait) == (True, 42, 7)
    assert list(launch.cpu_ids) == [2, 3]


def test_an_array_task_id_of_zero_is_sent_and_open_mode_overrides_the_default(
    tmp_path: Path,
) -> None:
    job = running(6, array_job_id=5, array_task_id=0, open_mode="truncate")
    launch = _launch(job, tmp_path)
    assert launch.HasField("array_task_id") and launch.array_task_id == 0
    assert not launch.append and not launch.cpu_ids
