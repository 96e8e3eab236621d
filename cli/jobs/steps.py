"""Job steps in the clients: ``squeue -s`` and ``scontrol show step``.

Steps come inside job records (``JobInfo.steps``). A running batch job also
shows its batch step (``N.batch``), as Slurm lists it. squeue's step format
letters are Slurm's: ``%i`` step id, ``%j`` name, ``%P`` partition, ``%u``
user, ``%U`` uid, ``%M`` time used, ``%l`` time limit, ``%S`` start time,
``%N`` nodes, ``%A`` tasks, ``%T`` state; widths and ``.`` (right
justification) work as for jobs.

A part of ``srun a : b`` in an ordinary job is a step of its own, ``123.1+N``
(``controller/mpmdsteps.py``). A step named with a part (``123.1+1``) is read as the
step (``123.1``), as 22.05's squeue and scontrol read it (measured: ``squeue -s
--steps=123.1+1`` lists every part, ``scontrol show step 123.1+1`` the first).
"""

from __future__ import annotations

from corral.timefmt import format_elapsed, format_limit_hms, format_minutes, format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

DEFAULT_FORMAT = "%.15i %.8j %.9P %.8u %.9M %N"
#: The job fields a step listing reads.
FIELDS = (
    "job_id", "array_job_id", "array_task_id", "name", "partition", "user", "uid", "state",
    "start_time", "nodes", "batch_host", "batch_flag", "time_limit", "steps", "num_cpus",
)  # fmt: skip


class Row:
    """One step as listed: the numbered steps of a job, or its batch step."""

    def __init__(self, job: Mapping[str, Any], step: Mapping[str, Any] | None, now: int) -> None:
        self.job = job
        self.step = step
        self.now = now

    @property
    def base_id(self) -> str:
        """The step's id without its part: ``123.1`` (``123_4.1`` in an array)."""
        job = self.job
        head = str(job["job_id"])
        if job.get("array_task_id") is not None and job.get("array_job_id"):
            head = f"{job['array_job_id']}_{job['array_task_id']}"
        return f"{head}.{'batch' if self.step is None else self.step['step_id']}"

    @property
    def step_id(self) -> str:
        """The step's id as printed: ``123.1``, or a part's ``123.1+0``."""
        step = self.step
        if step is not None and step.get("het_step"):
            return f"{self.base_id}+{step['het_comp']}"
        return self.base_id

    def value(self, letter: str) -> str:
        job, step = self.job, self.step
        start = int(job["start_time"] if step is None else step["start_time"])
        getters: dict[str, Callable[[], str]] = {
            "i": lambda: self.step_id,
            "j": lambda: "batch" if step is None else str(step["name"]),
            "P": lambda: str(job["partition"]),
            "u": lambda: str(job["user"]),
            "U": lambda: str(job["uid"]),
            "M": lambda: format_elapsed(max(self.now - start, 0)),
            "l": lambda: format_minutes(self._limit()),
            "S": lambda: format_timestamp(start),
            "N": lambda: str(job["batch_host"] if step is None else step["nodes"]),
            "A": lambda: "1" if step is None else str(step["ntasks"]),
            "T": lambda: "RUNNING" if step is None else str(step["state"]),
        }
        getter = getters.get(letter)
        return getter() if getter is not None else ""

    def _limit(self) -> int:
        if self.step is not None and int(self.step["time_limit"]) >= 0:
            return int(self.step["time_limit"])
        return int(self.job["time_limit"])


HEADERS = {
    "i": "STEPID", "j": "NAME", "P": "PARTITION", "u": "USER", "U": "UID", "M": "TIME",
    "l": "TIME_LIMIT", "S": "START_TIME", "N": "NODELIST", "A": "TASKS", "T": "STATE",
}  # fmt: skip


def rows(jobs: Sequence[Mapping[str, Any]], now: int, wanted: Sequence[str] = ()) -> list[Row]:
    """The running steps of running jobs, by job then step (batch last, as Slurm)."""
    out = []
    for job in jobs:
        if job["state"] != "RUNNING":
            continue
        for step in job["steps"]:
            if step["state"] == "RUNNING":
                out.append(Row(job, step, now))
        if job["batch_flag"]:
            out.append(Row(job, None, now))
    if wanted:
        named = {without_part(w) for w in wanted}
        out = [r for r in out if r.base_id in named or r.base_id.split(".")[0] in named]
    return out


def without_part(text: str) -> str:
    """``123.1+1`` as 22.05's squeue and scontrol read it: ``123.1``; a heterogeneous
    job's component (``123+1``, no step) stays as it is."""
    head, dot, step = text.partition(".")
    return head + dot + step.partition("+")[0] if dot else text


def first_parts(rows: Sequence[Row]) -> list[Row]:
    """Each step's first running part alone: ``scontrol show step 123.1`` shows
    ``123.1+0`` only (measured on 22.05)."""
    seen: set[str] = set()
    out = []
    for row in rows:
        if row.base_id not in seen:
            seen.add(row.base_id)
            out.append(row)
    return out


def _tokens(fmt: str) -> list[tuple[str, int, bool, str]]:
    """(letter, width, right-justified, literal text after) for each ``%`` field."""
    out = []
    parts = fmt.split("%")
    for part in parts[1:]:
        right = part.startswith(".")
        if right:
            part = part[1:]
        digits = len(part) - len(part.lstrip("0123456789"))
        width = int(part[:digits]) if digits else 0
        letter = part[digits : digits + 1]
        out.append((letter, width, right, part[digits + 1 :]))
    return out


def render(rows: Sequence[Row], fmt: str, header: bool) -> str:
    tokens = _tokens(fmt)
    prefix = fmt.split("%", 1)[0]

    def line(values: Sequence[str]) -> str:
        out = [prefix]
        for (_letter, width, right, after), text in zip(tokens, values, strict=True):
            if width:
                text = text[:width]
                text = text.rjust(width) if right else text.ljust(width)
            out.append(text + after)
        return "".join(out).rstrip() + "\n"

    lines = [line([HEADERS.get(t[0], t[0]) for t in tokens])] if header else []
    lines += [line([r.value(t[0]) for t in tokens]) for r in rows]
    return "".join(lines)


def show(row: Row, oneliner: bool) -> str:
    """``scontrol show step``'s record of one step."""
    job, step = row.job, row.step
    assert step is not None
    limit = format_limit_hms(row._limit())
    lines = [
        f"StepId={row.step_id} UserId={job['uid']} "
        f"StartTime={format_timestamp(int(step['start_time']))} TimeLimit={limit}",
        f"State={step['state']} Partition={job['partition']} NodeList={step['nodes']}",
        f"Nodes={step['node_count']} CPUs={step['cpus']} Tasks={step['ntasks']} "
        f"Name={step['name']} Network=(null)",
        f"TRES=cpu={step['cpus']},node={step['node_count']}",
        "ResvPorts=(null)",
        "CPUFreqReq=Default Dist=Block",
        "SrunHost:Pid=(null):0",
    ]
    if oneliner:
        return " ".join(lines) + "\n"
    return "\n   ".join(lines) + "\n\n"
