"""Trace replay speed: ``corral sim`` on real workloads, and what the core costs in it.

No cluster is started: ``corral sim`` replays a Standard Workload Format
trace through the pure scheduling core on a simulated clock. Each run is the
whole command as a user types it (``python -m cli.corral sim TRACE --json
--quiet``: start-up, reading the gzip file, the replay, the summary), timed
from outside; its JSON gives the core's share. The extra figure replays the
first jobs of CTC-SP2 in process twice: the sim's way, and the controller's
way (every pending job and every node shown to the core at every event),
which is what the sim's shortcuts save.

Every replay of ``REPLAYS`` (fcfs, easy and conservative on both traces: seconds
each) and the comparison run by default; ``--only`` picks replays by name:

    python bench/sim.py [--quick] [--runs N]   (traces: $CORRAL_TRACES, else ../shared/traces)
    python bench/sim.py --only ctc_sp2_easy,ctc_sp2_conservative --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    ROOT,
    CommandFailed,
    arguments,
    each_run,
    failed,
    figure,
    log,
    python_baseline,
    report,
    timed,
)

TRACES = Path(os.environ.get("CORRAL_TRACES", ROOT.parent / "shared" / "traces"))

CTC_SP2, HPC2N = "CTC-SP2-1996-3.1-cln.swf.gz", "HPC2N-2002-2.2-cln.swf.gz"

#: name -> (file, policy, target for the whole command in seconds): issue 21's targets
REPLAYS = {
    "ctc_sp2_fcfs": (CTC_SP2, "fcfs", "< 60"),
    "hpc2n_fcfs": (HPC2N, "fcfs", None),
    "ctc_sp2_easy": (CTC_SP2, "easy", "< 60"),
    "ctc_sp2_conservative": (CTC_SP2, "conservative", "< 60"),
    "hpc2n_easy": (HPC2N, "easy", "< 120"),
    "hpc2n_conservative": (HPC2N, "conservative", "< 120"),
}

#: Room for a slow machine: a whole backfill replay takes seconds on a quiet one, but
#: the Python core's took minutes (conservative on HPC2N: 8).
REPLAY_TIMEOUT_S = 3600

#: What runs without ``--only``.
DEFAULT = tuple(REPLAYS)

#: Jobs of CTC-SP2 replayed both ways for the extra figure (the whole queue
#: grows to thousands later in the trace, and the controller's way with it).
COMPARE_JOBS = 5000


def one_replay(path: Path, policy: str) -> dict[str, Any]:
    args = [sys.executable, "-m", "cli.corral", "sim", str(path), "--json", "--quiet"]
    args += ["--policy", policy]
    wall_ms, cpu_ms, result = timed(args, dict(os.environ), ROOT, timeout=REPLAY_TIMEOUT_S)
    if result.returncode != 0:
        raise CommandFailed(
            f"corral sim {path.name} exited {result.returncode}: "
            f"{result.stderr.decode(errors='replace').strip()[-500:]}"
        )
    out: dict[str, Any] = json.loads(result.stdout)
    log(
        f"  {path.name} ({policy}): {wall_ms / 1000:.2f} s ({out['jobs']} jobs, "
        f"{out['core_calls']} core calls, {out['core_s']:.2f} s in the core)"
    )
    return {"wall_s": wall_ms / 1000, "cpu_s": cpu_ms / 1000, "out": out}


def compare(path: Path, jobs: int) -> dict[str, Any]:
    """The first ``jobs`` records replayed the sim's way and the controller's way."""
    from controller.sim import cluster_shape, read, replay

    trace = read(str(path), 0, jobs)
    nodes, cpus = cluster_shape(trace.header, None, None)
    fast = replay(trace, nodes, cpus)
    whole = replay(trace, nodes, cpus, whole_queue=True)
    if fast.jobs != whole.jobs:
        raise CommandFailed("the two ways decided differently")
    sides = {}
    for name, result in (("sim", fast), ("whole_queue", whole)):
        sides[name] = {
            "wall_s": round(result.wall_seconds, 3),
            "core_s": round(result.core.seconds, 3),
            "core_calls": result.core.count,
            "pending_jobs_shown": result.core.jobs,
            "us_per_call": round(1e6 * result.core.seconds / max(result.core.count, 1), 1),
        }
        log(f"  first {jobs} jobs, {name}: {sides[name]}")
    return sides


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n for n in text.split(",") if n)
    unknown = [n for n in names if n not in REPLAYS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown replay {', '.join(unknown) or '(none)'} (choose from {', '.join(REPLAYS)})"
        )
    return names


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        type=_names,
        default=None,
        help="comma-separated replays to run instead of the default set (no comparison)",
    )


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1, options=_options)
    baseline = python_baseline(5)
    figures: dict[str, dict[str, Any]] = {}
    for name in args.only or DEFAULT:
        file, policy, target = REPLAYS[name]
        path = TRACES / file
        if not path.exists():
            figures[name] = failed("s", target, None, f"no trace at {path} (set CORRAL_TRACES)")
            continue
        try:

            def body(_: int, p: Path = path, q: str = policy) -> dict[str, Any]:
                return one_replay(p, q)

            runs = each_run(args.runs, f"corral sim {file} --policy {policy}", body)
        except (CommandFailed, OSError, ValueError) as exc:
            log(f"failed: {exc}")
            figures[name] = failed("s", target, None, str(exc)[:2000])
            continue
        last = runs[-1]["out"]
        figures[name] = figure(
            [r["wall_s"] for r in runs],
            "s",
            target=target,
            digits=2,
            cpu_s=round(min(r["cpu_s"] for r in runs), 2),
            jobs=last["jobs"],
            skipped=last["skipped"],
            cluster=f"{last['nodes']} nodes x {last['cpus_per_node']} CPUs",
            core_calls=last["core_calls"],
            core_s=last["core_s"],
            replay_s=last["wall_s"],
            avg_wait_s=last["avg_wait_s"],
            avg_bounded_slowdown=last["avg_bounded_slowdown"],
            utilization=last["utilization"],
            note=f"the whole command: start-up, gzip read, replay ({policy}), summary",
        )
    ctc = TRACES / CTC_SP2
    jobs = COMPARE_JOBS // 5 if args.quick else COMPARE_JOBS
    if ctc.exists() and args.only is None:
        log(f"CTC-SP2, first {jobs} jobs: the sim's way and the controller's way")
        try:
            sides = compare(ctc, jobs)
        except CommandFailed as exc:
            figures["ctc_sp2_whole_queue"] = failed("s", None, None, str(exc))
        else:
            figures["ctc_sp2_whole_queue"] = figure(
                [sides["whole_queue"]["wall_s"]],
                "s",
                digits=2,
                jobs=jobs,
                sim_way=sides["sim"],
                whole_queue=sides["whole_queue"],
                note="extra: every pending job and every node shown to the core at every "
                "event (the controller's way), against the sim's shortcuts; same decisions",
            )
    report("sim", args, baseline, figures, traces=str(TRACES))


if __name__ == "__main__":
    main()
