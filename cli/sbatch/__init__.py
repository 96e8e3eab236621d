"""sbatch: submit a batch script, with Slurm's options, output and exit statuses.

``submission`` runs the command: options, then the script, then the request,
in Slurm's order. It builds on ``options`` (the option table and the SBATCH_*
variables), ``script`` (reading and checking the script, its #SBATCH
directives), ``settings`` (each option's value, in Slurm's precedence),
``spec`` (the JobSpec the controller receives) and ``environment``
(``--export``). salloc and srun outside a job reuse ``settings`` and
``spec``, so this module imports nothing until ``main`` runs: they pay only
for the modules they use.
"""


def main() -> None:
    """The ``sbatch`` client script (``bin/sbatch``)."""
    from cli import boundary
    from cli.sbatch.submission import sbatch

    boundary.run("sbatch", sbatch)
