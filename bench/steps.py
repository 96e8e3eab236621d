"""Job steps: srun's latency inside an allocation, and a submitit job array end to end.

Each run starts a fresh 4-node cluster and takes an allocation of the four
nodes with ``salloc`` (left holding it with ``sleep``); srun then runs from
this process with ``SLURM_JOB_ID`` set, as inside the allocation, and each
sample is srun's wall time, process start to exit:

* ``srun -N1 -n1 true`` (Slurm 22.05 here: 27.5 ms);
* ``srun -N4 -n8 true`` (Slurm: 145 ms);
* ``srun -N4 -n64 -O true`` (64 tasks over 8 CPUs: ``-O`` lets tasks share them);
* ``srun -N4 -n16 -O true`` and the same step with ``--multi-prog`` of a 1,000-line
  file (a line per task, ``true %t``, and 984 comment lines): what reading, checking,
  sending and resolving the file adds to a step.

Then submitit's ``map_array`` of N trivial functions (500; 50 with --quick) on
the same cluster: from the call until every result is back.

    python bench/steps.py [--quick] [--runs N]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    BenchCluster,
    CommandFailed,
    arguments,
    compile_checkout,
    each_run,
    failed,
    figure,
    log,
    python_baseline,
    report,
    run_ms,
    tls_passes,
)

SLURM = {"srun_one_ms": 27.5, "srun_eight_ms": 145.0}
SAMPLES = 20  # srun runs per figure and cluster
STEPS = {
    "srun_1_task_1_node": ("-N1", "-n1", "true"),
    "srun_8_tasks_4_nodes": ("-N4", "-n8", "true"),
    "srun_64_tasks_4_nodes": ("-N4", "-n64", "-O", "true"),
    "srun_16_tasks_4_nodes": ("-N4", "-n16", "-O", "true"),
    "srun_multi_prog_1000_lines": ("-N4", "-n16", "-O", "--multi-prog", "multi.conf"),
}
MULTI_PROG_LINES = 1000


def _multi_prog_file(directory: Path) -> None:
    """multi.conf: a line per task of 16, the rest comments, 1,000 lines in all."""
    lines = [f"{task} true %t" for task in range(16)]
    lines += [f"# comment line {n}" for n in range(MULTI_PROG_LINES - len(lines))]
    (directory / "multi.conf").write_text("\n".join(lines) + "\n")


def _allocation(cluster: BenchCluster) -> tuple[subprocess.Popen[bytes], int]:
    """salloc holding the four nodes, and its job id."""
    holder = subprocess.Popen(
        cluster.command("salloc", "-N4", "-n8", "sleep", "3600"),
        env=cluster.env,
        cwd=cluster.dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = [j for j in cluster.jobs() if j["state"] == "RUNNING"]
        if running:
            return holder, int(running[0]["job_id"])
        time.sleep(0.05)
    holder.kill()
    raise CommandFailed("salloc got no allocation within 60 s")


def srun_run(samples: int) -> dict[str, list[float]]:
    with BenchCluster(nodes=4) as cluster:
        holder, job_id = _allocation(cluster)
        _multi_prog_file(Path(cluster.dir))
        env = {**cluster.env, "SLURM_JOB_ID": str(job_id)}
        try:
            out: dict[str, list[float]] = {name: [] for name in STEPS}
            for _ in range(samples):  # round-robin, so a slow moment hits every figure
                for name, args in STEPS.items():
                    out[name].append(run_ms(cluster.command("srun", *args), env, cluster.dir))
        finally:
            holder.terminate()
            holder.wait(timeout=30)
        for name, values in out.items():
            log(f"  {name}: median {sorted(values)[len(values) // 2]:.1f} ms")
        return out


def _square(x: int) -> int:
    return x * x


def submitit_run(tasks: int) -> float:
    import logging

    import submitit

    # submitit logs to stdout, where this script's JSON goes: keep it to errors, on stderr.
    logger = logging.getLogger("submitit")
    logger.setLevel(logging.ERROR)
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(sys.stderr)

    with BenchCluster(nodes=4) as cluster:
        saved = {k: os.environ.get(k) for k in ("PATH", "SLURM_CONF")}
        os.environ.update(PATH=cluster.env["PATH"], SLURM_CONF=cluster.conf)
        try:
            folder = cluster.dir / "submitit" / "%j"
            executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
            executor.update_parameters(timeout_min=10, slurm_array_parallelism=tasks)
            began = time.perf_counter()
            jobs = executor.map_array(_square, range(tasks))
            results = [job.result() for job in jobs]
            elapsed = time.perf_counter() - began
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        if results != [x * x for x in range(tasks)]:
            raise CommandFailed("submitit returned wrong results")
        log(f"  submitit map_array of {tasks}: {elapsed:.1f} s")
        return elapsed


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1, tls=True)
    compile_checkout()
    samples = 5 if args.quick else SAMPLES
    tasks = 50 if args.quick else 500
    baseline = python_baseline(10 if args.quick else 20)

    def measured() -> dict[str, dict[str, Any]]:
        """Every figure, from clusters with TLS as ``--tls`` says."""
        figures: dict[str, dict[str, Any]] = {}
        targets = {
            "srun_1_task_1_node": (f"<= {SLURM['srun_one_ms']}", SLURM["srun_one_ms"]),
            "srun_8_tasks_4_nodes": (f"<= {SLURM['srun_eight_ms']}", SLURM["srun_eight_ms"]),
            "srun_64_tasks_4_nodes": (None, None),
            "srun_16_tasks_4_nodes": (None, None),
            "srun_multi_prog_1000_lines": (None, None),
        }
        try:
            runs = each_run(
                args.runs, "srun in an allocation of 4 nodes", lambda _: srun_run(samples)
            )
        except (CommandFailed, OSError, subprocess.SubprocessError) as exc:
            log(f"failed: {exc}")
            for name, (target, slurm) in targets.items():
                figures[name] = failed("ms", target, slurm, str(exc)[:2000])
        else:
            for name, (target, slurm) in targets.items():
                values = [v for run in runs for v in run[name]]
                figures[name] = figure(values, "ms", target=target, slurm=slurm, digits=1)
        try:
            import submitit  # noqa: F401
        except ImportError:
            figures["submitit_map_array"] = failed("s", None, None, "submitit is not installed")
        else:
            try:
                seconds = each_run(
                    args.runs, f"submitit map_array of {tasks}", lambda _: submitit_run(tasks)
                )
            except (CommandFailed, OSError, RuntimeError) as exc:
                log(f"failed: {exc}")
                figures["submitit_map_array"] = failed("s", None, None, str(exc)[:2000])
            else:
                figures["submitit_map_array"] = figure(
                    seconds, "s", tasks=tasks, note="map_array call until every result is back"
                )
        return figures

    figures = tls_passes(args, measured)
    report("steps", args, baseline, figures, nodes=4, samples_per_run=samples)


if __name__ == "__main__":
    main()
