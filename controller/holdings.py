"""What the jobs on each node hold: the store's resource ledger.

The store adds a job here as it comes onto its nodes (RUNNING) and removes it
as it leaves them (off COMPLETING), so what is in use per node is always a
sum kept up to date, never recounted from the jobs: the snapshot, ``commit``'s
re-check and ``scontrol show node`` read it in O(1) per node. One class owns
the counts, so that a job's CPUs, memory, GRES, whole GPUs and CPU ids
come and go together. CPU ids are kept as bitmasks (those of jobs that keep
their CPUs) and per-CPU counts (those of sharing jobs, which may be given the
same CPU), so the views the scheduler reads are plain integers.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.jobstate import COMPLETING, JobState
from controller.model import Job

#: GRES per node as a job holds them: (name, type; None = any type, count).
HeldGres = tuple[tuple[str, str | None, int], ...]


def holds_nodes(job: Job) -> bool:
    """True while a job's processes may still be on its nodes (running, suspended,
    or completing)."""
    return bool(job.nodes) and (
        job.state in (JobState.RUNNING, JobState.SUSPENDED) or COMPLETING in job.flags
    )


class Holdings:
    """Per node: CPUs kept, CPUs shared per partition, memory, GRES, GPUs, CPU ids."""

    def __init__(self, names: Iterable[str]) -> None:
        self._used: dict[str, list[int]] = {name: [0, 0] for name in names}  # [cpus, memory]
        # Jobs sharing CPUs (OverSubscribe): node -> partition -> {CPUs of one job: jobs}.
        self._shared: dict[str, dict[str, dict[int, int]]] = {}
        # GRES in use: node -> (name, type; None = any type) -> count.
        self._gres: dict[str, dict[tuple[str, str | None], int]] = {}
        self._gpus: dict[str, set[int]] = {}  # GPU indices held on each node
        self._kept_ids: dict[str, int] = {}  # CPU ids of jobs that keep them, as a bitmask
        # CPU ids of jobs that share them: node -> CPU id -> jobs given it.
        self._shared_ids: dict[str, dict[int, int]] = {}
        # The jobs on each node by id: "what runs on node N" without a scan of every job.
        self._jobs: dict[str, set[int]] = {}
        # Per node, how many changes it has seen: a view of the node built at one count
        # holds until the next (``snapshots.NodeViews``).
        self._changes: dict[str, int] = {}

    def change(self, job: Job, sign: int, shares: bool, gres: list[HeldGres]) -> None:
        """Add (``sign`` +1) or remove (-1) what ``job`` holds on its nodes: its CPUs
        (among the shared ones if it ``shares`` them; none while it has lent them,
        ``Job.cpus_released``), memory, ``gres`` per node, whole GPUs and CPU ids."""
        if not job.cpus_released:
            self.change_cpus(job, sign, shares)
        for i, (name, memory) in enumerate(zip(job.nodes, job.alloc_mem, strict=True)):
            self._changes[name] = self._changes.get(name, 0) + 1
            used = self._used.setdefault(name, [0, 0])
            used[1] += sign * memory
            on = self._jobs.setdefault(name, set())
            (on.add if sign > 0 else on.discard)(job.job_id)
            if job.gpus and job.gpus[i]:
                mine = self._gpus.setdefault(name, set())
                (mine.update if sign > 0 else mine.difference_update)(job.gpus[i])
            if gres[i]:
                counts = self._gres.setdefault(name, {})
                for gname, gtype, count in gres[i]:
                    counts[gname, gtype] = counts.get((gname, gtype), 0) + sign * count

    def change_cpus(self, job: Job, sign: int, shares: bool) -> None:
        """Add or remove ``job``'s CPUs and CPU ids alone: a suspended job lends them
        to other jobs (-1) and takes them back on resume (+1), its memory and GRES
        kept (as Slurm's cons_tres suspends a job)."""
        for i, (name, cpus) in enumerate(zip(job.nodes, job.cpus, strict=True)):
            self._changes[name] = self._changes.get(name, 0) + 1
            used = self._used.setdefault(name, [0, 0])
            if shares:
                jobs = self._shared.setdefault(name, {}).setdefault(job.partition, {})
                jobs[cpus] = jobs.get(cpus, 0) + sign
                if not jobs[cpus]:
                    del jobs[cpus]
            else:
                used[0] += sign * cpus
            if job.cpu_ids and job.cpu_ids[i]:
                self._change_ids(name, job.cpu_ids[i], sign, shares)

    def _change_ids(self, name: str, ids: tuple[int, ...], sign: int, shares: bool) -> None:
        """Add or remove the CPU ids a job holds on ``name``."""
        if shares:
            counts = self._shared_ids.setdefault(name, {})
            for c in ids:
                counts[c] = counts.get(c, 0) + sign
                if not counts[c]:
                    del counts[c]
            return
        bits = 0
        for c in ids:
            bits |= 1 << c
        kept = self._kept_ids.get(name, 0)
        self._kept_ids[name] = kept | bits if sign > 0 else kept & ~bits

    def changes(self, name: str) -> int:
        """How many times what ``name`` holds has changed (it only ever grows)."""
        return self._changes.get(name, 0)

    def job_ids(self, name: str) -> list[int]:
        """The ids of the jobs on ``name``, lowest first."""
        return sorted(self._jobs.get(name, ()))

    def used(self, name: str) -> tuple[int, int]:
        """(CPUs held by jobs that do not share them, MiB held by all jobs) on ``name``.

        Jobs sharing CPUs (OverSubscribe) are not in the CPU count but in
        ``shared``, as ``nodefree`` splits a node's CPUs; what ``scontrol
        show node`` calls CPUAlloc is ``allocated_cpus``.
        """
        cpus, memory = self._used.get(name, (0, 0))
        return cpus, memory

    def shared(self, name: str) -> tuple[tuple[str, int, int], ...]:
        """Jobs sharing CPUs on ``name`` as ``NodeView.shared`` lists them:
        (partition, CPUs asked in all, most CPUs of one job)."""
        return tuple(
            (part, sum(c * n for c, n in jobs.items()), max(jobs))
            for part, jobs in self._shared.get(name, {}).items()
            if jobs
        )

    def allocated_cpus(self, name: str, total: int) -> int:
        """CPUs in use on ``name`` (``total`` of them) as Slurm counts them: held ones
        plus those jobs share."""
        held = self._used.get(name, (0, 0))[0]
        pools = self._shared.get(name, {}).values()
        shared = sum(cpus * n for jobs in pools for cpus, n in jobs.items())
        return held + min(shared, max(total - held, 0))

    def gres(self, name: str) -> dict[tuple[str, str | None], int]:
        """GRES in use on ``name`` per (name, type; None = any type)."""
        return self._gres.get(name, {})

    def gpus(self, name: str) -> set[int]:
        """The GPU indices jobs hold whole on ``name``."""
        return self._gpus.get(name, set())

    def cpu_ids(self, name: str) -> tuple[int, tuple[int, ...]]:
        """The CPU ids jobs hold on ``name`` as ``NodeView`` has them: a bitmask of
        those of jobs that keep their CPUs, and per load k the bitmask of the CPUs
        more than k sharing jobs were given."""
        counts = self._shared_ids.get(name)
        if not counts:
            return self._kept_ids.get(name, 0), ()
        loads = [0] * max(counts.values())
        for c, n in counts.items():
            for k in range(n):
                loads[k] |= 1 << c
        return self._kept_ids.get(name, 0), tuple(loads)
