"""What sacct can print about a job or a step: Slurm 24.11's field table and layout.

Each field has Slurm's name, default width (negative: left-justified) and
kind, which decides how a value too wide for its column is shown: text is cut
with a ``+`` as its last character, numbers and clocks overflow, dates that do
not fit become ``#``s (Slurm's ``print_fields_*`` rules). A value is None when
Slurm has nothing to print for the record, which leaves the cell blank.

The records are JobInfo dicts from the controller's ``History`` call. Fields
Corral does not record (usage statistics gathered on the nodes, associations,
wckeys, reservations) print as Slurm prints them on a cluster without
accounting-gather plugins: blank, ``0`` or ``00:00:00``, as in the golden
capture. Steps are the batch step, derived from the job record, and the
steps srun ran, recorded in it (``JobInfo.steps``).
"""

from __future__ import annotations

from cli.jobs.fields import node_list, run_seconds
from cli.jobs.ids import task_range
from cli.jobs.record import exit_code
from cli.printfields import PARSABLE2
from cli.printfields import Printer as _FieldPrinter
from cli.quantity import mebibytes
from corral.timefmt import format_hms, format_limit_hms, format_timestamp
from corral.units import parse_memory

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any

    Job = Mapping[str, Any]
    Value = str | None

#: Slurm's ``-b``, default and ``-l`` field lists (sacct.h).
BRIEF_FIELDS = "jobid,state,exitcode"
DEFAULT_FIELDS = "jobid,jobname,partition,account,alloccpus,state,exitcode"
LONG_FIELDS = (
    "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,"
    "maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,"
    "mincpu,mincpunode,mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,"
    "avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,"
    "maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,"
    "maxdiskwritenode,maxdiskwritetask,avediskwrite,reqtres,alloctres,tresusageinave,"
    "tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,"
    "tresusageinmint,tresusageintot,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,"
    "tresusageoutave,tresusageouttot"
)

#: States whose job has ended: its End is known and its clock has stopped.
_LIVE_STATES = frozenset(("PENDING", "RUNNING", "SUSPENDED"))
#: Flags that slurmdbd records as the job's state; the others never reach sacct.
_RECORDED_FLAGS = ("REQUEUED", "RESIZING", "REVOKED")
#: Job states whose batch step Slurm shows as CANCELLED (the shell was killed).
_KILLED_STATES = frozenset(("CANCELLED", "TIMEOUT", "DEADLINE", "PREEMPTED"))
_UNITS = "KMGTP"


class View:
    """The outside inputs of rendering: the controller's clock, environment and units.

    ``units`` is the ``--units`` index (1 = K ... 5 = P) or None; with
    ``noconvert`` sizes stay in MiB instead of being scaled up while exact.
    """

    __slots__ = ("env", "noconvert", "now", "units")

    def __init__(
        self,
        now: int,
        env: Mapping[str, str],
        *,
        units: int | None = None,
        noconvert: bool = False,
    ) -> None:
        self.now = now
        self.env = env
        self.units = units
        self.noconvert = noconvert


class Step:
    """One job step as sacct shows it, with a reference to its job.

    ``batch`` derives the batch step from the job record (it ran on the batch
    host with the first node's CPUs); ``recorded`` reads a step srun ran
    (``JobInfo.steps``; ``id`` is ``0``, or a part's ``0+1``). Usage (``rss_kb`` and
    the CPU times) is what the node agents measured with wait4 as the tasks ended.
    """

    __slots__ = (
        "ave_rss_kb",
        "cpus",
        "end",
        "exit_status",
        "id",
        "job",
        "mem",
        "name",
        "node",
        "node_count",
        "ntasks",
        "rss_kb",
        "start",
        "state",
        "sys_us",
        "user_us",
    )  # fmt: skip

    def __init__(self, job: Job, step_id: str, name: str, state: str, exit_status: int) -> None:
        self.job = job
        self.id = step_id
        self.name = name
        self.state = state
        self.exit_status = exit_status
        self.node = str(job["batch_host"] or job["nodes"])
        self.node_count = 1
        self.ntasks = 1
        cpus = job["cpus_per_node"]
        self.cpus = int(cpus[0]) if cpus else int(job["num_cpus"])
        nodes = max(int(job["num_nodes"]), 1)
        self.mem = tres_count(str(job["alloc_tres"]), "mem") // nodes
        self.start = int(job["start_time"])
        self.end = end_time(job)
        self.rss_kb = int(job.get("max_rss_kb") or 0)
        self.ave_rss_kb = self.rss_kb  # the batch step is one task
        self.user_us = int(job.get("user_cpu_us") or 0)
        self.sys_us = int(job.get("sys_cpu_us") or 0)

    @classmethod
    def recorded(cls, job: Job, info: Mapping[str, Any]) -> Step:
        step_id = str(info["step_id"])
        if info.get("het_step"):  # a part of ``srun a : b`` in an ordinary job
            step_id += f"+{info['het_comp']}"
        step = cls(job, step_id, str(info["name"]), str(info["state"]), 0)
        step.exit_status = int(info["exit_status"])
        step.node = str(info["nodes"])
        step.node_count = int(info["node_count"])
        step.ntasks = int(info["ntasks"])
        step.cpus = int(info["cpus"])
        step.mem *= step.node_count  # the job's memory on each of its nodes
        step.start = int(info["start_time"])
        step.end = int(info["end_time"])
        step.rss_kb = int(info["max_rss_kb"])
        step.ave_rss_kb = int(info["ave_rss_kb"])
        step.user_us = int(info["user_cpu_us"])
        step.sys_us = int(info["sys_cpu_us"])
        return step

    def tres(self) -> str:
        """AllocTRES of the step: its CPUs, its memory, its nodes."""
        return f"cpu={self.cpus},mem={mebibytes(self.mem)},node={self.node_count}"

    def elapsed(self, view: View) -> int:
        if not self.start:
            return 0
        return max((self.end or view.now) - self.start, 0)


def batch_step(job: Job) -> Step | None:
    """The ``N.batch`` step of a job that started, derived from the job record.

    The batch step ran on the batch host with the first node's CPUs and ended
    as the job did, except that a job killed by a cancel, time limit, deadline
    or preemption shows its batch step CANCELLED, as Slurm does. A job that
    never started (still pending, or cancelled while pending), or an
    allocation without a batch script (salloc, srun), has no batch step; nor has a
    heterogeneous job's component after the first (the script runs in ``123+0``).
    """
    if job["state"] == "PENDING" or not job["start_time"] or job.get("het_job_offset"):
        return None
    if not (job["batch_host"] or job["nodes"]) or not job.get("batch_flag", True):
        return None
    state = job_state(job)
    if state in _KILLED_STATES:
        state = "CANCELLED"
    step = Step(job, "batch", "batch", state, int(job["exit_status"]))
    step.start = int(job.get("run_start") or job["start_time"])  # a resized job's run
    return step


def extern_step(job: Job) -> Step | None:
    """``N.extern`` (PrologFlags=Contain): on every node of the job, for its whole run;
    it ends CANCELLED where the job was killed, else COMPLETED, with exit code 0."""
    if not job.get("extern_step") or not job["start_time"] or job["state"] == "PENDING":
        return None
    state = "CANCELLED" if job_state(job) in _KILLED_STATES else "COMPLETED"
    step = Step(job, "extern", "extern", state, 0)
    step.start = int(job.get("run_start") or job["start_time"])
    step.node = str(job["nodes"])
    step.node_count = step.ntasks = max(int(job["num_nodes"]), 1)
    step.cpus = int(job["num_cpus"])
    step.mem *= step.node_count
    step.rss_kb = step.ave_rss_kb = step.user_us = step.sys_us = 0
    return step


def job_steps(job: Job) -> list[Step]:
    """Every step of a job as sacct lists them: batch, extern, then srun's in order."""
    derived = [batch_step(job), extern_step(job)]
    return [s for s in derived if s is not None] + [
        Step.recorded(job, info) for info in job.get("steps") or ()
    ]


def job_state(job: Job) -> str:
    """State as slurmdbd records it: the base state, or REQUEUED, RESIZING, REVOKED.

    Transitional flags (COMPLETING, CONFIGURING, SIGNALING...) are not
    accounted, so a job completing still shows RUNNING or its final state;
    clients such as submitit count any unknown word as "finished".
    """
    flags = job["state_flags"]
    for flag in _RECORDED_FLAGS:
        if flag in flags:
            return flag
    if job["state"] == "CANCELLED" and job.get("cancelled_by") is not None:
        return f"CANCELLED by {job['cancelled_by']}"
    return str(job["state"]) or "UNKNOWN"


def end_time(job: Job) -> int:
    """When the job ended; 0 (printed ``Unknown``) while it has not."""
    if job["state"] in _LIVE_STATES:
        return 0
    return int(job["end_time"])


def start_time(job: Job) -> int:
    """When the job started; 0 while pending (the controller sends its expected start)."""
    return 0 if job["state"] == "PENDING" else int(job["start_time"])


def tres_count(text: str, name: str) -> int:
    """The count of ``name`` in a TRES string (memory in MiB); 0 when absent."""
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key == name:
            try:
                return parse_memory(value) if name == "mem" else int(value)
            except ValueError:
                return 0
    return 0


def _has_tres(text: str, name: str) -> bool:
    return any(item.partition("=")[0] == name for item in text.split(","))


def tres_text(text: str) -> str | None:
    """A TRES string as sacct prints it: sorted by name, memory scaled (``64G``)."""
    if not text:
        return None
    items = []
    for item in text.split(","):
        key, _, value = item.partition("=")
        items.append((key, _scaled(value) if key == "mem" else value))
    return ",".join(f"{key}={value}" for key, value in sorted(items))


def _scaled(size: str) -> str:
    """A memory size such as ``65536M`` as ``64G``; text that is no size as given."""
    try:
        return mebibytes(parse_memory(size))
    except ValueError:
        return size


def job_id(job: Job, view: View) -> str:
    """JobID: ``123``, an array task ``123_4``, a pending remainder ``123_[5-7%2]``, a
    heterogeneous job's component ``123+1``."""
    if job.get("het_job_id"):
        return f"{job['het_job_id']}+{job['het_job_offset']}"
    if job["array_task_str"]:
        return f"{job['array_job_id']}_[{task_range(job, view.env)}]"
    if job["array_task_id"] is not None:
        return f"{job['array_job_id']}_{job['array_task_id']}"
    return str(job["job_id"])


def sacct_exit_code(status: int) -> str:
    """ExitCode ``code:signal``; sacct reports an exit code over 127 less 128."""
    text = exit_code(status)
    code, _, signal = text.partition(":")
    return f"{int(code) - 128}:{signal}" if int(code) >= 128 else text


def alloc_cpus(job: Job) -> int:
    """CPUs allocated: 0 for a job that never got any (Slurm counts the cpu TRES)."""
    return tres_count(str(job["alloc_tres"]), "cpu")


def req_cpus(job: Job) -> int:
    return tres_count(str(job["req_tres"]), "cpu") or int(job["num_cpus"])


def req_mem(job: Job) -> int:
    """MiB the job asked for in all: the mem TRES, else per CPU or per node times the count."""
    text = str(job["req_tres"])
    if _has_tres(text, "mem"):
        return tres_count(text, "mem")
    if job["min_mem_cpu"]:
        return int(job["min_mem_cpu"]) * req_cpus(job)
    return int(job["min_mem_node"]) * int(job["num_nodes"])


def memory(mib: int, view: View) -> str:
    """A size in MiB as sacct prints it: scaled while exact, or per ``--units``/``--noconvert``."""
    if mib == 0:
        return "0"
    if view.units is not None:
        value = mib * 1024.0 ** (2 - view.units)
        letter = _UNITS[view.units - 1]
        return f"{int(value)}{letter}" if value == int(value) else f"{value:.2f}{letter}"
    if view.noconvert:
        return f"{mib}M"
    return mebibytes(mib)


def kibibytes(kib: int, view: View) -> str:
    """A size in KiB (MaxRSS) as sacct prints it: scaled while exact, or per ``--units``."""
    if view.units is not None:
        value = kib * 1024.0 ** (1 - view.units)
        letter = _UNITS[view.units - 1]
        return f"{int(value)}{letter}" if value == int(value) else f"{value:.2f}{letter}"
    unit = 0
    while not view.noconvert and kib and kib % 1024 == 0 and unit < len(_UNITS) - 1:
        kib //= 1024
        unit += 1
    return f"{kib}{_UNITS[unit]}"


def _rss(step: Step, view: View) -> str:
    """A step's MaxRSS, once it ended ("" while unknown)."""
    return kibibytes(step.rss_kb, view) if step.rss_kb else ""


def cpu_clock(microseconds: int) -> str:
    """CPU time as sacct prints it: ``[D-]HH:MM:SS``, or ``MM:SS.mmm`` under an hour."""
    seconds, rest = divmod(microseconds, 1_000_000)
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    if hours:
        return f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if rest // 1000:
        return f"{minutes:02d}:{seconds:02d}.{rest // 1000:03d}"
    return f"00:{minutes:02d}:{seconds:02d}"


def _cpu_time(*keys: str) -> tuple[Callable[[Job, View], Value], Callable[[Step, View], Value]]:
    """A CPU-time field's job and step values: the batch script's (its only step)."""

    def of_job(job: Job, view: View) -> Value:
        return cpu_clock(sum(int(job.get(key) or 0) for key in keys))

    def of_step(step: Step, view: View) -> Value:
        used = {"user_cpu_us": step.user_us, "sys_cpu_us": step.sys_us}
        return cpu_clock(sum(used[key] for key in keys))

    return of_job, of_step


def elapsed(job: Job, view: View) -> int:
    return run_seconds(job, view.now)


def _planned(job: Job, view: View) -> int:
    """Seconds from eligible to start (Slurm's Planned, formerly Reserved)."""
    eligible = int(job["eligible_time"])
    if not eligible:
        return 0
    start = start_time(job) or view.now
    return max(start - eligible, 0)


def suspended(job: Job, view: View) -> int:
    """Seconds the job was suspended in all (its present suspension counted to now)."""
    total = int(job.get("suspended_secs") or 0)
    if job["state"] == "SUSPENDED" and job["suspend_time"]:
        return total + max(view.now - int(job["suspend_time"]), 0)
    return total


def _time_limit(job: Job) -> str | None:
    limit = int(job["time_limit"])
    if limit == 0:
        return None
    return format_limit_hms(limit)


def _time_limit_raw(job: Job) -> str | None:
    limit = int(job["time_limit"])
    if limit == 0:
        return None
    return "UNLIMITED" if limit == -1 else str(limit)


# ------------------------------------------------------------------ the fields
def _blank(record: object, view: View) -> Value:
    return None


def _const(text: str) -> Callable[[object, View], Value]:
    return lambda record, view: text


def _text(key: str) -> Callable[[Job, View], Value]:
    """A job string, blank when unset."""
    return lambda job, view: str(job[key]) or None


def _of_job(value: Callable[[Job, View], Value]) -> Callable[[Step, View], Value]:
    """A step field that shows its job's value (Account, Cluster)."""
    return lambda step, view: value(step.job, view)


class Field:
    """One sacct field: name, default width, kind, and its value for jobs and steps.

    ``kind`` is ``str`` (cut with ``+``), ``num`` or ``time`` (never cut) or
    ``date`` (``#``s when it does not fit).
    """

    __slots__ = ("job", "kind", "name", "step", "width")

    def __init__(
        self,
        width: int,
        name: str,
        kind: str,
        job: Callable[[Job, View], Value] = _blank,
        step: Callable[[Step, View], Value] = _blank,
    ) -> None:
        self.width = width
        self.name = name
        self.kind = kind
        self.job = job
        self.step = step

    def __repr__(self) -> str:
        return f"Field({self.width}, {self.name!r}, {self.kind!r})"


def _stamp(epoch: int) -> str:
    return format_timestamp(epoch)


def _cpu_seconds(job: Job, view: View) -> int:
    return elapsed(job, view) * alloc_cpus(job)


def _step_cpu_seconds(step: Step, view: View) -> int:
    return step.elapsed(view) * step.cpus


_ACCOUNT = _text("account")
_ALLOC_CPUS = Field(
    10,
    "AllocCPUS",
    "num",
    lambda job, view: str(alloc_cpus(job)),
    lambda step, view: str(step.cpus),
)
_ZERO = _const("0")
_ENERGY = _const("energy=0")
_UNKNOWN = _const("Unknown")

#: Slurm 24.11's field table (sacct.c ``fields[]``), in its order.
FIELDS: tuple[Field, ...] = (
    Field(10, "Account", "str", _ACCOUNT, _of_job(_ACCOUNT)),
    Field(15, "AdminComment", "str"),
    _ALLOC_CPUS,
    Field(
        10,
        "AllocNodes",
        "str",
        lambda job, view: str(tres_count(str(job["alloc_tres"]), "node")),
        lambda step, view: str(step.node_count),
    ),
    Field(
        10,
        "AllocTRES",
        "str",
        lambda job, view: tres_text(str(job["alloc_tres"])),
        lambda step, view: step.tres(),
    ),
    Field(7, "AssocID", "num"),
    Field(10, "AveCPU", "str"),
    Field(10, "AveCPUFreq", "str", step=_ZERO),
    Field(14, "AveDiskRead", "str"),
    Field(14, "AveDiskWrite", "str"),
    Field(10, "AvePages", "str"),
    Field(
        10,
        "AveRSS",
        "str",
        step=lambda step, view: kibibytes(step.ave_rss_kb, view) if step.ave_rss_kb else "",
    ),
    Field(10, "AveVMSize", "str"),
    Field(16, "BlockID", "str"),
    Field(10, "Cluster", "str", _text("cluster"), _of_job(_text("cluster"))),
    Field(14, "Comment", "str", _text("comment")),
    Field(19, "Constraints", "str", _text("features")),
    Field(14, "ConsumedEnergy", "str", _ZERO, _ZERO),
    Field(17, "ConsumedEnergyRaw", "num", _ZERO, _ZERO),
    Field(19, "Container", "str"),
    Field(
        10,
        "CPUTime",
        "time",
        lambda job, view: format_hms(_cpu_seconds(job, view)),
        lambda step, view: format_hms(_step_cpu_seconds(step, view)),
    ),
    Field(
        10,
        "CPUTimeRAW",
        "num",
        lambda job, view: str(_cpu_seconds(job, view)),
        lambda step, view: str(_step_cpu_seconds(step, view)),
    ),
    Field(-21, "DBIndex", "num"),
    Field(
        15,
        "DerivedExitCode",
        "str",
        lambda job, view: exit_code(int(job["derived_exit_status"])),
        _const(""),
    ),
    Field(
        10,
        "Elapsed",
        "time",
        lambda job, view: format_hms(elapsed(job, view)),
        lambda step, view: format_hms(step.elapsed(view)),
    ),
    Field(
        10,
        "ElapsedRaw",
        "num",
        lambda job, view: str(elapsed(job, view)),
        lambda step, view: str(step.elapsed(view)),
    ),
    Field(
        19,
        "Eligible",
        "date",
        lambda job, view: _stamp(int(job["eligible_time"])),
        lambda step, view: _stamp(step.start),
    ),
    Field(
        19,
        "End",
        "date",
        lambda job, view: _stamp(end_time(job)),
        lambda step, view: _stamp(step.end),
    ),
    Field(
        8,
        "ExitCode",
        "str",
        lambda job, view: sacct_exit_code(int(job["exit_status"])),
        lambda step, view: sacct_exit_code(step.exit_status),
    ),
    Field(14, "Extra", "str"),
    Field(8, "FailedNode", "str"),
    Field(19, "Flags", "str"),
    Field(6, "GID", "num", lambda job, view: str(job["gid"])),
    Field(9, "Group", "str", lambda job, view: str(job["group"] or job["gid"])),
    Field(
        -12,
        "JobID",
        "str",
        job_id,
        lambda step, view: f"{job_id(step.job, view)}.{step.id}",
    ),
    Field(
        -12,
        "JobIDRaw",
        "str",
        lambda job, view: str(job["job_id"]),
        lambda step, view: f"{step.job['job_id']}.{step.id}",
    ),
    Field(10, "JobName", "str", _text("name"), lambda step, view: step.name),
    Field(9, "Layout", "str"),
    Field(10, "Licenses", "str"),
    Field(12, "MaxDiskRead", "str"),
    Field(15, "MaxDiskReadNode", "str"),
    Field(15, "MaxDiskReadTask", "num"),
    Field(12, "MaxDiskWrite", "str"),
    Field(16, "MaxDiskWriteNode", "str"),
    Field(16, "MaxDiskWriteTask", "num"),
    Field(8, "MaxPages", "str"),
    Field(12, "MaxPagesNode", "str"),
    Field(14, "MaxPagesTask", "num"),
    Field(10, "MaxRSS", "str", step=_rss),
    Field(10, "MaxRSSNode", "str", step=lambda step, view: step.node if step.rss_kb else ""),
    Field(10, "MaxRSSTask", "num", step=lambda step, view: "0" if step.rss_kb else ""),
    Field(10, "MaxVMSize", "str"),
    Field(14, "MaxVMSizeNode", "str"),
    Field(14, "MaxVMSizeTask", "num"),
    Field(12, "McsLabel", "str"),
    Field(10, "MinCPU", "str"),
    Field(10, "MinCPUNode", "str"),
    Field(10, "MinCPUTask", "num"),
    Field(10, "NCPUS", "num", _ALLOC_CPUS.job, _ALLOC_CPUS.step),
    Field(
        8, "NNodes", "num", lambda job, view: str(job["num_nodes"]), lambda s, v: str(s.node_count)
    ),
    Field(
        15,
        "NodeList",
        "str",
        lambda job, view: node_list(str(job["nodes"])) or "None assigned",
        lambda step, view: step.node,
    ),
    Field(8, "NTasks", "num", step=lambda step, view: str(step.ntasks)),
    Field(10, "Partition", "str", _text("partition")),
    Field(10, "Planned", "time", lambda job, view: format_hms(_planned(job, view))),
    Field(
        10,
        "PlannedCPU",
        "time",
        lambda job, view: format_hms(_planned(job, view) * req_cpus(job)),
    ),
    Field(
        13,
        "PlannedCPURAW",
        "num",
        lambda job, view: str(_planned(job, view) * req_cpus(job)),
    ),
    Field(10, "Priority", "num", lambda job, view: str(job["priority"])),
    Field(10, "QOS", "str", _text("qos")),
    Field(6, "QOSRAW", "num"),
    Field(10, "QOSREQ", "str"),
    Field(22, "Reason", "str", lambda job, view: str(job["reason"] or "None")),
    Field(10, "ReqCPUFreq", "str", _UNKNOWN, _ZERO),
    Field(13, "ReqCPUFreqGov", "str", _UNKNOWN, _ZERO),
    Field(13, "ReqCPUFreqMax", "str", _UNKNOWN, _ZERO),
    Field(13, "ReqCPUFreqMin", "str", _UNKNOWN, _ZERO),
    Field(8, "ReqCPUS", "num", lambda job, view: str(req_cpus(job)), _ALLOC_CPUS.step),
    Field(10, "ReqMem", "str", lambda job, view: memory(req_mem(job), view), _const("")),
    Field(
        8,
        "ReqNodes",
        "str",
        lambda job, view: str(tres_count(str(job["req_tres"]), "node") or job["num_nodes"]),
        _const("1"),
    ),
    Field(10, "ReqTRES", "str", lambda job, view: tres_text(str(job["req_tres"]))),
    Field(20, "Reservation", "str"),
    Field(8, "ReservationId", "num"),
    Field(8, "Restarts", "num", lambda job, view: str(job["restarts"])),
    Field(14, "SLUID", "str"),
    Field(
        19,
        "Start",
        "date",
        lambda job, view: _stamp(start_time(job)),
        lambda step, view: _stamp(step.start),
    ),
    Field(10, "State", "str", lambda job, view: job_state(job), lambda step, view: step.state),
    Field(20, "StdErr", "str", _text("std_err")),
    Field(20, "StdIn", "str", _text("std_in")),
    Field(20, "StdOut", "str", _text("std_out")),
    Field(
        19,
        "Submit",
        "date",
        lambda job, view: _stamp(int(job["submit_time"])),
        lambda step, view: _stamp(step.start),
    ),
    Field(20, "SubmitLine", "str", _text("submit_line")),
    Field(
        10,
        "Suspended",
        "time",
        lambda job, view: format_hms(suspended(job, view)),
        lambda step, view: format_hms(suspended(step.job, view)),
    ),
    Field(15, "SystemComment", "str"),
    Field(10, "SystemCPU", "str", *_cpu_time("sys_cpu_us")),
    Field(10, "Timelimit", "str", lambda job, view: _time_limit(job)),
    Field(10, "TimelimitRaw", "str", lambda job, view: _time_limit_raw(job)),
    Field(10, "TotalCPU", "str", *_cpu_time("user_cpu_us", "sys_cpu_us")),
    Field(14, "TRESUsageInAve", "str", step=_ENERGY),
    Field(14, "TRESUsageInMax", "str"),
    Field(18, "TRESUsageInMaxNode", "str"),
    Field(18, "TRESUsageInMaxTask", "str"),
    Field(14, "TRESUsageInMin", "str"),
    Field(18, "TRESUsageInMinNode", "str"),
    Field(18, "TRESUsageInMinTask", "str"),
    Field(14, "TRESUsageInTot", "str", step=_ENERGY),
    Field(15, "TRESUsageOutAve", "str", step=_ENERGY),
    Field(15, "TRESUsageOutMax", "str"),
    Field(19, "TRESUsageOutMaxNode", "str"),
    Field(19, "TRESUsageOutMaxTask", "str"),
    Field(15, "TRESUsageOutMin", "str"),
    Field(19, "TRESUsageOutMinNode", "str"),
    Field(19, "TRESUsageOutMinTask", "str"),
    Field(15, "TRESUsageOutTot", "str", step=_ENERGY),
    Field(6, "UID", "num", lambda job, view: str(job["uid"])),
    Field(9, "User", "str", lambda job, view: str(job["user"] or job["uid"])),
    Field(10, "UserCPU", "str", *_cpu_time("user_cpu_us")),
    Field(10, "WCKey", "str"),
    Field(10, "WCKeyID", "num"),
    Field(20, "WorkDir", "str", _text("work_dir")),
)


def help_format() -> str:
    """``--helpformat``: every field name, four to a line, each padded to 19."""
    names = [f"{field.name:<19}" for field in FIELDS]
    lines = (" ".join(names[start : start + 4]) for start in range(0, len(names), 4))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the layout
class FieldError(ValueError):
    """A ``--format`` field sacct rejects; ``str()`` is Slurm's whole message."""


def _c_atoi(text: str) -> int:
    """C's ``atoi`` on a width: leading blanks, a sign and digits; 0 if none."""
    text = text.lstrip(" \t\n\r\f\v")
    sign = -1 if text.startswith("-") else 1
    body = text[1:] if text[:1] in ("+", "-") else text
    digits = body[: len(body) - len(body.lstrip("0123456789"))]
    return sign * int(digits) if digits else 0


def _lookup(name: str) -> Field:
    """The first field whose name starts with ``name``, any case."""
    lowered = name.lower()
    for field in FIELDS:
        if field.name.lower().startswith(lowered):
            return field
    if lowered == "allocgres":
        raise FieldError("fatal: AllocGRES has been removed, please use AllocTRES")
    if lowered == "reqgres":
        raise FieldError("fatal: ReqGRES has been removed, please use ReqTRES")
    raise FieldError(f'error: Invalid field requested: "{name}"')


def parse_fields(spec: str) -> list[tuple[Field, int]]:
    """The columns of a field list such as ``JobID,State%20,nodelist%-256``.

    Slurm's rules, quirks included: names are case-insensitive prefixes (the
    first match in table order wins, so ``jobid`` is JobID), a prefix of
    ``all`` means every field, ``%N`` sets the width (negative: left-justify),
    and since Slurm stores the width in the field itself, the last width given
    for a field applies to all its columns. An empty item ends the list.
    """
    chosen: list[Field] = []
    widths: dict[str, int] = {}
    for raw in spec.split(","):
        item = raw.lstrip(" \t\n\r\f\v")
        if not item:
            break
        name, percent, width_text = item.partition("%")
        if "all".startswith(name.lower()):
            fields: Sequence[Field] = FIELDS
        else:
            fields = (_lookup(name),)
        for field in fields:
            chosen.append(field)
            if percent:
                widths[field.name] = _c_atoi(width_text)
    return [(field, widths.get(field.name, field.width)) for field in chosen]


class Printer(_FieldPrinter):
    """Slurm's ``print_fields`` rules plus sacct's ``--delimiter`` and its value kinds."""

    __slots__ = ("delimiter",)

    def __init__(self, parsable: int, delimiter: str = "|") -> None:
        super().__init__(parsable)
        self.delimiter = delimiter

    def _end(self, text: str, last: bool) -> str:
        if self.parsable == PARSABLE2 and last:
            return text
        return text + self.delimiter

    def cell(self, value: Value, width: int, kind: str, last: bool) -> str:
        """One value laid out for its kind (see ``Field``)."""
        if value is None or self.parsable or kind == "str":
            return self.text(value, width, last)
        size = abs(width)
        if kind == "date" and len(value) > size:
            value = value[:size] if value == "Unknown" else "#" * size
        return (value.rjust(size) if width > 0 else value.ljust(size)) + " "


class Layout:
    """The chosen columns and how to print them."""

    __slots__ = ("columns", "printer")

    def __init__(self, columns: list[tuple[Field, int]], printer: Printer) -> None:
        self.columns = columns
        self.printer = printer

    def header(self) -> str:
        """The header line, and the dashes line unless parsable."""
        return self.printer.header([(field.name, width, "") for field, width in self.columns])

    def line(self, job: Job, step: Step | None, view: View) -> str:
        """One record's line: the job's, or ``step``'s when given."""
        last = len(self.columns) - 1
        parts = []
        for index, (field, width) in enumerate(self.columns):
            value = field.job(job, view) if step is None else field.step(step, view)
            parts.append(self.printer.cell(value, width, field.kind, index == last))
        return "".join(parts) + "\n"


def expand_array(job: Job) -> Iterator[Job]:
    """``--array``: a pending remainder ``123_[4-6%2]`` as one record per task."""
    text = str(job["array_task_str"])
    if not text:
        yield job
        return
    from corral import arrayspec

    try:
        tasks, _ = arrayspec.parse(text)
    except ValueError:
        yield job
        return
    for task in tasks:
        yield {**job, "array_task_id": task, "array_task_str": ""}
