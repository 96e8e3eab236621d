"""The containment scenario of the fault suite (issue 16, point 7).

Three jobs try to get out of what they were given, one at a time, on a node
configured for cgroups (ProctrackType=proctrack/cgroup, TaskPlugin=task/cgroup,
cgroup.conf beside slurm.conf): whether anything holds them is the agent's
business (issue 16, points 1-2); this only looks at the outcome, so it reports
honestly whatever the agent does today.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from tests.integration.cluster import Cluster
from tests.integration.faultkit import (
    MakeCluster,
    Outcome,
    node_states,
    scenario,
    spec,
    states,
    wait_final,
)
from tests.integration.faultscenarios import started, until

#: cgroup.conf for the containment scenario (PidsMax is Corral's own key).
CGROUP_CONF = "ConstrainRAMSpace=yes\nConstrainSwapSpace=yes\nPidsMax={pids}\n"
CONTAINED = ("ProctrackType=proctrack/cgroup", "TaskPlugin=task/cgroup", "KillWait=2")


@scenario("containment")
def containment(
    out: Outcome, make: MakeCluster, pids: int = 64, forks: int = 300, mem_mib: int = 64
) -> None:
    """Three jobs that try to get out of what they were given, one at a time: one
    leaves a setsid daemon behind, one forks ``forks`` processes under a pids.max
    of ``pids``, one allocates 8 times its ``--mem``. Each must be held (nothing
    of it alive after its end, never more processes than the limit, OUT_OF_MEMORY),
    and the node must run a plain job afterwards."""
    out.tried = {"pids_max": pids, "forks": forks, "mem_mib": mem_mib}
    c = make(nodes=1, settings=CONTAINED)
    (Path(c.conf).parent / "cgroup.conf").write_text(CGROUP_CONF.format(pids=pids))
    with started(c) as work:
        daemon = work / "daemon.pid"
        escape = (
            "#!/bin/sh\n"
            f"setsid sh -c 'echo $$ > {daemon}; exec sleep 600' </dev/null >/dev/null 2>&1 &\n"
            "sleep 1\n"
        )
        job = _run(c, spec(work, escape))
        _done(c, out, job, "COMPLETED", "setsid daemon")
        pid = int(daemon.read_text()) if daemon.exists() else 0
        if pid and until(lambda: not os.path.exists(f"/proc/{pid}"), 10) is None:
            out.failures.append(f"setsid daemon: pid {pid} outlived its job")
            _end(pid)

        forked = work / "forked"
        bomb = (
            "#!/bin/sh\n"
            f"n=0; while [ $n -lt {forks} ]; do sleep 600 & n=$((n+1)); echo $n > {forked}; done\n"
            "sleep 3\n"
        )
        job = _run(c, spec(work, bomb))
        peak = 0  # seen at once; the script's own count of forks that worked may be higher
        while not _finished(c, job):
            peak = max(peak, len(c.job_processes(job)))
            time.sleep(0.2)
        made = int(forked.read_text()) if forked.exists() else 0
        out.tried["fork_bomb_forks_made"] = made
        out.tried["fork_bomb_peak_processes_seen"] = peak
        if max(peak, made) > pids:
            out.failures.append(f"fork bomb: {max(peak, made)} processes under pids.max {pids}")
        _done(c, out, job, "", "fork bomb")

        hog = f"#!/bin/sh\npython3 -c 'x = b\"x\" * ({8 * mem_mib} << 20)'\n"
        job = _run(c, spec(work, hog, mem_per_node=mem_mib, std_err=str(work / "hog.err")))
        _done(c, out, job, "OUT_OF_MEMORY", "--mem overrun")
        err = (work / "hog.err").read_text() if (work / "hog.err").exists() else ""
        out.tried["mem_overrun_error_file"] = err.strip()[-300:]

        plain = _run(c, spec(work, "#!/bin/sh\ntrue\n"))
        _done(c, out, plain, "COMPLETED", "plain job after")
        out.tried["node_after"] = node_states(c)
        if not all(s.startswith(("IDLE", "MIXED")) for s in node_states(c)):
            out.failures.append(f"node not healthy after: {node_states(c)}")


def _run(c: Cluster, job: dict[str, Any]) -> int:
    return int(c.client.call("Submit", {"spec": job})["job_id"])


def _finished(c: Cluster, job: int) -> bool:
    return wait_final(c, [job], 0.01)


def _done(c: Cluster, out: Outcome, job: int, want: str, what: str) -> None:
    """Count one containment job: its final state (any when ``want`` is empty), and
    nothing of it alive KillWait and a little after its end."""
    out.submitted += 1
    out.acknowledged += 1
    if not wait_final(c, [job], 60):
        out.failures.append(f"{what}: job {job} did not end within 60 s")
    state = states(c).get(job, "")
    out.tried[f"{what} state"] = state
    if want and state != want:
        out.wrong[job] = f"{what}: {state}, expected {want}"
    if until(lambda: not c.job_processes(job), 5) is None:
        left = c.job_processes(job)
        out.failures.append(f"{what}: {len(left)} process(es) of job {job} outlived it")
        for process in left:
            _end(process.pid)


def _end(pid: int) -> None:
    """End a process a job left behind (by its pid: it is this scenario's own)."""
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
