"""Slurm's GPU request semantics: what a job asks of GPUs, and how many each node gives.

A job asks for GPUs in one of Slurm's ways (cons_tres in Slurm 22.05, whose
results the unit tests' scenario table records), and the CPUs and memory follow:

* ``--gres=gpu:N`` and ``--gpus-per-node=N`` (TresPerNode): N on every node.
* ``--gpus-per-socket=G`` with ``--sockets-per-node=S``: G near each of S sockets,
  so G times S on every node, of nodes with at least S sockets.
* ``--gpus=N`` (TresPerJob): N in all over the job's nodes, at least one on each
  while N holds one for each. ``deal`` shares them out as ``gres_select_filter.c``
  does: first each node in order gets the GPUs near the job's CPUs there (``near``),
  at most what leaves one for each node after it (and one when none is near); then,
  in order again, each node gives what it has left until N are dealt. ``--gpus=5``
  on two 4-GPU nodes with two GPUs per socket is 3 + 2; where gres.conf names no
  cores, 4 + 1. Where the job's tasks take more nodes than N (no ``-N``, which
  sbatch refuses above N), the first nodes get none and each of the last N one:
  Slurm 22.05 ran ``--gpus=1 -n10`` on two 8-core nodes as 8 + 2 CPUs with the GPU
  on the second, ``--gpus=3 -n25`` on four as 0, 1, 1, 1 GPUs (every node still
  one with a GPU free: a node without one is passed over).
* ``--gpus-per-task=G``: G times the node's tasks; ``--ntasks-per-gpu=T``: a GPU
  for every T of the node's tasks (``for_tasks``). With GPUs per node as well
  (``--gres=gpu:N`` or ``--gpus-per-node=N``), every node gets its N GPUs and at most
  N/G tasks (``task_room``): ``--gpus-per-node=2 --gpus-per-task=1 -n4`` is two
  nodes of two tasks and two GPUs.
* CPUs follow: at least ``--cpus-per-gpu`` (else the partition's DefCpuPerGPU,
  unless ``-c`` was given) times the node's GPUs (of the dealt type only, when
  one is named: ``GpuAsk.cpu_gpus``); memory too, ``--mem-per-gpu``
  (else DefMemPerGPU, unless ``--mem`` or ``--mem-per-cpu``) times the node's GPUs.
* ``--gres-flags=enforce-binding``: the job's CPUs on a node are CPUs near its GPUs
  there only (``core/devices.py`` names them).

A job that asks none of this, or only ``--gres`` with no per-GPU CPUs or memory
(the common case), gets no ``GpuAsk`` and the placement path it always had.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from controller.core.devices import lowest_free
from controller.core.snapshot import Gres, NodeView, PartitionView
from controller.model import Job
from corral import gres as gres_syntax

__all__ = [
    "GpuAsk",
    "also_items",
    "ask",
    "deal",
    "deal_loose",
    "for_tasks",
    "free_gpus",
    "gpu_items",
    "near",
    "same_type",
]


@dataclass(frozen=True, slots=True)
class GpuAsk:
    """A job's GPU request in one partition (its defaults applied).

    ``items`` is the GRES asked on every node besides dealt GPUs: the job's
    ``--gres`` (with its GPUs unless dealt) and the per-socket GPUs; ``per_node``
    counts the GPUs among them, of every type, and ``same`` those that count
    towards ``kind`` (all but GPUs of another named type: ``--gres=gpu:a100:1
    --gpus=v100:2`` asks an A100 on each node besides two V100s in all, as Slurm
    keeps a request per type). ``per_job``, ``per_task`` and ``tasks_per_gpu``
    deal ``kind`` GPUs node by node (``dealt``).
    """

    kind: str
    items: Gres
    per_node: int
    same: int
    per_job: int
    per_task: int
    tasks_per_gpu: int
    per_socket: int
    sockets: int
    cpus_per_gpu: int
    mem_per_gpu: int | None
    enforce: bool
    also: tuple[tuple[str, int], ...] = ()  # --gpus's totals of further types
    listed: bool = False  # --gpus named several types (``lacks``)

    @property
    def dealt(self) -> bool:
        """Whether nodes get different numbers of GPUs (a total or per task)."""
        return bool(self.per_job or self.per_task or self.tasks_per_gpu or self.also)

    def lacks(self, free: Gres) -> bool:
        """Whether a node of ``free`` GRES is of no use to a job whose ``--gpus`` names
        several types because it has none of one of them free: Slurm 22.05 leaves such
        a node out (``--gpus=a100:5,v100:1`` never fits n1 and n3 of two A100s and two
        V100s each beside n2 of four A100s)."""
        if not self.listed:
            return False
        kinds = [kind for kind, _ in self.also]
        if self.per_job or self.per_task:
            kinds.append(self.kind)
        return any(not free_gpus(free, kind) for kind in kinds)

    @property
    def by_tasks(self) -> bool:
        return bool(self.per_task or self.tasks_per_gpu)

    def task_room(self, free: int) -> int:
        """The most tasks a node with ``free`` GPUs of the kind can hold."""
        if self.same and self.per_task:  # the node's own GPUs, per_task each
            return self.same // self.per_task if free >= self.same else 0
        if self.per_task:
            return free // self.per_task
        return free * self.tasks_per_gpu

    def cpu_gpus(self, gpus: int) -> int:
        """The GPUs on a node that ``--cpus-per-gpu`` counts, given ``gpus`` dealt
        there (of every dealt type): with a dealt type named, those of the dealt types
        only (Slurm 22.05: ``--gres=gpu:a100:1 --gpus=v100:2 --cpus-per-gpu=2`` is 4
        CPUs), else all."""
        return self.same + gpus if self.kind else self.per_node + gpus

    def request(self, gpus: int, also: Gres = ()) -> Gres:
        """The GRES asked on a node given ``gpus`` dealt GPUs there, and ``also`` of
        the further totals' types."""
        if not self.dealt or not gpus:
            return (*self.items, *also)
        return (*self.items, ("gpu", self.kind, gpus), *also)


@lru_cache(maxsize=4096)
def gpu_items(text: str) -> tuple[Gres, int]:
    """A ``--gres`` text's items and how many GPUs they ask per node; ValueError if
    malformed."""
    items = gres_syntax.parse_request(text) if text else ()
    return items, sum(count for name, _, count in items if name == "gpu")


@lru_cache(maxsize=1024)
def also_items(text: str) -> tuple[tuple[str, int], ...]:
    """A job's ``gpus_also`` ("a100:1,v100:2"): (type, count) of each further total;
    ValueError if malformed."""
    out = []
    for part in text.split(",") if text else ():
        kind, _, count = part.rpartition(":")
        if not kind or not count.isdigit() or int(count) < 1:
            raise ValueError(part)
        out.append((kind, int(count)))
    return tuple(out)


def same_type(items: Gres, kind: str) -> int:
    """The GPUs among per-node ``items`` that count towards a request of ``kind``
    ("" any): all but those of another named type."""
    return sum(
        count
        for name, own, count in items
        if name == "gpu" and (not kind or not own or own == kind)
    )


def _asks_more(job: Job, part: PartitionView) -> bool:
    """Whether anything beyond a plain per-node ``--gres`` may apply (cheap attribute
    tests: every placement of every job comes here)."""
    return bool(
        job.gpus_per_job
        or job.gpus_per_task
        or job.gpus_per_socket
        or job.ntasks_per_gpu
        or job.cpus_per_gpu
        or job.mem_per_gpu is not None
        or job.gres_flags == "enforce-binding"
        or part.def_cpu_per_gpu
        or part.def_mem_per_gpu
    )


def ask(job: Job, part: PartitionView) -> GpuAsk | None:
    """``job``'s GPU request in ``part``; None when the plain path covers it (no GPU
    asked, or only ``--gres`` with no per-GPU CPUs, memory or binding). ValueError for
    a malformed ``--gres``."""
    if not _asks_more(job, part):
        return None
    items, per_node = gpu_items(job.gres)
    per_socket = job.gpus_per_socket * max(job.sockets_per_node, 1)
    if per_socket:
        items = (*items, ("gpu", job.gpu_type, per_socket))
        per_node += per_socket
    same = same_type(items, job.gpu_type)
    # A total with GPUs of its type per node is met by the node count
    # (controller/gpuspec.py), and --ntasks-per-gpu with them or with a total by the
    # task count: only the rest is dealt.
    per_job = 0 if same else job.gpus_per_job
    tasks_per_gpu = 0 if same or job.gpus_per_task or per_job else job.ntasks_per_gpu
    if not (per_node or per_job or job.gpus_per_task or tasks_per_gpu):
        return None  # --cpus-per-gpu without GPUs changes nothing, as in Slurm
    cpus_per_gpu = job.cpus_per_gpu
    if not cpus_per_gpu and not job.cpus_per_task_given:
        cpus_per_gpu = part.def_cpu_per_gpu
    mem_per_gpu = job.mem_per_gpu
    if mem_per_gpu is None and job.mem_per_node is None and job.mem_per_cpu is None:
        mem_per_gpu = part.def_mem_per_gpu or None
    # A further type's total with GPUs of its type per node is met by the node count
    # too (--gpus=a100:2,v100:2 --gpus-per-node=a100:1,v100:1: one of each per node).
    also = tuple(item for item in also_items(job.gpus_also) if not same_type(items, item[0]))
    return GpuAsk(
        also=also,
        listed=bool(job.gpus_also),
        kind=job.gpu_type,
        items=items,
        per_node=per_node,
        same=same,
        per_job=per_job,
        per_task=job.gpus_per_task,
        tasks_per_gpu=tasks_per_gpu,
        per_socket=job.gpus_per_socket,
        sockets=job.sockets_per_node,
        cpus_per_gpu=cpus_per_gpu,
        mem_per_gpu=mem_per_gpu,
        enforce=job.gres_flags == "enforce-binding",
    )


def for_tasks(gpu: GpuAsk, tasks: int) -> int:
    """GPUs dealt for ``tasks`` tasks on a node: per task, or one per ``tasks_per_gpu``
    (none beyond ``items`` when GPUs of the kind per node are asked too)."""
    if gpu.same:
        return 0
    if gpu.per_task:
        return gpu.per_task * tasks
    return -(-tasks // gpu.tasks_per_gpu) if gpu.tasks_per_gpu else 0


def free_gpus(free: Gres, kind: str) -> int:
    """Whole GPUs of ``kind`` ("" any) in a node's free GRES (share pools excluded)."""
    return sum(
        count
        for name, pool, count in free
        if name == "gpu" and "#" not in pool and (not kind or pool == kind)
    )


def near(node: NodeView, gpu: GpuAsk, cpus: int) -> int:
    """How many of ``node``'s free GPUs of the kind asked are near the CPUs the job's
    first ``cpus`` CPUs there would be (the lowest free ones): those whose gres.conf
    Cores= (or probed CPUs) include one of them, and every GPU whose cores are not
    known. With --cpus-per-gpu the CPUs follow the GPUs, so every free GPU is near,
    as it is on a node whose devices the snapshot does not model."""
    dev = node.devices
    free = free_gpus(node.gres, gpu.kind)
    if dev is None or not dev.near or gpu.cpus_per_gpu:
        return free
    busy = node.busy_ids
    mine = set(lowest_free(node.cpus, node.unit, busy, max(cpus, 1)))
    cores = dict(dev.near)
    taken = dev.whole | dev.shared
    count = sum(
        1
        for kind, index in dev.numbers
        if index not in taken
        and (not gpu.kind or kind == gpu.kind)
        and (index not in cores or not mine.isdisjoint(cores[index]))
    )
    return min(count, free)


def deal(total: int, caps: list[int], nears: list[int]) -> list[int] | None:
    """``total`` GPUs over nodes that can give ``caps`` (``nears`` of them near the
    job's CPUs), in Slurm's two rounds; None when they cannot give that many. Fewer
    GPUs than nodes leave the first nodes none (``most`` below one there)."""
    if sum(caps) < total or any(cap < 1 for cap in caps):
        return None
    given: list[int] = []
    dealt = 0
    for i, (cap, close) in enumerate(zip(caps, nears, strict=True)):
        most = total - dealt - (len(caps) - i - 1)  # one left for each node after it
        take = (min(most, close, cap) or min(1, cap)) if most > 0 else 0
        given.append(take)
        dealt += take
    return _fill(total, caps, given)


def _fill(total: int, caps: list[int], given: list[int]) -> list[int] | None:
    """The second round: each node in order gives what it has left until ``total``
    are dealt; None when they cannot."""
    dealt = sum(given)
    for i, cap in enumerate(caps):
        more = min(cap - given[i], total - dealt)
        given[i] += more
        dealt += more
    return given if dealt == total else None


def deal_loose(total: int, caps: list[int], nears: list[int]) -> list[int] | None:
    """``deal`` for a job with totals of several types (``--gpus=a100:1,v100:3``): each
    type is dealt on its own and a node need not get one of every type (Slurm 22.05
    gave that job n1 ``gpu:a100:0,gpu:v100:2`` and n3 ``gpu:a100:1,gpu:v100:1``): the
    first round keeps one for each later node, as ``deal``'s, but gives none where
    that leaves none."""
    if sum(caps) < total:
        return None
    given: list[int] = []
    dealt = 0
    for i, (cap, close) in enumerate(zip(caps, nears, strict=True)):
        most = total - dealt - (len(caps) - i - 1)
        take = max(min(most, close, cap), 0)
        given.append(take)
        dealt += take
    return _fill(total, caps, given)
