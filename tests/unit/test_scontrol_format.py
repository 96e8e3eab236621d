"""scontrol's records and messages, compared with what Slurm 22.05 printed.

Records come from the golden cluster (jobs 2, 3 and 4, node n1, partition
debug, all captured in UTC). Corral has no submitting session id, so
``AllocNode:Sid`` ends in ``:0`` where Slurm printed the sid. Commands run
against a fake controller that records the requests.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import corral.clientconf
from cli import scontrol
from cli.jobs import record as job_record
from cli.nodes import record as node_record
from corral.errors import ControllerUnreachable, SlurmError
from corral.wire import codec

SUBMIT = 1796014612
NOW = SUBMIT + 2


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def job(**fields: Any) -> dict[str, Any]:
    record = codec.decode("JobInfo", b"")
    record.update(
        user="root",
        group="root",
        account="bench",
        qos="normal",
        partition="debug",
        state="PENDING",
        reason="None",
        priority=1,
        num_nodes=1,
        num_cpus=1,
        num_tasks=1,
        cpus_per_task=1,
        time_limit=-1,
        batch_flag=True,
        requeue=True,
        submit_time=SUBMIT,
        eligible_time=SUBMIT,
        last_sched_eval=SUBMIT,
        alloc_node="localhost",
        work_dir="/tmp/gold",
        min_cpus_node=1,
        oversubscribe="OK",
        req_tres="cpu=1,mem=6000M,node=1,billing=1",
    )
    record.update(fields)
    return record


JOB_4 = job(
    job_id=4,
    name="big",
    num_nodes=4,
    max_nodes=4,
    num_cpus=8,
    num_tasks=8,
    time_limit=2,
    req_tres="cpu=8,mem=24000M,node=4,billing=8",
)
JOB_3 = job(job_id=3, name="heldjob", priority=0, reason="JobHeldUser", eligible_time=0)
JOB_2 = job(
    job_id=2,
    array_job_id=2,
    array_task_str="1-6%2",
    array_max_tasks=2,
    name="wrap",
    std_out="/dev/null",
)

GOLDEN_JOB_4 = (
    """\
JobId=4 JobName=big
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=1 Nice=0 Account=bench QOS=normal
   JobState=PENDING Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   RunTime=00:00:00 TimeLimit=00:02:00 TimeMin=N/A
   SubmitTime=2026-11-30T04:56:52 EligibleTime=2026-11-30T04:56:52
   AccrueTime=Unknown
   StartTime=Unknown EndTime=Unknown Deadline=N/A
   SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-30T04:56:52 Scheduler=Main
   Partition=debug AllocNode:Sid=localhost:0
   ReqNodeList=(null) ExcNodeList=(null)
   NodeList=
   NumNodes=4-4 NumCPUs=8 NumTasks=8 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=8,mem=24000M,node=4,billing=8
   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
   Features=(null) DelayBoot=00:00:00
   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)
   Command=(null)
   WorkDir=/tmp/gold
   StdErr=/tmp/gold/slurm-4.out
   StdIn=/dev/null
   StdOut=/tmp/gold/slurm-4.out
   Power=
"""
    + "   \n\n"
)

GOLDEN_JOB_3_ONELINE = (
    "JobId=3 JobName=heldjob UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 Nice=0 "
    "Account=bench QOS=normal JobState=PENDING Reason=JobHeldUser Dependency=(null) Requeue=1 "
    "Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED "
    "TimeMin=N/A SubmitTime=2026-11-30T04:56:52 EligibleTime=Unknown AccrueTime=Unknown "
    "StartTime=Unknown EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval=2026-11-30T04:56:52 Scheduler=Main Partition=debug AllocNode:Sid=localhost:0 "
    "ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 "
    "ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=6000M,node=1,billing=1 Socks/Node=* "
    "NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 "
    "Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) "
    "Network=(null) Command=(null) WorkDir=/tmp/gold StdErr=/tmp/gold/slurm-3.out "
    "StdIn=/dev/null StdOut=/tmp/gold/slurm-3.out Power= \n"
)

GOLDEN_JOB_2_HEAD = (
    "JobId=2 ArrayJobId=2 ArrayTaskId=1-6%2 ArrayTaskThrottle=2 JobName=wrap\n"
    "   UserId=root(0) GroupId=root(0) MCS_label=N/A\n"
)
GOLDEN_JOB_2_TAIL = (
    "   WorkDir=/tmp/gold\n"
    "   StdErr=/dev/null\n"
    "   StdIn=/dev/null\n"
    "   StdOut=/dev/null\n"
    "   Power=\n"
    "   \n\n"
)


def node(name: str = "n1", **fields: Any) -> dict[str, Any]:
    record = codec.decode("NodeInfo", b"")
    record.update(
        name=name,
        arch="x86_64",
        cores_per_socket=2,
        cpus=2,
        cpu_load=0.07,
        addr="127.0.0.1",
        hostname="vm",
        port=17001,
        version="22.05.8",
        os="Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0",
        real_memory=6000,
        free_memory=23615,
        sockets=1,
        boards=1,
        state="IDLE",
        threads_per_core=1,
        weight=1,
        partitions=["debug"],
        boot_time=SUBMIT - 4810,
        agent_start_time=SUBMIT - 15,
        last_busy=SUBMIT - 4,
    )
    record.update(fields)
    return record


GOLDEN_NODE = (
    "NodeName=n1 Arch=x86_64 CoresPerSocket=2 \n"
    "   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.07\n"
    "   AvailableFeatures=(null)\n"
    "   ActiveFeatures=(null)\n"
    "   Gres=(null)\n"
    "   NodeAddr=127.0.0.1 NodeHostName=vm Port=17001 Version=22.05.8\n"
    "   OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0 \n"
    "   RealMemory=6000 AllocMem=0 FreeMem=23615 Sockets=1 Boards=1\n"
    "   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "   Partitions=debug \n"
    "   BootTime=2026-11-30T03:36:42 SlurmdStartTime=2026-11-30T04:56:37\n"
    "   LastBusyTime=2026-11-30T04:56:48\n"
    "   CfgTRES=cpu=2,mem=6000M,billing=2\n"
    "   AllocTRES=\n"
    "   CapWatts=n/a\n"
    "   CurrentWatts=0 AveWatts=0\n"
    "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n"
    "\n"
)


def partition(**fields: Any) -> dict[str, Any]:
    record = codec.decode("PartitionInfo", b"")
    record.update(
        name="debug",
        is_default=True,
        max_time=-1,
        nodes="n[1-4]",
        node_names=["n1", "n2", "n3", "n4"],
        priority_job_factor=1,
        priority_tier=1,
        oversubscribe="NO",
        state="UP",
        total_cpus=8,
        total_nodes=4,
        tres="cpu=8,mem=24000M,node=4,billing=8",
    )
    record.update(fields)
    return record


GOLDEN_PARTITION = """\
PartitionName=debug
   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL
   AllocNodes=ALL Default=YES QoS=N/A
   DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO
   MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED
   Nodes=n[1-4]
   PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO
   OverTimeLimit=NONE PreemptMode=OFF
   State=UP TotalCPUs=8 TotalNodes=4 SelectTypeParameters=NONE
   JobDefaults=(null)
   DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED
   TRES=cpu=8,mem=24000M,node=4,billing=8

"""


def test_golden_job_record() -> None:
    assert job_record.record(JOB_4, NOW) == GOLDEN_JOB_4


# A count -B gave as 0, as Slurm 22.05's scontrol showed it (sbatch -w n1 on nodes of
# two 4-core sockets): (JobInfo counts and node_info_zeros, ReqB:S:C:T, Socks/Node).
ZERO_ROWS: list[tuple[str, dict[str, Any], str, str]] = [
    ("B-0", {"node_info_zeros": ["sockets_per_node"]}, "0:0:*:*", "0"),
    ("B-1:0", {"sockets_per_node": 1, "node_info_zeros": ["cores_per_socket"]}, "0:0:0:*", "1"),
    ("B-0:2", {"cores_per_socket": 2, "node_info_zeros": ["sockets_per_node"]}, "0:0:2:*", "0"),
    ("B-0:0", {"node_info_zeros": ["cores_per_socket", "sockets_per_node"]}, "0:0:0:*", "0"),
    ("B-2:0:1", {"sockets_per_node": 2, "threads_per_core": 1,
                 "node_info_zeros": ["cores_per_socket"]}, "0:0:0:1", "2"),
    ("B-1", {"sockets_per_node": 1}, "0:0:*:*", "1"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "reqb", "socks"), [row[1:] for row in ZERO_ROWS], ids=[row[0] for row in ZERO_ROWS]
)
def test_a_count_given_as_0_shows_as_0(fields: dict[str, Any], reqb: str, socks: str) -> None:
    text = job_record.record(job(job_id=7, **fields), NOW, oneliner=True)
    assert (f" ReqB:S:C:T={reqb} " in text, f" Socks/Node={socks} " in text) == (True, True), text


def test_golden_job_oneliner() -> None:
    assert job_record.record(JOB_3, NOW, oneliner=True) == GOLDEN_JOB_3_ONELINE


def test_golden_array_record() -> None:
    text = job_record.record(JOB_2, NOW)
    assert text.startswith(GOLDEN_JOB_2_HEAD)
    assert text.endswith(GOLDEN_JOB_2_TAIL)


def test_golden_node_record() -> None:
    assert node_record.node_record(node()) == GOLDEN_NODE


def test_golden_partition_record() -> None:
    assert node_record.partition_record(partition()) == GOLDEN_PARTITION


def test_a_partitions_gpu_defaults_are_its_job_defaults() -> None:
    """As Slurm 22.05 prints a partition with DefCpuPerGPU=2 DefMemPerGPU=1000."""
    shown = node_record.partition_record(partition(job_defaults="DefCpuPerGPU=2,DefMemPerGPU=1000"))
    assert "\n   JobDefaults=DefCpuPerGPU=2,DefMemPerGPU=1000\n" in shown


def test_a_jobs_gpu_request_lines_follow_power_in_slurms_order() -> None:
    """``sbatch --gpus=4 --gpus-per-node=2 --gpus-per-task=1 --cpus-per-gpu=3
    --mem-per-gpu=300 --gpu-bind=closest --gres-flags=enforce-binding`` as Slurm 22.05
    orders its lines (api/job_info.c), in the gres/ spelling of 23.02 and later."""
    record = job_record.record(
        job(
            gres="gpu:2",
            gres_enforce_bind="Yes",
            cpus_per_tres="gres/gpu:3",
            mem_per_tres="gres/gpu:300",
            tres_bind="gpu:closest",
            tres_per_job="gres/gpu:4",
            tres_per_task="gres/gpu:1",
            ntasks_per_tres=2,
        ),
        NOW,
    )
    assert record.split("   Power=\n")[1] == (
        "   GresEnforceBind=Yes\n"
        "   CpusPerTres=gres/gpu:3\n"
        "   MemPerTres=gres/gpu:300\n"
        "   TresBind=gpu:closest\n"
        "   TresPerJob=gres/gpu:4\n"
        "   TresPerNode=gres/gpu:2\n"
        "   TresPerTask=gres/gpu:1\n"
        "   NtasksPerTRES=2\n"
        "   \n\n"
    )


@pytest.mark.parametrize(
    ("status", "text"),
    [(0, "0:0"), (3 << 8, "3:0"), (9, "0:9"), (15, "0:15"), (0x7F, "0:0"), (255 << 8, "255:0")],
)
def test_exit_code(status: int, text: str) -> None:
    assert job_record.exit_code(status) == text


def line_of(record: str, key: str) -> str:
    return next(part for part in record.split("\n   ") if key in part)


def test_running_job_lines() -> None:
    running = job(
        job_id=7,
        state="RUNNING",
        start_time=NOW - 3605,
        end_time=NOW + 3600,
        time_limit=120,
        nodes="n2,n1",
        batch_host="n1",
        num_nodes=2,
        state_desc="",
        comment="hello",
        min_mem_cpu=1024,
        exit_status=0,
    )
    text = job_record.record(running, NOW, details=True)
    assert "   RunTime=01:00:05 TimeLimit=02:00:00 TimeMin=N/A\n" in text
    assert "   NodeList=n[1-2]\n   BatchHost=n1\n" in text
    assert "   DerivedExitCode=0:0\n" in text
    assert "   MinCPUsNode=1 MinMemoryCPU=1G MinTmpDiskNode=0\n" in text
    assert "   WorkDir=/tmp/gold\n   Comment=hello \n   StdErr=" in text
    assert line_of(text, "EndTime=").endswith("EndTime=2026-11-30T05:56:54 Deadline=N/A")


def test_reason_whitespace_becomes_underscores() -> None:
    pending = job(state_desc="ReqNodeNotAvail, UnavailableNodes:n3")
    line = line_of(job_record.record(pending, NOW), "JobState=")
    assert line == "JobState=PENDING Reason=ReqNodeNotAvail,_UnavailableNodes:n3 Dependency=(null)"


def test_node_state_and_reason() -> None:
    drained = node(
        state="MIXED",
        state_flags=["DRAIN", "NOT_RESPONDING"],
        alloc_cpus=1,
        alloc_memory=100,
        reason="disk\nsecond line",
        reason_user="admin",
        reason_time=NOW,
    )
    text = node_record.node_record(drained)
    assert "   State=MIXED+DRAIN+NOT_RESPONDING ThreadsPerCore=1" in text
    assert "   AllocTRES=cpu=1,mem=100M\n" in text
    assert text.endswith("   Reason=disk [admin@2026-11-30T04:56:54]\n          second line\n\n")


class FakeClient:
    def __init__(self, replies: dict[str, Any]) -> None:
        self.replies = replies
        self.requests: list[tuple[str, Any]] = []

    def call(self, method: str, request: Any) -> Any:
        self.requests.append((method, request))
        reply = self.replies[method]
        if isinstance(reply, Exception):
            raise reply
        return reply


def session(
    monkeypatch: pytest.MonkeyPatch, replies: dict[str, Any]
) -> tuple[scontrol.Session, FakeClient]:
    client = FakeClient(replies)
    fake_conf = SimpleNamespace(
        controller_host=("ctl", "10.0.0.1"),
        controller_hosts=(("ctl", "10.0.0.1"),),
        slurmd_port=6818,
    )
    monkeypatch.setattr(corral.clientconf, "client_settings", lambda *args: fake_conf)
    chosen = scontrol.Session(io.StringIO(), io.StringIO())
    chosen._client = client
    return chosen, client


def outputs(chosen: scontrol.Session) -> tuple[str, str]:
    assert isinstance(chosen.out, io.StringIO) and isinstance(chosen.err, io.StringIO)
    return chosen.out.getvalue(), chosen.err.getvalue()


JOBS = {"Jobs": {"jobs": [JOB_4], "now": NOW, "last_update": NOW}}


@pytest.mark.parametrize("words", [["show", "job", "4"], ["SHO", "Job", "4"], ["show", "jobid=4"]])
def test_show_job(monkeypatch: pytest.MonkeyPatch, words: list[str]) -> None:
    chosen, client = session(monkeypatch, JOBS)
    chosen.run(words)
    assert outputs(chosen) == (GOLDEN_JOB_4, "")
    assert client.requests[0][1]["filter"]["job_ids"] == ["4"]
    assert chosen.exit_code == 0


@pytest.mark.parametrize(
    ("words", "reply", "out", "err"),
    [
        (
            ["show", "job", "999999"],
            SlurmError(2017),
            "",
            "slurm_load_jobs error: Invalid job id specified\n",
        ),
        (
            ["show", "job", "abc"],
            {},
            "",
            "scontrol_print_job error: Invalid job id specified\n",
        ),
    ],
)
def test_show_job_errors(
    monkeypatch: pytest.MonkeyPatch, words: list[str], reply: Any, out: str, err: str
) -> None:
    chosen, _ = session(monkeypatch, {"Jobs": reply})
    chosen.run(words)
    assert outputs(chosen) == (out, err)
    assert chosen.exit_code == 1


def test_show_job_array_task(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {"Jobs": {"jobs": [JOB_2], "now": NOW}})
    chosen.run(["show", "job", "2_3"])
    assert outputs(chosen)[0].startswith("JobId=2 ArrayJobId=2 ArrayTaskId=3 ArrayTaskThrottle=2")


def test_no_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {"Jobs": {"jobs": [], "now": NOW}})
    chosen.run(["show", "jobs"])
    assert outputs(chosen) == ("No jobs in the system\n", "")
    assert chosen.exit_code == 0


def test_show_nodes_and_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = {
        "Nodes": {"nodes": [node(port=6818), node("n2", port=6818)], "now": NOW},
        "Partitions": {"partitions": [partition()], "now": NOW},
    }
    chosen, _ = session(monkeypatch, replies)
    chosen.run(["show", "node", "n1"])
    chosen.run(["show", "partition"])
    out, err = outputs(chosen)
    assert out.startswith("NodeName=n1 Arch=x86_64 CoresPerSocket=2 \n")
    assert "   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8\n" in out
    assert out.endswith(GOLDEN_PARTITION)
    assert (err, chosen.exit_code) == ("", 0)


@pytest.mark.parametrize(
    ("words", "out"),
    [
        (["show", "node", "n9"], "Node n9 not found\n"),
        (["show", "partition", "nosuch"], "Partition nosuch not found\n"),
        # Slurm 22.05, for a job with no running step (pending, say) and for a step.
        (["show", "step", "7"], "Job step 7. not found\n"),
        (["show", "step", "7.3"], "Job step 7.3 not found\n"),
    ],
)
def test_show_missing(monkeypatch: pytest.MonkeyPatch, words: list[str], out: str) -> None:
    replies = {
        "Nodes": {"nodes": [node()], "now": NOW},
        "Partitions": {"partitions": [partition()], "now": NOW},
        "Jobs": {"jobs": [], "now": NOW},
    }
    chosen, _ = session(monkeypatch, replies)
    chosen.run(words)
    assert outputs(chosen) == (out, "")
    assert chosen.exit_code == 1


@pytest.mark.parametrize(
    ("words", "out"),
    [
        (["show", "hostnames", "n[1-3],x5"], "n1\nn2\nn3\nx5\n"),
        (["show", "hostlist", "n1,n2,n3,n7"], "n[1-3,7]\n"),
        (["show", "hostlist", "n9,n10,n11,n1"], "n[9-11,1]\n"),
        (["show", "hostlistsorted", "n9,n10,n1"], "n[1,9-10]\n"),
    ],
)
def test_hostlists(monkeypatch: pytest.MonkeyPatch, words: list[str], out: str) -> None:
    chosen, _ = session(monkeypatch, {})
    chosen.run(words)
    assert outputs(chosen) == (out, "")


def test_hostnames_default_to_job_nodelist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_NODELIST", "c[1-2]")
    chosen, _ = session(monkeypatch, {})
    chosen.run(["show", "hostnames"])
    assert outputs(chosen) == ("c1\nc2\n", "")


def pinged(*states: tuple[str, bool]) -> dict[str, Any]:
    controllers = [{"host": host, "up": up, "standby": False} for host, up in states]
    return {"host": states[0][0], "now": NOW, "cluster": "bench", "controllers": controllers}


def two_controllers(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = (("ctl1", "10.0.0.1"), ("ctl2", "10.0.0.2"))
    fake_conf = SimpleNamespace(controller_host=hosts[0], controller_hosts=hosts)
    monkeypatch.setattr(corral.clientconf, "client_settings", lambda *args: fake_conf)


def test_ping(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, client = session(monkeypatch, {"Ping": pinged(("ctl", True))})
    chosen.run(["ping"])
    assert outputs(chosen) == ("Slurmctld(primary) at ctl is UP\n", "")
    assert chosen.exit_code == 0
    assert client.requests == [("Ping", {"all": True})]


def test_ping_shows_every_controller_as_slurm_does(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {"Ping": pinged(("ctl1", False), ("ctl2", True))})
    two_controllers(monkeypatch)
    chosen.run(["ping"])
    lines = outputs(chosen)[0].splitlines()
    assert lines[:2] == ["Slurmctld(primary) at ctl1 is DOWN", "Slurmctld(backup) at ctl2 is UP"]
    assert chosen.exit_code == 1


def test_takeover_asks_backup_one_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, client = session(monkeypatch, {"Takeover": {}})
    two_controllers(monkeypatch)
    chosen.run(["takeover"])
    chosen.run(["takeover", "1"])
    assert client.requests == [("Takeover", {"index": 1}), ("Takeover", {"index": 1})]
    assert outputs(chosen) == ("", "")


@pytest.mark.parametrize(
    ("words", "err"),
    [
        (["takeover", "2"], "scontrol: invalid backup controller index (2)\n"),
        (["takeover", "x"], "scontrol: invalid backup controller index (0)\n"),
    ],
)
def test_takeover_refuses_a_bad_index(
    monkeypatch: pytest.MonkeyPatch, words: list[str], err: str
) -> None:
    chosen, client = session(monkeypatch, {})
    two_controllers(monkeypatch)
    chosen.run(words)
    assert outputs(chosen) == ("", err)
    assert chosen.exit_code == 1 and client.requests == []


def test_takeover_without_a_backup(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, client = session(monkeypatch, {})
    chosen.run(["takeover"])
    assert outputs(chosen) == ("", "scontrol: no backup controller defined\n")
    assert client.requests == []


def test_takeover_refused_by_the_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {"Takeover": SlurmError(2002)})
    two_controllers(monkeypatch)
    chosen.run(["takeover"])
    assert outputs(chosen) == ("", "slurm_takeover error: Access/permission denied\n")
    assert chosen.exit_code == 1


def test_ping_down(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {"Ping": ControllerUnreachable()})
    chosen.run(["ping"])
    assert outputs(chosen)[0].startswith("Slurmctld(primary) at ctl is DOWN\n")
    assert chosen.exit_code == 1


def test_show_config(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [{"key": "ClusterName", "value": "bench"}, {"key": "MinJobAge", "value": "300 sec"}]
    replies = {
        "Config": {"entries": entries, "now": NOW, "config_file": "/x", "last_update": SUBMIT},
        "Ping": pinged(("ctl", True)),
    }
    chosen, _ = session(monkeypatch, replies)
    chosen.run(["show", "config"])
    assert outputs(chosen)[0] == (
        "Configuration data as of 2026-11-30T04:56:52\n"
        "ClusterName             = bench\n"
        "MinJobAge               = 300 sec\n"
        "\n"
        "Slurmctld(primary) at ctl is UP\n"
    )


def results(*codes: tuple[str, int]) -> dict[str, Any]:
    return {
        "results": [
            {"job_id": job_id, "code": code, "message": str(SlurmError(code)) if code else ""}
            for job_id, code in codes
        ]
    }


@pytest.mark.parametrize(
    ("words", "action", "ids", "name"),
    [
        (["hold", "5"], "hold", ["5"], ""),
        (["uhold", "5,6"], "uhold", ["5", "6"], ""),
        (["release", "JobId=7_[1-3]"], "release", ["7_[1-3]"], ""),
        (["hold", "jobname=foo"], "hold", [], "foo"),
        (["requeue", "Incomplete", "8"], "requeue", ["8"], ""),
        (["requeuehold", "9"], "requeuehold", ["9"], ""),
        (["suspend", "10,11"], "suspend", ["10", "11"], ""),
        (["su", "JobId=12"], "suspend", ["12"], ""),
        (["resume", "13"], "resume", ["13"], ""),
        (["res", "14"], "resume", ["14"], ""),
    ],
)
def test_job_actions(
    monkeypatch: pytest.MonkeyPatch, words: list[str], action: str, ids: list[str], name: str
) -> None:
    chosen, client = session(monkeypatch, {"JobControl": results(("x", 0))})
    chosen.run(words)
    assert outputs(chosen) == ("", "")
    method, request = client.requests[0]
    assert (method, request["action"], request["job_ids"], request["job_name"]) == (
        "JobControl",
        action,
        ids,
        name,
    )


@pytest.mark.parametrize(
    ("words", "code"),
    [(["hold", "999"], 2017), (["suspend", "999"], 2002), (["resume", "999"], 2087)],
    ids=["hold-unknown-job", "suspend-refused", "resume-not-suspended"],
)
def test_a_refused_job_action_says_why_per_job_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, words: list[str], code: int
) -> None:
    chosen, _ = session(monkeypatch, {"JobControl": results(("999", code))})
    chosen.run(words)
    why = str(SlurmError(code))
    assert outputs(chosen)[1] == f"{why} for job 999\nslurm_suspend error: {why}\n"
    assert chosen.exit_code == 1


@pytest.mark.parametrize("words", [["suspend"], ["resume", "abc"]])
def test_suspend_and_resume_need_a_job_list(
    monkeypatch: pytest.MonkeyPatch, words: list[str]
) -> None:
    chosen, client = session(monkeypatch, {})
    chosen.run(words)
    assert (client.requests, chosen.exit_code) == ([], 1)


def test_requeue_bad_id(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, client = session(monkeypatch, {})
    chosen.run(["requeue", "abc"])
    assert outputs(chosen)[1] == "Invalid job id specified for job abc\n"
    assert (client.requests, chosen.exit_code) == ([], 1)


@pytest.mark.parametrize(
    ("words", "ids", "updates", "name"),
    [
        (["update", "JobId=5", "TimeLimit=30"], ["5"], {"TimeLimit": "30"}, ""),
        (
            ["update", "jobid=5", "Name=x", "Partition=p"],
            ["5"],
            {"Name": "x", "Partition": "p"},
            "",
        ),
        (["upd", "TimeLimit", "1:00", "JobID=5,6"], ["5", "6"], {"TimeLimit": "1:00"}, ""),
        (["update", "JobName=foo", "Priority=5"], [], {"Priority": "5"}, "foo"),
    ],
)
def test_update_job(
    monkeypatch: pytest.MonkeyPatch,
    words: list[str],
    ids: list[str],
    updates: dict[str, str],
    name: str,
) -> None:
    chosen, client = session(monkeypatch, {"JobControl": results(("5", 0))})
    chosen.run(words)
    assert outputs(chosen) == ("", "")
    request = client.requests[0][1]
    assert request == {"action": "update", "job_ids": ids, "updates": updates, "job_name": name}


def test_update_job_error(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {"JobControl": results(("5", 2051))})
    chosen.run(["update", "JobId=5", "TimeLimit=99999"])
    assert outputs(chosen)[1] == (
        "Requested time limit is invalid (missing or exceeds some limit) for job 5\n"
    )
    assert chosen.exit_code == 1


def test_update_job_without_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, client = session(monkeypatch, {})
    chosen.run(["update", "JobId=5"])
    assert outputs(chosen)[1] == "No changes specified\n"
    assert (client.requests, chosen.exit_code) == ([], 1)


@pytest.mark.parametrize(
    ("words", "request_sent"),
    [
        (
            ["update", "NodeName=n[1-2]", "State=DRAIN", "Reason=disk swap"],
            {"nodes": "n[1-2]", "state": "DRAIN", "reason": "disk swap"},
        ),
        (
            ["update", "nodename=n1", "state=resume"],
            {"nodes": "n1", "state": "RESUME", "reason": ""},
        ),
        (["update", "NodeName=n1", "State=idl"], {"nodes": "n1", "state": "IDLE", "reason": ""}),
    ],
)
def test_update_node(
    monkeypatch: pytest.MonkeyPatch, words: list[str], request_sent: dict[str, str]
) -> None:
    chosen, client = session(monkeypatch, {"NodeUpdate": {}})
    chosen.run(words)
    assert outputs(chosen) == ("", "")
    assert client.requests == [("NodeUpdate", request_sent)]


@pytest.mark.parametrize(
    ("words", "err"),
    [
        (
            ["update", "NodeName=n1", "State=DOWN"],
            "You must specify a reason when DOWNING or DRAINING a node. Request denied\n",
        ),
        (
            ["update", "NodeName=n1", "State=bogus"],
            "Invalid input: State=bogus\nRequest aborted\n"
            "Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN\n"
            "Not all states are valid given a node's prior state\n",
        ),
        (
            ["update", "NodeName=n1", "Weight=5"],
            "Update of this parameter is not supported: Weight=5\nRequest aborted\n",
        ),
        (["bogus"], "invalid keyword: bogus\n"),
        (["show", "bogus"], "invalid entity:bogus for keyword:show \n"),
        (["show"], "too few arguments for keyword:show\n"),
    ],
)
def test_command_errors(monkeypatch: pytest.MonkeyPatch, words: list[str], err: str) -> None:
    chosen, client = session(monkeypatch, {})
    chosen.run(words)
    assert outputs(chosen) == ("", err)
    assert (client.requests, chosen.exit_code) == ([], 1)


def test_node_update_error(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {"NodeUpdate": SlurmError(2018)})
    chosen.run(["update", "NodeName=n9", "State=RESUME"])
    assert outputs(chosen)[1] == "slurm_update error: Invalid node name specified\n"
    assert chosen.exit_code == 1


def test_version(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen, _ = session(monkeypatch, {})
    chosen.run(["version"])
    assert outputs(chosen) == ("slurm 24.11.0\n", "")


def test_oneliner_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = FakeClient({"Jobs": {"jobs": [JOB_3], "now": NOW}})
    monkeypatch.setattr(scontrol.boundary, "connect", lambda: client)
    assert scontrol.scontrol(["show", "job", "-o", "3"]) == 0
    assert capsys.readouterr().out == GOLDEN_JOB_3_ONELINE


def test_word_abbreviations() -> None:
    assert scontrol.word_is("sho", "show", 3)
    assert not scontrol.word_is("sh", "show", 3)
    assert scontrol.word_is("U", "update", 1)
    assert not scontrol.word_is("showx", "show", 3)
