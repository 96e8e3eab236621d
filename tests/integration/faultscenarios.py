"""The fault scenarios of issue 16 (point 7), each on a real cluster it starts and stops.

Every scenario takes a ``make`` that builds an unstarted cluster (the
integration tests' ``Cluster`` in pytest's directory, or the benchmark's
``BenchCluster``), runs a workload of jobs that mark their own runs
(``faultkit.MARK_SCRIPT``), breaks something while it runs, and returns an
``Outcome``: what it tried, what was acknowledged, lost, duplicated or ended in
the wrong state, and its timings. Sizes are parameters: the benchmark runs the
issue's sizes, CI small ones. Nothing here asserts; the callers do. The
containment scenario is in ``faultcontainment.py``.
"""

from __future__ import annotations

import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from corral import errors
from corral.errors import SlurmError
from tests.databases import fresh_database
from tests.integration.cluster import Cluster
from tests.integration.faultkit import (
    MakeCluster,
    Outcome,
    PassSampler,
    Submitter,
    audit,
    fill,
    mark_script,
    marks_of,
    namespace,
    node_states,
    restart_mariadb,
    scenario,
    small_disk,
    spec,
    states,
    timed,
    wait_final,
)

#: Job ids per accounting query: SQLite refuses an expression tree deeper than 1,000.
CHUNK = 400

#: A node that stops answering is DOWN after this (short, so a scenario stays short).
SILENT = ("SlurmdTimeout=4", "KillWait=1")


@contextmanager
def started(c: Cluster) -> Iterator[Path]:
    """Start ``c`` and yield its jobs' working directory; stop it on every path."""
    try:
        c.start()
        work = c.dir / "work"
        work.mkdir(exist_ok=True)
        yield work
    finally:
        c.stop()


def until(predicate: Callable[[], bool], timeout: float) -> float | None:
    """Seconds until ``predicate`` held, or None if it did not within ``timeout``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        try:
            if predicate():
                return round(time.monotonic() - began, 3)
        except SlurmError:
            pass  # the controller is busy or restarting: ask again
        time.sleep(0.1)
    return None


def readdress(c: Cluster, controller: str, node: str) -> None:
    """Rewrite ``c``'s slurm.conf: the address the controller listens on and the one
    its nodes are reached at (the configuration writer's are 127.0.0.1)."""
    text = Path(c.conf).read_text()
    text = re.sub(r"(SlurmctldHost=[^(]+)\(127\.0\.0\.1\)", rf"\1({controller})", text)
    Path(c.conf).write_text(text.replace("NodeAddr=127.0.0.1", f"NodeAddr={node}"))


def nodes_for(jobs: int) -> int:
    """Nodes enough to run ``jobs`` one-CPU jobs at once: an emulated node has the
    machine's CPUs, and one configured with more is drained for the shortfall."""
    return max(1, -(-jobs // (os.cpu_count() or 1)))


# ---------------------------------------------------------------- the controller killed


@scenario("controller_kill")
def controller_kill(out: Outcome, make: MakeCluster, jobs: int, kills: int, seed: int = 16) -> None:
    """SIGKILL the controller at ``kills`` random points of a workload of ``jobs``
    jobs (a point counts acknowledged submissions and jobs ended), restart it each
    time at once; every acknowledged job must run once and complete."""
    out.tried = {"jobs": jobs, "kills": kills, "seed": seed}
    points = sorted(random.Random(seed).sample(range(1, 2 * jobs), kills))
    c = make(nodes=4, settings=("KillWait=2",))
    with started(c) as work:
        marks = work / "marks"
        script = mark_script(marks)
        sub = Submitter(c.socket, (spec(work, script) for _ in range(jobs)))
        began = time.monotonic()
        sub.start()
        kills_done: list[dict[str, Any]] = []

        def progress() -> int:
            ended = marks.read_bytes().count(b"end ") if marks.exists() else 0
            return len(sub.acked) + ended

        for point in points:
            if until(lambda p=point: progress() >= p, 300) is None:  # type: ignore[misc]
                out.failures.append(f"the workload stalled before point {point}")
                break
            at = round(time.monotonic() - began, 2)
            c.kill("controller", signal.SIGKILL)
            recovery = timed(c.start_controller)
            kills_done.append({"at_s": at, "point": point, "recovery_s": recovery})
        sub.join()
        out.count(sub)
        audit(c, out, dict.fromkeys(sub.acked, "COMPLETED"), marks, 120 + jobs / 10)
        unacked = set(states(c)) - set(sub.acked)
        out.tried["kill_points"] = kills_done
        out.notes.append(f"{len(unacked)} job(s) kept whose acknowledgement a kill cut off")
        recoveries = [k["recovery_s"] for k in kills_done]
        out.timings = {
            "elapsed_s": round(time.monotonic() - began, 2),
            "recovery_s_median": statistics.median(recoveries) if recoveries else None,
            "recovery_s_max": max(recoveries, default=None),
        }


# ---------------------------------------------------------------- a node cut off, an agent stopped


def _cut_off(
    c: Cluster,
    out: Outcome,
    work: Path,
    jobs: int,
    cut: Callable[[], None],
    heal: Callable[[], None],
) -> None:
    """``jobs`` jobs on the nodes of one agent, half of them requeueable; ``cut`` silences the
    node until the controller has it DOWN, then ``heal``. A requeued job must run
    again and complete, the others end NODE_FAIL, and the runs the node kept while
    cut off must be ended once it is back, before any job's next run starts."""
    marks = work / "marks-cut"
    script = mark_script(marks, first=600, again=1)
    expected: dict[int, str] = {}
    for n in range(jobs):
        job = int(c.client.call("Submit", {"spec": spec(work, script, n % 2 == 0)})["job_id"])
        expected[job] = "COMPLETED" if n % 2 == 0 else "NODE_FAIL"
    out.submitted += jobs
    out.acknowledged += jobs
    if until(lambda: len(marks_of(marks)[0]) == jobs, 30) is None:
        out.failures.append("the jobs did not all start before the cut")
    cut_at = time.monotonic()
    try:
        cut()
        down = until(lambda: all(s.startswith("DOWN") for s in node_states(c)), 60)
        out.timings["node_down_after_s"] = down
        if down is None:
            out.failures.append("the cut-off node was never set DOWN")
        handled = until(lambda: all(states(c)[j] != "RUNNING" for j in expected), 30)
        out.tried["states_while_cut"] = {str(j): s for j, s in states(c).items() if j in expected}
        if handled is None:
            out.failures.append("the cut-off node's jobs were still RUNNING")
        out.tried["cut_s"] = round(time.monotonic() - cut_at, 2)
    finally:
        heal()
    healed = time.monotonic()

    def stale() -> set[int]:
        return {j for j in expected if c.job_processes(j, restarts=0)}

    while (left := stale()) and time.monotonic() - healed < 60:
        starts, _ = marks_of(marks)
        # A job whose next run started while its cut-off run lives ran twice at once.
        out.duplicated.extend(j for j in left if any(s[0] == j and s[1] > 0 for s in starts))
        time.sleep(0.2)
    if left:
        out.failures.append(f"runs cut off were still alive 60 s after the heal: {sorted(left)}")
    else:
        out.timings["stale_runs_ended_after_heal_s"] = round(time.monotonic() - healed, 2)
    audit(c, out, expected, marks, 60)
    restarts = {int(j["job_id"]): int(j["restarts"]) for j in c.jobs()}
    for job, want in expected.items():
        if want == "COMPLETED" and restarts.get(job) != 1:
            out.wrong.setdefault(job, f"requeued {restarts.get(job)} times, expected 1")


@scenario("netns_cut")
def netns_cut(out: Outcome, make: MakeCluster, jobs: int = 2) -> None:
    """The node's agent in its own network namespace, cut off by taking its link
    down past SlurmdTimeout, then healed (needs root and ``ip``)."""
    out.tried = {"jobs": jobs, "settings": list(SILENT)}
    with namespace() as ns:
        nodes = nodes_for(jobs)
        c = make(nodes=nodes, settings=SILENT, tls=False)
        readdress(c, ns.host_addr, ns.ns_addr)
        out.tried["controller_addr"], out.tried["node_addr"] = ns.host_addr, ns.ns_addr
        try:
            c.start_controller()
            names = f"node[1-{nodes}]" if nodes > 1 else "node1"
            with open(c.logs / "nodeagent.log", "ab") as log:
                c.agent = subprocess.Popen(
                    ns.exec(sys.executable, "-m", "nodeagent.main", "-f", c.conf, "--nodes", names),
                    stdout=log,
                    stderr=log,
                    env=c.env,
                    cwd=c.dir,
                    start_new_session=True,
                )
            c.wait_for(c.all_nodes_up, 30, "the nodes in the namespace did not register")
            work = c.dir / "work"
            work.mkdir()
            _cut_off(c, out, work, jobs, ns.cut, ns.heal)
        finally:
            c.stop()


@scenario("agent_stop")
def agent_stop(out: Outcome, make: MakeCluster, jobs: int = 2, brief: float = 2) -> None:
    """The agent SIGSTOPped and continued: first for ``brief`` seconds (under
    SlurmdTimeout: every job completes, run once), then past SlurmdTimeout (as a
    node cut off: requeued or NODE_FAIL)."""
    out.tried = {"jobs": jobs, "brief_stop_s": brief}
    c = make(nodes=nodes_for(jobs), settings=SILENT)
    with started(c) as work:
        marks = work / "marks-brief"
        script = mark_script(marks, first=brief + 2)
        ids = [
            int(c.client.call("Submit", {"spec": spec(work, script)})["job_id"])
            for _ in range(jobs)
        ]
        out.submitted += jobs
        out.acknowledged += jobs
        if until(lambda: len(marks_of(marks)[0]) == jobs, 30) is None:
            out.failures.append("the jobs did not all start before the brief stop")
        c.kill("agent", signal.SIGSTOP)
        time.sleep(brief)
        c.kill("agent", signal.SIGCONT)
        audit(c, out, dict.fromkeys(ids, "COMPLETED"), marks, 60)
        _cut_off(
            c,
            out,
            work,
            jobs,
            lambda: c.kill("agent", signal.SIGSTOP),
            lambda: c.kill("agent", signal.SIGCONT),
        )


# ---------------------------------------------------------------- accounting restarted


@scenario("dbd_restart")
def dbd_restart(out: Outcome, make: MakeCluster, jobs: int, pause: float = 0.02) -> None:
    """corral-dbd stopped and started (SIGTERM), MariaDB restarted, corral-dbd
    killed (SIGKILL) and started, each at a quarter more of a workload of ``jobs``;
    every job must complete once and be recorded exactly once in accounting."""
    out.tried = {"jobs": jobs, "events": []}
    with fresh_database("mariadb", Path(tempfile.gettempdir())) as url:
        c = make(nodes=2, settings=("KillWait=2",), accounting=True, database=url)
        with started(c) as work:
            marks = work / "marks"
            script = mark_script(marks, first=0.2)
            sub = Submitter(c.socket, (spec(work, script) for _ in range(jobs)), pause=pause)
            began = time.monotonic()
            sub.start()

            def dbd(sig: int) -> None:
                c.kill("dbd", sig)
                c.start_dbd()

            events: list[tuple[str, Callable[[], object]]] = [
                ("corral-dbd SIGTERM, started", lambda: dbd(signal.SIGTERM)),
                ("MariaDB restarted", restart_mariadb),
                ("corral-dbd SIGKILL, started", lambda: dbd(signal.SIGKILL)),
            ]
            for n, (what, act) in enumerate(events, 1):
                until(lambda n=n: len(sub.acked) >= jobs * n // 4, 300)  # type: ignore[misc]
                at = round(time.monotonic() - began, 2)
                out.tried["events"].append({"what": what, "at_s": at, "took_s": timed(act)})
            sub.join()
            out.count(sub)
            audit(c, out, dict.fromkeys(sub.acked, "COMPLETED"), marks, 120 + jobs / 10)
            recorded = until(lambda: _accounted(c, sub.acked, out, final=False), 120)
            out.timings["accounting_complete_after_s"] = recorded
            _accounted(c, sub.acked, out, final=True)
            out.timings["elapsed_s"] = round(time.monotonic() - began, 2)


def _records(c: Cluster, ids: list[int]) -> list[dict[str, Any]]:
    """The finished accounting records of ``ids`` (sacct's query, in chunks)."""
    got: list[dict[str, Any]] = []
    for first in range(0, len(ids), CHUNK):
        chunk = [str(j) for j in ids[first : first + CHUNK]]
        reply = c.client.call("History", {"filter": {"job_ids": chunk}})
        got.extend(j for j in reply["jobs"] if j["end_time"])
    return got


def _accounted(c: Cluster, ids: list[int], out: Outcome, *, final: bool) -> bool:
    """Whether every job of ``ids`` has exactly one finished record; with ``final``,
    what is missing or doubled goes into ``out``'s failures."""
    got = Counter(int(j["job_id"]) for j in _records(c, ids))
    missing = [j for j in ids if got[j] == 0]
    doubled = [j for j in ids if got[j] > 1]
    if final and (missing or doubled):
        out.failures.append(
            f"accounting: {len(missing)} job(s) without a record {missing[:20]}, "
            f"{len(doubled)} recorded more than once {doubled[:20]}"
        )
    return not missing and not doubled


# ---------------------------------------------------------------- the state disk filled


@scenario("disk_full")
def disk_full(
    out: Outcome, make: MakeCluster, jobs: int, full: float = 5, size: str = "24m"
) -> None:
    """StateSaveLocation on a small tmpfs, filled a third of the way into a workload
    of ``jobs`` submissions and freed ``full`` seconds after the first refusal;
    the controller is then killed and restarted: every job it acknowledged must
    be there, completed once (needs root, to mount)."""
    out.tried = {"jobs": jobs, "full_s": full, "disk": size}
    with small_disk(size) as disk:
        c = make(nodes=2, settings=("KillWait=2",))
        (c.dir / "state").symlink_to(disk)
        with started(c) as work:
            marks = work / "marks"
            script = mark_script(marks, first=0.5)
            sub = Submitter(c.socket, (spec(work, script) for _ in range(jobs)), pause=0.01)
            began = time.monotonic()
            sub.start()
            until(lambda: len(sub.acked) >= jobs // 3, 300)
            filler = fill(disk)
            out.tried["filled_at_s"] = round(time.monotonic() - began, 2)
            refused = until(lambda: sub.refused[errors.ESLURM_WRITING_TO_FILE] > 0, 60)
            out.timings["first_refusal_after_fill_s"] = refused
            if refused is None:
                out.failures.append("a full state disk never refused a submission")
            time.sleep(full)
            acked = len(sub.acked)
            filler.unlink()
            out.timings["accepting_after_free_s"] = until(lambda: len(sub.acked) > acked, 60)
            sub.join()
            out.count(sub)
            wait_final(c, sub.acked, 120 + jobs / 10)
            c.kill("controller", signal.SIGKILL)
            out.timings["restart_s"] = timed(c.start_controller)
            audit(c, out, dict.fromkeys(sub.acked, "COMPLETED"), marks, 60)
            out.timings["elapsed_s"] = round(time.monotonic() - began, 2)


# ---------------------------------------------------------------- a flood at MaxJobCount


@scenario("submit_flood")
def submit_flood(
    out: Outcome, make: MakeCluster, submissions: int, clients: int, max_jobs: int
) -> None:
    """``submissions`` jobs from ``clients`` parallel clients against MaxJobCount=
    ``max_jobs`` (finished jobs leave after MinJobAge=2): each submission retried
    until accepted; every accepted job must run once and be recorded COMPLETED
    in accounting; the scheduling pass time sampled throughout."""
    out.tried = {"submissions": submissions, "clients": clients, "max_job_count": max_jobs}
    settings = (f"MaxJobCount={max_jobs}", "MinJobAge=2", "KillWait=2")
    c = make(nodes=4, settings=settings, accounting=True)
    with started(c) as work:
        marks = work / "marks"
        job = spec(work, mark_script(marks), std_out="/dev/null")
        shares = [submissions // clients + (n < submissions % clients) for n in range(clients)]
        subs = [Submitter(c.socket, (job for _ in range(k)), give_up=3600) for k in shares]
        sampler = PassSampler(c.socket)
        began = time.monotonic()
        sampler.start()
        for sub in subs:
            sub.start()
        for sub in subs:
            sub.join()
        out.timings["submit_phase_s"] = round(time.monotonic() - began, 2)
        acked = [j for sub in subs for j in sub.acked]
        for sub in subs:
            out.count(sub)
        others = set(out.refused) - {errors.EAGAIN}
        if others:
            out.failures.append(f"refused with codes other than EAGAIN: {sorted(others)}")

        def all_ended() -> bool:
            return len({j for j, _ in marks_of(marks)[1]}) >= len(set(acked))

        out.timings["all_ended_after_s"] = until(all_ended, 600)
        out.timings["main_pass"] = sampler.figures()
        until(lambda: _accounted(c, acked, out, final=False), 300)
        _flood_audit(c, out, acked, marks)
        out.timings["elapsed_s"] = round(time.monotonic() - began, 2)


def _flood_audit(c: Cluster, out: Outcome, acked: list[int], marks: Path) -> None:
    """Lost: acknowledged, and neither in the controller nor in accounting; wrong:
    an accounting state other than COMPLETED; duplicated: from the marks."""
    known = states(c)
    finals = {int(j["job_id"]): str(j["state"]) for j in _records(c, acked)}
    starts, ends = marks_of(marks)
    ended = Counter(job for (job, _), n in ends.items() for _ in range(n))
    for job in acked:
        if job not in finals and job not in known:
            out.lost.append(job)
            continue
        if ended[job] > 1 or any(starts[(job, r)] > 1 for r in (0, 1)):
            out.duplicated.append(job)
        state = finals.get(job, known.get(job, ""))
        if state != "COMPLETED":
            out.wrong[job] = f"{state or 'no final record'}, expected COMPLETED"
    if len(set(acked)) != len(acked):
        out.failures.append("one job id was acknowledged to two submissions")


#: Every scenario by name, for the benchmark's selection.
SCENARIOS = (
    "controller_kill",
    "netns_cut",
    "agent_stop",
    "dbd_restart",
    "disk_full",
    "submit_flood",
    "containment",
)
