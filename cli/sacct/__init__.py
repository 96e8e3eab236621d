"""sacct: finished and live jobs from the accounting records, as Slurm 24.11's sacct.

``query`` runs the command (options, the History call, the output);
``fields`` is Slurm's field table and layout and ``jsonrecords`` the
``--json`` records. corral-restd builds its ``/slurmdb/`` job records with
``fields`` and ``jsonrecords`` too, so this module imports nothing until
``main`` runs.
"""


def main() -> None:
    """The ``sacct`` client script (``bin/sacct``)."""
    from cli import boundary
    from cli.sacct.query import PROG, sacct

    boundary.run(PROG, sacct)
