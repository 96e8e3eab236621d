"""srun inside a heterogeneous job: which component's allocation a step runs in.

The batch script of a heterogeneous job has its leader's SLURM_JOB_ID, so a plain
srun runs in component 0, as Slurm's does; ``--het-group=N`` runs the step in
component N, whose job id the script was given as SLURM_JOB_ID_HET_GROUP_N. A
step spanning several components (``--het-group=0,1``, ``srun ... : ...``) is
refused: each component's step is launched alone.
"""

from __future__ import annotations

from cli.halt import Halt

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping

PROG = "srun"

#: Why a step over several components is refused (no silent choice of one).
SPANNING = "a step spanning several heterogeneous job components is not supported"


def groups(text: str) -> list[int]:
    """``--het-group``'s indexes: ``1``, ``0,2``, ``0-2``; Slurm's fatal error otherwise."""
    found: list[int] = []
    for part in text.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise Halt(1, f"{PROG}: fatal: Invalid --het-group value: {text}")
        found += range(int(low), int(high if dash else low) + 1)
    if not found:
        raise Halt(1, f"{PROG}: fatal: Invalid --het-group value: {text}")
    if len(set(found)) != len(found):
        raise Halt(1, f"{PROG}: fatal: Duplicate het groups in single srun not supported")
    return found


def job_of(text: str, job_text: str, env: Mapping[str, str]) -> str:
    """The job id the step of ``--het-group=text`` runs in, inside the allocation
    ``job_text`` whose environment is ``env``."""
    indexes = groups(text)
    if len(indexes) > 1:
        raise Halt(1, f"{PROG}: fatal: --het-group={text}: {SPANNING}")
    index = indexes[0]
    size = int(env.get("SLURM_HET_SIZE", "1") or "1")
    if index >= size:
        raise Halt(
            1,
            f"{PROG}: fatal: Attempt to run a job step with het group value of {index}, "
            f"but the job allocation has maximum value of {size - 1}",
        )
    return env.get(f"SLURM_JOB_ID_HET_GROUP_{index}", job_text) if size > 1 else job_text
