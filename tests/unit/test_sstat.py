"""sstat's pieces without daemons: JobAcctGather* parsing, the controller's board of
samples and who may read it, and the client's merge of a step's nodes and its units."""

from __future__ import annotations

import pytest

from cli.sstat import FIELDS, Fatal, Step, help_format, num_unit, parse_format, parse_jobs
from controller.model import Step as JobStep
from controller.principal import Principal
from controller.stepusage import UsageBoard, running_steps, step_stats
from corral import errors
from corral.config import ConfigError, show_config
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from tests.unit.scenario import UID, running, slurm_conf

OWNER = Principal(UID, UID, "alice", frozenset())
OTHER = Principal(UID + 1, UID + 1, "bob", frozenset())


@pytest.mark.parametrize(
    ("lines", "kind", "task"),
    [
        ((), "none", 30),
        (("JobAcctGatherType=jobacct_gather/linux",), "linux", 30),
        (("JobAcctGatherType=jobacct_gather/cgroup", "JobAcctGatherFrequency=15"), "cgroup", 15),
        (("JobAcctGatherFrequency=task=5,energy=0,network=0",), "none", 5),
        (("JobAcctGatherFrequency=Task=0",), "none", 0),
    ],
    ids=["defaults", "linux", "bare number", "task with zeros", "sampling off"],
)
def test_job_acct_gather_keys(lines: tuple[str, ...], kind: str, task: int) -> None:
    conf = slurm_conf(*lines)
    assert (conf.job_acct.kind, conf.job_acct.task_frequency) == (kind, task)
    shown = dict(show_config(conf))
    assert shown["JobAcctGatherType"] == f"jobacct_gather/{kind}"
    assert shown["JobAcctGatherFrequency"] == f"task={task}"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("JobAcctGatherType=jobacct_gather/aix", "bad JobAcctGatherType value"),
        ("JobAcctGatherFrequency=energy=30", "only task usage is sampled"),
        ("JobAcctGatherFrequency=task=soon", "bad interval 'soon' for task"),
        ("JobAcctGatherFrequency=disk=3", "unknown data type 'disk'"),
    ],
    ids=["unknown plugin", "energy sampling", "not a number", "unknown kind"],
)
def test_job_acct_gather_refusals_name_the_line(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        slurm_conf(line)
    assert refused.value.line == 4


def _usage(node: str, step: str = "0") -> pb.StepUsage:
    return pb.StepUsage(job_id=5, step=step, node=node)


def test_the_board_keeps_each_nodes_latest_set() -> None:
    board = UsageBoard()
    assert board.take([_usage("n1"), _usage("n2"), _usage("n9")], ["n1", "n2"]) == 1
    assert len(board) == 2
    board.take([_usage("n1", "batch")], ["n1"])  # n1's step 0 ended: not in its new set
    assert board.of(5, "0", ["n1", "n2"]) == [_usage("n2")]
    assert board.of(5, "batch", ["n1"]) == [_usage("n1", "batch")]
    board.forget(["n2"])
    assert board.of(5, "0", ["n1", "n2"]) == []


def test_who_may_read_which_steps() -> None:
    steps = (
        JobStep(0, "a", ("n1",), (1,), (1,), 0, state="COMPLETED"),
        JobStep(1, "b", ("n1", "n2"), (1, 1), (1, 1), 0),
        JobStep(2, "c", ("n2",), (1,), (1,), 0),
    )
    job = running(5, ("n1", "n2"), steps=steps)
    assert running_steps(job) == ["batch", "1", "2"]
    board = UsageBoard()
    board.take([_usage("n1", "1"), _usage("n1", "batch")], ["n1"])
    board.take([_usage("n2", "1"), _usage("n2", "2")], ["n2"])
    conf = slurm_conf()

    def ask(who: Principal, step: str = "", all_steps: bool = False) -> pb.StepStatsReply:
        request = pb.StepStatsRequest(job_id=5, step=step, all_steps=all_steps)
        return step_stats({5: job}, conf, board, request, who)

    assert list(ask(OWNER).steps) == ["1"] and len(ask(OWNER).usage) == 2
    assert list(ask(OWNER, all_steps=True).steps) == ["batch", "1", "2"]
    assert [u.node for u in ask(OWNER, "batch").usage] == ["n1"]
    assert list(ask(OWNER, "0").steps) == [] and ask(OWNER, "0").running
    with pytest.raises(SlurmError) as refused:
        ask(OTHER)
    assert refused.value.code == errors.ESLURM_ACCESS_DENIED
    hidden = slurm_conf("PrivateData=jobs")
    with pytest.raises(SlurmError) as unseen:
        step_stats({5: job}, hidden, board, pb.StepStatsRequest(job_id=5), OTHER)
    assert unseen.value.code == errors.ESLURM_INVALID_JOB_ID
    with pytest.raises(SlurmError) as unknown:
        step_stats({}, conf, board, pb.StepStatsRequest(job_id=6), OWNER)
    assert unknown.value.code == errors.ESLURM_INVALID_JOB_ID


def test_the_parts_of_a_step_in_an_ordinary_job_are_read_as_slurm_shows_them() -> None:
    """``srun a : b`` in an ordinary job: parts ``0+0`` and ``0+1`` of step 0, which the
    agents sample as step 0 each on its own nodes; ``-j 5.0`` is the first part (as a
    real 22.05's sstat shows it), ``-a`` both, each with its own nodes' samples."""
    steps = (
        JobStep(0, "a", ("n1",), (1,), (1,), 0, het_comp=0),
        JobStep(0, "b", ("n2",), (2,), (2,), 0, het_comp=1, het_offset=(1, 1)),
    )
    job = running(5, ("n1", "n2"), steps=steps)
    assert running_steps(job) == ["batch", "0+0", "0+1"]
    board = UsageBoard()
    board.take([_usage("n1")], ["n1"])
    board.take([_usage("n2")], ["n2"])

    def ask(step: str = "", all_steps: bool = False) -> list[tuple[str, str]]:
        request = pb.StepStatsRequest(job_id=5, step=step, all_steps=all_steps)
        return [(u.step, u.node) for u in step_stats({5: job}, slurm_conf(), board, request,
                                                      OWNER).usage]  # fmt: skip

    assert ask("0") == ask() == [("0+0", "n1")]
    assert ask("0+1") == [("0+1", "n2")]
    assert ask(all_steps=True) == [("0+0", "n1"), ("0+1", "n2")]
    assert ask("0+2") == []


def test_a_step_on_two_nodes_is_merged_as_slurm_merges_them() -> None:
    usage = [
        {
            "node": "n1",
            "ntasks": 2,
            "pids": [10, 11],
            "max_rss_kb": 2048,
            "max_rss_task": 1,
            "sum_rss_kb": 3072,
            "min_cpu_us": 1_500_000,
            "min_cpu_task": 0,
            "sum_cpu_us": 4_000_000,
            "max_cpu_us": 2_500_000,
            "max_cpu_task": 1,
        },
        {
            "node": "n2",
            "ntasks": 1,
            "pids": [20],
            "max_rss_kb": 4096,
            "max_rss_task": 2,
            "sum_rss_kb": 4096,
            "min_cpu_us": 500_000,
            "min_cpu_task": 2,
            "sum_cpu_us": 500_000,
            "max_cpu_us": 500_000,
            "max_cpu_task": 2,
        },
    ]
    for entry in usage:
        for name in pb.StepUsage.DESCRIPTOR.fields_by_name:
            entry.setdefault(name, 0)
    step = Step(5, "0", usage, convert=True)

    def shown(name: str) -> str:
        return str(FIELDS[name][1](step))

    assert (shown("MaxRSS"), shown("MaxRSSNode"), shown("MaxRSSTask")) == ("4M", "n2", "2")
    assert shown("AveRSS") == "2389.33K"  # (3072 + 4096) / 3 tasks
    assert (shown("MinCPU"), shown("MinCPUNode"), shown("MinCPUTask")) == ("00:00.500", "n2", "2")
    assert shown("AveCPU") == "00:01.500"
    assert (shown("NTasks"), shown("Nodelist"), shown("Pids")) == ("3", "n[1-2]", "10,11,20")
    assert shown("TRESUsageInMax").startswith("cpu=00:02.500,energy=0,fs/disk=0,mem=4M,")
    assert shown("TRESUsageInMaxTask") == "cpu=1,fs/disk=0,mem=2,pages=0,vmem=0"
    assert shown("TRESUsageInMinNode") == "cpu=n2"
    assert shown("JobID") == "5.0" and shown("ConsumedEnergy") == "0"
    assert Step(5, "0", usage, convert=False).size(4096) == "4096K"


def test_units_job_lists_and_formats() -> None:
    assert [num_unit(v, 1, True) for v in (0, 1023, 1024, 1536, 3 * 1024**2)] == [
        "0",
        "1023K",
        "1M",
        "1536K",
        "3G",
    ]
    assert num_unit(2.5, 0, True) == "2.50"
    assert parse_jobs("5,6.batch,7.02,8_3") == [(5, ""), (6, "batch"), (7, "2"), (8, "")]
    # A heterogeneous job's component is read as its leader, as 22.05's sstat reads it.
    assert parse_jobs("9+1.0,9+1") == [(9, "0"), (9, "")]
    # A part of srun a : b in an ordinary job is named as Slurm prints it.
    assert parse_jobs("9.1+1,9.01+02") == [(9, "1+1"), (9, "1+2")]
    for bad, message in (
        ("x", "Bad job/step specified: x"),
        ("5.x", "Bad step specified: 5"),
        ("5+x.0", "Bad job/step specified: 5\\+x.0"),
    ):
        with pytest.raises(Fatal, match=message):
            parse_jobs(bad)
    assert parse_format("maxrss,jobid%-20,avecpu%7") == [
        ("MaxRSS", 10),
        ("JobID", -20),
        ("AveCPU", 7),
    ]
    assert help_format().splitlines()[0].split() == [
        "AveCPU",
        "AveCPUFreq",
        "AveDiskRead",
        "AveDiskWrite",
    ]
