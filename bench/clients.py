"""Client commands on an empty and on a loaded queue; controller memory and restart.

Each run starts a fresh 4-node cluster and then:

1. empty queue: ``squeue`` and ``sinfo`` with no job at all; ``scontrol show
   job <id>`` with one held job (submitted through the framed client and
   cancelled after the sample); ``sbatch --hold --wrap true``, then
   ``scancel <id>`` of the job it submitted, so the queue stays empty;
2. loads the queue with PENDING separate held jobs through the framed client
   (one job each, not an array: squeue folds a pending array into one line);
3. the same five commands again (``scontrol`` shows a job in the middle;
   scancel cancels sbatch's job each time, so PENDING stays exact);
4. controller memory (VmRSS, and VmHWM) from /proc/<pid>/status;
5. SIGTERM to the controller, start it again, and time until ``squeue -h``
   prints PENDING lines; then the same after SIGKILL.

Commands run round-robin, SAMPLES times per run, so drift hits all alike.
Each client figure is the median wall time; ``cpu_ms`` is the median CPU
time (user + system) of the same processes, which a busy machine moves less.

    python bench/clients.py [--quick] [--runs N]
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    SLURM,
    BenchCluster,
    CommandFailed,
    arguments,
    client_missing,
    failed,
    figure,
    framed_spec,
    log,
    python_baseline,
    report,
    timed,
)

SETTINGS = ("MaxJobCount=20000", "MaxArraySize=20001")
RESTART_DEADLINE = 120  # seconds
RETRY_PAUSE = 0.02  # after a failed squeue while the controller starts (spares the CPU)


class Run:
    """One cluster's samples; a command that fails is dropped from the rest of the run."""

    def __init__(self, cluster: BenchCluster, errors: dict[str, str]) -> None:
        self.cluster = cluster
        self.samples: dict[str, list[float]] = {}  # wall ms
        self.cpu: dict[str, list[float]] = {}  # user + system ms
        self.errors = errors
        self.values: dict[str, float] = {}

    def time(self, key: str, name: str, *args: str) -> tuple[float, bytes] | None:
        if key in self.errors:
            return None
        why = client_missing(name)
        if why:
            self.errors[key] = why
            return None
        c = self.cluster
        took, cpu, result = timed(c.command(name, *args), c.env, c.dir)
        if result.returncode != 0:
            self.errors[key] = (
                f"`{name} {' '.join(args)}` exited {result.returncode}: "
                f"{result.stderr.decode(errors='replace').strip()[-800:]}"
            )
            log(f"  {key}: {self.errors[key]}")
            return None
        self.samples.setdefault(key, []).append(took)
        self.cpu.setdefault(key, []).append(cpu)
        return took, result.stdout

    def submit_held(self) -> int:
        reply = self.cluster.client.call("Submit", {"spec": framed_spec(self.cluster.dir, True)})
        return int(reply["job_id"])

    def cancel(self, job_id: int) -> None:
        reply = self.cluster.client.call(
            "Signal", {"filter": {"job_ids": [str(job_id)]}, "signal": 0}
        )
        bad = [r for r in reply["results"] if r["code"]]
        if bad:
            raise CommandFailed(f"cancelling job {job_id}: {bad}")

    def sbatch_scancel(self, sbatch_key: str, scancel_key: str) -> None:
        """Time sbatch, then scancel of the job it submitted (the framed client if need be)."""
        out = self.time(sbatch_key, "sbatch", "--hold", "--wrap", "true")
        if out is None:
            return
        job = int(out[1].split()[-1])
        if self.time(scancel_key, "scancel", str(job)) is None:
            self.cancel(job)

    def scontrol(self, key: str, job_id: int | None = None) -> None:
        if job_id is not None:
            self.time(key, "scontrol", "show", "job", str(job_id))
            return
        job = self.submit_held()
        self.time(key, "scontrol", "show", "job", str(job))
        self.cancel(job)


def squeue_lines(cluster: BenchCluster) -> int | None:
    result = subprocess.run(
        cluster.command("squeue", "-h"),
        env=cluster.env,
        cwd=cluster.dir,
        capture_output=True,
        timeout=120,
    )
    return result.stdout.count(b"\n") if result.returncode == 0 else None


def _exit_status(cluster: BenchCluster) -> str:
    assert cluster.controller is not None
    code = cluster.controller.poll()
    return "still running" if code is None else f"exited with status {code}"


def restart(cluster: BenchCluster, sig: int, expected: int) -> dict[str, float]:
    """Stop the controller with ``sig``, start it, wait for a full squeue."""
    old = cluster.controller
    assert old is not None
    began = time.perf_counter()
    old.send_signal(sig)
    old.wait(timeout=60)
    stopped = time.perf_counter() - began
    began = time.perf_counter()
    cluster.spawn_controller()
    first = None
    while True:
        lines = squeue_lines(cluster)
        now = time.perf_counter() - began
        if lines is not None and first is None:
            first = now
        if lines == expected:
            break
        if now > RESTART_DEADLINE:
            raise CommandFailed(
                f"squeue -h showed {lines} of {expected} lines "
                f"{RESTART_DEADLINE} s after the restart (controller "
                f"{_exit_status(cluster)}); controller log ends:\n"
                f"{cluster.log('controller')[-1500:]}"
            )
        if lines is None:
            time.sleep(RETRY_PAUSE)
    full = time.perf_counter() - began
    assert first is not None
    return {"stop_s": stopped, "first_answer_s": first, "full_squeue_s": full}


def one_run(samples: int, pending: int, errors: dict[str, str]) -> Run:
    with BenchCluster(nodes=4, settings=SETTINGS) as cluster:
        run = Run(cluster, errors)
        log("  empty queue")
        for _ in range(samples):
            run.time("squeue_empty", "squeue")
            run.time("sinfo_empty", "sinfo")
            run.scontrol("scontrol_show_job_empty")
            run.sbatch_scancel("sbatch_empty", "scancel_empty")
        log(f"  submitting {pending} held jobs")
        began = time.perf_counter()
        ids = [run.submit_held() for _ in range(pending)]
        log(f"  submitted in {time.perf_counter() - began:.1f} s")
        lines = squeue_lines(cluster)
        if lines != pending:
            raise CommandFailed(f"squeue -h printed {lines} lines, expected {pending}")
        middle = ids[len(ids) // 2]
        tag = f"{pending}_pending"
        log(f"  {pending} pending")
        for _ in range(samples):
            run.time(f"squeue_{tag}", "squeue")
            run.time(f"sinfo_{tag}", "sinfo")
            run.scontrol(f"scontrol_show_job_{tag}", middle)
            run.sbatch_scancel(f"sbatch_{tag}", f"scancel_{tag}")
        memory = cluster.controller_memory_kib()
        run.values["rss_mib"] = memory["VmRSS"] / 1024
        run.values["hwm_mib"] = memory["VmHWM"] / 1024
        log(f"  controller VmRSS {memory['VmRSS'] / 1024:.1f} MiB; restart after SIGTERM")
        for name, sig in (("sigterm", signal.SIGTERM), ("sigkill", signal.SIGKILL)):
            try:
                times = restart(cluster, sig, pending)
            except (CommandFailed, subprocess.TimeoutExpired) as exc:
                errors[f"restart_{name}"] = str(exc)
                log(f"  restart after {name}: {exc}")
                break
            log(
                f"  {name}: stopped in {times['stop_s']:.2f} s, full squeue "
                f"{times['full_squeue_s']:.2f} s after the start"
            )
            for key, value in times.items():
                run.values[f"{name}_{key}"] = value
            if name == "sigterm":
                after = cluster.controller_memory_kib()
                run.values["rss_after_restart_mib"] = after["VmRSS"] / 1024
    return run


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1)
    samples = 5 if args.quick else 10
    pending = 1000 if args.quick else 10000
    baseline = python_baseline(10 if args.quick else 20)
    errors: dict[str, str] = {}
    runs: list[Run] = []
    for n in range(args.runs):
        log(f"run {n + 1}/{args.runs}")
        try:
            runs.append(one_run(samples, pending, errors))
        except (CommandFailed, AssertionError, OSError) as exc:
            log(f"run {n + 1} failed: {exc}")
            errors.setdefault("run", str(exc)[:2000])
    tag = f"{pending}_pending"
    full = pending == 10000

    def client(key: str, target: str | None, slurm: float | None) -> dict[str, Any]:
        values = [v for r in runs for v in r.samples.get(key, [])]
        if key in errors or not values:
            return failed("ms", target, slurm, errors.get(key) or errors.get("run", "no samples"))
        cpu = statistics.median(v for r in runs for v in r.cpu.get(key, []))
        return figure(
            values,
            "ms",
            target=target,
            slurm=slurm,
            digits=1,
            over_baseline_ms=round(statistics.median(values) - baseline.wall_ms, 1),
            cpu_ms=round(cpu, 1),
        )

    def value(
        key: str,
        unit: str,
        target: str | None,
        slurm: float | None,
        note: str | None = None,
        digits: int = 3,
    ) -> dict[str, Any]:
        values = [r.values[key] for r in runs if key in r.values]
        if not values:
            error = next((v for k, v in errors.items() if key.startswith(k)), None)
            return failed(unit, target, slurm, error or errors.get("run", "not measured"))
        return figure(values, unit, target=target, slurm=slurm, note=note, digits=digits)

    figures = {
        "sbatch_empty": client("sbatch_empty", "< 30", SLURM["sbatch_ms"]),
        "squeue_empty": client("squeue_empty", "< 30", SLURM["squeue_empty_ms"]),
        "sinfo_empty": client("sinfo_empty", "< 30", None),
        "scontrol_show_job_empty": client("scontrol_show_job_empty", "< 30", None),
        "scancel_empty": client("scancel_empty", "< 30", None),
        f"sbatch_{tag}": client(f"sbatch_{tag}", None, None),
        f"squeue_{tag}": client(f"squeue_{tag}", "< 100", SLURM["squeue_10k_ms"] if full else None),
        f"sinfo_{tag}": client(f"sinfo_{tag}", None, None),
        f"scontrol_show_job_{tag}": client(f"scontrol_show_job_{tag}", None, None),
        f"scancel_{tag}": client(f"scancel_{tag}", None, None),
        f"controller_memory_{tag}": value(
            "rss_mib",
            "MiB",
            "< 150",
            SLURM["memory_10k_mib"] if full else None,
            note="VmRSS after the loaded-queue samples",
            digits=1,
        ),
        f"controller_peak_memory_{tag}": value(
            "hwm_mib", "MiB", None, None, note="VmHWM (peak RSS) at the same moment", digits=1
        ),
        f"controller_memory_after_restart_{tag}": value(
            "rss_after_restart_mib",
            "MiB",
            "< 150",
            None,
            note="VmRSS once the restarted controller answers a full squeue",
            digits=1,
        ),
        f"restart_sigterm_{tag}": value(
            "sigterm_full_squeue_s",
            "s",
            "< 2",
            SLURM["restart_10k_s"] if full else None,
            note="from starting the new controller until squeue -h prints every job",
        ),
        f"restart_sigterm_first_answer_{tag}": value(
            "sigterm_first_answer_s",
            "s",
            None,
            None,
            note="from starting the new controller until squeue first succeeds",
        ),
        f"shutdown_sigterm_{tag}": value(
            "sigterm_stop_s", "s", None, None, note="from SIGTERM until the controller exited"
        ),
        f"restart_sigkill_{tag}": value(
            "sigkill_full_squeue_s",
            "s",
            "< 2",
            SLURM["restart_10k_s"] if full else None,
            note="kill -9, then the same as restart_sigterm",
        ),
    }
    report(
        "clients", args, baseline, figures, samples_per_run=samples, pending=pending, errors=errors
    )


if __name__ == "__main__":
    main()
