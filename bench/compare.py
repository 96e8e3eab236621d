"""Benchmarks at two revisions of Corral, taken in turns on the same machine.

A refactoring must not make a figure worse, and a figure recorded on another
day on a shared VM says little about that: this machine's speed swings by more
than the effect sought. So the base revision is checked out beside the working
tree (a detached git worktree with its wire code and C core built in place) and
each benchmark script runs for both, in alternating order over ``--rounds``
rounds (base first on even rounds), so that a machine growing busier or quieter
favours neither side. The report gives, per figure, the median of each side and
what the working tree loses against the base in percent (``worse_pct``: time
added or rate lost; negative where it gained), and lists every figure worse than
``--max-worse`` percent.

    python bench/compare.py --base 20ca3a9 --script-args=--quick submit steps
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._harness import log, worse_pct  # noqa: E402

SCRIPTS = ("schedule", "submit", "throughput", "clients", "steps", "restd")
#: Scripts run only when named: they need more than Corral (mpi.py: Debian's mpich).
NAMED_ONLY = ("mpi",)
PACKAGES = ("bench", "cli", "controller", "corral", "dbd", "nodeagent", "restd", "tests")


def checkout(revision: str) -> Path:
    """``revision`` in a temporary detached worktree, built as ``pip install`` would."""
    tree = Path(tempfile.mkdtemp(prefix="corral-compare-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), revision],
        check=True,
    )
    # csrc/spawn_build.py: revisions that start tasks from C (older ones have none).
    steps = ["proto/generate.py", "csrc/nodeset_build.py", "csrc/spawn_build.py"]
    for step in steps:
        if (tree / step).exists():
            subprocess.run([sys.executable, step], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    compiled(tree)
    return tree


def compiled(tree: Path) -> None:
    """Byte-compile ``tree``'s Python, as ``pip install`` does. Where
    PYTHONDONTWRITEBYTECODE is set (as on this machine) nothing else writes the
    caches, and every daemon and client would compile its modules at each start:
    a cost no installed Corral pays, and one that grows with the tree's size."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *PACKAGES],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def remove(tree: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
    )
    shutil.rmtree(tree.parent, ignore_errors=True)


def run(tree: Path, script: str, extra: list[str]) -> dict[str, Any]:
    """One run of ``bench/<script>.py`` from ``tree``: its figures."""
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / f"{script}.py"), *extra],
        cwd=tree,
        stdout=subprocess.PIPE,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"compare: {script} at {tree} exited {done.returncode}")
    figures: dict[str, Any] = json.loads(done.stdout)["figures"]
    return figures


def merged(runs: list[dict[str, Any]]) -> dict[str, tuple[str, float]]:
    """Each figure's unit and the median of its values over ``runs``."""
    values: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    for figures in runs:
        for name, fig in figures.items():
            if isinstance(fig, dict) and isinstance(fig.get("value"), int | float):
                values.setdefault(name, []).append(float(fig["value"]))
                units[name] = str(fig.get("unit", ""))
    return {name: (units[name], statistics.median(v)) for name, v in values.items()}


def compare(
    base: list[dict[str, Any]], head: list[dict[str, Any]], max_worse: float
) -> dict[str, Any]:
    before, after = merged(base), merged(head)
    figures: dict[str, dict[str, Any]] = {}
    for name, (unit, value) in after.items():
        if name not in before:
            continue
        figures[name] = {
            "unit": unit,
            "base": round(before[name][1], 4),
            "head": round(value, 4),
            "worse_pct": worse_pct(unit, before[name][1], value) if before[name][1] else None,
        }
    worse = [n for n, f in figures.items() if (f["worse_pct"] or 0) > max_worse]
    return {"figures": figures, "worse": worse}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side (default 2)")
    parser.add_argument("--max-worse", type=float, default=5.0, help="percent (default 5)")
    parser.add_argument("--script-args", default="", help="options for every script")
    parser.add_argument("scripts", nargs="*", default=list(SCRIPTS), help="bench scripts")
    args = parser.parse_args()
    extra = shlex.split(args.script_args)
    unknown = sorted(set(args.scripts) - set(SCRIPTS) - set(NAMED_ONLY))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    head_rev = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    base = checkout(args.base)
    compiled(ROOT)
    report: dict[str, Any] = {"benchmark": "compare", "base": args.base, "head": head_rev}
    try:
        for script in args.scripts:
            sides: dict[Path, list[dict[str, Any]]] = {base: [], ROOT: []}
            for n in range(args.rounds):
                for tree in (base, ROOT) if n % 2 == 0 else (ROOT, base):
                    log(f"{script} round {n + 1}/{args.rounds}: {tree}")
                    sides[tree].append(run(tree, script, extra))
            report[script] = compare(sides[base], sides[ROOT], args.max_worse)
    finally:
        remove(base)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
