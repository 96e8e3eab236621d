"""bench/mpi.py's cases beside real Slurm 22.05 on this machine: the same srun lines,
Corral's and Slurm's figures side by side.

Slurm's side is Debian's slurm-wlm (22.05) with munge, set up under a temporary
directory and torn down after each run, nothing of the machine's own /etc/slurm or
/etc/munge used: one ``munged`` with its own key and socket, ``slurmctld`` and four
``slurmd -N nodeN`` on 127.0.0.1 (distinct ports), each started in the foreground by
this script and stopped by its pid. The configuration is what Corral's ``corral up``
gives its four nodes (the machine's CPUs on each, one partition), with
``MpiDefault=pmi2``, ``ProctrackType=proctrack/pgid``, ``TaskPlugin=task/none``,
``SelectType=select/cons_tres``, no accounting and no job completion log. Both sides
take ``salloc -N4 -n8 sleep`` and time, from this process with ``SLURM_JOB_ID`` set:

* ``srun -N4 -n16 -O --mpi=pmi2 ./allreduce`` (bench/mpi.py's MPICH program);
* ``srun -N4 -n16 -O true``;
* ``srun -N4 -n1000 -O --multi-prog FILE``, a file of 1,000 lines ``I echo %t``.

Runs alternate: a Slurm cluster, then a Corral cluster, ``--runs`` times, so that a
busy moment of the shared machine is not all on one side. Each figure is the median
of every sample of its side; ``corral_over_slurm`` is the ratio of the medians
(below 1: Corral faster). Needs root (slurmd runs tasks as the submitting user and
munged's key must be its own), slurm-wlm, munge and mpich.

    python bench/realslurm.py [--quick] [--runs N] [--keep] [--slurm-only]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import mpi
from bench._harness import (
    BenchCluster,
    CommandFailed,
    arguments,
    failed,
    figure,
    log,
    python_baseline,
    report,
)

SBIN = Path("/usr/sbin")
#: Slurm's clients by their path: with a Corral venv first on PATH, ``srun`` is Corral's.
BIN = Path("/usr/bin")
NODES = 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SlurmCluster:
    """munged, slurmctld and ``NODES`` slurmd under one temporary directory: ``start``,
    then ``stop`` (always: it ends whatever was started, by pid, and removes the
    directory unless ``keep``)."""

    def __init__(self, keep: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="realslurm-"))
        self.keep = keep
        self.conf = self.dir / "slurm.conf"
        self.socket = self.dir / "munge.socket"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_"))} | {
            "SLURM_CONF": str(self.conf)
        }
        self.daemons: list[subprocess.Popen[bytes]] = []

    def command(self, name: str, *args: str) -> list[str]:
        return [str(BIN / name), *args]

    def _spawn(self, name: str, *args: str) -> None:
        log_file = open(self.dir / f"{name}.out", "ab")  # noqa: SIM115 - the daemon's
        with log_file:
            self.daemons.append(
                subprocess.Popen(
                    [*args],
                    env=self.env,
                    cwd=self.dir,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def _write_config(self) -> None:
        cpus = os.cpu_count() or 1
        memory = 1024
        lines = [
            "ClusterName=realslurm",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.socket}",
            f"StateSaveLocation={self.dir}/state",
            f"SlurmdSpoolDir={self.dir}/spool/%n",
            f"SlurmctldPidFile={self.dir}/slurmctld.pid",
            f"SlurmdPidFile={self.dir}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.dir}/slurmctld.log",
            f"SlurmdLogFile={self.dir}/slurmd-%n.log",
            f"PlugStackConfig={self.dir}/plugstack.conf",
            "MpiDefault=pmi2",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "ReturnToService=2",
            "SlurmdTimeout=30",
            "KillWait=5",
            "MinJobAge=300",
            *(
                f"NodeName=node{i} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 "
                f"Port={_free_port()} CPUs={cpus} RealMemory={memory}"
                for i in range(1, NODES + 1)
            ),
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
        self.conf.write_text("\n".join(lines))
        (self.dir / "plugstack.conf").write_text("")
        for sub in ("state", "spool"):
            (self.dir / sub).mkdir()

    def start(self) -> None:
        for binary in ("slurmctld", "slurmd", "munged"):
            if not (SBIN / binary).exists():
                raise CommandFailed(f"{SBIN / binary} is missing (apt-get install slurm-wlm munge)")
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn(
            "munged",
            str(SBIN / "munged"),
            "-F",
            "--force",
            f"--key-file={key}",
            f"--socket={self.socket}",
            f"--pid-file={self.dir / 'munged.pid'}",
            f"--log-file={self.dir / 'munged.log'}",
            f"--seed-file={self.dir / 'munged.seed'}",
        )
        self._wait(self.socket.exists, 10, "munged did not open its socket")
        self._write_config()
        self._spawn("slurmctld", str(SBIN / "slurmctld"), "-D", "-i", "-f", str(self.conf))
        self._wait(self._answers, 30, "slurmctld did not answer")
        for i in range(1, NODES + 1):
            self._spawn(
                f"slurmd-node{i}",
                str(SBIN / "slurmd"),
                "-D",
                "-N",
                f"node{i}",
                "-f",
                str(self.conf),
            )
        self._wait(self._idle, 60, "the slurmd did not all register")

    def _wait(self, ready: Any, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for daemon in self.daemons:
                if daemon.poll() is not None:
                    raise CommandFailed(
                        f"{daemon.args[0]} exited {daemon.returncode}: {self.logs()}"
                    )
            if ready():
                return
            time.sleep(0.1)
        raise CommandFailed(f"{what}: {self.logs()}")

    def logs(self) -> str:
        tails = []
        for path in sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("*.out")):
            text = path.read_text(errors="replace").strip()
            if text:
                tails.append(f"--- {path.name}\n{text[-800:]}")
        return "\n".join(tails)[-4000:]

    def _answers(self) -> bool:
        got = subprocess.run(
            self.command("scontrol", "ping"),
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        return "UP" in got.stdout

    def _idle(self) -> bool:
        got = subprocess.run(
            self.command("sinfo", "-h", "-N", "-o", "%T"),
            env=self.env,
            capture_output=True,
            text=True,
        )
        states = got.stdout.split()
        return len(states) == NODES and all(s == "idle" for s in states)

    def jobs(self) -> list[dict[str, str]]:
        got = subprocess.run(
            self.command("squeue", "-h", "-o", "%i %T"),
            env=self.env,
            capture_output=True,
            text=True,
        )
        out = []
        for line in got.stdout.splitlines():
            job_id, _, state = line.partition(" ")
            out.append({"job_id": job_id, "state": state})
        return out

    def stop(self) -> None:
        """Every daemon started here, last first, by pid: SIGTERM, then SIGKILL."""
        for daemon in reversed(self.daemons):
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
                try:
                    daemon.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(daemon.pid, signal.SIGKILL)
                    daemon.wait(timeout=10)
        self.daemons.clear()
        if self.keep:
            log(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def slurm_run(samples: int, keep: bool) -> tuple[dict[str, list[float]], str]:
    """One Slurm cluster: bench/mpi.py's cases with real srun, and srun's version."""
    cluster = SlurmCluster(keep)
    try:  # stop() also ends what a start that failed half way left running
        cluster.start()
        version = subprocess.run(
            cluster.command("srun", "--version"),
            env=cluster.env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return mpi.measure(cluster, samples, hydra=False), version
    finally:
        cluster.stop()


def corral_run(samples: int) -> dict[str, list[float]]:
    """One Corral cluster: bench/mpi.py's cases (without its mpiexec.hydra figure)."""
    with BenchCluster(nodes=NODES) as cluster:
        return mpi.measure(cluster, samples, hydra=False)


def _options() -> argparse.Namespace:
    extra = "--slurm-only"
    slurm_only = extra in sys.argv
    if slurm_only:
        sys.argv.remove(extra)
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1)
    args.slurm_only = slurm_only
    return args


def main() -> None:
    args = _options()
    if os.getuid() != 0:
        raise SystemExit("bench/realslurm.py: error: run it as root (munged, slurmd)")
    samples = 3 if args.quick else mpi.SAMPLES
    baseline = python_baseline(10 if args.quick else 20)
    cases = (mpi.MPI, mpi.TRUE, mpi.MULTI_PROG)
    slurm: list[dict[str, list[float]]] = []
    corral: list[dict[str, list[float]]] = []
    figures: dict[str, dict[str, Any]] = {}
    version = ""
    try:
        for run in range(args.runs):  # in turns: a busy moment lands on both sides
            log(f"Slurm 22.05: run {run + 1}/{args.runs}")
            figures_of_run, version = slurm_run(samples, args.keep)
            slurm.append(figures_of_run)
            if not args.slurm_only:
                log(f"Corral: run {run + 1}/{args.runs}")
                corral.append(corral_run(samples))
    except (CommandFailed, OSError, subprocess.SubprocessError) as exc:
        log(f"failed: {exc}")
        for name in cases:
            figures[name] = failed("ms", None, None, str(exc)[:2000])
    else:
        for name in cases:
            theirs = figure([v for r in slurm for v in r[name]], "ms", digits=1)
            if args.slurm_only:
                figures[name] = {**theirs, "note": f"Slurm 22.05: {mpi.NOTES[name]}"}
                continue
            ours = figure(
                [v for r in corral for v in r[name]],
                "ms",
                target=f"<= {theirs['value']}",
                slurm=theirs["value"],
                note=mpi.NOTES[name],
                digits=1,
            )
            ours["slurm_min"], ours["slurm_max"] = theirs["min"], theirs["max"]
            ours["corral_over_slurm"] = round(ours["value"] / theirs["value"], 2)
            figures[name] = ours
    report(
        "realslurm",
        args,
        baseline,
        figures,
        slurm=version,
        nodes=NODES,
        ranks=mpi.RANKS,
        multi_prog_lines=mpi.MULTI_PROG_TASKS,
        samples_per_run=samples,
    )


if __name__ == "__main__":
    main()
