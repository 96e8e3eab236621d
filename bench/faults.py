"""The fault suite of issue 16 (point 7) at its full sizes, with figures.

Each scenario (``tests/integration/faultscenarios.py``, shared with the CI tests
in ``tests/integration/test_fault_suite.py`` at small sizes) starts its own
cluster, runs a workload whose jobs mark their own runs, breaks something, and
reports what it tried, what was acknowledged, lost, duplicated and left in a
wrong final state, and its timings. The script prints one JSON object and exits
1 when any scenario lost, duplicated or got wrong anything, or failed otherwise.
Scenarios that cut a network namespace, fill a tmpfs or restart MariaDB need root.

    python bench/faults.py [--quick] [--keep] [--seed N] [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _harness
from bench._harness import BenchCluster, compile_checkout, log, machine
from tests.integration import faultscenarios as scenarios
from tests.integration.cluster import Cluster
from tests.integration.faultcontainment import containment
from tests.integration.faultkit import Outcome


def make(**options: Any) -> Cluster:
    return BenchCluster(**options)


def plan(quick: bool, seed: int) -> dict[str, Callable[[], Outcome]]:
    """Each scenario at the issue's size, or at a smoke check's with ``quick``."""
    s = scenarios
    return {
        "controller_kill": lambda: s.controller_kill(
            make, jobs=200 if quick else 2000, kills=5 if quick else 20, seed=seed
        ),
        "netns_cut": lambda: s.netns_cut(make, jobs=2 if quick else 4),
        "agent_stop": lambda: s.agent_stop(make, jobs=2 if quick else 4),
        "dbd_restart": lambda: s.dbd_restart(make, jobs=200 if quick else 1000),
        "disk_full": lambda: s.disk_full(make, jobs=150 if quick else 600),
        "submit_flood": lambda: s.submit_flood(
            make,
            submissions=2000 if quick else 50000,
            clients=16,
            max_jobs=500 if quick else 20000,
        ),
        "containment": lambda: containment(make),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="SCENARIO", help=", ".join(scenarios.SCENARIOS))
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke check")
    parser.add_argument("--keep", action="store_true", help="keep each cluster's directory")
    parser.add_argument("--seed", type=int, default=16, help="where the controller is killed")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in scenarios.SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}: choose from {list(scenarios.SCENARIOS)}")
    _harness.KEEP = args.keep
    compile_checkout()
    started = [round(x, 2) for x in os.getloadavg()]
    runs = plan(args.quick, args.seed)
    results: dict[str, dict[str, Any]] = {}
    for name in args.names or scenarios.SCENARIOS:
        log(f"{name}: start")
        began = time.monotonic()
        outcome = runs[name]()
        results[name] = {**outcome.as_dict(), "wall_s": round(time.monotonic() - began, 1)}
        log(
            f"{name}: {'ok' if outcome.ok else 'NOT OK'}: acknowledged {outcome.acknowledged}, "
            f"lost {len(outcome.lost)}, duplicated {len(outcome.duplicated)}, "
            f"wrong {len(outcome.wrong)}, failures {outcome.failures}"
        )
    every = all(r["ok"] for r in results.values())
    out = {
        "benchmark": "faults",
        **machine(),
        "quick": args.quick,
        "loadavg_start": started,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "ok": every,
        "scenarios": results,
    }
    print(json.dumps(out, indent=2))
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
