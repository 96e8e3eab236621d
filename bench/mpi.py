"""MPI jobs: srun --mpi=pmi2 of an MPICH program of 16 ranks over 4 nodes, from srun's start
until every rank has passed MPI_Finalize, beside srun of 16 ``true`` tasks and a
1,000-line ``--multi-prog`` step.

Each run starts a fresh 4-node cluster and takes an allocation of the four nodes
with ``salloc -N4 -n8`` (left holding it with ``sleep``); srun runs from this
process with ``SLURM_JOB_ID`` set, as inside the allocation, with ``-O`` (16 tasks
on the 8 CPUs of the allocation), and each sample is srun's wall time:

* ``srun -N4 -n16 -O --mpi=pmi2 ./allreduce``: MPI_Init (PMI-1 over PMI_FD: the
  business cards put, one fence through srun, the gets), MPI_Allreduce of the
  ranks, a line from each rank, MPI_Finalize; every run's sum is checked;
* ``srun -N4 -n16 -O true``: the same step without MPI, the launch's own share;
* ``srun -N4 -n1000 -O --multi-prog multi.conf``: a configuration file of 1,000
  lines ``I echo %t``, one per task (250 on each node); srun's wall time until
  every task's line is back (one run's lines checked first);
* ``mpiexec.hydra -launcher fork -n 16 ./allreduce`` outside Corral: MPICH's own
  launcher on this one host, the cost of MPI itself (16 ranks loading and starting
  UCX on these cores) with no resource manager at all.

The program is tests/integration/mpi_allreduce.c built with Debian's
``mpicc.mpich``. bench/realslurm.py runs the same srun lines (``measure``) on
real Slurm 22.05 beside these.

    python bench/mpi.py [--quick] [--runs N]
"""

from __future__ import annotations

import os
import shutil
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
    each_run,
    failed,
    figure,
    log,
    python_baseline,
    report,
    run_ms,
)
from tests.integration.mpiprog import COMPILERS, SOURCE, ranks

SAMPLES = 10  # srun runs per figure and cluster
RANKS = 16
MULTI_PROG_TASKS = 1000
MPI = "mpi_16_ranks_4_nodes"
TRUE = "srun_16_true_4_nodes"
MULTI_PROG = "multi_prog_1000_lines_4_nodes"
HYDRA = "mpiexec_hydra_16_ranks_one_host"
#: What each figure is.
NOTES = {
    MPI: "srun --mpi=pmi2 until every rank is past MPI_Finalize",
    TRUE: "the same step's launch without MPI",
    MULTI_PROG: "srun -n1000 --multi-prog of 1,000 lines 'I echo %t', every task's line back",
    HYDRA: "MPICH's own launcher on this host, outside Corral: MPI's own cost",
}


def _build(directory: Path) -> Path:
    compiler = shutil.which(COMPILERS["mpich"])
    if compiler is None:
        raise CommandFailed(f"{COMPILERS['mpich']} is not installed (apt-get install mpich)")
    program = directory / "allreduce"
    subprocess.run([compiler, "-O1", "-o", str(program), str(SOURCE)], check=True, timeout=60)
    return program


def _allocation(cluster: Any) -> tuple[subprocess.Popen[bytes], int]:
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


def _multi_prog(directory: Path) -> Path:
    """The --multi-prog file of ``MULTI_PROG_TASKS`` lines, one task each."""
    path = directory / "multi.conf"
    path.write_text("".join(f"{i} echo %t\n" for i in range(MULTI_PROG_TASKS)))
    return path


def _check(cluster: Any, env: dict[str, str], args: tuple[str, ...], good: Any) -> None:
    """One run of ``srun ARGS`` whose output ``good`` must accept."""
    check = subprocess.run(
        cluster.command("srun", *args),
        env=env,
        cwd=cluster.dir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check.returncode != 0 or not good(check.stdout):
        raise CommandFailed(
            f"srun {' '.join(args)} went wrong: {check.stdout}{check.stderr}"[:2000]
        )


def _mpi_good(output: str) -> bool:
    got = ranks(output)
    return sorted(got) == list(range(RANKS)) and {v[:2] for v in got.values()} == {
        (RANKS, sum(range(RANKS)))
    }


def _multi_prog_good(output: str) -> bool:
    return sorted(output.split()) == sorted(str(i) for i in range(MULTI_PROG_TASKS))


def measure(cluster: Any, samples: int, hydra: bool = True) -> dict[str, list[float]]:
    """The cases on a started cluster of 4 nodes (Corral's ``BenchCluster`` or
    bench/realslurm.py's ``SlurmCluster``: ``dir``, ``env``, ``command``, ``jobs``),
    each run checked once, then ``samples`` of each in turns (``hydra``: with
    mpiexec.hydra outside any resource manager in the same turns)."""
    program = _build(cluster.dir)
    config = _multi_prog(cluster.dir)
    holder, job_id = _allocation(cluster)
    env = {**cluster.env, "SLURM_JOB_ID": str(job_id)}
    steps = {
        MPI: ("-N4", f"-n{RANKS}", "-O", "--mpi=pmi2", str(program)),
        TRUE: ("-N4", f"-n{RANKS}", "-O", "true"),
        MULTI_PROG: ("-N4", f"-n{MULTI_PROG_TASKS}", "-O", "--multi-prog", str(config)),
    }
    alone = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_"))}
    mpiexec = ["mpiexec.hydra", "-launcher", "fork", "-n", str(RANKS), str(program)]
    try:
        _check(cluster, env, steps[MPI], _mpi_good)
        _check(cluster, env, steps[MULTI_PROG], _multi_prog_good)
        out: dict[str, list[float]] = {name: [] for name in steps}
        if hydra:
            out[HYDRA] = []
        for _ in range(samples):  # round-robin, so a slow moment hits every figure
            for name, args in steps.items():
                out[name].append(run_ms(cluster.command("srun", *args), env, cluster.dir))
            if hydra:
                out[HYDRA].append(run_ms(mpiexec, alone, cluster.dir))
    finally:  # Slurm's salloc ignores SIGTERM while its command runs: end the job
        subprocess.run(
            cluster.command("scancel", str(job_id)),
            env=cluster.env,
            capture_output=True,
            check=False,
        )
        try:
            holder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait(timeout=10)
    for name, values in out.items():
        log(f"  {name}: median {sorted(values)[len(values) // 2]:.1f} ms")
    return out


def one_run(samples: int) -> dict[str, list[float]]:
    with BenchCluster(nodes=4) as cluster:
        return measure(cluster, samples)


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1)
    samples = 3 if args.quick else SAMPLES
    baseline = python_baseline(10 if args.quick else 20)
    figures: dict[str, dict[str, Any]] = {}
    try:
        runs = each_run(args.runs, "srun in an allocation of 4 nodes", lambda _: one_run(samples))
    except (CommandFailed, OSError, subprocess.SubprocessError) as exc:
        log(f"failed: {exc}")
        for name in NOTES:
            figures[name] = failed("ms", None, None, str(exc)[:2000])
    else:
        for name, note in NOTES.items():
            values = [v for run in runs for v in run[name]]
            figures[name] = figure(values, "ms", note=note, digits=1)
        mpi, plain = figures[MPI], figures[TRUE]
        figures["mpi_over_plain_launch"] = {
            "value": round(mpi["value"] - plain["value"], 1),
            "unit": "ms",
            "note": "what MPI adds: the wire-up and the program, medians' difference",
        }
    report("mpi", args, baseline, figures, nodes=4, ranks=RANKS, samples_per_run=samples)


if __name__ == "__main__":
    main()
