"""sbatch's ``-m/--distribution``, checked as Slurm 22.05's sbatch checks it and
passed on: the job's distribution (``JobSpec.distribution``; its second level
takes the job's CPUs, ``controller/core/cpupick.py``) and SLURM_DISTRIBUTION
(with SLURM_DIST_PLANESIZE for ``plane``) in the job's environment, which its
steps' srun reads as their default."""

from __future__ import annotations

from cli.failure import Failure

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

ARBITRARY = (
    "With Arbitrary distribution you need to specify a nodelist or hostfile with the -w option"
)


def distribution(text: str | None) -> dict[str, Any]:
    """``-m``'s setter: the text as given, once Slurm's grammar accepts it (exit 255
    otherwise, as Slurm's sbatch; a bare ``*`` too)."""
    from corral import distribution as grammar

    value = text or ""
    try:
        if value.partition(",")[0] == "*":
            raise ValueError(grammar.INVALID)
        grammar.parse(value)
    except ValueError as exc:
        raise Failure(*str(exc).splitlines(), status=255) from None
    return {"distribution": value}


def check(fields: Mapping[str, Any]) -> None:
    """``-m arbitrary`` needs the nodes named (``-w`` or a node file)."""
    text = fields.get("distribution", "")
    if text.lower().startswith("arbitrary") and not fields.get("req_nodes"):
        raise Failure(ARBITRARY)


def environment(fields: Mapping[str, Any]) -> dict[str, str]:
    """SLURM_DISTRIBUTION (and SLURM_DIST_PLANESIZE) for the job's ``-m``."""
    text = fields.get("distribution", "")
    if not text:
        return {}
    from corral import distribution as grammar

    env = {"SLURM_DISTRIBUTION": grammar.job_text(text)}
    plane = grammar.parse(text).plane
    if plane:
        env["SLURM_DIST_PLANESIZE"] = str(plane)
    return env
