"""What each running step uses now: Slurm's jobacct_gather/linux and /cgroup, for sstat.

Every JobAcctGatherFrequency ``task`` seconds the agent samples each live run
(a batch script or its node's part of a step) and sends the controller one
:class:`~corral.wire.corral_pb2.StepUsage` per run; the controller keeps the
latest in memory for ``sstat`` (docs/design.md, "Live step statistics").

* **jobacct_gather/linux** reads /proc once per sample for every process on
  the host, keeps those in a run's process group (a step's tasks share the
  first task's group; the batch script leads its own), and sums them per task
  (the task is the process's SLURM_PROCID, read once per process from its
  environment, where a node runs more than one of the step's tasks): RSS and
  virtual size now, CPU time (user + system, its own and its waited-for
  children's), major page faults, and the bytes read and written
  (/proc/PID/io ``rchar``/``wchar``, what Slurm counts).
* **jobacct_gather/cgroup** does the same, but where a run has a cgroup
  (``Target.cgroup``) its memory, CPU time and disk bytes come from there:
  memory.current and memory.peak, cpu.stat's usage_usec and io.stat on cgroup
  v2; memory.usage_in_bytes, memory.max_usage_in_bytes, cpuacct.usage and
  blkio.throttle.io_service_bytes on v1. A cgroup measures the node's part of
  the step as a whole, so those figures are charged to the node's first task
  (Slurm marks such node-centric TRES the same way). Virtual size, page
  faults and the pids still come from /proc.

A task's RSS and virtual size are the highest seen in any sample while it ran
(``Max*``), and their current values summed over the tasks give the ``Ave*``;
CPU time, faults and bytes only grow, so a task's figure never goes back when
a process ends. One sample costs one pass over /proc, whatever the number of
steps; the agent runs it off its event loop.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from corral.wire import corral_pb2 as pb

PROC = "/proc"
_TICK_US = 1_000_000 // os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
_PROCID = b"SLURM_PROCID="


@dataclass(frozen=True, slots=True)
class Proc:
    """One process as /proc shows it now."""

    pid: int
    pgid: int
    start: int  # clock ticks after boot: tells a pid reused from the process it was
    rss_kb: int
    vmsize_kb: int
    pages: int  # major faults
    cpu_us: int  # user + system, with its waited-for children's
    read_bytes: int = 0
    write_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Use:
    """What one task (or a whole cgroup) uses: now, or the most seen."""

    rss_kb: int = 0
    vmsize_kb: int = 0
    pages: int = 0
    cpu_us: int = 0
    read_bytes: int = 0
    write_bytes: int = 0

    def __add__(self, other: Use) -> Use:
        return Use(
            self.rss_kb + other.rss_kb,
            self.vmsize_kb + other.vmsize_kb,
            self.pages + other.pages,
            self.cpu_us + other.cpu_us,
            self.read_bytes + other.read_bytes,
            self.write_bytes + other.write_bytes,
        )

    def most(self, other: Use) -> Use:
        """Field by field, the larger of the two."""
        return Use(
            max(self.rss_kb, other.rss_kb),
            max(self.vmsize_kb, other.vmsize_kb),
            max(self.pages, other.pages),
            max(self.cpu_us, other.cpu_us),
            max(self.read_bytes, other.read_bytes),
            max(self.write_bytes, other.write_bytes),
        )


@dataclass(frozen=True, slots=True)
class Target:
    """A live run to sample: its step's name (``0``, ``batch``), node, process group,
    the step's task ids on this node, and its cgroup directories (v2: one; v1: the
    memory, cpuacct and blkio ones; none: /proc alone)."""

    job_id: int
    step: str
    node: str
    pgid: int
    tasks: tuple[int, ...]
    cgroup: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[int, str, str]:
        return (self.job_id, self.step, self.node)


# ------------------------------------------------------------------ /proc


def read_proc(pid: int, root: str = PROC, *, with_io: bool = True) -> Proc | None:
    """Process ``pid`` from ``root`` (None: gone, or not a process)."""
    try:
        with open(f"{root}/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything, parentheses too.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 22:
        return None
    ticks = sum(int(fields[n]) for n in (11, 12, 13, 14))  # utime stime cutime cstime
    read_bytes = write_bytes = 0
    if with_io:
        read_bytes, write_bytes = _io(f"{root}/{pid}/io")
    return Proc(
        pid=pid,
        pgid=int(fields[2]),
        start=int(fields[19]),
        rss_kb=max(int(fields[21]), 0) * _PAGE_KB,
        vmsize_kb=int(fields[20]) // 1024,
        pages=int(fields[9]),
        cpu_us=ticks * _TICK_US,
        read_bytes=read_bytes,
        write_bytes=write_bytes,
    )


def _io(path: str) -> tuple[int, int]:
    """``rchar`` and ``wchar`` of a /proc/PID/io (0, 0 where it may not be read)."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError:
        return 0, 0
    found = dict(line.split(b":", 1) for line in text.splitlines() if b":" in line)
    return _int(found.get(b"rchar")), _int(found.get(b"wchar"))


def _int(text: bytes | str | None) -> int:
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


def scan(groups: Iterable[int], root: str = PROC) -> dict[int, list[Proc]]:
    """Every process of the process groups ``groups``, by group: one pass over /proc."""
    wanted = set(groups)
    found: dict[int, list[Proc]] = {}
    if not wanted:
        return found
    try:
        names = os.listdir(root)
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        proc = read_proc(int(name), root, with_io=False)
        if proc is None or proc.pgid not in wanted:
            continue
        read_bytes, write_bytes = _io(f"{root}/{name}/io")
        found.setdefault(proc.pgid, []).append(
            replace(proc, read_bytes=read_bytes, write_bytes=write_bytes)
        )
    return found


def task_id(pid: int, root: str = PROC) -> int | None:
    """The SLURM_PROCID in process ``pid``'s environment (None: unreadable or unset)."""
    try:
        with open(f"{root}/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_PROCID):
            value = entry[len(_PROCID) :]
            return int(value) if value.isdigit() else None
    return None


# ------------------------------------------------------------------ cgroups


@dataclass(frozen=True, slots=True)
class CgroupUse:
    """What a cgroup's processes use: memory now and at most (KiB; ``peak_kb`` 0 where
    the kernel keeps no peak), CPU time (microseconds) and disk bytes."""

    current_kb: int
    peak_kb: int
    cpu_us: int
    read_bytes: int
    write_bytes: int


def read_cgroup(directories: Sequence[str]) -> CgroupUse | None:
    """The use of the cgroup in ``directories`` (v2: its one directory; v1: its
    directories in the memory, cpuacct and blkio hierarchies), or None when none of
    its accounting files can be read."""
    values: dict[str, int] = {}
    for directory in directories:
        values.update(_cgroup_files(directory))
    if not values:
        return None
    cpu_us = values.get("usage_usec", values.get("cpuacct_ns", 0) // 1000)
    return CgroupUse(
        current_kb=values.get("current", values.get("usage_in_bytes", 0)) // 1024,
        peak_kb=values.get("peak", values.get("max_usage_in_bytes", 0)) // 1024,
        cpu_us=cpu_us,
        read_bytes=values.get("rbytes", 0),
        write_bytes=values.get("wbytes", 0),
    )


def _cgroup_files(directory: str) -> dict[str, int]:
    values: dict[str, int] = {}
    single = {
        "memory.current": "current",
        "memory.peak": "peak",
        "memory.usage_in_bytes": "usage_in_bytes",
        "memory.max_usage_in_bytes": "max_usage_in_bytes",
        "cpuacct.usage": "cpuacct_ns",
    }
    for name, key in single.items():
        text = _read(os.path.join(directory, name))
        if text is not None and text.strip().isdigit():
            values[key] = int(text)
    cpu = _read(os.path.join(directory, "cpu.stat"))
    if cpu is not None:
        for line in cpu.splitlines():
            name, _, number = line.partition(" ")
            if name == "usage_usec":
                values["usage_usec"] = _int(number)
    io = _read(os.path.join(directory, "io.stat"))
    if io is not None:
        values.update(_io_stat(io))
    blkio = _read(os.path.join(directory, "blkio.throttle.io_service_bytes"))
    if blkio is not None:
        values.update(_blkio(blkio))
    return values


def _io_stat(text: str) -> dict[str, int]:
    """cgroup v2 io.stat: ``MAJ:MIN rbytes=N wbytes=N ...`` per device, summed."""
    total = {"rbytes": 0, "wbytes": 0}
    for line in text.splitlines():
        for item in line.split()[1:]:
            key, _, number = item.partition("=")
            if key in total:
                total[key] += _int(number)
    return total


def _blkio(text: str) -> dict[str, int]:
    """cgroup v1 blkio.throttle.io_service_bytes: ``MAJ:MIN Read N`` per device."""
    total = {"rbytes": 0, "wbytes": 0}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("Read", "Write"):
            total["rbytes" if parts[1] == "Read" else "wbytes"] += _int(parts[2])
    return total


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


# ------------------------------------------------------------------ the sampler


@dataclass(slots=True)
class _Seen:
    """What the sampler remembers of one run between samples."""

    peaks: dict[int, Use] = field(default_factory=dict)  # per task, the most seen
    cgroup_peak_kb: int = 0


class Sampler:
    """Samples live runs (``kind``: ``linux`` or ``cgroup``, as JobAcctGatherType)."""

    def __init__(self, kind: str, root: str = PROC) -> None:
        self.kind = kind
        self.root = root
        self._seen: dict[tuple[int, str, str], _Seen] = {}
        self._tasks: dict[tuple[int, int], int | None] = {}  # (pid, start) -> SLURM_PROCID

    def sample(self, targets: Sequence[Target], now: int) -> list[pb.StepUsage]:
        """One StepUsage per target; runs no longer given are forgotten."""
        procs = scan((t.pgid for t in targets if t.pgid > 0), self.root)
        self._seen = {t.key: self._seen.get(t.key, _Seen()) for t in targets}
        alive: set[tuple[int, int]] = set()
        usages = []
        for target in targets:
            members = procs.get(target.pgid, []) if target.pgid > 0 else []
            alive.update((p.pid, p.start) for p in members)
            usages.append(self._usage(target, members, now))
        self._tasks = {key: task for key, task in self._tasks.items() if key in alive}
        return usages

    def peaks(self, key: tuple[int, str, str]) -> tuple[int, int] | None:
        """(the largest task's highest RSS, the sum of every task's) of run ``key``, in
        KiB, as far as the samples saw it (None: never sampled)."""
        seen = self._seen.get(key)
        if seen is None or not seen.peaks:
            return None
        sizes = [use.rss_kb for use in list(seen.peaks.values())]
        return max(sizes), sum(sizes)

    def _task_of(self, proc: Proc, tasks: tuple[int, ...]) -> int:
        if len(tasks) == 1:
            return tasks[0]
        key = (proc.pid, proc.start)
        if key not in self._tasks:
            self._tasks[key] = task_id(proc.pid, self.root)
        task = self._tasks[key]
        return task if task in tasks else tasks[0]

    def _usage(self, target: Target, members: Sequence[Proc], now: int) -> pb.StepUsage:
        tasks = target.tasks or (0,)
        current: dict[int, Use] = {}
        for proc in members:
            task = self._task_of(proc, tasks)
            use = Use(
                proc.rss_kb,
                proc.vmsize_kb,
                proc.pages,
                proc.cpu_us,
                proc.read_bytes,
                proc.write_bytes,
            )
            current[task] = current.get(task, Use()) + use
        seen = self._seen[target.key]
        if self.kind == "cgroup" and target.cgroup:
            current = self._cgroup_view(target, tasks, current, seen)
        for task, use in current.items():
            seen.peaks[task] = seen.peaks.get(task, Use()).most(use)
        return summary(target, current, seen.peaks, sorted(p.pid for p in members), now)

    def _cgroup_view(
        self, target: Target, tasks: tuple[int, ...], current: dict[int, Use], seen: _Seen
    ) -> dict[int, Use]:
        """The /proc figures with memory, CPU and disk replaced by the cgroup's, charged
        to the node's first task (the others keep their size and faults)."""
        group = read_cgroup(target.cgroup)
        if group is None:
            return current
        seen.cgroup_peak_kb = max(seen.cgroup_peak_kb, group.peak_kb, group.current_kb)
        first = tasks[0]
        view = {
            task: Use(0, use.vmsize_kb, use.pages, 0, 0, 0)
            for task, use in current.items()
            if task != first
        }
        mine = current.get(first, Use())
        view[first] = Use(
            group.current_kb,
            mine.vmsize_kb,
            mine.pages,
            group.cpu_us,
            group.read_bytes,
            group.write_bytes,
        )
        seen.peaks[first] = seen.peaks.get(first, Use()).most(Use(rss_kb=seen.cgroup_peak_kb))
        return view


def summary(
    target: Target,
    current: Mapping[int, Use],
    peaks: Mapping[int, Use],
    pids: Sequence[int],
    now: int,
) -> pb.StepUsage:
    """The StepUsage of ``target``: the largest task by its peaks, sums of sizes now
    and of the counters' peaks (which are their latest values)."""
    usage = pb.StepUsage(
        job_id=target.job_id,
        step=target.step,
        node=target.node,
        ntasks=len(target.tasks) or 1,
        pids=pids,
        sampled=now,
    )
    if not peaks:
        return usage
    usage.max_rss_task, usage.max_rss_kb = _largest(peaks, "rss_kb")
    usage.max_vmsize_task, usage.max_vmsize_kb = _largest(peaks, "vmsize_kb")
    usage.max_pages_task, usage.max_pages = _largest(peaks, "pages")
    usage.max_read_task, usage.max_read_bytes = _largest(peaks, "read_bytes")
    usage.max_write_task, usage.max_write_bytes = _largest(peaks, "write_bytes")
    usage.max_cpu_task, usage.max_cpu_us = _largest(peaks, "cpu_us")
    least = min(peaks, key=lambda task: (peaks[task].cpu_us, task))
    usage.min_cpu_task, usage.min_cpu_us = least, peaks[least].cpu_us
    usage.sum_rss_kb = sum(use.rss_kb for use in current.values())
    usage.sum_vmsize_kb = sum(use.vmsize_kb for use in current.values())
    usage.sum_pages = sum(use.pages for use in peaks.values())
    usage.sum_cpu_us = sum(use.cpu_us for use in peaks.values())
    usage.sum_read_bytes = sum(use.read_bytes for use in peaks.values())
    usage.sum_write_bytes = sum(use.write_bytes for use in peaks.values())
    return usage


def _largest(peaks: Mapping[int, Use], name: str) -> tuple[int, int]:
    """(task, value) of the task with the largest ``name`` (the lowest task on a tie)."""
    task = max(peaks, key=lambda t: (getattr(peaks[t], name), -t))
    return task, int(getattr(peaks[task], name))
