"""What squeue can print about a job: its ``-o`` letters and ``-O`` names.

Each field has Slurm's header and renders one JobInfo dict (as decoded from
the wire) to the text squeue prints, including Slurm's placeholders:
``(null)`` for an unset string, ``N/A`` for an unknown time, ``*`` for an
unconstrained socket count. Rendering is pure; ``JobView`` carries the only
outside inputs (the controller's clock and the environment).
"""

from __future__ import annotations

from operator import itemgetter

from cli.columns import Field
from cli.jobs import statenames
from cli.jobs.ids import DISPLAY_ID_READS, display_id, task_range
from cli.quantity import mebibytes, scaled
from cli.records import null
from corral.hostlist import compress, expand
from corral.timefmt import format_elapsed, format_minutes, format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Job = Mapping[str, Any]
    Column = Callable[[Sequence[Job], "JobView"], list[str]]

#: Slurm's ceiling for a job priority, the denominator of ``%p``.
_PRIORITY_SCALE = 0xFFFFFFFF


class JobView:
    """The outside inputs of rendering: the controller's clock and the environment."""

    __slots__ = ("env", "now")

    def __init__(self, now: int, env: Mapping[str, str]) -> None:
        self.now = now
        self.env = env


#: The JobInfo fields ``run_seconds`` reads.
RUN_SECONDS_READS = ("state", "start_time", "pre_suspend_secs", "end_time", "suspend_time")


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


# Node lists repeat from job to job and compressing one costs some 10 us, which
# 10,000 running jobs would pay 10,000 times; the bound keeps ``squeue -i`` small.
_NODE_LISTS: dict[str, str] = {}
_NODE_LISTS_MAX = 4096


def node_list(names: str) -> str:
    """A node list sorted and compressed as Slurm prints it; unparsable text as given."""
    text = _NODE_LISTS.get(names)
    if text is None:
        if len(_NODE_LISTS) >= _NODE_LISTS_MAX:
            _NODE_LISTS.clear()
        text = _NODE_LISTS[names] = _compressed(names)
    return text


def _compressed(names: str) -> str:
    if not names:
        return ""
    if names.isascii() and names.isalnum():  # one host (most jobs): printed as it is
        return names
    try:
        return compress(expand(names))
    except ValueError:
        return names


_REASON_STATES = frozenset(("PENDING", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "FAILED"))


def shows_reason(job: Job) -> bool:
    """Whether ``%R`` shows the reason (pending or failed) rather than the nodes."""
    flags = job["state_flags"]
    if flags:
        if "COMPLETING" in flags:
            return False
        if "STAGE_OUT" in flags:
            return True
    return job["state"] in _REASON_STATES


def reason_text(job: Job) -> str:
    """``%r``: the state description when the controller gave one, else the reason word."""
    return str(job["state_desc"] or job["reason"])


_REASON_READS = ("state_desc", "reason")


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


def _time_used(job: Job, view: JobView) -> str:
    if job["start_time"] == 0 or job["state"] == "PENDING":
        return "0:00"  # what format_elapsed(0) prints: most of a long queue is pending
    return format_elapsed(run_seconds(job, view.now))


def _job_array_id(job: Job, view: JobView) -> str:
    if job["array_task_str"] or job["array_task_id"] is not None or job.get("het_job_id"):
        return display_id(job, view.env)
    return str(job["job_id"])  # display_id's answer, without a call for every plain job


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


# Whole columns (``Field.column``): the same text as the field's ``value`` for each
# record, worked out for a list of records at once, in one pass over them (walking
# 100,000 dicts again costs more than the calls it would save). A long listing is
# mostly pending jobs, so the comprehensions test for that case first and call the
# per-record function only for the others. tests/unit/test_squeue_columns.py
# checks each against its ``value``.


def _plain(key: str) -> Column:
    """``str(job[key])`` of each job, with C-level ``map``."""
    get = itemgetter(key)
    return lambda jobs, view: list(map(str, map(get, jobs)))


def _integers(key: str) -> Column:
    """``str(int(job[key]))`` of each job."""
    get = itemgetter(key)
    return lambda jobs, view: list(map(str, map(int, map(get, jobs))))


def _texts(key: str) -> Column:
    """``null(str(job[key]))`` of each job."""
    get = itemgetter(key)
    return lambda jobs, view: [text or "(null)" for text in map(str, map(get, jobs))]


def _stamps(key: str) -> Column:
    get = itemgetter(key)
    return lambda jobs, view: [_time(epoch) for epoch in map(get, jobs)]


def _job_array_ids(jobs: Sequence[Job], view: JobView) -> list[str]:
    return [
        display_id(job, view.env)
        if job["array_task_str"] or job["array_task_id"] is not None or job.get("het_job_id")
        else str(job["job_id"])
        for job in jobs
    ]


def _times_used(jobs: Sequence[Job], view: JobView) -> list[str]:
    now = view.now
    return [
        "0:00"
        if job["start_time"] == 0 or job["state"] == "PENDING"
        else format_elapsed(run_seconds(job, now))
        for job in jobs
    ]


def _reason_lists(jobs: Sequence[Job], view: JobView) -> list[str]:
    return [
        f"({job['state_desc'] or job['reason']})"
        if (job["state"] in _REASON_STATES if not job["state_flags"] else shows_reason(job))
        else node_list(job["nodes"])
        for job in jobs
    ]


def _user_names(jobs: Sequence[Job], view: JobView) -> list[str]:
    return [job["user"] or str(job["uid"]) for job in jobs]


# Each field names the JobInfo fields its value reads (``Field.reads``): squeue asks
# the controller for just those, and tests/unit/test_squeue_fields.py checks the lists.


def _text(header: str, key: str, cut: bool = True, header_cut: bool = True) -> Field:
    """A string field, ``(null)`` when unset."""
    return Field(
        header,
        lambda job, view: null(str(job[key])),
        cut,
        header_cut,
        reads=(key,),
        column=_texts(key),
    )


def _number(header: str, key: str) -> Field:
    return Field(header, lambda job, view: str(int(job[key])), reads=(key,), column=_integers(key))


def _stamp(header: str, key: str) -> Field:
    return Field(header, lambda job, view: _time(job[key]), reads=(key,), column=_stamps(key))


def _nodes(header: str, key: str, cut: bool = True, header_cut: bool = True) -> Field:
    return Field(header, lambda job, view: node_list(job[key]), cut, header_cut, reads=(key,))


def _het(header: str, key: str) -> Field:
    """A heterogeneous job's field; N/A, as squeue prints it, for any other job."""
    return Field(
        header,
        lambda job, view: str(job[key]) if job.get("het_job_id") else "N/A",
        reads=(key, "het_job_id"),
    )


def _const(header: str, text: str) -> Field:
    return Field(header, lambda job, view: text)


_ACCOUNT = _text("ACCOUNT", "account")
_ARRAY_JOB_ID = Field(
    "ARRAY_JOB_ID",
    _array_job_id,
    reads=("array_task_str", "array_task_id", "array_job_id", "job_id"),
)
_ARRAY_TASK_ID = Field("ARRAY_TASK_ID", _array_task_id, reads=("array_task_str", "array_task_id"))
_BATCH_HOST = Field("EXEC_HOST", _exec_host, reads=("batch_flag", "batch_host", "alloc_node"))
_COMMAND = _text("COMMAND", "command")
_COMMENT = _text("COMMENT", "comment")
_CONTIGUOUS = _const("CONTIGUOUS", "0")
_CORES = _const("CORES_PER_SOCKET", "*")
_CORE_SPEC = _const("CORE_SPEC", "N/A")
_DEPENDENCY = _text("DEPENDENCY", "dependency")
_END_TIME = Field("END_TIME", _end, reads=("time_limit", "end_time"))
_EXC_NODES = _nodes("EXC_NODES", "exc_nodes")
_FEATURES = _text("FEATURES", "features")
_GRES = Field("TRES_PER_NODE", lambda job, view: job["gres"] or "N/A", reads=("gres",))
_GROUP_ID = _number("GROUP", "gid")
_GROUP_NAME = Field(
    "GROUP", lambda job, view: job["group"] or str(job["gid"]), reads=("group", "gid")
)
_JOB_ARRAY_ID = Field("JOBID", _job_array_id, reads=DISPLAY_ID_READS, column=_job_array_ids)
_JOB_ID = _number("JOBID", "job_id")
_LICENSES = _text("LICENSES", "licenses")
_MIN_CPUS = Field(
    "MIN_CPUS", lambda job, view: scaled(int(job["min_cpus_node"])), reads=("min_cpus_node",)
)
_MIN_MEMORY = Field("MIN_MEMORY", _min_memory, reads=("min_mem_cpu", "min_mem_node"))
_MIN_TMP_DISK = _const("MIN_TMP_DISK", "0")
_NAME = Field("NAME", lambda job, view: str(job["name"]), reads=("name",), column=_plain("name"))
_NICE = _number("NICE", "nice")
_NODE_LIST = _nodes("NODELIST", "nodes", cut=False, header_cut=False)
_NUM_CPUS = _number("CPUS", "num_cpus")
_NUM_NODES = _number("NODES", "num_nodes")
_OVERSUBSCRIBE = Field(
    "OVER_SUBSCRIBE", lambda job, view: job["oversubscribe"] or "OK", reads=("oversubscribe",)
)
_PARTITION = Field(
    "PARTITION",
    lambda job, view: str(job["partition"]),
    reads=("partition",),
    column=_plain("partition"),
)
_PRIORITY = Field(
    "PRIORITY",
    lambda job, view: f"{job['priority'] / _PRIORITY_SCALE:16.14f}",
    reads=("priority",),
)
_PRIORITY_LONG = _number("PRIORITY", "priority")
_QOS = _text("QOS", "qos")
_REASON = Field("REASON", lambda job, view: reason_text(job), reads=_REASON_READS)
_REASON_LIST = Field(
    "NODELIST(REASON)",
    _reason_list,
    header_cut=False,
    reads=("state_flags", "state", *_REASON_READS, "nodes"),
    column=_reason_lists,
)
_REQ_NODES = _nodes("REQ_NODES", "req_nodes")
_RESERVATION = _text("RESERVATION", "reservation")
_SCHED_NODES = _text("SCHEDNODES", "sched_nodes", cut=False, header_cut=False)
_SCT = _const("S:C:T", "*:*:*")
_SOCKETS = _const("SOCKETS_PER_NODE", "*")
_START_TIME = _stamp("START_TIME", "start_time")
_STATE = Field(
    "STATE",
    lambda job, view: statenames.long_name(job),
    reads=statenames.READS,
    column=lambda jobs, view: statenames.long_names(jobs),
)
_STATE_COMPACT = Field(
    "ST",
    lambda job, view: statenames.compact_name(job),
    reads=statenames.READS,
    column=lambda jobs, view: statenames.compact_names(jobs),
)
_SUBMIT_TIME = _stamp("SUBMIT_TIME", "submit_time")
_THREADS = _const("THREADS_PER_CORE", "*")
_TIME_LEFT = Field("TIME_LEFT", _left, cut=False, reads=("time_limit", *RUN_SECONDS_READS))
_TIME_LIMIT = Field("TIME_LIMIT", _limit, cut=False, reads=("time_limit",))
_TIME_USED = Field("TIME", _time_used, cut=False, reads=RUN_SECONDS_READS, column=_times_used)
_TRES_ALLOC = Field(
    "TRES_ALLOC",
    lambda job, view: job["alloc_tres"] or job["req_tres"] or "N/A",
    reads=("alloc_tres", "req_tres"),
)
_USER_ID = _number("UID", "uid")
_USER_NAME = Field(
    "USER",
    lambda job, view: job["user"] or str(job["uid"]),
    reads=("user", "uid"),
    column=_user_names,
)
_WCKEY = _const("WCKEY", "(null)")
_WORK_DIR = _text("WORK_DIR", "work_dir")

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
    "AccrueTime": _stamp("ACCRUE_TIME", "accrue_time"),
    "admin_comment": _const("ADMIN_COMMENT", "(null)"),
    "AllocNodes": _text("ALLOC_NODES", "alloc_node"),
    "AllocSID": _const("ALLOC_SID", "0"),
    "ArrayJobId": _ARRAY_JOB_ID,
    "ArrayTaskId": _ARRAY_TASK_ID,
    "AssocId": _const("ASSOC_ID", "0"),
    "BatchFlag": _number("BATCH_FLAG", "batch_flag"),
    "BatchHost": _BATCH_HOST,
    "BoardsPerNode": _const("BOARDS_PER_NODE", "N/A"),
    "BurstBuffer": _const("BURST_BUFFER", "(null)"),
    "BurstBufferState": _const("BURST_BUFFER_STATE", "(null)"),
    "Cluster": _text("CLUSTER", "cluster"),
    "ClusterFeature": _const("CLUSTER_FEATURES", "(null)"),
    "Command": _COMMAND,
    "Comment": _COMMENT,
    "Container": _text("CONTAINER", "container"),  # the OCI bundle (squeue(1))
    "Contiguous": _CONTIGUOUS,
    "Cores": _CORES,
    "CoreSpec": _CORE_SPEC,
    "CPUsPerTask": _number("CPUS_PER_TASK", "cpus_per_task"),
    "cpus-per-task": _number("CPUS_PER_TASK", "cpus_per_task"),
    "Deadline": _stamp("DEADLINE", "deadline"),
    "DelayBoot": _const("DELAY_BOOT", "0:00"),
    "Dependency": _DEPENDENCY,
    "DerivedEC": _number("DERIVED_EC", "derived_exit_status"),
    "EligibleTime": _stamp("ELIGIBLE_TIME", "eligible_time"),
    "EndTime": _END_TIME,
    "ExcNodes": _EXC_NODES,
    "exit_code": _number("EXIT_CODE", "exit_status"),
    "Feature": _FEATURES,
    "Gres": _GRES,
    "GroupId": _GROUP_ID,
    "GroupName": _GROUP_NAME,
    "HetJobId": _het("HET_JOB_ID", "het_job_id"),
    "HetJobIdSet": _het("HET_JOB_ID_SET", "het_job_id_set"),
    "HetJobOffset": _het("HET_JOB_OFFSET", "het_job_offset"),
    "JobArrayId": _JOB_ARRAY_ID,
    "JobId": _JOB_ID,
    "LastSchedEval": _stamp("LAST_SCHED_EVAL", "last_sched_eval"),
    "Licenses": _LICENSES,
    "MaxCPUs": _number("MAX_CPUS", "num_cpus"),
    "MaxNodes": Field(
        "MAX_NODES",
        lambda job, view: str(job["max_nodes"] or job["num_nodes"]),
        reads=("max_nodes", "num_nodes"),
    ),
    "MCSLabel": _const("MCSLABEL", "N/A"),
    "MinCPUs": _MIN_CPUS,
    "MinMemory": _MIN_MEMORY,
    "MinTime": Field(
        "TIME_MIN",
        lambda job, view: format_elapsed(int(job["time_min"]) * 60),
        reads=("time_min",),
    ),
    "MinTmpDisk": _MIN_TMP_DISK,
    "Name": _NAME,
    "Network": _const("NETWORK", "(null)"),
    "Nice": _NICE,
    "NodeList": _NODE_LIST,
    "NTPerNode": Field(
        "NTASKS_PER_NODE",
        lambda job, view: str(job["ntasks_per_node"] or "N/A"),
        reads=("ntasks_per_node",),
    ),
    "NumCPUs": _NUM_CPUS,
    "NumNodes": _NUM_NODES,
    "NumTasks": _number("TASKS", "num_tasks"),
    "OverSubscribe": _OVERSUBSCRIBE,
    "Partition": _PARTITION,
    "PendingTime": Field("PENDING_TIME", _pending_time, reads=("start_time", "submit_time")),
    "PreemptTime": _const("PREEMPT_TIME", "N/A"),
    "Priority": _PRIORITY,
    "PriorityLong": _PRIORITY_LONG,
    "QOS": _QOS,
    # Corral's: the job's team queue (queues.conf), "(null)" outside one.
    "Queue": _text("QUEUE", "queue"),
    "Reason": _REASON,
    "ReasonList": _REASON_LIST,
    "Reboot": _const("REBOOT", "0"),
    "ReqNodes": _REQ_NODES,
    "Requeue": _number("REQUEUE", "requeue"),
    "ReqSwitch": _number("REQ_SWITCH", "switches"),
    "Reservation": _RESERVATION,
    "RestartCnt": _number("RESTART_COUNT", "restarts"),
    "SchedNodes": _SCHED_NODES,
    "SCT": _SCT,
    "Shared": _OVERSUBSCRIBE,
    "Sockets": _SOCKETS,
    "StartTime": _START_TIME,
    "State": _STATE,
    "StateCompact": _STATE_COMPACT,
    "StdErr": Field(
        "STDERR", _std_err, reads=("batch_flag", "std_err", "std_out", "work_dir", "job_id")
    ),
    "StdIn": _text("STDIN", "std_in"),
    "StdOut": Field("STDOUT", _std_out, reads=("batch_flag", "std_out", "work_dir", "job_id")),
    "SubmitTime": _SUBMIT_TIME,
    "system_comment": _text("SYSTEM_COMMENT", "system_comment"),
    "Threads": _THREADS,
    "TimeLeft": _TIME_LEFT,
    "TimeLimit": _TIME_LIMIT,
    "TimeUsed": _TIME_USED,
    "Tres": _TRES_ALLOC,
    "tres-alloc": _TRES_ALLOC,
    "tres-per-node": _GRES,
    "tres-per-task": _const("TRES_PER_TASK", "N/A"),
    "UserId": _USER_ID,
    "UserName": _USER_NAME,
    "Wait4Switch": Field(
        "WAIT4SWITCH",
        lambda job, view: format_elapsed(int(job["switch_wait"])),
        reads=("switch_wait",),
    ),
    "WCKey": _WCKEY,
    "WorkDir": _WORK_DIR,
}

#: ``-O`` names, keyed in lower case (squeue matches them case-insensitively).
NAMES: dict[str, Field] = {name.lower(): field for name, field in _NAMED.items()}
