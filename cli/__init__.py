"""Slurm-compatible client commands. They own nothing: each parses options as
Slurm does, calls the controller through ``corral.client`` and prints what
Slurm prints. ``boundary`` is the one place errors become ``prog: error: ...``.
"""

#: What other modules may import: each command (bin/ and the ``corral`` entry point),
#: ``options`` (how each option is honoured, for restd's job fields) and ``sacct``'s
#: record shapes (restd's accounting answers in them).
__all__ = [
    "corral",
    "failure",  # restd reports sbatch's GPU option checks (cli.sbatch.gpuopts) in their words
    "halt",  # corral sim reads sacctmgr dump files (cli.sacctmgr.file), whose refusals are Halts
    "options",
    "sacct",
    "sacctmgr",
    "salloc",
    "sattach",
    "sbatch",
    "sbcast",
    "scancel",
    "scontrol",
    "scrontab",
    "sdiag",
    "sinfo",
    "sprio",
    "squeue",
    "sreport",
    "srun",
    "sshare",
    "sstat",
    "strigger",
]
