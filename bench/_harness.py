"""What every benchmark shares: a throw-away cluster, the API, timing and the report.

Each benchmark script starts its own clusters through the integration tests'
``Cluster`` (``corral up``'s config writer, 127.0.0.1, a temporary directory),
measures, stops them and prints one JSON object on stdout. Progress goes to
stderr. Nothing here asserts a target: figures are reported next to the
target and to Slurm's figure, and ``met`` says which side they fall on.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cli import shutdown  # noqa: E402
from corral import auth  # noqa: E402
from corral.config import load  # noqa: E402
from tests.integration.cluster import Cluster, command  # noqa: E402

#: Slurm 22.05 on the same 2-core machine with 4 emulated nodes (from the issue).
SLURM = {
    "sbatch_ms": 3.5,
    "squeue_empty_ms": 3.2,
    "squeue_10k_ms": 62.0,
    "sbatch_submissions_per_s": 262.0,
    "sbatch_8_submitters_per_s": 502.0,
    "array_1000_s": 0.004,
    "jobs_per_s": 4.3,  # 10 jobs/s tuned
    "memory_10k_mib": 55.0,
    "restart_10k_s": 0.19,
}

#: Keep the clusters' directories (``--keep``), for reading their logs.
KEEP = False

#: A trivial job as sbatch --wrap writes it.
WRAP_SCRIPT = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\ntrue\n"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- arguments and report


def arguments(
    description: str,
    runs: int,
    quick_runs: int,
    *,
    tls: bool = False,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The common options; ``tls``: the script measures through ``tls_passes`` (``--tls``);
    ``options``: adds the script's own."""
    parser = argparse.ArgumentParser(description=description)
    if options is not None:
        options(parser)
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke check: fewer jobs and {quick_runs} run(s) instead of {runs}",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"clusters per figure (default {runs}, {quick_runs} with --quick)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep each cluster's directory (config, state, logs) and print it",
    )
    if tls:
        parser.add_argument(
            "--tls",
            choices=("on", "off", "both"),
            default="both",
            help="internal traffic over TLS (on: corral up's default), plaintext (off), or "
            "every figure both ways, plaintext first, with TLS's cost beside it (both, default)",
        )
    args = parser.parse_args()
    global KEEP
    KEEP = args.keep
    if args.runs is None:
        args.runs = quick_runs if args.quick else runs
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    args.loadavg_start = [round(x, 2) for x in os.getloadavg()]
    compile_checkout()
    return args


def compile_checkout() -> None:
    """Byte-compile the checkout's packages, as ``pip install`` does.

    Without it a client whose ``__pycache__`` is missing or older than its
    source compiles on every start (always so under PYTHONDONTWRITEBYTECODE),
    and the figures time the compiler instead of the command.
    """
    import compileall

    for package in ("cli", "corral", "controller", "nodeagent"):
        if (ROOT / package).is_dir():
            compileall.compile_dir(str(ROOT / package), quiet=1)


def machine() -> dict[str, Any]:
    return {
        "machine": (
            subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip()
            if shutil.which("uname")
            else " ".join(platform.uname())
        ),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _commit(),
    }


def _commit() -> str | None:
    """The checkout's commit, with "+changes" when the work tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        # --no-optional-locks: never take the index lock from under someone's commit.
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(ROOT), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def report(
    benchmark: str,
    args: argparse.Namespace,
    baseline: Baseline,
    figures: dict[str, dict[str, Any]],
    **extra: Any,
) -> None:
    """Print the one JSON object (load averages: 1, 5 and 15 minutes, at start and end)."""
    out = {
        "benchmark": benchmark,
        **machine(),
        "loadavg_start": args.loadavg_start,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "runs": args.runs,
        "quick": args.quick,
        **baseline.fields(),
        **extra,
        "figures": figures,
    }
    print(json.dumps(out, indent=2))


def _met(value: float, target: str | None) -> bool | None:
    if not target:
        return None
    op, _, number = target.partition(" ")
    limit = float(number)
    return {"<": value < limit, "<=": value <= limit, ">": value > limit, ">=": value >= limit}[op]


def figure(
    samples: Sequence[float],
    unit: str,
    target: str | None = None,
    slurm: float | None = None,
    note: str | None = None,
    digits: int = 3,
    **extra: Any,
) -> dict[str, Any]:
    """The median of ``samples`` with its spread, target and Slurm's figure.

    ``target`` is "OP NUMBER" in ``unit`` (e.g. ">= 1000"); ``met`` compares the
    median with it.
    """
    value = statistics.median(samples)
    out: dict[str, Any] = {
        "value": round(value, digits),
        "unit": unit,
        "target": target,
        "slurm": slurm,
        "min": round(min(samples), digits),
        "max": round(max(samples), digits),
        "samples": len(samples),
        "met": _met(value, target),
    }
    out.update(extra)
    if note:
        out["note"] = note
    return out


def failed(unit: str, target: str | None, slurm: float | None, error: str) -> dict[str, Any]:
    """A figure that could not be measured, and why."""
    return {
        "value": None,
        "unit": unit,
        "target": target,
        "slurm": slurm,
        "met": None,
        "error": error,
    }


# ---------------------------------------------------------------- processes


class CommandFailed(RuntimeError):
    pass


def client_missing(name: str) -> str | None:
    """Why the client command ``name`` cannot run, or None when it can."""
    if command(name)[0] != sys.executable:
        return None
    if importlib.util.find_spec(f"cli.{name}") is None:
        return f"{name} is not available: no console script and no module cli/{name}.py"
    return None


def timed(
    args: Sequence[str], env: dict[str, str], cwd: Path, timeout: float = 120
) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """Run one process: its wall time and CPU time (user + system) in ms, and its result
    (``timeout`` seconds at most: subprocess.TimeoutExpired past it).

    The CPU time comes from RUSAGE_CHILDREN around the call, so it is the
    command's own as long as no other child ends meanwhile (the daemons run
    on). It moves much less than the wall time when the machine is busy.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    result = subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, timeout=timeout)
    wall = (time.perf_counter() - began) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu, result


def run_ms(args: Sequence[str], env: dict[str, str], cwd: Path, check: bool = True) -> float:
    """Wall time of one process in ms (stdout and stderr read through pipes)."""
    wall, _, result = timed(args, env, cwd)
    if check and result.returncode != 0:
        raise CommandFailed(
            f"{' '.join(args[-6:])} exited {result.returncode}: "
            f"{result.stderr.decode(errors='replace').strip()[-500:]}"
        )
    return wall


class Baseline:
    """``python -c pass`` with this interpreter: the floor of any Python client."""

    def __init__(self, samples: int) -> None:
        env = dict(os.environ)
        args = [sys.executable, "-c", "pass"]
        timed(args, env, ROOT)  # warm the page cache
        runs = [timed(args, env, ROOT) for _ in range(samples)]
        self.wall = [r[0] for r in runs]
        self.cpu = [r[1] for r in runs]

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu)

    def fields(self) -> dict[str, Any]:
        return {
            "baseline_python_ms": round(self.wall_ms, 2),
            "baseline_python_ms_min": round(min(self.wall), 2),
            "baseline_python_ms_max": round(max(self.wall), 2),
            "baseline_python_cpu_ms": round(self.cpu_ms, 2),
            "baseline_python_samples": len(self.wall),
        }


def python_baseline(samples: int = 20) -> Baseline:
    log(f"baseline: python -c pass ({sys.executable}), {samples} times")
    return Baseline(samples)


# ---------------------------------------------------------------- the cluster


#: Whether the clusters BenchCluster starts use TLS (``tls_passes`` sets it for each pass).
TLS = True


def tls_passes(
    args: argparse.Namespace, measured: Callable[[], dict[str, dict[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """The figures of ``measured()`` on clusters with TLS as ``--tls`` says.

    With ``both``, each of the ``--runs`` runs measures every figure twice, once
    plaintext and once with TLS, in alternating order (plaintext first on even runs),
    so that a machine growing busier or quieter does not favour one side; each figure
    is then the TLS one with the plaintext one beside it (``plaintext``) and what TLS
    costs in percent of it (``tls_cost_pct``: time added, or rate lost).
    """
    global TLS
    if args.tls != "both":
        TLS = args.tls == "on"
        return {name: {**fig, "tls": TLS} for name, fig in measured().items()}
    runs, args.runs = args.runs, 1
    passes: dict[bool, list[dict[str, dict[str, Any]]]] = {False: [], True: []}
    try:
        for run in range(runs):
            for TLS in (False, True) if run % 2 == 0 else (True, False):
                log(f"run {run + 1}/{runs}: {'TLS' if TLS else 'plaintext (TLSType=tls/none)'}")
                passes[TLS].append(measured())
    finally:
        args.runs = runs
    plain, secure = _merged(passes[False]), _merged(passes[True])
    return {name: beside(fig, plain.get(name)) for name, fig in secure.items()}


def _merged(passes: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """One figure per name from one-run passes: the median of their values, the extremes."""
    out: dict[str, dict[str, Any]] = {}
    for name, first in passes[0].items():
        figs = [p[name] for p in passes if name in p]
        values = [f["value"] for f in figs if f.get("value") is not None]
        if not values:
            out[name] = first
            continue
        out[name] = {
            **first,
            "value": round(statistics.median(values), 4),
            "min": min(f.get("min", f["value"]) for f in figs if f.get("value") is not None),
            "max": max(f.get("max", f["value"]) for f in figs if f.get("value") is not None),
            "samples": sum(f.get("samples", 1) for f in figs if f.get("value") is not None),
            "runs": len(values),
        }
        if first.get("target"):
            out[name]["met"] = _met(out[name]["value"], first["target"])
    return out


def beside(secure: dict[str, Any], plain: dict[str, Any] | None) -> dict[str, Any]:
    """The TLS figure ``secure`` with the plaintext one beside it and what TLS costs."""
    out = {**secure, "tls": True}
    if plain is None:
        return out
    out["plaintext"] = {k: plain.get(k) for k in ("value", "min", "max", "samples", "error")}
    before, after = plain.get("value"), secure.get("value")
    if before and after is not None:
        out["tls_cost_pct"] = worse_pct(str(secure.get("unit", "")), before, after)
    return out


def worse_pct(unit: str, before: float, after: float) -> float:
    """What ``after`` loses against ``before`` (non-zero) in percent, by ``unit``: time
    added, or rate lost for a rate (``.../s``); negative where it gained."""
    lost = (before - after) if unit.endswith("/s") else (after - before)
    return round(100 * lost / before, 1)


class BenchCluster(Cluster):
    """The integration harness's cluster in its own temporary directory.

    ``stop`` ends the daemons this cluster started and any job supervisors
    running from its spool, by pid, then removes the directory.
    """

    def __init__(
        self,
        nodes: int = 4,
        settings: Iterable[str] = (),
        tls: bool | None = None,
        **options: Any,
    ) -> None:
        """``options``: the rest of ``Cluster``'s (``accounting``, ``database``)."""
        directory = Path(tempfile.mkdtemp(prefix="corral-bench-"))
        tls = TLS if tls is None else tls
        super().__init__(directory, nodes=nodes, settings=tuple(settings), tls=tls, **options)
        path = os.environ.get("PYTHONPATH")
        self.env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
        self._api: Api | None = None

    def __enter__(self) -> BenchCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def command(self, name: str, *args: str) -> list[str]:
        return [*command(name), *args]

    def time_command(self, name: str, *args: str) -> float:
        return run_ms(self.command(name, *args), self.env, self.dir)

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api(self.conf)
        return self._api

    def controller_memory_kib(self) -> dict[str, int]:
        assert self.controller is not None
        out = {}
        with open(f"/proc/{self.controller.pid}/status") as status:
            for line in status:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(rest.split()[0])
        return out

    def spawn_controller(self) -> None:
        """Start the controller without waiting for it to answer."""
        self.controller = self._spawn("controller.main")

    def _supervisors(self) -> list[int]:
        mine = str(self.dir)
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as src:
                    args = src.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if "nodeagent.supervisor" in args and any(mine in a for a in args):
                pids.append(int(entry))
        return pids

    def stop(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None
        for proc in (*self.restds, self.agent, self.controller, self.dbd):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in (*self.restds, self.agent, self.controller, self.dbd):
            if proc is not None:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for pid in self._supervisors():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        # A job's own processes (a long `sleep`) outlive its supervisor: end them as
        # `corral down` does, while the directory they are known by is still there.
        shutdown.sweep(self.conf, shutdown.Report())
        if KEEP:
            log(f"  kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


class Api:
    """The gRPC Controller service, authenticated with the cluster key."""

    def __init__(self, conf_path: str) -> None:
        from corral import grpctls
        from corral.wire import corral_pb2, corral_pb2_grpc

        self.pb = corral_pb2
        conf = load(conf_path)
        _, addr = conf.controller_host
        self.target = f"{addr}:{conf.slurmctld_port}"
        self.tls = conf.tls
        self.key = auth.Keys.derive(auth.load_key(auth.key_path(conf_path))).credential
        self.receiver = auth.controller_receiver(conf.cluster_name)
        # A listing of 100,000 jobs is some 20 MB: past gRPC's default 4 MB answer.
        self.channel = grpctls.sync_channel(
            self.target, conf.tls, options=[("grpc.max_receive_message_length", 256 << 20)]
        )
        self.stub = corral_pb2_grpc.ControllerStub(self.channel)

    def signed(self, method: str, request: Any) -> Any:
        """``request`` with a credential for this one call (each call needs its own)."""
        from corral import credentials

        return credentials.stamp(
            request,
            self.key,
            uid=os.getuid(),
            gid=os.getgid(),
            method=credentials.controller_method(method),
            receiver=self.receiver,
        )

    def spec(self, work_dir: Path, hold: bool, **fields: Any) -> Any:
        return self.pb.JobSpec(
            name="wrap",
            script=WRAP_SCRIPT,
            work_dir=str(work_dir),
            hold=hold,
            environment=dict(os.environ),
            submit_dir=str(work_dir),
            **fields,
        )

    def submit(self, spec: Any) -> int:
        request = self.signed("Submit", self.pb.SubmitRequest(spec=spec))
        return int(self.stub.Submit(request).job_id)

    def jobs(self, **filter_fields: Any) -> list[Any]:
        request = self.signed(
            "Jobs", self.pb.JobsRequest(filter=self.pb.JobFilter(**filter_fields))
        )
        return list(self.stub.Jobs(request).jobs)

    def close(self) -> None:
        self.channel.close()


def framed_spec(work_dir: Path, hold: bool) -> dict[str, Any]:
    """The same job as ``Api.spec`` for the framed client (dict messages)."""
    return {
        "name": "wrap",
        "script": WRAP_SCRIPT,
        "work_dir": str(work_dir),
        "hold": hold,
        "environment": dict(os.environ),
        "submit_dir": str(work_dir),
    }


def count_jobs(cluster: Cluster, states: list[str] | None = None) -> int:
    flt: dict[str, Any] = {"states": states} if states else {}
    return len(cluster.client.call("Jobs", {"filter": flt, "expand_arrays": True})["jobs"])


def each_run(runs: int, what: str, body: Callable[[int], Any]) -> list[Any]:
    out = []
    for run in range(runs):
        log(f"{what}: run {run + 1}/{runs}")
        out.append(body(run))
    return out
