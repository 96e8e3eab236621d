"""A submission's GPU options, checked and completed as slurmctld does at submission.

The clients check them first, in Slurm's words (cli/sbatch/gpuopts.py); this is
the controller's own check, for every client (restd, older ones, a hand-made
request), refused with the errno Slurm's controller sends,
``Invalid generic resource (gres) specification``. What the options imply is
filled in here, as Slurm does before placement:

* ``--gpus=N`` with GPUs per node (``--gres=gpu:G``, ``--gpus-per-node=G``, or
  ``--gpus-per-socket`` times ``--sockets-per-node``): N/G nodes, N a multiple of G.
* ``--gpus-per-task=G`` with ``--gpus=N`` and no ``-n``: N/G tasks.
* ``--ntasks-per-gpu=T``: T tasks per GPU asked, of every type (``--gpus=N``: N*T
  tasks; GPUs per node: G*T per node; both, of two types, the sum); with ``-n``
  alone, a GPU for every T of a node's tasks.

GPUs of several types are asked as Slurm keeps them, a request per type: per
node, any types (``--gres=gpu:a100:1,gpu:v100:2``), and dealt (``--gpus``,
``--gpus-per-task``, ``--gpus-per-socket``) one type, which may be another one
(``--gres=gpu:a100:1 --gpus=v100:2``); only GPUs per node of the dealt type count
towards a total or per-task request (``--gpus-per-node=a100:1,v100:1 --gpus=v100:4``
is four nodes). Typed and untyped GPUs together are refused, as Slurm's clients
refuse them.

``--gpus`` may name several types (``--gpus=a100:1,v100:2``), and a type other
than ``--gpus-per-task``'s or ``--gpus-per-socket``'s (``--gpus=a100:1
--gpus-per-task=v100:1``): the first (resp. the per-task or per-socket type) is the
dealt type, the other totals ``gpus_also``, each dealt over the job's nodes on its
own, as Slurm 22.05 does. Beside GPUs per node, each type's total and its GPUs per
node make the node count (every type the same one, and every total at least it);
``--ntasks-per-gpu`` counts every listed GPU. The clients send each type once (a
type named again keeps its last count, as Slurm's); a ``gpus_also`` naming one twice
is refused.

GPUs per task or per GPU-task ratio together with GPUs per socket are refused, as
Slurm's clients refuse them.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.gpus import also_items, gpu_items, same_type
from controller.core.snapshot import Gres
from controller.jobspec import JobSpec
from controller.model import Job
from corral import errors
from corral.errors import SlurmError

__all__ = ["GpuSpec", "check", "tasks_held"]


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """A submission's node and task counts once its GPU options are counted in."""

    min_nodes: int | None
    num_tasks: int | None


def _refuse() -> SlurmError:
    return SlurmError(errors.ESLURM_INVALID_GRES)


def _items(spec: JobSpec) -> Gres:
    """The GRES ``spec`` asks on every node (--gres, --gpus-per-node)."""
    try:
        return gpu_items(spec.gres)[0]
    except ValueError:
        raise _refuse() from None


def _per_node(spec: JobSpec) -> tuple[int, int]:
    """GPUs asked on every node (--gres, --gpus-per-node, per socket), of every type
    and of the dealt type (``gpus.same_type``)."""
    items = _items(spec)
    per_node = sum(count for name, _, count in items if name == "gpu")
    typed = {bool(kind) for name, kind, _ in items if name == "gpu"}
    if spec.gpus or spec.gpus_per_socket or spec.gpus_per_task:
        typed.add(bool(spec.gpu_type))
    if len(typed) > 1:
        raise _refuse()  # with and without type identification, as Slurm's clients say
    same = same_type(items, spec.gpu_type)
    if spec.gpus_per_socket:
        if not spec.sockets_per_node:
            raise _refuse()
        per_node += spec.gpus_per_socket * spec.sockets_per_node
        same += spec.gpus_per_socket * spec.sockets_per_node
    return per_node, same


def _asked(spec: JobSpec) -> bool:
    return bool(
        spec.gpus
        or spec.gpus_per_socket
        or spec.gpus_per_task
        or spec.cpus_per_gpu
        or spec.mem_per_gpu is not None
        or spec.ntasks_per_gpu
        or spec.gpu_bind
        or spec.gres_flags
        or spec.gpu_type
        or spec.gpus_also
    )


def _also_nodes(spec: JobSpec, items: Gres) -> tuple[tuple[tuple[str, int], ...], int]:
    """``--gpus`` totals of further types (``gpus_also``), checked: each typed, apart
    from the others and the dealt type, beside a total, GPUs per task or per socket of
    that type; and the node count those with GPUs of their type per node make (0:
    none), each a multiple of them (Slurm 22.05: ``--gpus=a100:2,v100:2
    --gpus-per-node=a100:1,v100:1`` is two nodes)."""
    try:
        also = also_items(spec.gpus_also)
    except ValueError:
        raise _refuse() from None
    kinds = [kind for kind, _ in also]
    if not spec.gpu_type or spec.gpu_type in kinds or len(set(kinds)) < len(kinds):
        raise _refuse()
    if not (spec.gpus or spec.gpus_per_task or spec.gpus_per_socket):
        raise _refuse()
    nodes = 0
    for kind, count in also:
        own = same_type(items, kind)
        if own and count % own:
            raise _refuse()
        nodes = max(nodes, count // own if own else 0)
    return also, nodes


def check(spec: JobSpec) -> GpuSpec:
    """``spec``'s GPU options checked (SlurmError if inconsistent) and what they imply."""
    if not _asked(spec):
        return GpuSpec(spec.min_nodes, spec.num_tasks)
    all_types, per_node = _per_node(spec)
    also, also_nodes = _also_nodes(spec, _items(spec)) if spec.gpus_also else ((), 0)
    if spec.gres_flags not in ("", "enforce-binding", "disable-binding"):
        raise _refuse()
    if spec.cpus_per_gpu and spec.cpus_per_task is not None:
        raise _refuse()
    if spec.mem_per_gpu is not None:
        if spec.mem_per_node is not None or spec.mem_per_cpu is not None:
            raise SlurmError(
                errors.EINVAL, "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive"
            )
        if not (all_types or spec.gpus or spec.gpus_per_task or spec.ntasks_per_gpu):
            raise _refuse()
    by_tasks = spec.gpus_per_task or spec.ntasks_per_gpu
    if spec.gpus_per_task and spec.ntasks_per_gpu:
        raise _refuse()
    if by_tasks and spec.gpus_per_socket:
        raise _refuse()
    if per_node and spec.gpus_per_task and per_node < spec.gpus_per_task:
        raise _refuse()  # no node's GPUs serve one task
    min_nodes, num_tasks = spec.min_nodes, spec.num_tasks
    if spec.gpus and per_node:
        if spec.gpus % per_node:
            # GPUs per node of --gres are sbatch's "not multiple"; per socket, Slurm
            # 22.05's controller finds no node for them (--gpus=1 --gpus-per-socket=1
            # --sockets-per-node=2)
            if spec.gpus_per_socket:
                raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
            raise _refuse()
        if min_nodes is not None and min_nodes != spec.gpus // per_node:
            raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
        min_nodes = spec.gpus // per_node
    if also_nodes:  # within -N's range, or the dealt type's count where it made one
        high = (spec.max_nodes or 0) if min_nodes == spec.min_nodes else min_nodes
        if also_nodes < (min_nodes or 0) or (high and also_nodes > high):
            raise _refuse()
        min_nodes = also_nodes
    if min_nodes is not None and any(count < min_nodes for _, count in also):
        raise _refuse()  # Slurm's "--gpus < -N", for each type
    if spec.gpus_per_task:
        if spec.gpus and spec.gpus % spec.gpus_per_task:
            raise _refuse()
        implied = spec.gpus // spec.gpus_per_task if spec.gpus else None
        if num_tasks is None:
            num_tasks = implied
        elif implied is not None and implied != num_tasks:
            raise _refuse()
        if num_tasks is None:
            raise _refuse()  # per task, but how many tasks?
    if spec.ntasks_per_gpu:
        # Every GPU asked counts, of every type: the dealt type's total (or per node)
        # and the other types' per node (Slurm 22.05: --gres=gpu:a100:1 --gpus=v100:2
        # --ntasks-per-gpu=2 is 6 tasks; --gpus=a100:1,v100:2 --ntasks-per-gpu=2 too),
        # on -N's nodes or one.
        nodes = min_nodes or 1
        gpus = (spec.gpus or per_node * nodes) + (all_types - per_node) * nodes
        gpus += sum(count for kind, count in also if not same_type(_items(spec), kind))
        if gpus:
            num_tasks = gpus * spec.ntasks_per_gpu
        elif num_tasks is None or num_tasks % spec.ntasks_per_gpu:
            raise _refuse()
    if spec.gpus and min_nodes is not None and spec.gpus < min_nodes:
        raise _refuse()
    return GpuSpec(min_nodes, num_tasks)


def tasks_held(job: Job) -> int:
    """The task count ``scontrol show job`` gives ``job`` (NumTasks): its ``-n``, but
    once it runs with GPUs per node and per task, the tasks its nodes' GPUs are for
    when more, as Slurm 22.05 counts them (``--gres=gpu:2 --gpus-per-task=1 -n3 -N2``
    runs with 2 + 2 CPUs and shows NumTasks=4, while its SLURM_NTASKS stays 3, so
    ``job.num_tasks`` does too)."""
    if not (job.gpus_per_task and job.nodes):
        return job.num_tasks
    try:
        items, _ = gpu_items(job.gres)
    except ValueError:
        return job.num_tasks
    per_node = same_type(items, job.gpu_type) // job.gpus_per_task
    if not per_node:
        return job.num_tasks
    cpt = max(job.cpus_per_task, 1)
    held = sum(min(cpus // cpt, per_node) for cpus in job.cpus)
    return max(job.num_tasks, held)
