"""The OOM killer is kept off the daemons and the runs' processes, not off the jobs (issue 16).

Each reads ``/proc/PID/oom_score_adj``: -1000 for the controller, the node
agent, a batch script's supervisor and a step's runner; 0 for the script and
the step's task, which the job's own overrun must be able to end.

The cluster starts with the test's own value raised to 500 (raising needs no
privilege). With CAP_SYS_RESOURCE the daemons lower theirs to -1000; without
it (the root of a container, as on this project's CI machines) they keep the
500 they inherited, and the job's 0 then
shows the reset before exec all the same: a process may lower its value back
to the lowest one a privileged process set, 0 here.
"""

from __future__ import annotations

from pathlib import Path

from corral import oomscore
from tests.privileges import may_lower_oom_score

#: Prints the oom_score_adj of the shell and of its parent (the supervisor or runner).
SHOW = "cat /proc/self/oom_score_adj /proc/$PPID/oom_score_adj"
#: What the test raises its own value to before the daemons inherit it.
RAISED = 500


def _score(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def test_daemons_and_supervisors_are_exempt_and_jobs_are_not(make_cluster) -> None:  # type: ignore[no-untyped-def]
    protected = may_lower_oom_score()
    daemon = oomscore.PROTECTED if protected else RAISED
    c = make_cluster(nodes=1, settings=("KillWait=2",), start=False)
    before = oomscore.current()
    oomscore.write(RAISED)
    try:
        c.start()
    finally:
        oomscore.write(before)
    assert c.controller is not None and c.agent is not None
    assert (_score(c.controller.pid), _score(c.agent.pid)) == (daemon, daemon)
    out = c.dir / "scores.txt"
    path = c.dir / "show.sh"
    path.write_text(f"#!/bin/sh\n{SHOW}\nsrun -n1 sh -c '{SHOW}'\n")
    job_id = c.sbatch("-o", str(out), str(path))
    job = c.wait_done(job_id, 60)
    assert job["state"] == "COMPLETED", out.read_text() if out.exists() else job
    # The batch script, its supervisor; the step's task, its step runner.
    assert out.read_text().split() == ["0", str(daemon), "0", str(daemon)]
