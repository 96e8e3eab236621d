"""sreport: usage reports from the accounting rollups, as Slurm 24.11's sreport.

``session`` runs the command (options, report words, one report or
interactive mode) and ``layout`` prints a report in Slurm's layout. Like
the other commands' packages, this module imports nothing until ``main``
runs.
"""


def main() -> None:
    """The ``sreport`` client script (``bin/sreport``)."""
    from cli import boundary
    from cli.sreport.session import PROG, sreport

    boundary.run(PROG, sreport)
