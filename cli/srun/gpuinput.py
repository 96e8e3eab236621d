"""srun's GPU options: from its command line, else from the variables its job set.

Slurm's srun reads SLURM_GPUS, SLURM_GPUS_PER_NODE, SLURM_GPUS_PER_TASK,
SLURM_CPUS_PER_GPU, SLURM_MEM_PER_GPU, SLURM_NTASKS_PER_GPU and SLURM_GPU_BIND
as its own options (srun(1), INPUT ENVIRONMENT VARIABLES): sbatch and salloc set
them from theirs (cli/sbatch/gpuopts.py), so a step in ``sbatch --gpus-per-task=1
-n4`` binds a GPU to each task, and one in ``sbatch --gpus=3 -N2`` asks 3 GPUs over
its nodes, ``srun -n1`` there failing as Slurm's does. The command line wins over
the environment; a memory option given there leaves the environment's alone.

What a step asks is sent in StepCreate's fields; the controller lays the GPUs out
(controller/steps.py) and binds each task (controller/gpubind.py).
"""

from __future__ import annotations

from cli.halt import Halt

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping

PROG = "srun"
#: Variable -> the option it stands for (srun's own input variables).
INPUT = (
    ("SLURM_GPUS", "gpus"),
    ("SLURM_GPUS_PER_NODE", "gpus-per-node"),
    ("SLURM_GPUS_PER_TASK", "gpus-per-task"),
    ("SLURM_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SLURM_NTASKS_PER_GPU", "ntasks-per-gpu"),
    ("SLURM_GPU_BIND", "gpu-bind"),
)
MEMORY = ("mem", "mem-per-cpu", "mem-per-gpu")


def inherit(options: MutableMapping[str, str | None], env: Mapping[str, str]) -> None:
    """Fill ``options`` from srun's input variables where the command line left them."""
    for variable, key in INPUT:
        if key not in options and env.get(variable):
            options[key] = env[variable]
    if env.get("SLURM_MEM_PER_GPU") and not any(key in options for key in MEMORY):
        options["mem-per-gpu"] = env["SLURM_MEM_PER_GPU"]


def count(options: Mapping[str, str | None], key: str) -> int:
    """``[type:]N`` of a GPU option, or the sum of a list of them (a step takes the
    job's GPUs, whatever their type: in ``sbatch --gpus-per-node=a100:1,v100:1``,
    whose SLURM_GPUS_PER_NODE srun reads back, a step asks two on each node); a type
    named again counts once, its last count, as Slurm 22.05's srun takes it (a step of
    ``sbatch --gpus=1,2`` gets two GPUs)."""
    counts: dict[str, int] = {}
    for item in (options.get(key) or "").split(","):
        kind, _, text = item.rpartition(":")
        if not text.isdigit():
            raise Halt(1, f"{PROG}: error: Invalid --{key} specification")
        counts[kind] = int(text)
    return sum(counts.values())


def _number(options: Mapping[str, str | None], key: str) -> int:
    text = options.get(key) or ""
    if not text.isdigit() or not int(text):
        raise Halt(1, f'{PROG}: error: Invalid numeric value "{text}" for --{key}.')
    return int(text)


def step_fields(options: Mapping[str, str | None]) -> dict[str, int | str]:
    """The step's GPU request: --gpus, --gpus-per-node (or --gres=gpu:N),
    --gpus-per-task, --cpus-per-gpu, --ntasks-per-gpu and --gpu-bind."""
    from cli.sbatch.gpuopts import bind_valid

    fields: dict[str, int | str] = {}
    for key, field in (
        ("gpus", "gpus"),
        ("gpus-per-node", "gpus_per_node"),
        ("gpus-per-task", "gpus_per_task"),
    ):
        if key in options:
            fields[field] = count(options, key)
    if "gres" in options and "gpus_per_node" not in fields:
        total = 0
        for item in (options.get("gres") or "").split(","):
            parts = item.removeprefix("gres/").split(":")
            if parts[0] == "gpu":
                total += int(parts[-1]) if parts[-1].isdigit() and len(parts) > 1 else 1
        if total:
            fields["gpus_per_node"] = total
    for key, field in (("cpus-per-gpu", "cpus_per_gpu"), ("ntasks-per-gpu", "ntasks_per_gpu")):
        if key in options:
            fields[field] = _number(options, key)
    bind = options.get("gpu-bind")
    if bind is not None:
        if not bind_valid(bind):
            raise Halt(1, f"{PROG}: error: Invalid --gpu-bind argument: gpu:{bind}")
        fields["gpu_bind"] = bind
    return fields
