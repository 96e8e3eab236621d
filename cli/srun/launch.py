"""srun: run a job step's tasks on an allocation's nodes and bring their I/O home.

Inside an allocation (``SLURM_JOB_ID``, or ``--jobid``) srun asks the
controller for a step (``StepCreate``: the controller lays the tasks out and
sends each node its part), and listens on a TCP socket of its own that each
node's step runner connects back to (corral/stepio.py). Output comes back as
it is written (``-l`` puts ``task: `` before each line), stdin goes to every task
(or where ``-i`` says: cli/srun/inputroute.py),
signals srun receives go to every task, and each task's end is reported as it
happens. srun exits with 128 + the highest signal that killed a task, else the
highest exit code, and says which tasks failed, in Slurm's words.

Outside an allocation, srun first gets one (``cli/allocation.py``), runs the
step in it and gives it back.

Ctrl-C once prints the tasks' state; twice within a second sends SIGINT to
the tasks; a third time kills them.

``--pty`` runs task 0 on a pseudo-terminal of its own on its node, with srun's
terminal in raw mode meanwhile (cli/srun/terminal.py): Ctrl-C is then a byte
for the remote terminal, and srun's SIGINT handling above is for a SIGINT sent
to srun itself, as in Slurm.
"""

from __future__ import annotations

# The raw modules: ``socket``, ``signal`` and ``selectors`` import ``enum`` and
# more, ~7 ms of a command whose whole budget is Slurm's 27.5 ms.
import _signal  # type: ignore[import-not-found]  # no stub: CPython's C module
import _socket
import os
import select
import sys
import time

from cli import boundary
from cli.halt import Halt
from cli.options import (
    HONOURED,
    NO_ARGUMENT,
    OPTIONAL,
    REFUSED,
    REQUIRED,
    WARNED,
    Option,
    OptionError,
    OptionTable,
    put_last,
)
from cli.options import parse as parse_options
from cli.sbatch.options import TOPOLOGY_LEVEL
from cli.srun import gpuinput, hetstep, placement, step_options
from cli.srun.inputroute import InputRoute
from cli.srun.values import cpu_bind, open_mode_append
from cli.tasklines import TaskLines
from corral import filepattern, mpitypes, stepinput, stepio
from corral.clientconf import ClientSettings, client_settings
from corral.errors import ESLURM_NODES_BUSY, SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from cli.srun.terminal import Terminal
    from corral.stepcipher import SrunEnd

PROG = "srun"
#: Seconds to wait for every node's runner to connect back.
CONNECT_TIMEOUT = 60.0
#: While runners are missing, how often srun asks the controller whether the step
#: still runs (a launch lost with its node's agent fails the step there).
PROBE_EVERY = 2.0
#: Signals srun passes on to the tasks (as Slurm's srun does).
FORWARDED = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1, _signal.SIGUSR2)
SIGINT, SIGKILL, SIGWINCH = _signal.SIGINT, _signal.SIGKILL, _signal.SIGWINCH

USAGE = """\
Usage: srun [-N nnodes] [-n ntasks] [-c ncpus] [-w hosts] [-x hosts] [-l] [-u]
            [-o out] [-e err] [-i in] [-K] [--export=...] [--overlap] executable [args...]
"""


def _row(
    long: str, short: str = "", arg: int = REQUIRED, use: str = HONOURED, note: str = ""
) -> Option:
    return Option(long, short, long, arg, use, note)


#: What -M does: a new allocation on another cluster (docs/federation.md).
CLUSTERS = (
    "outside a job: to the cluster named, of several the one that would start it first; "
    "in a job only this cluster"
)
#: What a job step does with the options that shape a new job (cli/srun/step_options.py).
JOB_LEVEL = "in a job step the job's applies, and another value is warned about"
STEP_GPU_TYPE = "in a job step a GPU type is warned about: the step takes the job's GPUs"
STEP_TOPOLOGY = "in a job step it is warned about: the job's nodes are placed"
JOB_ONLY = "for a new job; in a job step it is warned about: the job's allocation applies"
STEP_MEMORY = (
    "in a job step the step's own memory: its tasks' limit, held against the job's other steps"
)

TABLE = OptionTable(
    [
        _row("account", "A", note=JOB_LEVEL),
        _row(
            "bcast",
            arg=OPTIONAL,
            note="the executable copied to the step's nodes first, as sbcast copies "
            "(BcastParameters DestDir, Compression, send_libs); not with : or --multi-prog",
        ),
        _row("chdir", "D"),
        _row("compress", arg=OPTIONAL, note="with --bcast only: lz4, none, and zlib"),
        _row("clusters", "M", note=CLUSTERS),
        Option("clusters", "", "cluster", REQUIRED, HONOURED, CLUSTERS),
        _row("container", note="an OCI bundle the tasks run in (oci.conf; docs/containers.md)"),
        _row("container-id", note="Slurm 24.11's: in SLURM_CONTAINER_ID; no runtime uses it"),
        _row(
            "cpu-bind",
            note="none, rank, threads, cores, sockets, ldoms, map_cpu, mask_cpu, quiet, verbose "
            "(Slurm's cpu-bind= line); without it, cores under TaskPlugin=task/affinity, else "
            "the job's CPUs on the node; map_ldom, mask_ldom, rank_ldom and boards are refused",
        ),
        _row("cores-per-socket", note=JOB_ONLY),
        _row("cpus-per-gpu", note="in a job step at most the job's"),
        _row("cpus-per-task", "c"),
        _row(
            "distribution",
            "m",
            note="block, cyclic, plane=N, arbitrary (SLURM_HOSTFILE or -w), Pack/NoPack; the "
            "second and third levels lay CPUs over sockets and cores for --cpu-bind",
        ),
        _row("error", "e", note="also SLURM_STDERRMODE"),
        _row("exact", arg=NO_ARGUMENT, note="also SLURM_EXACT; implied by -c and --exclusive"),
        _row("exclude", "x"),
        _row(
            "exclusive",
            arg=OPTIONAL,
            note="=user, =mcs and =topo are refused for a new job; in a job step plain "
            "--exclusive is the default and the job-level values are warned about",
        ),
        _row("extra-node-info", "B", note=JOB_ONLY),
        _row("export", note="ALL, NONE, or NAME[=value] list (with or without ALL)"),
        _row(
            "external-launcher",
            arg=NO_ARGUMENT,
            note="Slurm 23.11's, which OpenMPI's mpirun passes when it starts its daemons: "
            "as --overlap, the step holds none of the job's CPUs against other steps",
        ),
        _row("gpu-bind", note="closest, map_gpu, mask_gpu, none, per_task, single"),
        _row("gpus", "G", note=STEP_GPU_TYPE),
        _row("gpus-per-node", note=STEP_GPU_TYPE),
        _row("gpus-per-socket", note="for a new job only: refused in a job step"),
        _row("gpus-per-task", note=STEP_GPU_TYPE),
        _row("gres", note="in a job step only gpu (a type is warned about): others are refused"),
        _row("gres-flags", note=JOB_ONLY),
        _row("help", arg=NO_ARGUMENT),
        _row(
            "het-group",
            note="inside a heterogeneous job, the components the step runs in; one step "
            "spanning several (as srun ... : ...) numbers its tasks across them; outside a "
            "job srun ... : ... makes a heterogeneous job (one index alone a plain job), in "
            "an ordinary one each : group takes the next of its nodes",
        ),
        _row(
            "hint",
            note="compute_bound, memory_bound (cores), multithread, nomultithread (threads); "
            "a new job's as sbatch's; beside --cpu-bind, --ntasks-per-core or "
            "--threads-per-core ignored (said under -v)",
        ),
        _row("immediate", "I", OPTIONAL, REFUSED, "immediate allocation is not implemented"),
        _row(
            "input",
            "i",
            note="all (default: srun's stdin to every task), none, a task id (that task "
            "alone), a file with %t/%n/%N (each task's, opened on its node) or another file "
            "(srun reads it for every task), as Slurm 22.05; also SLURM_STDINMODE",
        ),
        _row("job-name", "J"),
        _row("jobid"),
        _row("kill-on-bad-exit", "K", OPTIONAL, note="0 or 1"),
        _row("label", "l", NO_ARGUMENT),
        _row("licenses", "L", note=JOB_ONLY),
        _row("mail-type", note=f"by slurm.conf's MailProg; {JOB_ONLY}"),
        _row("mail-user", note=JOB_ONLY),
        _row("mem", note=STEP_MEMORY),
        _row("mem-per-cpu", note=STEP_MEMORY),
        _row("mem-per-gpu", note=STEP_MEMORY),
        _row(
            "mpi",
            note="none, pmi2 (PMI-1 and PMI-2 served to the tasks) and list; other types "
            "are refused as Slurm refuses a plugin it cannot load",
        ),
        _row("nodefile", "F"),
        _row("multi-prog", arg=NO_ARGUMENT, note="ranks, *, %t and %o; comment lines"),
        _row("nodelist", "w"),
        _row("nodes", "N"),
        _row("ntasks", "n"),
        _row("ntasks-per-core", note="at most N tasks on each of the job's cores; binds to cores"),
        _row("ntasks-per-gpu"),
        _row("ntasks-per-node"),
        _row("ntasks-per-socket", note="at most N tasks on each socket; binds to sockets"),
        _row("open-mode", note="append or truncate"),
        _row("output", "o", note="also SLURM_STDOUTMODE"),
        _row("overcommit", "O", NO_ARGUMENT),
        _row("overlap", arg=NO_ARGUMENT),
        _row("partition", "p", note=JOB_LEVEL),
        _row("prefer", note="for a new job: tried first, as Slurm 22.05 does; " + JOB_LEVEL),
        _row(
            "pty",
            arg=NO_ARGUMENT,
            note="task 0 on a pseudo-terminal (--pty=fd, Slurm 24.11's, is refused)",
        ),
        _row("qos", "q", note=JOB_LEVEL),
        _row("quiet", "Q", NO_ARGUMENT),
        _row("relative", "r", note="in a job only; not with -w or -x"),
        _row("send-libs", arg=OPTIONAL, note="with --bcast only: the libraries ldd names"),
        _row("segment", note=f"with TopologyPlugin=topology/block; {STEP_TOPOLOGY}"),
        _row("switches", note=f"with TopologyPlugin=topology/tree; {STEP_TOPOLOGY}"),
        _row("sockets-per-node", note=JOB_ONLY),
        _row(
            "threads-per-core",
            note="for a new job: that many threads of each whole core; drops --hint; "
            "in a job step it is warned about: the job's allocation applies",
        ),
        _row("time", "t"),
        _row("topology-level", note=f"{TOPOLOGY_LEVEL}; {STEP_TOPOLOGY}"),
        _row("unbuffered", "u", NO_ARGUMENT),
        _row("usage", arg=NO_ARGUMENT),
        _row(
            "verbose",
            "v",
            NO_ARGUMENT,
            WARNED,
            "srun prints no progress, only Slurm's line on a --hint that another option drops",
        ),
        _row("version", "V", NO_ARGUMENT),
        _row("wait", "W", use=REFUSED, note="the other tasks are never ended after a first exit"),
    ],
    prog="srun",
)


class Settings:
    """srun's options, as they shape the step request and what srun prints."""

    def __init__(self) -> None:
        self.options: dict[str, str | None] = {}
        self.command: list[str] = []
        self.kill_on_bad_exit = False  # -K, else slurm.conf's KillOnBadExit
        self.cpu_bind_none = False
        self.cpu_bind = ""  # --cpu-bind's text, checked
        self.append = False
        self.mpi = mpitypes.NONE  # --mpi, else SLURM_MPI_TYPE, else MpiDefault
        self.relative = 0  # -r: the step's first node among the job's

    def get(self, key: str, default: str = "") -> str:
        value = self.options.get(key)
        return default if value is None else value

    def has(self, key: str) -> bool:
        return key in self.options

    def count(self, key: str) -> int:
        text = self.get(key, "0")
        if key == "nodes":
            text = text.split("-")[0]
        try:
            value = int(text)
        except ValueError:
            raise Halt(1, f'{PROG}: error: Invalid numeric value "{text}" for --{key}.') from None
        if value < 0:
            raise Halt(1, f"{PROG}: error: Invalid --{key} value: {text}")
        return value


#: srun's input variables for its standard streams (srun(1): "Same as -i, --input" and
#: so on): a value, even empty, stands for the option when the command line lacks it
#: (Slurm 22.05, measured: ``SLURM_STDINMODE=0`` feeds task 0 alone, an empty one too,
#: as ``-i ""``; ``-i`` wins over it; with ``--pty`` it is refused as ``-i`` is).
STDIO_VARIABLES = (
    ("SLURM_STDINMODE", "input"),
    ("SLURM_STDOUTMODE", "output"),
    ("SLURM_STDERRMODE", "error"),
)


def parse(argv: list[str], inherited: Mapping[str, str | None] | None = None) -> Settings:
    """srun's options and command (``inherited``: the options a ``:`` group takes from
    the group before it unless given again, ``cli/srun/hetstep.py``)."""
    try:
        found, positional = parse_options(TABLE, argv)
    except OptionError as exc:
        raise Halt(1, f"{PROG}: {exc}", f'Try "{PROG} --help" for more information') from None
    settings = Settings()
    for option, value in found:
        if option.key == "help" or option.key == "usage":
            raise Halt(0, USAGE.rstrip("\n"))
        if option.key == "version":
            raise Halt(0, boundary.version_line())
        if option.key == "nodefile":  # as -w, whichever comes last
            put_last(settings.options, "nodelist", _node_file(value or ""))
            continue
        put_last(settings.options, option.key, value)
    for key, value in (inherited or {}).items():
        settings.options.setdefault(key, value)
    for variable, key in STDIO_VARIABLES:
        if variable in os.environ:
            settings.options.setdefault(key, os.environ[variable])
    if settings.get("mpi") == "list":  # as Slurm's srun: the list, whatever else is given
        raise Halt(0, mpitypes.listing().rstrip("\n"))
    if settings.has("exclusive") and settings.has("overlap"):  # overlap would win unsaid
        raise Halt(1, f"{PROG}: error: --exclusive and --overlap are mutually exclusive")
    if settings.has("pty"):
        if any(settings.has(key) for key in ("error", "input", "output")):
            raise Halt(1, f"{PROG}: error: --error/--input/--output are incompatible with --pty")
        settings.options["unbuffered"] = None  # implicit, as in Slurm
    if sum(settings.has(key) for key in ("mem", "mem-per-cpu", "mem-per-gpu")) > 1:
        raise Halt(
            1, f"{PROG}: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."
        )
    env = os.environ
    settings.cpu_bind, settings.cpu_bind_none = cpu_bind(
        PROG, settings.get("cpu-bind", env.get("SLURM_CPU_BIND", ""))
    )
    settings.append = open_mode_append(
        PROG, settings.get("open-mode", env.get("SLURM_OPEN_MODE", ""))
    )
    settings.command = positional
    if not positional:
        raise Halt(1, f"{PROG}: fatal: No command given to execute.")
    if any(settings.has(key) for key in ("bcast", "compress", "send-libs")):
        from cli.srun import bcast

        bcast.check(settings.options)
        if settings.has("bcast") and settings.has("multi-prog"):
            raise Halt(1, f"{PROG}: error: --bcast is not supported with --multi-prog")
    return settings


def _node_file(path: str) -> str:
    """-F's hosts, or Halt in Slurm's words (cli/sbatch/settings.py reads the file)."""
    from cli.failure import Failure
    from cli.sbatch.settings import node_file

    try:
        return node_file(path)
    except Failure as exc:
        raise Halt(exc.status or 1, *(f"{PROG}: error: {line}" for line in exc.lines)) from None


def mpi_type(settings: Settings, env: Mapping[str, str], configured: str) -> str:
    """The step's MPI type: ``--mpi``, else SLURM_MPI_TYPE, else MpiDefault; one Corral
    does not serve is refused in the words Slurm's srun has for a plugin it cannot load."""
    name = mpitypes.resolve(settings.options.get("mpi"), env.get("SLURM_MPI_TYPE", ""), configured)
    if name not in mpitypes.SERVED:
        raise Halt(1, *mpitypes.refusal(PROG, name))
    return name


def kill_on_bad_exit(settings: Settings, configured: bool) -> bool:
    """``-K``/``--kill-on-bad-exit[=0|1]`` if given (``-K0`` turns slurm.conf's
    KillOnBadExit=1 off), else slurm.conf's KillOnBadExit, as in Slurm."""
    if not settings.has("kill-on-bad-exit"):
        return configured
    value = settings.get("kill-on-bad-exit", "1")
    if value not in ("0", "1"):  # "yes" once meant 1 here and 0 to Slurm's strtol
        raise Halt(1, f"{PROG}: error: Invalid --kill-on-bad-exit value: {value}")
    return value == "1"


def task_environment(settings: Settings, env: Mapping[str, str]) -> dict[str, str]:
    """The tasks' base environment after ``--export`` (default ALL)."""
    export = settings.get("export", env.get("SLURM_EXPORT_ENV", "ALL") or "ALL")
    words = [w for w in export.split(",") if w]
    base: dict[str, str] = {}
    upper = [w.upper() for w in words]
    if "ALL" in upper:
        base = dict(env)
    elif "NONE" in upper:
        base = {k: v for k, v in env.items() if k.startswith("SLURM_")}
    for word, up in zip(words, upper, strict=True):
        if up in ("ALL", "NONE"):
            continue
        name, eq, value = word.partition("=")
        if eq:
            base[name] = value
        elif name in env:
            base[name] = env[name]
    return base


def _io_host() -> str:
    """Where the step runners reach this srun: SLURM_SRUN_COMM_HOST, else this host's
    name (the runners resolve it)."""
    return os.environ.get("SLURM_SRUN_COMM_HOST", "") or _socket.gethostname()


def step_request(
    settings: Settings,
    job_id: int,
    listener: _socket.socket,
    key: bytes,
    terminal: Terminal | None = None,
) -> dict[str, Any]:
    """StepCreate's request (``terminal``: srun's, under --pty)."""
    env = dict(os.environ)
    time_limit = -1
    if settings.has("time"):
        from corral.timefmt import parse_duration

        try:
            time_limit = parse_duration(settings.get("time"))
        except ValueError:
            raise Halt(1, f"{PROG}: error: Invalid time limit specification") from None
    cwd = settings.get("chdir") or os.getcwd()
    ntasks = settings.count("ntasks")
    request: dict[str, Any] = {
        "job_id": job_id,
        "ntasks": ntasks,
        "min_nodes": placement.node_count(settings.count("nodes"), ntasks),
        "cpus_per_task": settings.count("cpus-per-task") or int(env.get("SRUN_CPUS_PER_TASK", 0)),
        "ntasks_per_node": settings.count("ntasks-per-node"),
        "nodelist": settings.get("nodelist"),
        "exclude": settings.get("exclude"),
        "overlap": settings.has("overlap")
        or settings.has("external-launcher")
        or env.get("SLURM_OVERLAP", "") != "",
        "overcommit": settings.has("overcommit"),
        "exact": exact(settings, env),
        **_gpu_fields(settings),
        **_memory_fields(settings),
        "name": settings.get("job-name"),
        "argv": settings.command,
        "environment": task_environment(settings, env),
        "cwd": cwd,
        "io_host": _io_host(),
        "io_port": listener.getsockname()[1],
        "io_key": key,
        "std_out": settings.get("output"),
        "std_err": settings.get("error"),
        "std_in": input_value(settings),
        "append": settings.append,
        "unbuffered": settings.has("unbuffered"),
        "cpu_bind_none": settings.cpu_bind_none,
        "cpu_bind": settings.cpu_bind,
        "time_limit": time_limit,
        "submit_line": " ".join(["srun", *sys.argv[1:]]),
        "mpi": settings.mpi,
        "relative": settings.relative,
        **placement.distribution_fields(settings.options, env, ntasks),
        "ntasks_per_core": settings.count("ntasks-per-core"),
        "ntasks_per_socket": settings.count("ntasks-per-socket"),
    }
    request.update(_container_fields(settings, env, cwd))
    if mpitypes.wires(settings.mpi):  # the tasks' own sruns wire up as this one does
        request["environment"]["SLURM_MPI_TYPE"] = settings.mpi
    request.update(placement.hint(settings.options, env, settings.cpu_bind))
    if settings.has("multi-prog"):
        request.update(placement.multi_prog(settings.command, env, request["ntasks"]))
    if request["cpus_per_task"]:  # srun(1): the tasks see -c, not the job's value
        request["environment"]["SLURM_CPUS_PER_TASK"] = str(request["cpus_per_task"])
    if terminal is not None:
        request["pty"] = True
        request["environment"].update(terminal.environment(request["io_port"]))
    return request


def exact(settings: Settings, env: Mapping[str, str]) -> bool:
    """Whether the step gets only the CPUs its tasks ask for (srun(1): ``--exact``,
    or ``-c`` or ``--exclusive`` given): else it has all of the job's CPUs on each of
    its nodes that other steps leave, and parallel steps wait for each other."""
    return (
        settings.has("exact")
        or env.get("SLURM_EXACT", "") != ""
        or (settings.has("exclusive") and settings.get("exclusive").lower() in ("", "exclusive"))
        or settings.has("cpus-per-task")
        or env.get("SRUN_CPUS_PER_TASK", "") != ""
    )


def _container_fields(settings: Settings, env: Mapping[str, str], cwd: str) -> dict[str, str]:
    """--container (else SRUN_CONTAINER), checked to be an OCI bundle, and --container-id."""
    from cli.bundle import absolute, bundle_error

    fields = {}
    path = settings.get("container", env.get("SRUN_CONTAINER", ""))
    if path:
        fields["container"] = absolute(path, cwd)
        error = bundle_error(fields["container"])
        if error is not None:
            raise Halt(1, f"{PROG}: error: {error}")
    if settings.get("container-id"):
        fields["container_id"] = settings.get("container-id")
    return fields


def _memory_fields(settings: Settings) -> dict[str, int]:
    """The step's own memory: --mem, --mem-per-cpu or --mem-per-gpu (MiB; 0: the job's)."""
    fields = {}
    for key, field in (("mem", "mem_per_node"), ("mem-per-cpu", "mem_per_cpu"),
                       ("mem-per-gpu", "mem_per_gpu")):  # fmt: skip
        if settings.has(key):
            fields[field] = step_options.memory(key, settings.get(key))
    return fields


def _gpu_fields(settings: Settings) -> dict[str, int | str]:
    """The step's GPU request and binding (cli/srun/gpuinput.py)."""
    return gpuinput.step_fields(settings.options)


def step_state(client: Any, job_id: int, step_id: int) -> str | None:
    """The step's state as the controller has it; None when it cannot say now."""
    try:
        reply = client.call(
            "Jobs",
            {"filter": {"job_ids": [str(job_id)], "states": ["ALL"]}, "expand_arrays": False},
        )
    except SlurmError:
        return None
    for job in reply.get("jobs", ()):
        for step in job.get("steps", ()):
            if int(step["step_id"]) == step_id:
                return str(step["state"])
    return None


def create_step(client: Any, request: dict[str, Any], quiet: bool) -> dict[str, Any]:
    """The step, retrying while other steps hold the CPUs (as Slurm's srun does)."""
    job_id = request["job_id"]
    told = False
    while True:
        try:
            reply: dict[str, Any] = client.call("StepCreate", request)
        except SlurmError as exc:
            if exc.code != ESLURM_NODES_BUSY:
                said = [f"{PROG}: error: {exc.detail}"] if exc.detail else []
                failed = f"{PROG}: error: Unable to create step for job {job_id}: {exc}"
                raise Halt(1, *said, failed) from None
            if not told and not quiet:
                print(
                    f"{PROG}: Job {job_id} step creation temporarily disabled, retrying ({exc})",
                    file=sys.stderr,
                )
                told = True
            time.sleep(0.2)
            continue
        if told and not quiet:
            print(f"{PROG}: Step created for StepId={job_id}.{reply['step_id']}", file=sys.stderr)
        return reply


def _node_ids(tasks: list[int], flat: list[int]) -> list[list[int]]:
    """Each node's global task ids: the reply's (node by node), else block order
    (a controller that sends none)."""
    if len(flat) != sum(tasks):
        flat = list(range(sum(tasks)))
    out, first = [], 0
    for count in tasks:
        out.append(flat[first : first + count])
        first += count
    return out


def _ranges(ids: list[int]) -> str:
    ids = sorted(ids)
    parts, start = [], 0
    while start < len(ids):
        end = start
        while end + 1 < len(ids) and ids[end + 1] == ids[end] + 1:
            end += 1
        parts.append(str(ids[start]) if start == end else f"{ids[start]}-{ids[end]}")
        start = end + 1
    return ",".join(parts)


def _why(status: int) -> str:
    if status & 0x7F:
        return _signal.strsignal(status & 0x7F) or f"Signal {status & 0x7F}"
    return f"Exited with exit code {(status >> 8) & 0xFF}"


def exit_code(statuses: list[int]) -> int:
    """srun's exit status from its tasks' wait statuses, as Slurm picks it: a task
    killed by a signal wins over exit codes (128 + the highest signal, which is
    predictable if not always the strongest), else the highest exit code."""
    signals = [status & 0x7F for status in statuses if status & 0x7F]
    if signals:
        return 128 + max(signals)
    return max(((status >> 8) & 0xFF for status in statuses), default=0)


class Poll:
    """``select.poll`` over sockets and descriptors, each with what it stands for."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._what: dict[int, tuple[Any, Any]] = {}

    def register(self, fileobj: Any, what: Any) -> None:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd in self._what:
            self._poll.modify(fd, select.POLLIN)
        else:
            self._poll.register(fd, select.POLLIN)
        self._what[fd] = (what, fileobj)

    def unregister(self, fileobj: Any) -> None:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if self._what.pop(fd, None) is not None:
            self._poll.unregister(fd)

    def wait(self, timeout: float | None) -> list[tuple[Any, Any]]:
        ready = self._poll.poll(None if timeout is None else timeout * 1000)
        return [self._what[fd] for fd, _ in ready if fd in self._what]


class Signals:
    """The signals srun catches, from before the step exists until it ends: they
    are noted here and acted on by the step's loop (a pipe wakes it up)."""

    def __init__(self, *extra: int) -> None:
        """``extra``: more signals to note (SIGWINCH under --pty)."""
        self.caught: list[int] = []
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self._old_wakeup = _signal.set_wakeup_fd(self.wake_w)
        watched = (SIGINT, *FORWARDED, *extra)
        self._handlers = {sig: _signal.signal(sig, self._note) for sig in watched}

    def _note(self, sig: int, _frame: object) -> None:
        self.caught.append(sig)

    def close(self) -> None:
        _signal.set_wakeup_fd(self._old_wakeup)
        for sig, handler in self._handlers.items():
            _signal.signal(sig, handler)
        os.close(self.wake_r)
        os.close(self.wake_w)


class Step:
    """One running step as srun sees it: connections, statuses, output."""

    def __init__(
        self, settings: Settings, job_id: int, reply: dict[str, Any], listener: _socket.socket,
        key: bytes, signals: Signals, probe: Callable[[], str | None] = lambda: None,
        terminal: Terminal | None = None,
    ) -> None:  # fmt: skip
        """``probe``: the step's state as the controller has it (None: not known);
        ``terminal``: srun's, under --pty."""
        self.settings = settings
        self.terminal = terminal
        self.probe = probe
        self.job_id = job_id
        self.step_id = int(reply["step_id"])
        self.nodes = list(reply["nodes"])
        self.tasks = [int(t) for t in reply["tasks"]]
        self.ntasks = sum(self.tasks)
        self.ids = _node_ids(self.tasks, [int(t) for t in reply.get("task_ids", ())])
        # each node's component's first task, in a step spanning heterogeneous job
        # components: its error lines name tasks by their id in their component
        self.offsets = [int(t) for t in reply.get("het_task_offsets", ())] or [0] * len(self.nodes)
        # the node of task 0, whose terminal srun's is under --pty
        self.stdin_node = next((i for i, ids in enumerate(self.ids) if 0 in ids), 0)
        self.input = InputRoute.of_srun(
            input_value(settings), self.ntasks, self.ids, terminal is not None
        )
        self.input_fd = sys.stdin.fileno() if self.input.reads else -1
        self.input_file = -1  # -i FILE that srun reads: opened once the step exists
        self.listener = listener
        self.key = key
        self.poll = Poll()
        self.conns: dict[int, _socket.socket] = {}  # node id -> runner
        self.ends: dict[_socket.socket, SrunEnd] = {}  # each runner's session
        # Imported once the step exists, while its runners start and connect: the
        # cipher's few ms of import hide in that wait instead of adding to srun's.
        from corral.stepcipher import SrunEnd as new_end

        self.new_end = new_end
        self.done: set[int] = set()
        self.statuses: dict[int, int] = {}
        self.lines = TaskLines(settings.has("label"), self.ntasks)
        self.early: list[bytes] = []  # frames for every runner, sent before all connected
        self.kill_on_bad_exit = settings.kill_on_bad_exit
        self.interrupts: list[float] = []
        self.killed = False
        self.aborted = False  # the step is being ended (cancel, time limit): said once
        self.forced = False  # scancel -s KILL of the step
        self.go = False  # --bcast: each runner waits for GO before starting its tasks
        self.unlaunched: set[int] = set()  # node ids whose tasks could not be launched
        self.fence = None  # --mpi=pmi2: the PMI fence through srun (cli/srun/pmifence.py)
        if mpitypes.wires(settings.mpi):
            from cli.srun.pmifence import Fence

            self.fence = Fence(len(self.nodes))
        self.signals = signals.caught
        self.wake = signals.wake_r

    @property
    def name(self) -> str:
        return f"StepId={self.job_id}.{self.step_id}"

    # ------------------------------------------------------------ the loop

    def run(self) -> int:
        self.poll.register(self.listener, "accept")
        self.poll.register(self.wake, "wake")
        if self.input_file >= 0:  # -i FILE: srun reads it for the tasks
            self.input_fd = self.input_file
        if self.input.reads:
            try:
                self.poll.register(self.input_fd, "stdin")
            except (ValueError, OSError):  # closed: its end at once
                self._stdin(b"")
        deadline = time.monotonic() + CONNECT_TIMEOUT
        probe_at = time.monotonic() + PROBE_EVERY
        try:
            while len(self.done) < len(self.nodes):
                timeout = None if len(self.conns) == len(self.nodes) else 1.0
                for what, fileobj in self.poll.wait(timeout):
                    self._handle_signals()  # first: a resize goes before keys typed after it
                    self._ready(what, fileobj)
                self._handle_signals()
                if len(self.conns) == len(self.nodes):
                    continue
                why = ""
                now = time.monotonic()
                if now > deadline:
                    why = "no response"
                elif now > probe_at:
                    probe_at = now + PROBE_EVERY
                    state = self.probe()
                    if state not in (None, "RUNNING"):
                        why = f"the step is {state} (its launch was lost)"
                if why:
                    missing = [self.nodes[i] for i in range(len(self.nodes)) if i not in self.conns]
                    print(
                        f"{PROG}: error: Task launch for {self.name} failed on node "
                        f"{','.join(missing)}: {why}",
                        file=sys.stderr,
                    )
                    self._send_all(stepio.frame(stepio.SIGNAL, SIGKILL))
                    for node_id in range(len(self.nodes)):
                        self.done.add(node_id)
                        for task in self._tasks_of(node_id):
                            self.statuses.setdefault(task, 1 << 8)
        finally:
            for conn in self.conns.values():
                conn.close()
            if self.input_file >= 0:
                os.close(self.input_file)
        self.lines.flush()
        return self._report()

    def _handle_signals(self) -> None:
        while self.signals:
            sig = self.signals.pop(0)
            if sig == SIGWINCH:
                self._resized()
                continue
            if sig != SIGINT:
                self._send_all(stepio.frame(stepio.SIGNAL, sig))
                continue
            now = time.monotonic()
            self.interrupts = [t for t in self.interrupts if now - t < 1.0] + [now]
            if len(self.interrupts) == 1:
                running = [t for t in range(self.ntasks) if t not in self.statuses]
                print(f"{PROG}: interrupt (one more within 1 sec to abort)", file=sys.stderr)
                if running:
                    print(f"{PROG}: {self.name} tasks {_ranges(running)}: running", file=sys.stderr)
            elif len(self.interrupts) == 2:
                print(f"{PROG}: sending Ctrl-C to {self.name}", file=sys.stderr)
                self._send_all(stepio.frame(stepio.SIGNAL, SIGINT))
            else:
                print(f"{PROG}: forcing job termination", file=sys.stderr)
                self._send_all(stepio.frame(stepio.SIGNAL, SIGKILL))

    def _resized(self) -> None:
        """srun's terminal changed size: task 0's follows."""
        size = self.terminal.resized() if self.terminal is not None else None
        conn = self.conns.get(self.stdin_node)
        if size is not None and conn is not None:
            self._send(conn, stepio.winsize_frame(*size))

    def _ready(self, what: str, fileobj: Any) -> None:
        if what == "accept":
            fd, _ = self.listener._accept()  # type: ignore[attr-defined]  # _socket's
            conn = _socket.socket(fileno=fd)
            conn.setblocking(True)
            self.ends[conn] = self.new_end(self.key)
            self.poll.register(conn, "hello")
        elif what == "wake":
            os.read(fileobj, 512)
        elif what == "stdin":
            try:
                data = os.read(self.input_fd, 65536)
            except OSError:  # EIO: the terminal hung up
                data = b""
            if not data:
                self.poll.unregister(fileobj)
            self._stdin(data)
        else:
            self._from_runner(fileobj, what)

    def _from_runner(self, conn: _socket.socket, what: str | int) -> None:
        try:
            frames = stepio.recv_frames(conn, self.ends[conn])
        except (OSError, stepio.ProtocolError):
            frames = None
        if frames is None:
            self._lost(conn, what)
            return
        for kind, number, payload in frames:
            if kind == stepio.HELLO and what == "hello":
                node_id, _ = stepio.read_hello(payload)  # sealed: from a holder of the key
                if node_id >= len(self.nodes) or node_id in self.conns:
                    self._lost(conn, what)
                    return
                self.conns[node_id] = conn
                self.poll.register(conn, node_id)
                what = node_id
                if self.go:  # --bcast: the copy is on every node, the tasks may start
                    self._send(conn, stepio.frame(stepio.GO, 0))
                task0 = node_id == self.stdin_node
                if task0 and self.terminal is not None:  # resized before it came
                    self._send(conn, stepio.winsize_frame(*self.terminal.size))
                for data in self.input.connect(node_id):
                    self._send(conn, data)
                for data in self.early:  # a signal that came before this runner did
                    self._send(conn, data)
            elif what == "hello":  # nothing but HELLO comes first
                self._lost(conn, what)
                return
            elif kind in (stepio.OUT, stepio.ERR):
                self.lines.write(kind, number, payload)
            elif kind == stepio.EXIT:
                self._exited(number, stepio.read_status(payload))
            elif kind == stepio.DONE and isinstance(what, int):
                self.done.add(what)
            elif kind == stepio.ABORTED and not self.aborted:
                self.aborted = True  # each node's runner says it: srun says it once
                print(
                    f"{PROG}: Job step aborted: Waiting up to {number + 2} seconds for job "
                    "step to finish.",
                    file=sys.stderr,
                )
            elif kind == stepio.FORCED:
                self.forced = True  # said after the tasks' lines, as Slurm's srun says it
            elif kind == stepio.FAILED and isinstance(what, int):
                self._launch_failed(what, payload.decode(errors="replace"))
            elif kind == stepio.IO_FAILED and isinstance(what, int):
                self._io_failed(what)
            elif (
                kind in (stepio.KVS, stepio.FENCE, stepio.ABORT)
                and isinstance(what, int)
                and not self._pmi(what, kind, number, payload)
            ):  # PMI frames from the runner of a step without PMI: not our runner
                self._lost(conn, what)
                return

    def _pmi(self, node_id: int, kind: int, number: int, payload: bytes) -> bool:
        """A runner's part of a fence, or a task's PMI abort; False: not a PMI step."""
        if self.fence is None:
            return False
        if kind == stepio.KVS:
            self.fence.add(payload)
        elif kind == stepio.FENCE:
            for data in self.fence.enter(node_id):
                self._send_all(data)
        else:
            code, message = stepio.read_abort(payload)
            said = f": {message}" if message else ""
            print(
                f"{PROG}: error: {self.nodes[node_id]}: task {number}: PMI abort with exit "
                f"code {code}{said}",
                file=sys.stderr,
            )
            if not self.killed:  # Slurm's PMI plugin ends the whole step
                self.killed = True
                print(f"{PROG}: Terminating {self.name}", file=sys.stderr)
                self._send_all(stepio.frame(stepio.SIGNAL, stepio.TERM_KILL))
        return True

    def _launch_failed(self, node_id: int, why: str) -> None:
        """The node's runner could not start its tasks (user, cgroup): they failed."""
        print(
            f"{PROG}: error: Task launch for {self.name} failed on node {self.nodes[node_id]}: "
            f"{why}",
            file=sys.stderr,
        )
        if not self.killed:  # the step cannot run as asked: the other nodes' tasks end too
            self.killed = True
            self._send_all(stepio.frame(stepio.SIGNAL, stepio.TERM_KILL))
        self.unlaunched.add(node_id)
        self.done.add(node_id)
        for task in self._tasks_of(node_id):
            self.statuses.setdefault(task, 1 << 8)

    def _io_failed(self, node_id: int) -> None:
        """The node could not open a task's input file: Slurm 22.05's srun says "task N
        launch failed: Slurmd could not connect IO" for each of its tasks, leaves the
        other nodes' tasks running, and counts no exit code for these (measured: srun
        exits as the tasks that ran do, 0 when none did)."""
        for task in self._tasks_of(node_id):
            print(
                f"{PROG}: error: task {task} launch failed: Slurmd could not connect IO",
                file=sys.stderr,
            )
        self.unlaunched.add(node_id)
        self.done.add(node_id)

    def _lost(self, conn: _socket.socket, what: str | int) -> None:
        self.poll.unregister(conn)
        self.ends.pop(conn, None)
        conn.close()
        if isinstance(what, int) and what not in self.done:
            self.done.add(what)
            for task in self._tasks_of(what):
                self.statuses.setdefault(task, SIGKILL)

    def _tasks_of(self, node_id: int) -> list[int]:
        return self.ids[node_id]

    # ------------------------------------------------------------ streams

    def _stdin(self, data: bytes) -> None:
        """Input read (empty: its end), to the runners it is for that are connected
        (those still to come get it as they do)."""
        nodes, frame = self.input.read(data)
        for node_id in nodes:
            conn = self.conns.get(node_id)
            if conn is not None:
                self._send(conn, frame)

    def _send(self, conn: _socket.socket, frames: bytes) -> None:
        conn.sendall(self.ends[conn].seal(frames))

    def _send_all(self, data: bytes) -> None:
        if len(self.conns) < len(self.nodes):
            self.early.append(data)
        for conn in self.conns.values():
            try:
                self._send(conn, data)
            except OSError:
                continue

    def _exited(self, task: int, status: int) -> None:
        self.statuses[task] = status
        if status and self.kill_on_bad_exit and not self.killed:
            self.killed = True
            print(f"{PROG}: Terminating {self.name}", file=sys.stderr)
            self._send_all(stepio.frame(stepio.SIGNAL, stepio.TERM_KILL))

    def _report(self) -> int:
        """Slurm's lines for failed tasks, by node and cause; the exit code."""
        for node_id, node in enumerate(self.nodes):
            if node_id in self.unlaunched:  # said already
                continue
            causes: dict[str, list[int]] = {}
            for task in self._tasks_of(node_id):
                status = self.statuses.get(task, 0)
                if status:
                    causes.setdefault(_why(status), []).append(task - self.offsets[node_id])
            for why, ids in causes.items():
                noun = "task" if len(ids) == 1 else "tasks"
                print(f"{PROG}: error: {node}: {noun} {_ranges(ids)}: {why}", file=sys.stderr)
        if self.forced:
            print(f"{PROG}: Force Terminated {self.name}", file=sys.stderr)
        return exit_code(list(self.statuses.values()))


def site_program(kind: str, program: str, settings: Settings, job_id: int) -> bool:
    """Run SrunProlog or SrunEpilog (``kind`` "prolog" or "epilog") as Slurm's srun does:
    here, as srun's user, in srun's environment, with the step's command line as its
    arguments. False, said on stderr, when it failed."""
    if not program:
        return True
    from corral import hooks  # loaded only where one is set: srun's start-up budget

    env = {**os.environ, "SLURM_JOB_ID": str(job_id), "SLURM_JOBID": str(job_id)}
    result = hooks.run(program, env, argv=settings.command, cwd=os.getcwd())
    if result.ok:
        return True
    code = result.status >> 8 if result.status > 0 else result.status
    ending = ". Aborting step." if kind == "prolog" else ""
    print(f"{PROG}: error: srun {kind} failed rc = {code}{ending}", file=sys.stderr)
    return False


def run_in_allocation(
    client: Any,
    settings: Settings,
    job_id: int,
    conf: ClientSettings | None = None,
    het_parts: Sequence[tuple[Settings, int]] = (),
    own: bool = False,
) -> int:
    """Run the step in job ``job_id``, between SrunProlog and SrunEpilog (``conf``'s):
    a failed SrunProlog launches nothing. ``het_parts``: the later components' parts
    of a step spanning heterogeneous job components, each with its component's job
    (``own``: a heterogeneous job this srun made)."""
    prolog, epilog = (conf.srun_prolog, conf.srun_epilog) if conf else ("", "")
    if not site_program("prolog", prolog, settings, job_id):
        return 1
    try:
        return _step_in_allocation(client, settings, job_id, het_parts, own)
    finally:
        site_program("epilog", epilog, settings, job_id)


def _step_in_allocation(
    client: Any,
    settings: Settings,
    job_id: int,
    het_parts: Sequence[tuple[Settings, int]] = (),
    own: bool = False,
) -> int:
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.bind(("", 0))
    listener.listen(64)
    key = os.urandom(stepio.KEY_BYTES)
    terminal = None
    if settings.has("pty"):
        from cli.srun.terminal import open_terminal

        terminal = open_terminal(PROG)
    signals = Signals(SIGWINCH) if terminal is not None else Signals()
    try:
        request = step_request(settings, job_id, listener, key, terminal)
        copy = None
        if settings.has("bcast"):
            if het_parts:
                raise Halt(1, f"{PROG}: error: --bcast is not supported in a step of parts (:)")
            from cli.srun.bcast import Copy

            copy = Copy(settings.options, settings.command[0], client_settings())
            request.update(copy.fields())
        if het_parts:  # one step: every part's runners come to this srun's socket
            request["het_parts"] = [step_request(s, j, listener, key) for s, j in het_parts]
            request["own_het_job"] = own
        reply = create_step(client, request, settings.has("quiet"))
        step_id = int(reply["step_id"])
        if copy is not None and copy.send(client, job_id, step_id):
            return 1  # the runners, waiting for GO, see srun hang up: no task starts

        def probe() -> str | None:
            return step_state(client, job_id, step_id)

        input_file = -1
        ntasks = sum(int(t) for t in reply["tasks"])
        if stepinput.mode(input_value(settings), ntasks)[0] == stepinput.SRUN_FILE:
            input_file = open_input(input_value(settings), settings, job_id, step_id)
            if input_file < 0:
                return 1  # the runners find srun gone: no task starts
        step = Step(settings, job_id, reply, listener, key, signals, probe, terminal)
        step.input_file = input_file
        step.go = copy is not None
        if terminal is not None:
            terminal.raw()
        try:
            return step.run()
        finally:
            if terminal is not None:
                terminal.restore()
    finally:
        signals.close()
        listener.close()


def input_value(settings: Settings) -> str:
    """``--input`` as the step gets it: given empty, 22.05's srun feeds task 0 alone."""
    value = settings.get("input")
    return value if value or not settings.has("input") else "0"


def open_input(pattern: str, settings: Settings, job_id: int, step_id: int) -> int:
    """``-i FILE`` without a per-task pattern: srun opens it, relative to its own
    directory, as 22.05's does (its bytes go to every task); -1 after Slurm's error
    when it cannot be read."""
    array_task = os.environ.get("SLURM_ARRAY_TASK_ID", "")
    path = filepattern.expand(
        pattern,
        job_id=job_id,
        array_job_id=int(os.environ.get("SLURM_ARRAY_JOB_ID", "0") or 0),
        array_task_id=int(array_task) if array_task.isdigit() else None,
        user=os.environ.get("USER", "") or str(os.getuid()),
        job_name=settings.get("job-name") or os.environ.get("SLURM_JOB_NAME", ""),
        node="",
        step=str(step_id),
    )
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as exc:
        print(f"{PROG}: error: Could not open stdin file: {exc.strerror}", file=sys.stderr)
        return -1


def run_in_new_allocation(
    client: Any, settings: Settings, argv: list[str], conf: ClientSettings | None = None
) -> int:
    """srun outside a job: an allocation for the step, the step, then give it back."""
    from cli import allocation

    name = os.path.basename(settings.command[0])
    job_id = allocation.submit(client, PROG, settings.options, name, argv)
    os.environ.update(allocation.wait_for_start(client, PROG, job_id, settings.has("quiet")))
    told = allocation.hint_environment(settings.options)  # the tasks': no SLURM_HINT
    os.environ.update({k: v for k, v in told.items() if k != "SLURM_HINT"})
    code = 1
    halt_notices = allocation.print_notices(client, PROG, job_id)
    try:
        code = run_in_allocation(client, settings, job_id, conf)
    finally:
        halt_notices()
        allocation.release(client, job_id, (code & 0xFF) << 8)
    return code


def srun(argv: list[str]) -> int:
    try:
        groups = hetstep.split(argv)
        settings = parse(groups[0])
        job_text = (
            settings.get("jobid")
            or os.environ.get("SLURM_JOB_ID")
            or os.environ.get("SLURM_JOBID", "")
        )
        if settings.has("clusters"):
            _to_cluster(settings, job_text, groups, argv)
        if len(groups) > 1 or len(hetstep.groups(settings.get("het-group", "0"))) > 1:
            return _spanning_step(groups, settings, job_text, argv)
        if job_text and settings.has("het-group"):  # a component of a heterogeneous job
            job_text = hetstep.job_of(settings.get("het-group"), job_text, os.environ)[0]
        elif settings.has("het-group"):  # one index outside a job: 22.05 runs a plain job
            settings.options.pop("het-group", None)
        job_id = _job_id(job_text, settings) if job_text else 0
        settings.relative = placement.relative(settings.options, os.environ, bool(job_text))
        gpuinput.inherit(settings.options, os.environ)  # after: the job's own raise no warning
        conf = client_settings()
        settings.kill_on_bad_exit = kill_on_bad_exit(settings, conf.kill_on_bad_exit)
        settings.mpi = mpi_type(settings, os.environ, conf.mpi_default)
        client = boundary.connect(conf)
        if not job_text:
            return run_in_new_allocation(client, settings, argv, conf)
        return run_in_allocation(client, settings, job_id, conf)
    except Halt as halt:
        if halt.status == 0:  # --help, --version
            print("\n".join(halt.lines))
            return 0
        return halt.report()


def _to_cluster(
    settings: Settings, job_text: str, groups: list[list[str]], argv: list[str]
) -> None:
    """``-M``: outside a job the new allocation goes to the cluster named (of several,
    the one that would start it first); in a job a step runs in the job's own cluster,
    so naming another is refused."""
    from cli import allocation, clusters

    wanted = settings.get("clusters") or ""
    if job_text:
        if not all(clusters.local(name) for name in wanted.split(",") if name):
            raise Halt(
                1, f"{PROG}: error: --clusters={wanted}: a job step runs in its job's cluster"
            )
        return
    het = [parse(words, hetstep.inherited(settings.options)).options for words in groups[1:]]
    name = os.path.basename(settings.command[0]) if settings.command else PROG
    allocation.choose_cluster(PROG, settings.options, name, argv, het)


def _job_id(job_text: str, settings: Settings) -> int:
    """The job a step runs in, once the options only a new job takes are checked."""
    try:
        job_id = int(job_text.split("_")[0])
    except ValueError:
        raise Halt(1, f"{PROG}: error: Invalid job id: {job_text}") from None
    for warning in step_options.check(settings.options, job_id, os.environ):
        print(warning, file=sys.stderr)
    return job_id


def _spanning_step(groups: list[list[str]], first: Settings, job_text: str, argv: list[str]) -> int:
    """A step spanning heterogeneous job components (``cli/srun/hetstep.py``): each
    ``:`` group in the next component (or those its --het-group names), component 0's
    part first; the first part's srun-wide options (-l, -K, --mpi) serve them all.
    Outside a job, srun first makes the heterogeneous job itself (``_own_het_job``)."""
    if not job_text:
        return _own_het_job(groups, first, argv)
    parts: list[tuple[int, Settings]] = []
    settings = first
    for index, words in enumerate(groups):
        if index:
            settings = parse(words, hetstep.inherited(settings.options))
        named = hetstep.groups(settings.get("het-group")) if settings.has("het-group") else [index]
        parts += [(component, settings) for component in named]
    parts.sort(key=lambda part: part[0])
    if "SLURM_HET_SIZE" not in os.environ:  # an ordinary job: one step, a part per group
        return _one_job_step([settings for _, settings in parts], job_text)
    indexes = [component for component, _ in parts]
    job_of = dict(zip(indexes, hetstep.job_ids(indexes, job_text, os.environ), strict=True))
    conf = client_settings()
    main = _main_part(parts[0][1], conf)
    steps: list[tuple[Settings, int]] = []
    for component, settings in parts:
        _step_part(settings, main, True)
        steps.append((settings, _job_id(job_of[component], settings)))
    client = boundary.connect(conf)
    (_, job_id), *rest = steps
    return run_in_allocation(client, main, job_id, conf, rest)


def _main_part(main: Settings, conf: ClientSettings) -> Settings:
    """Component 0's part, whose srun-wide options (-K, --mpi) serve every part."""
    main.kill_on_bad_exit = kill_on_bad_exit(main, conf.kill_on_bad_exit)
    main.mpi = mpi_type(main, os.environ, conf.mpi_default)
    return main


def _step_part(settings: Settings, main: Settings, in_job: bool) -> None:
    """A part's step options completed from the environment, as a plain step's."""
    settings.relative = placement.relative(settings.options, os.environ, in_job)
    gpuinput.inherit(settings.options, os.environ)
    settings.mpi = main.mpi  # one srun serves the whole step's PMI


def _own_het_job(groups: list[list[str]], first: Settings, argv: list[str]) -> int:
    """``srun a : b`` outside a job, as Slurm 22.05's srun runs it: a heterogeneous job
    of one component per group (as salloc's, ``cli/allocation.py``; ``--het-group=0,1``:
    one per index, the same options in each), one step spanning them all, the job
    given back when the step ends. A group's --het-group names nothing here: the
    components are the groups, as in Slurm."""
    parts = [first]
    for words in groups[1:]:
        parts.append(parse(words, hetstep.inherited(parts[-1].options)))
    if len(parts) == 1:
        parts *= len(hetstep.groups(first.get("het-group")))
    for settings in parts:
        settings.options.pop("het-group", None)
    conf = client_settings()
    main = _main_part(parts[0], conf)
    for settings in parts:
        _step_part(settings, main, False)
    client = boundary.connect(conf)
    from cli import allocation

    name = os.path.basename(main.command[0])
    het = [settings.options for settings in parts[1:]]
    job_id = allocation.submit(client, PROG, main.options, name, argv, het)
    env = allocation.wait_for_start(client, PROG, job_id, main.has("quiet"))
    jobs = [int(env[f"SLURM_JOB_ID_HET_GROUP_{index}"]) for index in range(len(parts))]
    # The tasks have what Slurm's srun sets for its own job, not salloc's per-group names.
    os.environ.update({k: v for k, v in env.items() if "_GROUP_" not in k})
    code = 1
    halt_notices = allocation.print_notices(client, PROG, job_id)
    try:
        rest = list(zip(parts[1:], jobs[1:], strict=True))
        code = run_in_allocation(client, main, job_id, conf, rest, own=True)
    finally:
        halt_notices()
        allocation.release(client, job_id, (code & 0xFF) << 8)
    return code


def _one_job_step(parts: list[Settings], job_text: str) -> int:
    """``srun a : b`` in an ordinary job, as Slurm 22.05's srun runs it: one step of the
    job, each group on the next of the job's nodes (its -N, else as many as its -n
    asks, at most the job's, else all of them; ``hetstep.node_spans``), its tasks
    numbered across the groups (``controller/mpmdsteps.py``)."""
    import copy

    from corral import hostlist

    conf = client_settings()
    main = _main_part(parts[0], conf)
    job_id = _job_id(job_text, main)
    client = boundary.connect(conf)
    nodes = hostlist.expand(client.call("Allocation", {"job_id": job_id})["nodes"])
    counts = [_nodes_of_part(settings, len(nodes)) for settings in parts]
    steps: list[tuple[Settings, int]] = []
    spans = hetstep.node_spans(counts, len(nodes))
    for index, (part, span) in enumerate(zip(parts, spans, strict=True)):
        settings = copy.copy(part)  # --het-group=0,1: one group's options, two parts
        settings.options = dict(part.options)
        settings.options.setdefault("nodelist", hostlist.compress(nodes[span.start : span.stop]))
        settings.options.setdefault("nodes", str(len(span)))
        if index and part is not main:
            _job_id(job_text, settings)  # its options' warnings, as a plain step's
        _step_part(settings, main, True)
        steps.append((settings, job_id))
    (first, _), *rest = steps
    return run_in_allocation(client, first, job_id, conf, rest)


def _nodes_of_part(settings: Settings, total: int) -> int:
    """How many of the job's ``total`` nodes a part of a step in an ordinary job takes."""
    if settings.has("nodes"):
        return settings.count("nodes")
    if settings.has("ntasks"):
        return min(settings.count("ntasks"), total)
    return total
