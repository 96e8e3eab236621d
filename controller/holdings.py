"""What the jobs on each node hold: the store's resource ledger.

The store adds a job here as it comes onto its nodes (RUNNING) and removes it
as it leaves them (off COMPLETING), so what is in use per node is always a
sum kept up to date, never recounted from the jobs: the snapshot, ``commit``'s
re-check and ``scontrol show node`` read it in O(1) per node. One class owns
the counts, so that a job's CPUs, memory, GRES, whole GPUs and pinned CPUs
come and go together.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.jobstate import COMPLETING, JobState
from controller.model import Job

#: GRES per node as a job holds them: (name, type; None = any type, count).
HeldGres = tuple[tuple[str, str | None, int], ...]


def holds_nodes(job: Job) -> bool:
    """True while a job's processes may still be on its nodes."""
    return bool(job.nodes) and (job.state is JobState.RUNNING or COMPLETING in job.flags)


class Holdings:
    """Per node: CPUs kept, CPUs shared per partition, memory, GRES, GPUs, pinned CPUs."""

    def __init__(self, names: Iterable[str]) -> None:
        self._used: dict[str, list[int]] = {name: [0, 0] for name in names}  # [cpus, memory]
        # Jobs sharing CPUs (OverSubscribe): node -> partition -> {CPUs of one job: jobs}.
        self._shared: dict[str, dict[str, dict[int, int]]] = {}
        # GRES in use: node -> (name, type; None = any type) -> count.
        self._gres: dict[str, dict[tuple[str, str | None], int]] = {}
        self._gpus: dict[str, set[int]] = {}  # GPU indices held on each node
        self._pinned: dict[str, set[int]] = {}  # CPUs jobs are pinned to on each node

    def change(self, job: Job, sign: int, shares: bool, gres: list[HeldGres]) -> None:
        """Add (``sign`` +1) or remove (-1) what ``job`` holds on its nodes: its CPUs
        (among the shared ones if it ``shares`` them), memory, ``gres`` per node,
        whole GPUs and pinned CPUs."""
        for i, (name, cpus, memory) in enumerate(
            zip(job.nodes, job.cpus, job.alloc_mem, strict=True)
        ):
            used = self._used.setdefault(name, [0, 0])
            if shares:
                jobs = self._shared.setdefault(name, {}).setdefault(job.partition, {})
                jobs[cpus] = jobs.get(cpus, 0) + sign
                if not jobs[cpus]:
                    del jobs[cpus]
            else:
                used[0] += sign * cpus
            used[1] += sign * memory
            for held, ids in ((self._gpus, job.gpus), (self._pinned, job.cpu_ids)):
                if ids and ids[i]:
                    mine = held.setdefault(name, set())
                    (mine.update if sign > 0 else mine.difference_update)(ids[i])
            if gres[i]:
                counts = self._gres.setdefault(name, {})
                for gname, gtype, count in gres[i]:
                    counts[gname, gtype] = counts.get((gname, gtype), 0) + sign * count

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

    def pinned(self, name: str) -> set[int]:
        """The CPUs jobs are pinned to on ``name``."""
        return self._pinned.get(name, set())
