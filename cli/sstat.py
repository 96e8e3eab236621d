"""sstat: what a running job's steps use now, in Slurm 22.05's fields and layout.

The numbers are the agents' latest samples (every JobAcctGatherFrequency task
seconds, ``nodeagent/acctgather.py``), which the controller keeps
(``controller/stepusage.py``); one ``StepStats`` call per job asked. A step on
several nodes has one sample per node, merged here as Slurm merges its nodes'
answers: a ``Max*`` is the largest over the nodes (with the node and task it was
on), ``MinCPU`` the smallest, an ``Ave*`` the sum over all tasks divided by the
step's tasks. Sizes print as Slurm's ``convert_num_unit`` prints them (``1234K``,
scaled up while exact; ``--noconvert`` keeps the unit), CPU times as sacct's.
Corral measures no energy or CPU frequency: those fields print ``0`` or
``Unknown`` as Slurm does without those plugins.
"""

from __future__ import annotations

import sys

from cli import boundary
from cli.command import Command
from cli.halt import Halt
from cli.jobs.ids import leader_step
from cli.options import REQUIRED, Option, OptionTable
from cli.printfields import NOT_PARSABLE, PARSABLE, PARSABLE2, Printer
from cli.sacct.fields import cpu_clock
from corral import errors
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs milliseconds of a client's start-up budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    Usage = Mapping[str, Any]

PROG = "sstat"
USAGE = "Usage: sstat [options] -j <job(.stepid)>\n\tUse --help for help\n"
HELP = """\
sstat [<OPTION>] -j <job(.stepid)>
    Valid <OPTION> values are:
      -a, --allsteps:   every running step of a job given without a step
      -e, --helpformat: the fields --format accepts
      -h, --help:       this text
      -i, --pidformat:  the pids of each step (JobId,Nodes,Pids)
      -j, --jobs:       <job(.step)>[,...], required: the steps to show; without a
                        step, the lowest-numbered srun step running (all with -a);
                        a step of 'batch' is the batch script's
      -n, --noheader:   no header
      --noconvert:      sizes in their own unit (2048M stays 2048M)
      -o, --format:     comma-separated fields (see --helpformat)
      -p, --parsable:   '|' after every field
      -P, --parsable2:  '|' between fields
      --usage:          a short usage line
      -v, --verbose:    tracebacks on errors
      -V, --version:    the version
"""

TABLE = OptionTable(
    [
        Option("allsteps", "a", "allsteps"),
        Option("helpformat", "e", "helpformat"),
        Option("help", "h", "help"),
        Option("pidformat", "i", "pidformat"),
        Option("jobs", "j", "jobs", REQUIRED),
        Option("noheader", "n", "noheader"),
        Option("noconvert", "", "noconvert"),
        Option("format", "o", "format", REQUIRED),
        Option("format", "", "fields", REQUIRED),
        Option("parsable", "p", "parsable"),
        Option("parsable2", "P", "parsable2"),
        Option("usage", "", "usage"),
        Option("verbose", "v", "verbose"),
        Option("version", "V", "version"),
    ],
    prog=PROG,
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

#: sstat's default fields (Slurm 22.05's, in its order).
DEFAULT_FIELDS = (
    "JobID,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,MaxRSSNode,MaxRSSTask,"
    "AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,"
    "NTasks,AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ConsumedEnergy,MaxDiskRead,"
    "MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,MaxDiskWriteNode,"
    "MaxDiskWriteTask,AveDiskWrite,TRESUsageInAve,TRESUsageInMax,TRESUsageInMaxNode,"
    "TRESUsageInMaxTask,TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,"
    "TRESUsageOutAve,TRESUsageOutMax,TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutMin,"
    "TRESUsageOutMinNode,TRESUsageOutMinTask,TRESUsageOutTot"
)
PID_FIELDS = "JobID,Nodelist,Pids"
_UNITS = ("", "K", "M", "G", "T", "P")


def num_unit(value: float, unit: int, convert: bool) -> str:
    """Slurm's ``convert_num_unit`` with its exact flag: ``value`` in ``unit`` (0 none,
    1 K...) scaled by 1024 while that is exact, two decimals when not whole."""
    if int(value) == 0:
        return "0"
    while convert and value >= 1024 and value % 1024 == 0 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if value == int(value):
        return f"{int(value)}{_UNITS[unit]}"
    return f"{value:.2f}{_UNITS[unit]}"


class Step:
    """One step's samples from all its nodes, merged (see the module's docstring)."""

    def __init__(self, job_id: int, step: str, usage: Sequence[Usage], convert: bool) -> None:
        self.job_id = job_id
        self.step = step
        self.usage = usage
        self.convert = convert
        self.ntasks = sum(int(u["ntasks"]) for u in usage)

    def top(self, name: str, task: str) -> tuple[int, str, int]:
        """(largest value, its node, its task) of the per-node maximum ``name``."""
        best = max(self.usage, key=lambda u: int(u[name]))
        return int(best[name]), str(best["node"]), int(best[task])

    def least_cpu(self) -> tuple[int, str, int]:
        best = min(self.usage, key=lambda u: int(u["min_cpu_us"]))
        return int(best["min_cpu_us"]), str(best["node"]), int(best["min_cpu_task"])

    def total(self, name: str) -> int:
        return sum(int(u[name]) for u in self.usage)

    def average(self, name: str) -> float:
        return self.total(name) / self.ntasks if self.ntasks else 0.0

    def size(self, kib: float) -> str:
        return num_unit(kib, 1, self.convert)

    def count(self, number: float) -> str:
        return num_unit(number, 0, self.convert)

    def tres(self, kind: str, node: bool = False, task: bool = False) -> str:
        """A TRESUsageIn* string: ``kind`` is ave, max, min or tot; ``node`` or ``task``:
        where each maximum (minimum) was instead of its value. Only CPU time has a
        minimum here: the agents send the least of nothing else."""
        if kind == "min":
            cpu, where, which = self.least_cpu()
            return f"cpu={where if node else which if task else cpu_clock(cpu)}"
        items = []
        for tres, top, task_key, total, scale in _TRES_IN:
            value: float
            text = ""
            if kind == "max":
                value, where, which = self.top(top, task_key)
                text = where if node else str(which) if task else ""
            else:
                value = self.total(total) if kind == "tot" else self.average(total)
            items.append(f"{tres}={text or _tres_value(tres, value * scale, self.convert)}")
            if tres == "cpu" and not task:  # energy is the node's: no task has it
                items.append(f"energy={self.usage[0]['node'] if node else 0}")
        return ",".join(items)

    def tres_out(self, kind: str, node: bool = False, task: bool = False) -> str:
        """A TRESUsageOut* string: energy and the bytes written."""
        if kind == "max":
            value, where, which = self.top("max_write_bytes", "max_write_task")
            if task:
                return f"fs/disk={which}"
            if node:
                return f"energy={where},fs/disk={where}"
        elif kind == "min":
            return "" if task or node else "energy=0"
        else:
            value = self.total("sum_write_bytes")
            if kind == "ave":
                value = int(self.average("sum_write_bytes"))
        return f"energy=0,fs/disk={num_unit(value, 0, self.convert)}"


#: The TRES of TRESUsageIn*: (name, max field, its task field, sum field, scale to bytes).
_TRES_IN = (
    ("cpu", "max_cpu_us", "max_cpu_task", "sum_cpu_us", 1),
    ("fs/disk", "max_read_bytes", "max_read_task", "sum_read_bytes", 1),
    ("mem", "max_rss_kb", "max_rss_task", "sum_rss_kb", 1024),
    ("pages", "max_pages", "max_pages_task", "sum_pages", 1),
    ("vmem", "max_vmsize_kb", "max_vmsize_task", "sum_vmsize_kb", 1024),
)


def _tres_value(tres: str, value: float, convert: bool) -> str:
    if tres == "cpu":
        return cpu_clock(int(value))
    if tres == "pages":
        return str(int(value))
    return num_unit(value, 0, convert)


def _max(name: str, task: str, size: bool) -> tuple[Any, Any, Any]:
    def value(step: Step) -> str:
        found = step.top(name, task)[0]
        return step.size(found) if size else step.count(found)

    return (
        value,
        (lambda step: step.top(name, task)[1]),
        (lambda step: str(step.top(name, task)[2])),
    )


def _ave(name: str, size: bool) -> Any:
    def value(step: Step) -> str:
        found = step.average(name)
        return step.size(found) if size else step.count(found)

    return value


def _pids(step: Step) -> str:
    return ",".join(str(pid) for u in step.usage for pid in u["pids"])


def _nodes(step: Step) -> str:
    from corral.hostlist import compress

    return compress([str(u["node"]) for u in step.usage])


def _fields() -> dict[str, tuple[int, Any]]:
    """Every field by name: (default width, value of a Step)."""
    vm = _max("max_vmsize_kb", "max_vmsize_task", True)
    rss = _max("max_rss_kb", "max_rss_task", True)
    pages = _max("max_pages", "max_pages_task", False)
    read = _max("max_read_bytes", "max_read_task", False)
    write = _max("max_write_bytes", "max_write_task", False)
    zero: Any = lambda step: "0"  # noqa: E731
    unknown: Any = lambda step: "Unknown"  # noqa: E731
    table: dict[str, tuple[int, Any]] = {
        "AveCPU": (10, lambda step: cpu_clock(int(step.average("sum_cpu_us")))),
        "AveCPUFreq": (10, zero),
        "AveDiskRead": (12, _ave("sum_read_bytes", False)),
        "AveDiskWrite": (12, _ave("sum_write_bytes", False)),
        "AvePages": (10, _ave("sum_pages", False)),
        "AveRSS": (10, _ave("sum_rss_kb", True)),
        "AveVMSize": (10, _ave("sum_vmsize_kb", True)),
        "ConsumedEnergy": (14, zero),
        "ConsumedEnergyRaw": (17, zero),
        "JobID": (-12, lambda step: f"{step.job_id}.{step.step}"),
        "MaxDiskRead": (12, read[0]),
        "MaxDiskReadNode": (15, read[1]),
        "MaxDiskReadTask": (15, read[2]),
        "MaxDiskWrite": (12, write[0]),
        "MaxDiskWriteNode": (16, write[1]),
        "MaxDiskWriteTask": (16, write[2]),
        "MaxPages": (8, pages[0]),
        "MaxPagesNode": (12, pages[1]),
        "MaxPagesTask": (14, pages[2]),
        "MaxRSS": (10, rss[0]),
        "MaxRSSNode": (10, rss[1]),
        "MaxRSSTask": (10, rss[2]),
        "MaxVMSize": (10, vm[0]),
        "MaxVMSizeNode": (14, vm[1]),
        "MaxVMSizeTask": (14, vm[2]),
        "MinCPU": (10, lambda step: cpu_clock(step.least_cpu()[0])),
        "MinCPUNode": (10, lambda step: step.least_cpu()[1]),
        "MinCPUTask": (10, lambda step: str(step.least_cpu()[2])),
        "Nodelist": (20, _nodes),
        "NTasks": (8, lambda step: str(step.ntasks)),
        "Pids": (20, _pids),
        "ReqCPUFreq": (10, unknown),
        "ReqCPUFreqMin": (13, unknown),
        "ReqCPUFreqMax": (13, unknown),
        "ReqCPUFreqGov": (13, unknown),
    }
    for way, value, width in (("In", Step.tres, 14), ("Out", Step.tres_out, 15)):
        for kind in ("Ave", "Max", "Min", "Tot"):
            low = kind.lower()
            table[f"TRESUsage{way}{kind}"] = (width, lambda s, v=value, k=low: v(s, k))
            if kind in ("Max", "Min"):
                table[f"TRESUsage{way}{kind}Node"] = (
                    width + 4,
                    lambda s, v=value, k=low: v(s, k, node=True),
                )
                table[f"TRESUsage{way}{kind}Task"] = (
                    width + 4,
                    lambda s, v=value, k=low: v(s, k, task=True),
                )
    return table


FIELDS = _fields()


def help_format() -> str:
    """``--helpformat``: the field names in Slurm's order, four to a line, 19 wide."""
    names = list(FIELDS)
    lines = []
    for start in range(0, len(names), 4):
        lines.append(" ".join(f"{name:<19}" for name in names[start : start + 4]))
    return "\n".join(lines) + "\n"


def parse_format(spec: str) -> list[tuple[str, int]]:
    """``-o``'s columns: case-insensitive names (a prefix picks the first match in
    the table's order), each with an optional ``%WIDTH``."""
    columns = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, percent, width = item.partition("%")
        found = _lookup(name)
        if found is None:
            raise boundary.UsageError(f'Invalid field requested: "{name}"')
        columns.append((found, int(width) if percent and _is_int(width) else FIELDS[found][0]))
    return columns


def _lookup(name: str) -> str | None:
    """The first field in the table's order whose name starts with ``name``, any case."""
    lowered = name.lower()
    return next((f for f in FIELDS if f.lower().startswith(lowered)), None)


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def parse_jobs(text: str) -> list[tuple[int, str]]:
    """``-j``'s list: ``JOB``, ``JOB.STEP`` or ``JOB.batch`` (step "" when not given);
    ``JOB+N`` is the leader ``JOB``, as 22.05's sstat reads it (``ids.leader_step``);
    ``JOB.STEP+N`` names a part of ``srun a : b`` (step ``STEP+N``)."""
    found = []
    for item in text.split(","):
        if not item:
            continue
        job, dot, step = leader_step(item).partition(".")
        digits = job.split("_", 1)[0]
        if not digits.isdigit():
            raise Fatal(f"Bad job/step specified: {item}")
        if dot and step not in ("batch", "extern") and not step[:1].isdigit():
            raise Fatal(f"Bad step specified: {job}")
        if dot and step[:1].isdigit():
            number, plus, part = step.partition("+")
            step = str(int(number[: len(number) - len(number.lstrip("0123456789"))]))
            if plus and part.isdigit():
                step += f"+{int(part)}"
        found.append((int(digits), step))
    return found


class Fatal(Exception):
    """Slurm's ``fatal:``: printed, exit status 1."""


def _step_name(job_id: int, step: str) -> str:
    """A step as Slurm's ``%ps`` names it in messages."""
    return f"StepId={job_id}.{step}" if step else f"JobId={job_id}"


def stat_job(
    client: Any, job_id: int, step: str, all_steps: bool, convert: bool
) -> tuple[list[Step], str | None]:
    """The steps to print for one ``-j`` item, or the error Slurm prints for it."""
    try:
        reply = client.call("StepStats", {"job_id": job_id, "step": step, "all_steps": all_steps})
    except SlurmError as exc:
        if exc.code == errors.ESLURM_INVALID_JOB_ID:
            return [], f"couldn't get steps for job {job_id}"
        return [], f"problem getting step_layout for {_step_name(job_id, step)}: {exc}"
    if step and not reply["steps"]:
        return [], f"{_step_name(job_id, step)} not found running."
    if not reply["running"]:
        return [], f"No steps running for job {job_id}"
    if "+" in step:  # 22.05's sstat finds a part named so and prints no line (measured)
        return [], None
    steps = []
    for name in reply["steps"]:
        usage = [u for u in reply["usage"] if u["step"] == name]
        if usage:
            steps.append(Step(job_id, name, usage, convert))
    return steps, None


def sstat(argv: list[str]) -> int:
    """Run sstat with ``argv``; return the exit status."""
    try:
        found, positional = COMMAND.parse(argv)
        chosen: dict[str, str] = {}
        for opt, value in found:
            COMMAND.answer(opt.key)
            if opt.key == "helpformat":
                sys.stdout.write(help_format())
                return 0
            chosen[opt.key] = value or ""
        parsable = PARSABLE2 if "parsable2" in chosen else NOT_PARSABLE
        if "parsable" in chosen and "parsable2" not in chosen:
            parsable = PARSABLE
        fmt = PID_FIELDS if "pidformat" in chosen else chosen.get("format", DEFAULT_FIELDS)
        columns = parse_format(fmt)
        asked = parse_jobs(chosen.get("jobs") or (positional[0] if positional else ""))
    except Halt as halt:
        return halt.report()
    except Fatal as fatal:
        print(f"{PROG}: fatal: {fatal}", file=sys.stderr)
        return 1
    if not asked:
        print(f"{PROG}: error: You didn't give me any jobs to stat.", file=sys.stderr)
        return 1
    printer = Printer(parsable)
    if "noheader" not in chosen:
        sys.stdout.write(printer.header([(name, width, "") for name, width in columns]))
    client = boundary.connect()
    for job_id, step in asked:
        steps, error = stat_job(
            client, job_id, step, "allsteps" in chosen, "noconvert" not in chosen
        )
        if error is not None:
            print(f"{PROG}: error: {error}", file=sys.stderr)
        for found_step in steps:
            sys.stdout.write(render(found_step, columns, printer))
    return 0


def render(step: Step, columns: Sequence[tuple[str, int]], printer: Printer) -> str:
    """One step's line."""
    last = len(columns) - 1
    cells = [
        printer.text(FIELDS[name][1](step), width, index == last)
        for index, (name, width) in enumerate(columns)
    ]
    return "".join(cells) + "\n"


def main() -> None:
    boundary.run(PROG, sstat)
