"""The scripts ``scontrol update job N NumNodes=K`` leaves, as Slurm's scontrol does.

Run inside a job (``SLURM_JOBID`` set), a successful change of a job's node count
(``NumNodes=`` or ``ReqNodes=``) writes ``slurm_job_<id>_resize.sh`` and
``slurm_job_<id>_resize.csh`` (mode 0700) in the current directory, setting each of
SLURM_NODELIST, SLURM_JOB_NODELIST, SLURM_NNODES, SLURM_JOB_NUM_NODES and
SLURM_JOB_CPUS_PER_NODE that is set in scontrol's environment to the job's new
allocation and unsetting SLURM_NPROCS, SLURM_NTASKS and SLURM_TASKS_PER_NODE when they
are set (what Slurm 22.05's scontrol writes, checked against it), and says how to read
them (Slurm's ``_update_job_size``). The node agents write the same lines for every
run of the job (``$CORRAL_RESIZE_FILE``, ``nodeagent/resizes.py``).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def lines(job: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The sh and csh lines for ``job`` (a JobInfo as a dict), as Slurm writes them:
    only for the variables ``environ`` has."""
    from corral.hostlist import expand  # here: only a resize needs it

    nodes = job["nodes"]
    count = len(expand(nodes)) if nodes else 0
    cpus = _per_node(list(job["cpus_per_node"]))
    values = (
        ("SLURM_NODELIST", f'"{nodes}"'),
        ("SLURM_JOB_NODELIST", f'"{nodes}"'),
        ("SLURM_NNODES", str(count)),
        ("SLURM_JOB_NUM_NODES", str(count)),
        ("SLURM_JOB_CPUS_PER_NODE", f'"{cpus}"'),
    )
    sh, csh = [], []
    for name, value in values:
        if name in environ:
            sh.append(f"export {name}={value}")
            csh.append(f"setenv {name} {value}")
    for name in ("SLURM_NPROCS", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE"):
        if name in environ:  # the task counts of the old size, as Slurm 22.05 unsets them
            sh.append(f"unset {name}")
            csh.append(f"unsetenv {name}")
    return sh, csh


def write(job_id: int, job: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """Write both scripts in the current directory; the lines to print (OSError if a
    file cannot be made, which scontrol reports as Slurm's does)."""
    sh, csh = lines(job, environ)
    names = (f"slurm_job_{job_id}_resize.csh", f"slurm_job_{job_id}_resize.sh")
    for name, body in zip(names, (csh, sh), strict=True):
        if os.path.lexists(name):
            os.unlink(name)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
        with os.fdopen(fd, "w") as out:
            out.write("".join(line + "\n" for line in body))
        os.chmod(name, 0o700)
    return [
        "To reset Slurm environment variables, execute",
        f"  For bash or sh shells:  . ./{names[1]}",
        f"  For csh shells:         source ./{names[0]}",
    ]


def _per_node(values: list[int]) -> str:
    """A count per node as Slurm writes it: ``[2, 2, 1]`` -> ``2(x2),1`` (the
    controller's ``jobenv.run_length``, which the clients do not import)."""
    from itertools import groupby

    runs = [(value, len(list(same))) for value, same in groupby(values)]
    return ",".join(f"{value}(x{count})" if count > 1 else str(value) for value, count in runs)
