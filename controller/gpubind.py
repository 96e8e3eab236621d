"""Which of a step's GPUs on a node each of its tasks sees: ``--gpu-bind``.

By default every task of a step sees all of the step's GPUs on its node. With
``--gpu-bind`` (or SLURM_GPU_BIND, which sbatch and salloc set from their own
option) each task sees some of them, as slurmstepd binds them (``gres.c``
``_get_usable_gres``, Slurm 22.05; checked on this machine, see
tests/unit/test_gpu_bind.py):

* ``closest``: the GPUs near the task's CPUs (gres.conf Cores=, or the probe),
  and every GPU whose cores are not known. A task bound by ``--cpu-bind``
  (``controller/cpubind.py``) has its own CPUs, so those near its socket;
  otherwise it has the job's CPUs on the node, so the GPUs near those.
* ``single:N``: of those, one: task ``i`` the ``(i // N) % count``-th.
* ``map_gpu:LIST``: task ``i`` the GPU ``LIST[i]`` names (cyclically; ``ID*N``
  repeats an ID for N tasks); IDs are the GPUs' indices as SLURM_JOB_GPUS names
  them, decimal or ``0x`` hex.
* ``mask_gpu:LIST``: task ``i`` the GPUs whose bits ``LIST[i]`` sets (hex).
* ``per_task:N``: task ``i`` the step's GPUs ``i*N`` to ``i*N+N-1`` on the node.
* ``none`` (or a word Slurm accepts but binds nothing by): all of them.

A binding that names none of the step's GPUs binds the task to the step's first
GPU on the node, as slurmstepd does. Without ``--gpu-bind``, ``--gpus-per-task``
binds as ``per_task`` and ``--ntasks-per-gpu`` as ``single`` (srun's implicit
binding). Binding is ignored on a node where the step runs one task. Slurm
22.05 leaves ``none``'s tasks no GPU at all (CUDA_VISIBLE_DEVICES empty); its
manual and Slurm 24.11 give them every GPU of the step, as Corral does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["implicit", "task_gpus"]

Gpus = tuple[int, ...]


def implicit(bind: str, gpus_per_task: int, ntasks_per_gpu: int) -> str:
    """The binding a step uses: ``--gpu-bind`` if given, else srun's implicit one."""
    if bind:
        return bind
    if ntasks_per_gpu:
        return f"single:{ntasks_per_gpu}"
    return f"per_task:{gpus_per_task}" if gpus_per_task else ""


def _number(text: str, base: int) -> int | None:
    """A number as ``strtol`` reads it (``0x`` hex in base 0), None when it is none."""
    text = text.strip()
    try:
        return int(text, base) if base else int(text, 0 if text[:2].lower() == "0x" else 10)
    except ValueError:
        return None


def _entry(items: Sequence[str], task: int) -> str:
    """The item of a ``map_gpu``/``mask_gpu`` list for local task ``task``: items
    repeat for their ``*N`` count, and the list for as many tasks as there are."""
    counts = []
    for item in items:
        _, star, repeat = item.partition("*")
        counts.append(max(_number(repeat, 10) or 1, 1) if star else 1)
    task %= sum(counts)
    for item, count in zip(items, counts, strict=True):
        if task < count:
            return item.partition("*")[0]
        task -= count
    return items[-1].partition("*")[0]


def _closest(gpus: Gpus, near: Mapping[int, tuple[int, ...]], cpus: Sequence[int]) -> list[int]:
    mine = set(cpus)
    return [g for g in gpus if g not in near or not mine.isdisjoint(near[g])]


def _usable(
    bind: str, task: int, gpus: Gpus, near: Mapping[int, tuple[int, ...]], cpus: Sequence[int]
) -> list[int] | None:
    """The GPUs local task ``task`` may use under ``bind``; None: all of them."""
    word = bind[8:] if bind[:8].lower() == "verbose," else bind
    lower = word.lower()
    kind, _, argument = lower.partition(":")
    if lower.startswith("closest"):
        return _closest(gpus, near, cpus)
    if kind == "single":
        usable = _closest(gpus, near, cpus)
        per = _number(argument, 0) or 1
        return [usable[(task // max(per, 1)) % len(usable)]] if usable else []
    if kind == "map_gpu":
        value = _number(_entry(word[8:].split(","), task), 0)
        return [value] if value in gpus else []
    if kind == "mask_gpu":
        mask = _number(_entry(word[9:].split(","), task).removeprefix("0x"), 16) or 0
        return [g for g in gpus if mask >> g & 1]
    if kind == "per_task":
        per = _number(argument, 0) or 0
        return list(gpus[task * per : task * per + per])
    return None


def task_gpus(
    bind: str,
    gpus: Gpus,
    tasks: int,
    near: Mapping[int, tuple[int, ...]],
    cpus: Sequence[int],
    bound: Sequence[Sequence[int]] = (),
) -> tuple[Gpus, ...]:
    """Each of ``tasks`` local tasks' GPUs among the step's ``gpus`` on a node under
    ``bind`` (``implicit``'s), the tasks pinned to ``cpus``, or each to its own
    ``bound[i]`` under ``--cpu-bind``; () when every task sees all of them."""
    if not bind or tasks <= 1 or not gpus:
        return ()
    out = []
    for task in range(tasks):
        usable = _usable(bind, task, gpus, near, bound[task] if bound else cpus)
        if usable is None:
            return ()
        out.append(tuple(sorted(usable)) if usable else gpus[:1])
    return tuple(out)
