"""controller.partitionaccess: who may use a partition and what a job may ask of it,
at submission (through ``admit``) and as the rules themselves."""

from __future__ import annotations

from typing import Any

import pytest
from scenario import GID, NOW, UID, slurm_conf

from controller import partitionaccess
from controller.admission import admit, partition_view, static_nodes
from controller.core.placement import place
from controller.core.plan import Start
from controller.jobspec import from_fields
from controller.principal import Principal, principal_for
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.wire import codec

NODES = "NodeName=n[1-4] CPUs=8 RealMemory=8000"
RULES = (
    NODES,
    "PartitionName=open Nodes=n[1-4] Default=YES",
    "PartitionName=rootonly Nodes=n1 RootOnly=YES",
    "PartitionName=nobio Nodes=n1 DenyAccounts=bio",
    "PartitionName=chemonly Nodes=n1 AllowAccounts=chem",
    "PartitionName=highqos Nodes=n1 AllowQos=high",
    "PartitionName=nolow Nodes=n1 DenyQos=low",
    "PartitionName=staff Nodes=n1 AllowGroups=corral-no-such-group",
    "PartitionName=short Nodes=n[1-4] MaxTime=30 MaxNodes=2",
    "PartitionName=narrow Nodes=n[1-4] MaxCPUsPerNode=2",
    "PartitionName=thin Nodes=n[1-4] MaxMemPerCPU=1000",
)
OPEN = slurm_conf(*RULES)
ALL = slurm_conf("EnforcePartLimits=ALL", *RULES)
ANY = slurm_conf("EnforcePartLimits=ANY", *RULES)
USER = principal_for(UID, GID)
ROOT = principal_for(0, 0)


def submit(conf: SlurmConfig = ALL, who: Principal = USER, **fields: Any) -> Any:
    fields = {"script": "#!/bin/sh\n", **fields}
    spec = from_fields(codec.decode("JobSpec", codec.encode("JobSpec", fields)))
    return admit(spec, who, conf, {}, 100, NOW, 0).job


REFUSED = [
    ("root-only", {"partitions": ["rootonly"]}, errors.ESLURM_ACCESS_DENIED),
    ("denied-account", {"partitions": ["nobio"], "account": "bio"}, errors.ESLURM_INVALID_ACCOUNT),
    ("not-allowed-account", {"partitions": ["chemonly"], "account": "bio"}, 2045),
    ("not-allowed-qos", {"partitions": ["highqos"]}, errors.ESLURM_INVALID_QOS),
    ("denied-qos", {"partitions": ["nolow"], "qos": "low"}, errors.ESLURM_INVALID_QOS),
    ("group", {"partitions": ["staff"]}, errors.ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP),
    ("max-time", {"partitions": ["short"], "time_limit": 31}, errors.ESLURM_INVALID_TIME_LIMIT),
    ("unlimited-time", {"partitions": ["short"], "time_limit": -1}, 2051),
    ("max-nodes", {"partitions": ["short"], "min_nodes": 3}, errors.ESLURM_INVALID_NODE_COUNT),
    ("cpus-per-node", {"partitions": ["narrow"], "cpus_per_task": 3}, 2005),
    ("tasks-per-node", {"partitions": ["narrow"], "ntasks_per_node": 3}, 2005),
    ("min-cpus-per-node", {"partitions": ["narrow"], "min_cpus": 3}, 2005),
    ("all-of-two", {"partitions": ["open", "short"], "time_limit": 60}, 2051),
]


@pytest.mark.parametrize(("fields", "code"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_at_submission(fields: dict[str, Any], code: int) -> None:
    with pytest.raises(SlurmError) as info:
        submit(**fields)
    assert info.value.code == code
    assert str(info.value) == errors.MESSAGES[code]


ALLOWED = [
    ("allowed-qos", {"partitions": ["highqos"], "qos": "high"}),
    ("other-account", {"partitions": ["nobio"], "account": "chem"}),
    ("allowed-account", {"partitions": ["chemonly"], "account": "chem"}),
    ("within-limits", {"partitions": ["short"], "time_limit": 30, "min_nodes": 2}),
    ("cpus-within", {"partitions": ["narrow"], "cpus_per_task": 2}),
]


@pytest.mark.parametrize("fields", [a[1] for a in ALLOWED], ids=[a[0] for a in ALLOWED])
def test_allowed_at_submission(fields: dict[str, Any]) -> None:
    assert submit(**fields).job_id == 100


def test_root_passes_root_only_and_groups() -> None:
    assert submit(who=ROOT, partitions=["rootonly"]).partitions == ("rootonly",)
    assert submit(who=ROOT, partitions=["staff"]).partitions == ("staff",)


def test_enforce_part_limits_no_queues_the_job_to_wait() -> None:
    """Slurm's default: the job is taken and waits (PartitionTimeLimit)."""
    assert submit(OPEN, partitions=["short"], time_limit=60).time_limit == 60


def test_enforce_part_limits_any_needs_one_partition() -> None:
    assert submit(ANY, partitions=["open", "short"], time_limit=60).time_limit == 60
    with pytest.raises(SlurmError) as info:
        submit(ANY, partitions=["short"], time_limit=60)
    assert info.value.code == errors.ESLURM_INVALID_TIME_LIMIT


def test_max_mem_per_cpu_raises_cpus_per_task() -> None:
    """slurm.conf(5): the job's CPUs per task grow to fit its memory per CPU."""
    job = submit(partitions=["thin"], mem_per_cpu=2500)
    assert (job.cpus_per_task, job.mem_per_cpu) == (3, 834)


def test_max_mem_per_cpu_too_much_for_any_node_is_refused() -> None:
    with pytest.raises(SlurmError) as info:
        submit(partitions=["thin"], mem_per_cpu=9000)  # 9 CPUs per task; nodes have 8
    assert info.value.code == errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE


@pytest.mark.parametrize(
    ("cpus", "mem", "cap", "expected"),
    [(1, 500, 1000, (1, 500)), (1, 1000, 1000, (1, 1000)), (2, 2001, 1000, (6, 667)),
     (1, 4000, 0, (1, 4000))],
)  # fmt: skip
def test_fit_mem_per_cpu(cpus: int, mem: int, cap: int, expected: tuple[int, int]) -> None:
    assert partitionaccess.fit_mem_per_cpu(cpus, mem, cap) == expected


@pytest.mark.parametrize(
    ("text", "mode"),
    [("", "NO"), ("NO", "NO"), ("YES", "ANY"), ("any", "ANY"), ("ALL", "ALL"), ("x", "NO")],
)
def test_enforce_mode(text: str, mode: str) -> None:
    settings = (("EnforcePartLimits", text),) if text else ()
    assert partitionaccess.enforce_mode(settings) == mode


def test_access_is_case_blind_for_accounts() -> None:
    part = ALL.partition("chemonly")
    assert part is not None
    assert partitionaccess.access_refusal(part, USER, "CHEM", "normal", ()) == 0


def test_max_cpus_per_node_spreads_a_job_over_nodes() -> None:
    """A job of ``-n 4`` in a MaxCPUsPerNode=2 partition gets two CPUs on each of two
    nodes, where it would otherwise get four on one."""
    job = submit(partitions=["narrow"], num_tasks=4)
    start = place(job, partition_view(ALL, "narrow"), static_nodes(ALL))
    assert isinstance(start, Start)
    assert (start.nodes, start.cpus) == (("n1", "n2"), (2, 2))
    wide = place(job, partition_view(ALL, "open"), static_nodes(ALL))
    assert isinstance(wide, Start) and wide.cpus == (4,)
