"""What every test run shares: the check that the run leaves no process behind.

Tests start daemons, supervisors and jobs in their temporary directories; a
test that forgets one leaves it running after the suite, holding CPUs and
ports, and in CI the runner waits on it. So once the last fixture is torn down
(``pytest_sessionfinish``, run last), every process that still names the
run's base temporary directory (in its working directory, command line or
environment, ``SLURM_CONF`` among them) fails the run: each is listed, then
ended so that nothing waits on it. pytest here runs in one process (no xdist),
so this runs once, at the very end; were xdist added, it belongs to the
controlling process only (the one without ``workerinput``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import processes
from cli.processes import Process

#: How long a leftover has after SIGTERM before SIGKILL.
LEFTOVER_GRACE_S = 2.0

_roots: set[Path] = set()


@pytest.fixture(autouse=True, scope="session")
def _basetemp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Note the run's base temporary directory, for the check at the end."""
    _roots.add(tmp_path_factory.getbasetemp())


def leftovers(root: Path) -> list[Process]:
    """Live processes (not this one nor its ancestors) that name ``root``."""

    def names_root(process: Process) -> bool:
        found = [process.cwd(), *process.argv, *process.environ().values()]
        return processes.mentions(found, str(root))

    return processes.scan(names_root)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return
    found = [p for root in sorted(_roots) for p in leftovers(root)]
    if not found:
        return
    lines = [f"{len(found)} process(es) outlived the tests that started them (now ended):"]
    lines += [f"  {p.describe()}" for p in found]
    survivors = processes.end(found, LEFTOVER_GRACE_S)
    lines += [f"  could not be ended: {p.describe()}" for p in survivors]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        print("\n".join(lines))
    else:
        reporter.write_sep("=", "processes left behind", red=True)
        for line in lines:
            reporter.write_line(line, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
