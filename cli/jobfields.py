"""What squeue can print about a job: its ``-o`` letters and ``-O`` names.

Each field has Slurm's header and renders one JobInfo dict (as decoded from
the wire) to the text squeue prints, including Slurm's placeholders:
``(null)`` for an unset string, ``N/A`` for an unknown time, ``*`` for an
unconstrained socket count. Rendering is pure; ``JobView`` carries the only
outside inputs (the controller's clock and the environment).
"""

from __future__ import annotations

from cli import jobstate
from cli.columns import Field
from cli.jobids import display_id, task_range
from cli.quantity import mebibytes, scaled
from cli.records import null
from corral.hostlist import compress, expand
from corral.timefmt import format_elapsed, format_minutes, format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Job = Mapping[str, Any]

#: Slurm's ceiling for a job priority, the denominator of ``%p``.
_PRIORITY_SCALE = 0xFFFFFFFF


class JobView:
    """The outside inputs of rendering: the controller's clock and the environment."""

    __slots__ = ("env", "now")

    def __init__(self, now: int, env: Mapping[str, str]) -> None:
        self.now = now
        self.env = env


def run_seconds(job: Job, now: int) -> int:
    """Seconds the job has run, not counting time suspended (squeue TIME, scontrol RunTime)."""
    state = job["state"]
    if job["start_time"] == 0 or state == "PENDING":
        return 0
    if state == "SUSPENDED":
        return int(job["pre_suspend_secs"])
    end = now if state == "RUNNING" or job["end_time"] == 0 else job["end_time"]
    if job["suspend_time"]:
        return int(end - job["suspend_time"] + job["pre_suspend_secs"])
    return int(end - job["start_time"])


def node_list(names: str) -> str:
    """A node list sorted and compressed as Slurm prints it; unparsable text as given."""
    if not names:
        return ""
    try:
        return compress(expand(names))
    except ValueError:
        return names


def shows_reason(job: Job) -> bool:
    """Whether ``%R`` shows the reason (pending or failed) rather than the nodes."""
    if "COMPLETING" in job["state_flags"]:
        return False
    if "STAGE_OUT" in job["state_flags"]:
        return True
    return job["state"] in ("PENDING", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "FAILED")


def reason_text(job: Job) -> str:
    """``%r``: the state description when the controller gave one, else the reason word."""
    return str(job["state_desc"] or job["reason"])


def _time(epoch: int) -> str:
    return format_timestamp(epoch) if epoch else "N/A"


def _limit(job: Job, view: JobView) -> str:
    return format_minutes(int(job["time_limit"]))


def _left(job: Job, view: JobView) -> str:
    if job["time_limit"] == -1:
        return "UNLIMITED"
    return format_elapsed(int(job["time_limit"]) * 60 - run_seconds(job, view.now))


def _end(job: Job, view: JobView) -> str:
    if job["time_limit"] == -1 and job["end_time"] > view.now:
        return "NONE"
    return _time(job["end_time"])


def _reason_list(job: Job, view: JobView) -> str:
    if shows_reason(job):
        return f"({reason_text(job)})"
    return node_list(job["nodes"])


def _array_job_id(job: Job, view: JobView) -> str:
    if job["array_task_str"] or job["array_task_id"] is not None:
        return str(job["array_job_id"])
    return str(job["job_id"])


def _array_task_id(job: Job, view: JobView) -> str:
    if job["array_task_str"]:
        return task_range(job, view.env)
    if job["array_task_id"] is not None:
        return str(job["array_task_id"])
    return "N/A"


def _exec_host(job: Job, view: JobView) -> str:
    host = job["batch_host"] if job["batch_flag"] else job["alloc_node"]
    return host or "n/a"


def _min_memory(job: Job, view: JobView) -> str:
    return mebibytes(int(job["min_mem_cpu"] or job["min_mem_node"]))


def _std_err(job: Job, view: JobView) -> str:
    if not job["batch_flag"]:
        return "N/A"
    return str(job["std_err"] or job["std_out"] or f"{job['work_dir']}/slurm-{job['job_id']}.out")


def _std_out(job: Job, view: JobView) -> str:
    if not job["batch_flag"]:
        return "N/A"
    return str(job["std_out"] or f"{job['work_dir']}/slurm-{job['job_id']}.out")


def _pending_time(job: Job, view: JobView) -> str:
    if job["start_time"] and job["start_time"] < view.now:
        return str(job["start_time"] - job["submit_time"])
    return str(view.now - job["submit_time"])


def _text(key: str) -> Callable[[Job, JobView], str]:
    """A string field, ``(null)`` when unset."""
    return lambda job, view: null(str(job[key]))


def _number(key: str) -> Callable[[Job, JobView], str]:
    return lambda job, view: str(int(job[key]))


def _stamp(key: str) -> Callable[[Job, JobView], str]:
    return lambda job, view: _time(job[key])


def _nodes(key: str) -> Callable[[Job, JobView], str]:
    return lambda job, view: node_list(job[key])


def _const(text: str) -> Callable[[Job, JobView], str]:
    return lambda job, view: text


_ACCOUNT = Field("ACCOUNT", _text("account"))
_ARRAY_JOB_ID = Field("ARRAY_JOB_ID", _array_job_id)
_ARRAY_TASK_ID = Field("ARRAY_TASK_ID", _array_task_id)
_BATCH_HOST = Field("EXEC_HOST", _exec_host)
_COMMAND = Field("COMMAND", _text("command"))
_COMMENT = Field("COMMENT", _text("comment"))
_CONTIGUOUS = Field("CONTIGUOUS", _const("0"))
_CORES = Field("CORES_PER_SOCKET", _const("*"))
_CORE_SPEC = Field("CORE_SPEC", _const("N/A"))
_DEPENDENCY = Field("DEPENDENCY", _text("dependency"))
_END_TIME = Field("END_TIME", _end)
_EXC_NODES = Field("EXC_NODES", _nodes("exc_nodes"))
_FEATURES = Field("FEATURES", _text("features"))
_GRES = Field("TRES_PER_NODE", lambda job, view: job["gres"] or "N/A")
_GROUP_ID = Field("GROUP", _number("gid"))
_GROUP_NAME = Field("GROUP", lambda job, view: job["group"] or str(job["gid"]))
_JOB_ARRAY_ID = Field("JOBID", lambda job, view: display_id(job, view.env))
_JOB_ID = Field("JOBID", _number("job_id"))
_LICENSES = Field("LICENSES", _const("(null)"))
_MIN_CPUS = Field("MIN_CPUS", lambda job, view: scaled(int(job["min_cpus_node"])))
_MIN_MEMORY = Field("MIN_MEMORY", _min_memory)
_MIN_TMP_DISK = Field("MIN_TMP_DISK", _const("0"))
_NAME = Field("NAME", lambda job, view: str(job["name"]))
_NICE = Field("NICE", _number("nice"))
_NODE_LIST = Field("NODELIST", _nodes("nodes"), cut=False, header_cut=False)
_NUM_CPUS = Field("CPUS", _number("num_cpus"))
_NUM_NODES = Field("NODES", _number("num_nodes"))
_OVERSUBSCRIBE = Field("OVER_SUBSCRIBE", lambda job, view: job["oversubscribe"] or "OK")
_PARTITION = Field("PARTITION", lambda job, view: str(job["partition"]))
_PRIORITY = Field("PRIORITY", lambda job, view: f"{job['priority'] / _PRIORITY_SCALE:16.14f}")
_PRIORITY_LONG = Field("PRIORITY", _number("priority"))
_QOS = Field("QOS", _text("qos"))
_REASON = Field("REASON", lambda job, view: reason_text(job))
_REASON_LIST = Field("NODELIST(REASON)", _reason_list, header_cut=False)
_REQ_NODES = Field("REQ_NODES", _nodes("req_nodes"))
_RESERVATION = Field("RESERVATION", _const("(null)"))
_SCHED_NODES = Field("SCHEDNODES", _text("sched_nodes"), cut=False, header_cut=False)
_SCT = Field("S:C:T", _const("*:*:*"))
_SOCKETS = Field("SOCKETS_PER_NODE", _const("*"))
_START_TIME = Field("START_TIME", _stamp("start_time"))
_STATE = Field("STATE", lambda job, view: jobstate.long_name(job))
_STATE_COMPACT = Field("ST", lambda job, view: jobstate.compact_name(job))
_SUBMIT_TIME = Field("SUBMIT_TIME", _stamp("submit_time"))
_THREADS = Field("THREADS_PER_CORE", _const("*"))
_TIME_LEFT = Field("TIME_LEFT", _left, cut=False)
_TIME_LIMIT = Field("TIME_LIMIT", _limit, cut=False)
_TIME_USED = Field("TIME", lambda job, view: format_elapsed(run_seconds(job, view.now)), cut=False)
_TRES_ALLOC = Field("TRES_ALLOC", lambda job, view: job["alloc_tres"] or job["req_tres"] or "N/A")
_USER_ID = Field("UID", _number("uid"))
_USER_NAME = Field("USER", lambda job, view: job["user"] or str(job["uid"]))
_WCKEY = Field("WCKEY", _const("(null)"))
_WORK_DIR = Field("WORK_DIR", _text("work_dir"))

#: ``-o`` letters.
LETTERS: dict[str, Field] = {
    "a": _ACCOUNT,
    "A": _JOB_ID,
    "b": _GRES,
    "B": _BATCH_HOST,
    "c": _MIN_CPUS,
    "C": _NUM_CPUS,
    "d": _MIN_TMP_DISK,
    "D": _NUM_NODES,
    "e": _END_TIME,
    "E": _DEPENDENCY,
    "f": _FEATURES,
    "F": _ARRAY_JOB_ID,
    "g": _GROUP_NAME,
    "G": _GROUP_ID,
    "h": _OVERSUBSCRIBE,
    "H": _SOCKETS,
    "i": _JOB_ARRAY_ID,
    "I": _CORES,
    "j": _NAME,
    "J": _THREADS,
    "k": _COMMENT,
    "K": _ARRAY_TASK_ID,
    "l": _TIME_LIMIT,
    "L": _TIME_LEFT,
    "m": _MIN_MEMORY,
    "M": _TIME_USED,
    "n": _REQ_NODES,
    "N": _NODE_LIST,
    "o": _COMMAND,
    "O": _CONTIGUOUS,
    "p": _PRIORITY,
    "P": _PARTITION,
    "q": _QOS,
    "Q": _PRIORITY_LONG,
    "r": _REASON,
    "R": _REASON_LIST,
    "S": _START_TIME,
    "t": _STATE_COMPACT,
    "T": _STATE,
    "u": _USER_NAME,
    "U": _USER_ID,
    "v": _RESERVATION,
    "V": _SUBMIT_TIME,
    "w": _WCKEY,
    "W": _LICENSES,
    "x": _EXC_NODES,
    "X": _CORE_SPEC,
    "y": _NICE,
    "Y": _SCHED_NODES,
    "z": _SCT,
    "Z": _WORK_DIR,
}

_NAMED: dict[str, Field] = {
    "Account": _ACCOUNT,
    "AccrueTime": Field("ACCRUE_TIME", _stamp("accrue_time")),
    "admin_comment": Field("ADMIN_COMMENT", _const("(null)")),
    "AllocNodes": Field("ALLOC_NODES", _text("alloc_node")),
    "AllocSID": Field("ALLOC_SID", _const("0")),
    "ArrayJobId": _ARRAY_JOB_ID,
    "ArrayTaskId": _ARRAY_TASK_ID,
    "AssocId": Field("ASSOC_ID", _const("0")),
    "BatchFlag": Field("BATCH_FLAG", _number("batch_flag")),
    "BatchHost": _BATCH_HOST,
    "BoardsPerNode": Field("BOARDS_PER_NODE", _const("N/A")),
    "BurstBuffer": Field("BURST_BUFFER", _const("(null)")),
    "BurstBufferState": Field("BURST_BUFFER_STATE", _const("(null)")),
    "Cluster": Field("CLUSTER", _text("cluster")),
    "ClusterFeature": Field("CLUSTER_FEATURES", _const("(null)")),
    "Command": _COMMAND,
    "Comment": _COMMENT,
    "Contiguous": _CONTIGUOUS,
    "Cores": _CORES,
    "CoreSpec": _CORE_SPEC,
    "CPUsPerTask": Field("CPUS_PER_TASK", _number("cpus_per_task")),
    "cpus-per-task": Field("CPUS_PER_TASK", _number("cpus_per_task")),
    "Deadline": Field("DEADLINE", _stamp("deadline")),
    "DelayBoot": Field("DELAY_BOOT", _const("0:00")),
    "Dependency": _DEPENDENCY,
    "DerivedEC": Field("DERIVED_EC", _number("derived_exit_status")),
    "EligibleTime": Field("ELIGIBLE_TIME", _stamp("eligible_time")),
    "EndTime": _END_TIME,
    "ExcNodes": _EXC_NODES,
    "exit_code": Field("EXIT_CODE", _number("exit_status")),
    "Feature": _FEATURES,
    "Gres": _GRES,
    "GroupId": _GROUP_ID,
    "GroupName": _GROUP_NAME,
    "HetJobId": Field("HET_JOB_ID", _const("N/A")),
    "HetJobIdSet": Field("HET_JOB_ID_SET", _const("N/A")),
    "HetJobOffset": Field("HET_JOB_OFFSET", _const("N/A")),
    "JobArrayId": _JOB_ARRAY_ID,
    "JobId": _JOB_ID,
    "LastSchedEval": Field("LAST_SCHED_EVAL", _stamp("last_sched_eval")),
    "Licenses": _LICENSES,
    "MaxCPUs": Field("MAX_CPUS", _number("num_cpus")),
    "MaxNodes": Field("MAX_NODES", lambda job, view: str(job["max_nodes"] or job["num_nodes"])),
    "MCSLabel": Field("MCSLABEL", _const("N/A")),
    "MinCPUs": _MIN_CPUS,
    "MinMemory": _MIN_MEMORY,
    "MinTime": Field("TIME_MIN", lambda job, view: format_elapsed(int(job["time_min"]) * 60)),
    "MinTmpDisk": _MIN_TMP_DISK,
    "Name": _NAME,
    "Network": Field("NETWORK", _const("(null)")),
    "Nice": _NICE,
    "NodeList": _NODE_LIST,
    "NTPerNode": Field("NTASKS_PER_NODE", lambda job, view: str(job["ntasks_per_node"] or "N/A")),
    "NumCPUs": _NUM_CPUS,
    "NumNodes": _NUM_NODES,
    "NumTasks": Field("TASKS", _number("num_tasks")),
    "OverSubscribe": _OVERSUBSCRIBE,
    "Partition": _PARTITION,
    "PendingTime": Field("PENDING_TIME", _pending_time),
    "PreemptTime": Field("PREEMPT_TIME", _const("N/A")),
    "Priority": _PRIORITY,
    "PriorityLong": _PRIORITY_LONG,
    "QOS": _QOS,
    "Reason": _REASON,
    "ReasonList": _REASON_LIST,
    "Reboot": Field("REBOOT", _const("0")),
    "ReqNodes": _REQ_NODES,
    "Requeue": Field("REQUEUE", _number("requeue")),
    "Reservation": _RESERVATION,
    "RestartCnt": Field("RESTART_COUNT", _number("restarts")),
    "SchedNodes": _SCHED_NODES,
    "SCT": _SCT,
    "Shared": _OVERSUBSCRIBE,
    "Sockets": _SOCKETS,
    "StartTime": _START_TIME,
    "State": _STATE,
    "StateCompact": _STATE_COMPACT,
    "StdErr": Field("STDERR", _std_err),
    "StdIn": Field("STDIN", _text("std_in")),
    "StdOut": Field("STDOUT", _std_out),
    "SubmitTime": _SUBMIT_TIME,
    "system_comment": Field("SYSTEM_COMMENT", _const("(null)")),
    "Threads": _THREADS,
    "TimeLeft": _TIME_LEFT,
    "TimeLimit": _TIME_LIMIT,
    "TimeUsed": _TIME_USED,
    "Tres": _TRES_ALLOC,
    "tres-alloc": _TRES_ALLOC,
    "tres-per-node": _GRES,
    "tres-per-task": Field("TRES_PER_TASK", _const("N/A")),
    "UserId": _USER_ID,
    "UserName": _USER_NAME,
    "WCKey": _WCKEY,
    "WorkDir": _WORK_DIR,
}

#: ``-O`` names, keyed in lower case (squeue matches them case-insensitively).
NAMES: dict[str, Field] = {name.lower(): field for name, field in _NAMED.items()}
