"""``corral``: Corral's own command (version, a whole cluster on one machine, replays,
the systemd units: ``cli/installunits.py``, Ray on an allocation: ``cli/ray/``).

``corral up`` writes a slurm.conf for N emulated nodes on 127.0.0.1, starts
the controller and one node agent serving them all, prints the
``export SLURM_CONF=...`` line and runs until Ctrl-C (or ``corral down``).
With ``--detach`` it returns once the cluster answers; with ``--demo`` it runs
a short workload through the real clients, shows the results and stops.
``corral sim`` replays a workload trace through the scheduling core on a
simulated clock (``controller/sim/``) and prints what the jobs would have seen.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import signal
import socket
import subprocess
import sys
import time

from cli.boundary import UsageError, run
from cli.corral_options import CERT_ISSUE, DOWN, SIM, UP
from cli.options import REQUIRED
from cli.options import parse as parse_options
from corral import __version__

TYPE_CHECKING = False  # typing stays out of a command's start-up
if TYPE_CHECKING:
    from typing import Any

    from controller.sim.powersim import PowerModel
    from controller.sim.replay import Progress

USAGE = """\
Usage: corral up [--nodes N] [--dir DIR] [--detach] [--demo] [--set Key=Value ...]
                 [--database URL | --no-accounting] [--no-restd] [--no-tls]
       corral down [--dir DIR]
       corral cert ca DIR   |   corral cert issue NAME --ca DIR --host H [--host H ...] [--out DIR]
       corral sim TRACE [--nodes N] [--cpus-per-node C] [--policy P[,P...]] [--jobs A:B]
                  [-f slurm.conf [--set Key=Value ...] [--accounts FILE] [--map FILE]]
                  [--sched-params LIST] [--queues FILE --queue-map FILE] [--csv FILE]
                  [--suspend-time S --resume-time R] [--png FILE] [--json] [--quiet]
                  (corral sim --help)
       corral why [--json] JOBID   (why a pending job waits; what would start it sooner)
       corral queues [-p | -P] [-n] [--json]   (each queue's quota, share and holdings now)
       corral install-units [--root DIR] [--bindir DIR] [--user NAME] [--force] [UNIT ...]
                  (the daemons' systemd units into /etc/systemd/system; docs/install.md)
       corral ray [--timeout S] [--ray-args ARGS] [--head-args ARGS] -- COMMAND [ARGS...]
                  (in an allocation: a Ray cluster on its nodes for COMMAND; docs/ray.md)
       corral --version"""

SIM_USAGE = """\
Usage: corral sim TRACE [--nodes N] [--cpus-per-node C] [--policy P[,P...]] [--jobs A:B]
                  [-f slurm.conf [--set Key=Value ...] [--accounts FILE] [--map FILE]]
                  [--sched-params LIST] [--queues FILE --queue-map FILE] [--csv FILE]
                  [--suspend-time S --resume-time R] [--png FILE] [--json] [--quiet]

Replay a Standard Workload Format trace (plain or gzip) through Corral's scheduling core on a
simulated clock, in one partition `batch` of all nodes (with -f, on that slurm.conf's nodes,
partitions and priorities), and print the number of jobs, their average wait, average
bounded slowdown, the utilization and the makespan; with -f, per partition and account its
jobs, mean and p95 wait, mean bounded slowdown, utilization and makespan; with --queues,
per queue its jobs, mean and p95 wait, mean bounded slowdown, utilization, borrowed share,
jobs preempted by reclaim and waiting jobs it reclaimed for.

  --nodes N          nodes (default: the trace header's MaxNodes)
  --cpus-per-node C  CPUs per node (default: MaxProcs / MaxNodes from the header, else 1)
  --policy P         fcfs: Slurm's main scheduler, priority order, the first job that cannot
                     start blocks the rest (default); conservative: with backfill, every
                     waiting job reserves; easy: only the first waiting job reserves.
                     Several, comma-separated (fcfs,easy,conservative): each replays the
                     trace in a process of its own and one table compares them
  -f FILE            replay on this slurm.conf's nodes and partitions, with its
                     SchedulerParameters, PriorityType and PriorityWeight*, and
                     AccountingStorageEnforce (default policy: its SchedulerType's)
  --set Key=Value    a slurm.conf line after -f's (as corral up --set); repeatable
  --accounts FILE    accounts, users, shares and limits from a `sacctmgr dump` file
  --map FILE         trace users and groups to user names, accounts, partitions and QOS,
                     and the QOS (docs/simconfig.md)
  --jobs A:B         replay only job records A to B-1 in file order (0-based, as a Python
                     slice; either end may be left out: 1000:, :5000)
  --sched-params LIST  backfill's SchedulerParameters, as in slurm.conf: bf_window,
                     bf_resolution, bf_max_job_test, bf_max_job_user (Slurm's defaults
                     otherwise; bf_job_part_count_reserve follows --policy); e.g.
                     bf_resolution=1,bf_window=43200 (docs/sim.md)
  --queues FILE      divide the cluster among the queues of this queues.conf, as the
                     controller does (admission, borrowing, reclaim; reclaimed jobs are
                     requeued); they may govern cpu and node (SWF traces have no GPUs)
  --queue-map FILE   each job's account from the trace's user and group numbers, one rule
                     a line: `user=12 account=teama`, `group=3 account=teamb`,
                     `default account=other` (docs/queues.md, CORRAL SIM)
  --suspend-time S   power saving: a node idle S seconds is powered down, and a job given
  --resume-time R    powered-down nodes starts R seconds later (its nodes held meanwhile);
                     the report adds node-hours powered down and the wait added (mean, p95)
                     against the same replay without power saving (docs/sim.md)
  --csv FILE         write one row per job: id,submit,start,end,wait,run,procs,nodes
                     (with --queues, then queue,requeued)
  --png FILE         plot queue length and utilization over time (needs matplotlib:
                     pip install 'corral[plot]')
  --json             print the summary as one JSON object
  --quiet            no progress on stderr (else every 10% of jobs on traces of 10,000+)

A job asks for its requested processors (allocated ones when unknown) as tasks of 1 CPU,
packed onto nodes, and for its requested time (its run time when unknown) as its time limit;
it runs for its run time. Records with no run time or no processors, or with more processors
than the cluster has, are skipped and counted, as are malformed lines (the first is named)."""

SIM_PROGRESS_JOBS = 10_000  # report progress on traces at least this long

DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".corral", "cluster")
START_TIMEOUT = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: slurmrestd's port: corral up's REST gateway takes it where it is free.
REST_PORT = 6820


def _rest_port() -> int:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", REST_PORT))
            return REST_PORT
        except OSError:
            pass
    return _free_port()


def _memory_mib() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 1024


#: The daemons corral up gives certificates (node agents need only the CA: they are clients).
TLS_ROLES = ("ctld", "dbd", "restd")


def write_tls(directory: str, ca_from: str | None = None) -> tuple[list[str], list[str]]:
    """The cluster's TLS material in DIR/tls; its slurm.conf and slurmdbd.conf lines.

    A CA already in DIR/tls (or in ``ca_from``'s, another cluster sharing this one's
    dbd) is kept, so running ``corral up`` again leaves certificates handed out valid;
    the daemons' certificates are issued anew each time.
    """
    from corral import certs

    tls_dir = os.path.join(directory, "tls")
    os.makedirs(tls_dir, mode=0o755, exist_ok=True)
    ca_dir = os.path.join(ca_from, "tls") if ca_from else tls_dir
    ca_cert = os.path.join(ca_dir, "ca_cert.pem")
    ca_key = os.path.join(ca_dir, "ca_key.pem")
    if not (os.path.exists(ca_cert) and os.path.exists(ca_key)):
        certs.create_ca(ca_cert, ca_key)
    names = socket.gethostname()
    hosts = [names.split(".")[0], names, "localhost", "127.0.0.1", "::1"]
    files = {}
    for role in TLS_ROLES:
        cert = os.path.join(tls_dir, f"{role}_cert.pem")
        key = os.path.join(tls_dir, f"{role}_cert_key.pem")
        certs.issue(ca_cert, ca_key, role, hosts, cert, key)
        files[role] = f"{role}_cert_file={cert},{role}_cert_key_file={key}"
    ca = f"ca_cert_file={ca_cert}"
    slurm = ["TLSType=tls/s2n", f"TLSParameters={ca},{files['ctld']},{files['restd']}"]
    dbd = ["TLSType=tls/s2n", f"TLSParameters={ca},{files['dbd']}"]
    return slurm, dbd


def write_config(
    directory: str,
    nodes: int,
    extra: list[str],
    *,
    accounting: bool = False,
    cluster: str = "corral",
    shared_dbd: tuple[int, bytes, str] | None = None,
    tls: bool = True,
) -> str:
    """Write DIR/slurm.conf (and the cluster key) for ``nodes`` emulated nodes.

    With ``accounting``, slurm.conf sends job records to a corral-dbd on
    127.0.0.1, and DIR/slurmdbd.conf configures that dbd (SQLite in
    DIR/accounting.db unless it is started with ``--database``). With
    ``shared_dbd`` (another cluster's dbd port, key and directory), this cluster
    uses that dbd instead and writes none: several clusters, one accounting
    database (and one CA, whose certificates that dbd trusts). With ``tls`` (the
    default) every daemon speaks TLS (``write_tls``); without, the files say
    ``TLSType=tls/none``: plaintext, asked for in so many words.
    """
    from corral import auth

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "slurm.conf")
    host = socket.gethostname().split(".")[0]
    if tls:
        tls_lines, dbd_tls = write_tls(directory, shared_dbd[2] if shared_dbd else None)
    else:
        tls_lines = dbd_tls = ["TLSType=tls/none"]
    cpus = os.cpu_count() or 1
    memory = max(_memory_mib() // max(nodes, 1), 100)
    names = f"node[1-{nodes}]" if nodes > 1 else "node1"
    dbd_port = shared_dbd[0] if shared_dbd else _free_port()
    # The daemons run as whoever runs `corral up`: as SlurmUser, who owns the key.
    owner = [] if os.getuid() == 0 else [f"SlurmUser={pwd.getpwuid(os.getuid()).pw_name}"]
    if shared_dbd:  # the other cluster's key: its dbd trusts this controller too
        key = auth.key_path(path)
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            out.write(shared_dbd[1] + b"\n")
    elif accounting:
        _write(
            os.path.join(directory, "slurmdbd.conf"),
            [
                "# Written by `corral up`: the accounting daemon of its cluster.",
                "DbdAddr=127.0.0.1",
                f"DbdPort={dbd_port}",
                "StorageType=accounting_storage/sqlite",
                f"StorageLoc={directory}/accounting.db",
                *owner,
                *dbd_tls,
                "",
            ],
        )
    lines = [
        "# Written by `corral up`: a whole cluster on one machine.",
        f"ClusterName={cluster}",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"StateSaveLocation={directory}/state",
        f"SlurmdSpoolDir={directory}/spool/%n",
        "SlurmdTimeout=30",
        "ReturnToService=2",
        "KillWait=5",
        "MinJobAge=300",
        "SchedulerParameters=requeue_delay=1",
        *owner,
        *tls_lines,
        *(
            [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=127.0.0.1",
                f"AccountingStoragePort={dbd_port}",
            ]
            if accounting or shared_dbd
            else []
        ),
        *extra,
        f"NodeName={names} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory}",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "",
    ]
    _write(path, lines)
    key = auth.key_path(path)
    if not os.path.exists(key):
        auth.create_key(key)
    return path


def _write(path: str, lines: list[str]) -> None:
    with open(path + ".tmp", "w") as out:
        out.write("\n".join(lines))
    os.replace(path + ".tmp", path)


def restd_env() -> dict[str, str]:
    """What ``corral up`` adds to its restd's environment: as root (the README's demo,
    the tests), slurmrestd's own override of its refusal to run as root, since
    this one-machine cluster runs every daemon as whoever starts it; nothing
    otherwise. The systemd unit runs restd as SlurmUser and sets nothing."""
    if os.getuid() != 0 and os.getgid() != 0:
        return {}
    return {"SLURMRESTD_SECURITY": "disable_user_check"}


def _spawn(args: list[str], log_path: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a daemon in the cluster directory (the log's parent's parent).

    Not in the caller's directory: ``python -m`` puts the working directory
    first on the module path, and in a source checkout that would load the
    daemon from the sources (without the built C extension) instead of the
    installed package.
    """
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen(
        args,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        cwd=os.path.dirname(os.path.dirname(log_path)),
    )


def _wait_listening(host: str, port: int, proc: subprocess.Popen[bytes], name: str) -> None:
    """Until ``proc`` (the daemon ``name``) listens on host:port; UsageError if it does not."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    _stop([proc])
    raise UsageError(f"corral-{name} did not start; see {name}.log in the cluster directory")


def _wait_until_up(conf_path: str, nodes: int, procs: list[subprocess.Popen[bytes]]) -> None:
    from corral.client import Client, socket_path
    from corral.config import load
    from corral.errors import SlurmError

    client = Client(socket_path(load(conf_path).state_save_location), timeout=2)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise UsageError(
                    f"a daemon exited during start-up (status {proc.returncode}); "
                    "see the logs in the cluster directory"
                )
        try:
            reply = client.call("Nodes", {})
            if sum(1 for n in reply["nodes"] if n["state"] != "UNKNOWN") >= nodes:
                return
        except SlurmError:
            pass
        time.sleep(0.1)
    raise UsageError("the cluster did not come up within 30 seconds")


def up(argv: list[str]) -> int:
    nodes, directory, detach, demo, extra = 4, DEFAULT_DIR, False, False, []
    accounting, database, restd, tls = True, None, True, True
    found, positional = parse_options(UP, argv, permute=True)
    if positional:
        raise UsageError(f"unknown argument {positional[0]!r}\n{USAGE}")
    for option, value in found:
        text = value or ""
        if option.key == "nodes":
            nodes = _positive("--nodes", text)
        elif option.key == "dir":
            directory = text
        elif option.key == "detach":
            detach = True
        elif option.key == "demo":
            demo = True
        elif option.key == "set":
            extra.append(text)
        elif option.key == "database":
            database = text
        elif option.key == "no-accounting":
            accounting = False
        elif option.key == "no-restd":
            restd = False
        elif option.key == "no-tls":
            tls = False
    directory = os.path.abspath(directory)
    if _running_pids(directory):
        raise UsageError(
            f"a cluster is already running in {directory} (corral down --dir {directory})"
        )
    if database and not accounting:
        raise UsageError("--database and --no-accounting exclude each other")
    conf = write_config(directory, nodes, extra, accounting=accounting, tls=tls)
    logs = os.path.join(directory, "log")
    os.makedirs(logs, exist_ok=True)
    env = {**os.environ, "SLURM_CONF": conf}
    procs = []
    if accounting:
        dbd_conf = os.path.join(directory, "slurmdbd.conf")
        procs.append(
            _spawn(
                [sys.executable, "-m", "dbd.main", "-f", dbd_conf]
                + (["--database", database] if database else []),
                os.path.join(logs, "dbd.log"),
                env,
            )
        )
        # The controller learns the associations from dbd as it starts: let dbd listen first.
        from dbd.config import load as load_dbd

        dbd = load_dbd(dbd_conf)
        _wait_listening(dbd.dbd_addr, dbd.dbd_port, procs[0], "dbd")
    controller = _spawn(
        [sys.executable, "-m", "controller.main", "-f", conf],
        os.path.join(logs, "controller.log"),
        env,
    )
    names = f"node[1-{nodes}]" if nodes > 1 else "node1"
    agent = _spawn(
        [sys.executable, "-m", "nodeagent.main", "-f", conf, "--nodes", names],
        os.path.join(logs, "nodeagent.log"),
        env,
    )
    procs += [controller, agent]
    rest_port = _rest_port() if restd else 0
    tls_dir = os.path.join(directory, "tls")
    # With TLS, restd serves HTTPS with its certificate: tokens cross no wire in clear either.
    https = (
        ["--tls-cert", f"{tls_dir}/restd_cert.pem", "--tls-key", f"{tls_dir}/restd_cert_key.pem"]
        if tls
        else []
    )
    if restd:
        procs.append(
            _spawn(
                [sys.executable, "-m", "restd.main", "-f", conf, *https, f"127.0.0.1:{rest_port}"],
                os.path.join(logs, "restd.log"),
                {**env, **restd_env()},
            )
        )
    with open(os.path.join(directory, "pids"), "w") as out:
        out.write("".join(f"{proc.pid}\n" for proc in procs))
    try:
        _wait_until_up(conf, nodes, procs)
        if restd:
            _wait_listening("127.0.0.1", rest_port, procs[-1], "restd")
    except BaseException:
        _stop(procs)
        raise
    where = (database or f"SQLite in {directory}/accounting.db") if accounting else "off"
    print(f"Corral cluster with {nodes} nodes is up (logs in {logs}; accounting: {where}).")
    if tls:
        print(f"Internal traffic uses TLS: the cluster CA and certificates are in {directory}/tls.")
    else:
        print("Internal traffic is plaintext (--no-tls): TLSType=tls/none.")
    print(f"export SLURM_CONF={shlex.quote(conf)}")
    if restd:
        url = f"{'https' if tls else 'http'}://127.0.0.1:{rest_port}"
        cacert = f"--cacert {shlex.quote(tls_dir + '/ca_cert.pem')} " if tls else ""
        print(
            f"REST API (slurmrestd's) at {url}, OpenAPI at {url}/openapi/v3; with a token:\n"
            f'  export $(scontrol token); curl {cacert}-H "X-SLURM-USER-TOKEN: $SLURM_JWT" '
            f"{url}/slurm/v0.0.42/jobs"
        )
    sys.stdout.flush()
    if detach:
        return 0
    try:
        if demo:
            from cli.demo import run_demo

            return run_demo(conf, accounting)
        print("Press Ctrl-C to stop.")
        signal.signal(signal.SIGTERM, _interrupt)
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        _end(conf, procs)
        # Gone already when `corral down` stopped this cluster.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, "pids"))


def _end(conf: str, procs: list[subprocess.Popen[bytes]]) -> None:
    """End the jobs and the daemons as ``corral down`` does, saying what was done."""
    from cli import shutdown

    alive = [proc.pid for proc in procs if proc.poll() is None]
    for line in shutdown.down(conf, alive).lines():
        print(line)
    _stop(procs)  # reaps them (and kills any that outlived their SIGKILL)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _running_pids(directory: str) -> list[int]:
    try:
        with open(os.path.join(directory, "pids")) as src:
            pids = [int(line) for line in src if line.strip()]
    except (OSError, ValueError):
        return []
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except OSError:
            pass
    return alive


def down(argv: list[str]) -> int:
    directory = DEFAULT_DIR
    found, positional = parse_options(DOWN, argv, permute=True)
    if positional:
        raise UsageError(f"unknown argument {positional[0]!r}\n{USAGE}")
    for option, value in found:
        if option.key == "dir":
            directory = value or ""
    directory = os.path.abspath(directory)
    conf = os.path.join(directory, "slurm.conf")
    pids = _running_pids(directory)
    if not pids and not os.path.exists(conf):
        print(f"no cluster running in {directory}")
        return 0
    from cli import shutdown

    report = shutdown.down(conf, pids)
    # A foreground `corral up` removes it too, once its daemons have exited.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, "pids"))
    for line in report.lines():
        print(line)
    if pids:
        print(f"stopped the cluster in {directory}")
    elif not report.ended and not report.survivors:
        print(f"no cluster running in {directory}")
    return 1 if report.survivors else 0


def _positive(option: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise UsageError(f"{option} wants a positive integer, got {value!r}")
    return number


def _job_slice(value: str) -> tuple[int, int | None]:
    """``--jobs A:B`` as (start, stop): job records A to B-1, 0-based."""
    first, colon, last = value.partition(":")
    try:
        if not colon:
            raise ValueError(value)
        start = int(first) if first.strip() else 0
        stop = int(last) if last.strip() else None
    except ValueError:
        start, stop = -1, None
    if start < 0 or (stop is not None and stop <= start):
        raise UsageError(
            f"--jobs wants A:B, job records A to B-1 (0 <= A < B; either may be left out), "
            f"got {value!r}"
        )
    return start, stop


def sim(argv: list[str]) -> int:
    options: dict[str, str] = {}
    flags: set[str] = set()
    sets: list[str] = []
    trace_path: str | None = None
    found, positional = parse_options(SIM, argv, permute=True)
    for option, value in found:
        if option.key == "help":
            print(SIM_USAGE)
            return 0
        if option.key == "set":
            sets.append(value or "")
        elif option.arg == REQUIRED:
            options[f"--{option.key}"] = value or ""
        elif option.key != "verbose":  # the error boundary's switch for tracebacks
            flags.add(f"--{option.key}")
    if len(positional) > 1:
        raise UsageError(f"one trace at a time, got {positional[0]!r} and {positional[1]!r}")
    trace_path = positional[0] if positional else None
    if trace_path is None:
        raise UsageError("which trace? (corral sim --help)")
    nodes = _positive("--nodes", options["--nodes"]) if "--nodes" in options else None
    cpus = (
        _positive("--cpus-per-node", options["--cpus-per-node"])
        if "--cpus-per-node" in options
        else None
    )
    start, stop = _job_slice(options["--jobs"]) if "--jobs" in options else (0, None)
    if ("--queues" in options) != ("--queue-map" in options):
        raise UsageError("--queues and --queue-map go together: the queues, and who is in which")
    power = _power_model(options)
    if "--config" in options or "," in options.get("--policy", ""):
        from cli.simsite import sim_site

        if "--sched-params" in options:
            raise UsageError(
                "--sched-params shapes one policy on the trace's own cluster; with -f or "
                "several policies, SchedulerParameters comes from slurm.conf (-f, --set)"
            )

        if power is not None:
            raise UsageError(
                "--suspend-time and --resume-time replay one policy on the trace's own "
                "cluster, not with -f or several policies"
            )
        return sim_site(trace_path, options, flags, tuple(sets), (start, stop))
    if sets or "--accounts" in options or "--map" in options:
        raise UsageError("--set, --accounts and --map describe a slurm.conf's cluster: give it, -f")

    import json

    from cli.simsite import read_trace
    from controller.sim import cluster_shape, powersim, queuereport, replay, report
    from controller.sim.policy import choose

    policy = options.get("--policy", "fcfs")
    choose(policy)  # an unknown or not yet runnable policy fails before the trace is read
    params = None
    if "--sched-params" in options:
        from controller.sim.params import backfill_params

        params = backfill_params(options["--sched-params"], policy)
    queues = None
    if "--queues" in options:
        from controller.sim import queuemap
        from controller.sim.queues import load_conf

        conf = load_conf(options["--queues"])
        queues = (conf, queuemap.load(options["--queue-map"], conf))
    png = options.get("--png")
    report.check_outputs(options.get("--csv"), png)
    trace = read_trace(trace_path, start, stop)
    nodes, cpus = cluster_shape(trace.header, nodes, cpus)
    quiet = "--quiet" in flags
    first_submit = min((r.submit for r in trace.records if r.submit >= 0), default=0)

    def progress(p: Progress) -> None:
        if quiet or p.total < SIM_PROGRESS_JOBS:
            return
        print(
            f"corral sim: {100 * p.submitted // p.total}% of {p.total} jobs submitted, "
            f"simulated day {(p.now - first_submit) / 86400:.1f}, {p.elapsed:.1f} s",
            file=sys.stderr,
            flush=True,
        )

    run: dict[str, Any] = {
        "timeline": png is not None,
        "progress": progress,
        "queues": queues,
        "params": params,
    }
    powered = None
    if power is None:
        result = replay(trace, nodes, cpus, policy, **run)
    else:
        result, powered = powersim.compare(trace, nodes, cpus, policy, power, **run)
    summary = report.summarize(result)
    per_queue = queuereport.figures(result, summary)
    shown = trace_path if "--jobs" not in options else f"{trace_path} (records {options['--jobs']})"
    if "--csv" in options:
        report.write_csv(options["--csv"], result.jobs, queues=queues is not None)
    if png is not None:
        report.draw(png, result, f"{os.path.basename(trace_path)}, {policy}, {nodes}x{cpus} CPUs")
    if "--json" in flags:
        figures = report.as_dict(shown, result, summary)
        if queues is not None:
            figures["queues"] = queuereport.as_dicts(per_queue)
        if powered is not None:
            figures["power_saving"] = powersim.as_dict(powered)
        print(json.dumps(figures, indent=2))
    else:
        print(report.text(shown, result, summary))
        if powered is not None:
            print(powersim.text(powered))
        if queues is not None:
            print()
            print(queuereport.text(per_queue))
    return 0


def _power_model(options: dict[str, str]) -> PowerModel | None:
    """``--suspend-time S --resume-time R`` (both or neither)."""
    given = ("--suspend-time" in options, "--resume-time" in options)
    if not any(given):
        return None
    if not all(given):
        raise UsageError(
            "--suspend-time and --resume-time go together: when nodes go, how long back"
        )
    resume = options["--resume-time"]
    if not resume.isdigit():
        raise UsageError(f"--resume-time wants seconds (0 or more), got {resume!r}")
    from controller.sim.powersim import PowerModel

    return PowerModel(_positive("--suspend-time", options["--suspend-time"]), int(resume))


CERT_USAGE = """\
Usage: corral cert ca DIR
       corral cert issue NAME --ca DIR --host H [--host H ...] [--out DIR]

ca     a new cluster CA: DIR/ca_cert.pem (give it to every host) and DIR/ca_key.pem
       (mode 0600; keep it off the compute nodes).
issue  a certificate for daemon NAME (ctld, dbd, restd or slurmd: the names TLSParameters
       uses) valid for the host names and addresses given with --host (those clients dial),
       signed by the CA in --ca: OUT/NAME_cert.pem and OUT/NAME_cert_key.pem (mode 0600),
       OUT being --out or the current directory. Prints the TLSParameters entries to add."""


def cert(argv: list[str]) -> int:
    """``corral cert``: a cluster CA, and certificates signed by it, for a real cluster."""
    if not argv or argv[0] in ("-h", "--help"):
        print(CERT_USAGE)
        return 0 if argv else 1
    from corral import certs

    command, args = argv[0], list(argv[1:])
    if command == "ca":
        if len(args) != 1:
            raise UsageError(f"corral cert ca wants one directory\n{CERT_USAGE}")
        directory = os.path.abspath(args[0])
        os.makedirs(directory, exist_ok=True)
        cert_path = os.path.join(directory, "ca_cert.pem")
        key_path = os.path.join(directory, "ca_key.pem")
        if os.path.exists(cert_path) or os.path.exists(key_path):
            raise UsageError(f"{directory} already holds a CA; remove it first to make another")
        certs.create_ca(cert_path, key_path)
        print(f"CA certificate: {cert_path}\nCA key: {key_path} (mode 0600)")
        print(
            f"slurm.conf and slurmdbd.conf: TLSType=tls/s2n, TLSParameters=ca_cert_file={cert_path}"
        )
        return 0
    if command != "issue" or not args or args[0].startswith("-"):
        raise UsageError(f"unknown or incomplete cert command\n{CERT_USAGE}")
    name, args = args[0], args[1:]
    ca_dir, out, hosts = "", ".", []
    found, positional = parse_options(CERT_ISSUE, args, permute=True)
    if positional:
        raise UsageError(f"unknown argument {positional[0]!r}\n{CERT_USAGE}")
    for option, value in found:
        if option.key == "ca":
            ca_dir = value or ""
        elif option.key == "host":
            hosts.append(value or "")
        elif option.key == "out":
            out = value or ""
    if not ca_dir or not hosts:
        raise UsageError(f"corral cert issue needs --ca DIR and at least one --host\n{CERT_USAGE}")
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    cert_path = os.path.join(out, f"{name}_cert.pem")
    key_path = os.path.join(out, f"{name}_cert_key.pem")
    try:
        certs.issue(
            os.path.join(ca_dir, "ca_cert.pem"),
            os.path.join(ca_dir, "ca_key.pem"),
            name,
            hosts,
            cert_path,
            key_path,
        )
    except certs.CertError as exc:
        raise UsageError(str(exc)) from None
    print(f"certificate: {cert_path}\nkey: {key_path} (mode 0600)")
    print(f"TLSParameters entries: {name}_cert_file={cert_path},{name}_cert_key_file={key_path}")
    return 0


def corral(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 1
    if argv[0] in ("-V", "--version", "version"):
        print(f"corral {__version__}")
        return 0
    if argv[0] == "up":
        return up(argv[1:])
    if argv[0] == "down":
        return down(argv[1:])
    if argv[0] == "sim":
        return sim(argv[1:])
    if argv[0] == "cert":
        return cert(argv[1:])
    if argv[0] == "why":
        from cli.why import why

        return why(argv[1:])
    if argv[0] == "queues":
        from cli.queues import queues

        return queues(argv[1:])
    if argv[0] == "ray":
        from cli.ray.command import ray

        return ray(argv[1:])
    if argv[0] == "install-units":
        from cli.installunits import install_units

        return install_units(argv[1:])
    raise UsageError(f"unknown command {argv[0]!r}\n{USAGE}")


def main() -> None:
    if sys.argv[1:2] == ["sim"]:
        run("corral sim", corral)  # errors read "corral sim: error: ..."
    if sys.argv[1:2] == ["why"]:
        run("corral why", corral)
    if sys.argv[1:2] == ["queues"]:
        run("corral queues", corral)  # errors read "corral queues: error: ..."
    if sys.argv[1:2] == ["ray"]:
        run("corral ray", corral)
    run("corral", corral)


if __name__ == "__main__":
    main()
