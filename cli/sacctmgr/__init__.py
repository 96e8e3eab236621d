"""sacctmgr: view and change the accounting database, as Slurm 24.11's sacctmgr does.

``session`` runs the command (options, one command or interactive mode, the
commit prompt); ``words`` parses a command's words, ``fields`` lays out the
tables, ``text`` words the changes before they are committed and ``file``
reads and writes the flat files of ``dump`` and ``load``. Like the other
commands' packages, this module imports nothing until ``main`` runs.
"""


def main() -> None:
    """The ``sacctmgr`` client script (``bin/sacctmgr``)."""
    from cli import boundary
    from cli.sacctmgr.session import PROG, sacctmgr

    boundary.run(PROG, sacctmgr)
