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
#: Slurm's answer to --het-group outside a heterogeneous job.
NO_COMPONENT = "No directives to start application on any available hetjob components"


def groups(text: str) -> list[int]:
    """``--het-group``'s indexes: ``1``, ``0,2``, ``0-2``; Slurm's errors otherwise."""
    found: list[int] = []
    for part in text.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise Halt(
                1,
                f"{PROG}: error: _parse_single_range: Invalid range: `{part}'",
                f"{PROG}: error: Invalid --het-group value: {text}",
            )
        found += range(int(low), int(high if dash else low) + 1)
    return found


def job_of(text: str, job_text: str, env: Mapping[str, str]) -> str:
    """The job id the step of ``--het-group=text`` runs in, inside the allocation
    ``job_text`` whose environment is ``env`` (Slurm 22.05's errors, all exit 1)."""
    indexes = groups(text)
    size = int(env.get("SLURM_HET_SIZE", "0") or "0")
    if max(indexes) >= max(size, 1):
        raise Halt(
            1,
            f"{PROG}: error: Requested het-group offset exceeds highest hetjob index "
            f"({max(indexes)} > {max(size - 1, 0)})",
        )
    if not size:  # not a heterogeneous job: srun finds no component to start on
        raise Halt(1, f"{PROG}: error: {NO_COMPONENT}")
    if len(set(indexes)) != len(indexes):
        raise Halt(1, f"{PROG}: error: Duplicate het groups in single srun not supported")
    if len(indexes) > 1:
        raise Halt(1, f"{PROG}: error: --het-group={text}: {SPANNING}")
    return env.get(f"SLURM_JOB_ID_HET_GROUP_{indexes[0]}", job_text)
