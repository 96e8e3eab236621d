"""sbatch's option table and the SBATCH_* environment variables that stand for options.

The table lists every long option Slurm 24.11's sbatch accepts, not only the
ones Corral acts on: a script written for Slurm must not fail with
``unrecognized option`` because of ``--mail-type``, and prefix abbreviations
must be ambiguous exactly where Slurm's are (``--par`` could be
``--parsable`` or ``--partition``). Corral adds one option, ``--elastic``
(docs/design.md, "Elastic jobs"); no Slurm option begins with ``el``, so no
abbreviation changes meaning. Each row says what Corral does with the
option (``cli.options.HONOURED``, ``WARNED`` or ``REFUSED``): an option it
does not implement is refused where ignoring it could change the outcome,
and warned about where it cannot.
"""

from __future__ import annotations

from cli.options import (
    HONOURED,
    NO_ARGUMENT,
    OPTIONAL,
    REFUSED,
    REQUIRED,
    WARNED,
    Option,
    OptionTable,
)


def _row(
    long: str, short: str = "", arg: int = REQUIRED, use: str = HONOURED, note: str = ""
) -> Option:
    return Option(long, short, long, arg, use, note)


def _no(long: str, note: str, short: str = "", arg: int = REQUIRED) -> Option:
    """An option not implemented whose absence could change the outcome: refused."""
    return Option(long, short, long, arg, REFUSED, note)


def _warn(long: str, note: str, short: str = "", arg: int = REQUIRED) -> Option:
    """An option not implemented that cannot change the outcome: warned about."""
    return Option(long, short, long, arg, WARNED, note)


_PLACEMENT = "this placement constraint is not implemented"
#: The note of Corral's own --topology-level (sbatch, salloc and srun).
TOPOLOGY_LEVEL = "Corral's own: REQUIRED[:PREFERRED] switch or block level (docs/topology.md)"
_LAYOUT = "this task layout request is not implemented"
_TO_CLUSTERS = "to the cluster named; of several, the one that would start the job first"


TABLE = OptionTable(
    [
        _row("account", "A"),
        _warn("acctg-freq", "accounting samples once per job"),
        _row("array", "a"),
        _no("autocomplete", "no shell completion"),
        _no("batch", "batch host features are not implemented"),
        _no("bb", "burst buffers are not implemented"),
        _no("bbf", "burst buffers are not implemented"),
        _row("begin", "b"),
        _row("chdir", "D"),
        Option("clusters", "", "cluster", REQUIRED, HONOURED, _TO_CLUSTERS),
        _no("cluster-constraint", "federation is not implemented"),
        _row("clusters", "M", note=_TO_CLUSTERS),
        _row("comment"),
        _row("constraint", "C"),
        _row(
            "container",
            note="an OCI bundle the batch script runs in (oci.conf; docs/containers.md)",
        ),
        _row(
            "container-id",
            note="Slurm 24.11's: shown and in SLURM_CONTAINER_ID; no runtime uses it",
        ),
        _no("context", "SELinux contexts are not implemented"),
        _no("contiguous", _PLACEMENT, arg=NO_ARGUMENT),
        _no("core-spec", "core specialization is not implemented", "S"),
        _row(
            "cores-per-socket",
            note="at least that many free cores on each socket the job uses; without -n on a fixed "
            "node count, a task per core (Slurm's); a --hint that holds drops it",
        ),
        _warn("cpu-freq", "CPU frequencies are left as they are"),
        _row("cpus-per-gpu"),
        _row("cpus-per-task", "c"),
        _row("deadline"),
        _warn("delay-boot", "nodes are never rebooted for a job"),
        _row("dependency", "d"),
        _row(
            "distribution",
            "m",
            note="SLURM_DISTRIBUTION for the job's steps; its second level (block, cyclic, "
            "fcyclic) takes the job's CPUs from each node's sockets",
        ),
        _row(
            "elastic",
            arg=OPTIONAL,
            note="Corral's: with -N min-max the job grows and shrinks while it runs, "
            "told by SIG (default WINCH) and $CORRAL_RESIZE_FILE",
        ),
        _row("error", "e"),
        _row("exclude", "x"),
        _row("exclusive", arg=OPTIONAL, note="=user, =mcs and =topo are refused"),
        _row("export"),
        _row("export-file"),
        _no("extra", "extra node constraints are not implemented"),
        _row(
            "extra-node-info",
            "B",
            note="S[:C[:T]], each a count, MIN-MAX (the minimum) or *: as --sockets-per-node, "
            "--cores-per-socket and --threads-per-core; drops --hint",
        ),
        _row(
            "get-user-env",
            arg=OPTIONAL,
            note="refused for root: the login environment is not loaded (others': ignored, "
            "as in Slurm)",
        ),
        _row("gid"),
        _row(
            "gpu-bind",
            note="closest, map_gpu, mask_gpu, none, per_task, single: steps bind each task "
            "(SLURM_GPU_BIND)",
        ),
        _warn("gpu-freq", "GPU frequencies are left as they are"),
        _row("gpus", "G"),
        _row("gpus-per-node"),
        _row(
            "gpus-per-socket",
            note="with --sockets-per-node; GPUs near each socket where gres.conf names their cores",
        ),
        _row("gpus-per-task"),
        _row("gres", note="A|B: alternatives, in order of preference (Corral's own)"),
        _row("gres-flags", note="enforce-binding (CPUs near the GPUs only) or disable-binding"),
        _row("help", "h", NO_ARGUMENT),
        _row(
            "hint",
            note="nomultithread, compute_bound, memory_bound: a thread of each whole core; "
            "SLURM_HINT for the steps",
        ),
        _row("hold", "H", NO_ARGUMENT),
        _row("ignore-pbs", arg=NO_ARGUMENT, note="#PBS lines are never read"),
        _no("immediate", "immediate allocation is not implemented", "I", OPTIONAL),
        _row("input", "i"),
        _row("job-name", "J"),
        _row("kill-on-invalid-dep"),
        _row("licenses", "L", note="names of slurm.conf's Licenses=, each :count (default 1)"),
        _row("mail-type", note="by slurm.conf's MailProg, with Slurm's subject lines"),
        _row("mail-user"),
        _no("mcs-label", "MCS labels are not implemented"),
        _row("mem"),
        _warn("mem-bind", "memory is not bound to NUMA nodes"),
        _row("mem-per-cpu"),
        _row("mem-per-gpu"),
        _row("mincpus"),
        _no("network", "network requests are not implemented"),
        _row("nice", arg=OPTIONAL),
        _no("no-kill", "a job always ends with a failed node", "k", OPTIONAL),
        _row("no-requeue", arg=NO_ARGUMENT),
        _row("nodefile", "F"),
        _row("nodelist", "w"),
        _row("nodes", "N"),
        _row("ntasks", "n"),
        _no("ntasks-per-core", _LAYOUT),
        _row("ntasks-per-gpu"),
        _row("ntasks-per-node"),
        _row("ntasks-per-socket", note="at most N tasks on each socket of a node"),
        _no("ntasks-per-tres", _LAYOUT),
        _no("oom-kill-step", "OOM handling per step is not implemented", arg=OPTIONAL),
        _row("open-mode", note="append or truncate"),
        _row("output", "o"),
        _no("overcommit", "overcommitting CPUs is not implemented", "O", NO_ARGUMENT),
        _row("oversubscribe", "s", NO_ARGUMENT),
        _row("parsable", arg=NO_ARGUMENT),
        _row("partition", "p"),
        _row("prefer", note="tried first, then --constraint, as Slurm 22.05 does"),
        _row("priority"),
        _warn("profile", "no profiling data is gathered"),
        _no("propagate", "resource limits are not propagated", arg=OPTIONAL),
        _row("qos", "q"),
        _row("quiet", "Q", NO_ARGUMENT),
        _warn("reboot", "nodes are never rebooted for a job", arg=NO_ARGUMENT),
        _row("requeue", arg=NO_ARGUMENT),
        _row("reservation"),
        _no("resv-ports", "reserved ports are not implemented", arg=OPTIONAL),
        _row("segment", note="with TopologyPlugin=topology/block"),
        _row("signal", note="[B:]SIG[@SECS]; the R: flag is warned (no MaxStartDelay)"),
        _row(
            "sockets-per-node",
            note="nodes with at least that many sockets; without -n on a fixed node count, "
            "a task per socket (Slurm's); cores are not spread over them",
        ),
        _no("spread-job", _PLACEMENT, arg=NO_ARGUMENT),
        _warn("stepmgr", "steps are always managed by the controller", arg=NO_ARGUMENT),
        _row("switches", note="with TopologyPlugin=topology/tree"),
        Option("ntasks-per-node", "", "tasks-per-node", REQUIRED),
        _row("test-only", arg=NO_ARGUMENT),
        _no("thread-spec", "thread specialization is not implemented"),
        _row("threads-per-core", note="that many threads of each whole core; drops --hint"),
        _row("time", "t"),
        _row("time-min"),
        _row("topology-level", note=TOPOLOGY_LEVEL),
        _no("tmp", "temporary disk requests are not implemented"),
        _no("tres-bind", _LAYOUT),
        _no("tres-per-task", _LAYOUT),
        _row("uid"),
        _row("usage", arg=NO_ARGUMENT),
        _no("use-min-nodes", _PLACEMENT, arg=NO_ARGUMENT),
        _row("verbose", "v", NO_ARGUMENT),
        _row("version", "V", NO_ARGUMENT),
        _row("wait", "W", NO_ARGUMENT),
        _warn("wait-all-nodes", "nodes are up when a job starts"),
        _warn("wckey", "WCKeys are not tracked (a label only: TrackWCKey is refused)"),
        _row("wrap"),
    ],
    prog="sbatch",
)

#: Options that only count on the command line: Slurm handles them before it
#: reads the script, and ignores them in #SBATCH lines.
COMMAND_LINE_ONLY = frozenset({"help", "usage", "verbose", "quiet", "version", "wrap"})

#: Options a heterogeneous job's component takes from the one before unless it sets
#: them itself (Slurm's heterogeneous_jobs.html lists them; --chdir and --mem too, as
#: a real 22.05 sbatch propagates them); others start afresh.
PROPAGATED = frozenset(
    {"account", "acctg-freq", "begin", "chdir", "cluster-constraint", "clusters", "comment",
     "deadline", "delay-boot", "dependency", "distribution", "error", "export", "export-file",
     "exclude", "get-user-env", "gid", "hold", "ignore-pbs", "immediate", "input", "job-name",
     "mail-type", "mail-user", "mcs-label", "mem", "nice", "no-kill", "no-requeue", "open-mode",
     "output", "parsable", "partition", "priority", "profile", "propagate", "qos", "reboot",
     "requeue", "reservation", "signal", "time", "time-min", "uid", "wait", "wckey"}
)  # fmt: skip

#: Environment variables read as options, in the order Slurm reads them; later
#: ones override earlier ones, and all of them override #SBATCH lines.
ENVIRONMENT = (
    ("SBATCH_ACCOUNT", "account"),
    ("SBATCH_ARRAY_INX", "array"),
    ("SBATCH_ACCTG_FREQ", "acctg-freq"),
    ("SBATCH_BATCH", "batch"),
    ("SBATCH_BURST_BUFFER", "bb"),
    ("SBATCH_CLUSTER_CONSTRAINT", "cluster-constraint"),
    ("SBATCH_CLUSTERS", "clusters"),
    ("SLURM_CLUSTERS", "clusters"),
    ("SBATCH_CONTAINER", "container"),
    ("SBATCH_CONTAINER_ID", "container-id"),
    ("SBATCH_CONSTRAINT", "constraint"),
    ("SBATCH_CORE_SPEC", "core-spec"),
    ("SBATCH_CPU_FREQ_REQ", "cpu-freq"),
    ("SBATCH_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SBATCH_DELAY_BOOT", "delay-boot"),
    ("SBATCH_DISTRIBUTION", "distribution"),
    ("SBATCH_EXCLUSIVE", "exclusive"),
    ("SBATCH_EXPORT", "export"),
    ("SBATCH_GET_USER_ENV", "get-user-env"),
    ("SBATCH_GRES", "gres"),
    ("SBATCH_GRES_FLAGS", "gres-flags"),
    ("SBATCH_GPUS", "gpus"),
    ("SBATCH_GPU_BIND", "gpu-bind"),
    ("SBATCH_GPU_FREQ", "gpu-freq"),
    ("SBATCH_GPUS_PER_NODE", "gpus-per-node"),
    ("SBATCH_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SBATCH_GPUS_PER_TASK", "gpus-per-task"),
    ("SLURM_HINT", "hint"),
    ("SBATCH_HINT", "hint"),
    ("SBATCH_JOB_NAME", "job-name"),
    ("SBATCH_MEM_BIND", "mem-bind"),
    ("SBATCH_MEM_PER_CPU", "mem-per-cpu"),
    ("SBATCH_MEM_PER_GPU", "mem-per-gpu"),
    ("SBATCH_MEM_PER_NODE", "mem"),
    ("SBATCH_NETWORK", "network"),
    ("SBATCH_NO_KILL", "no-kill"),
    ("SBATCH_NO_REQUEUE", "no-requeue"),
    ("SBATCH_OPEN_MODE", "open-mode"),
    ("SBATCH_OVERCOMMIT", "overcommit"),
    ("SBATCH_PARTITION", "partition"),
    ("SBATCH_PROFILE", "profile"),
    ("SBATCH_QOS", "qos"),
    ("SBATCH_REQ_SWITCH", "switches"),
    ("SBATCH_REQUEUE", "requeue"),
    ("SBATCH_RESERVATION", "reservation"),
    ("SBATCH_SIGNAL", "signal"),
    ("SBATCH_SPREAD_JOB", "spread-job"),
    ("SBATCH_THREAD_SPEC", "thread-spec"),
    ("SBATCH_THREADS_PER_CORE", "threads-per-core"),
    ("SBATCH_TIMELIMIT", "time"),
    ("SBATCH_TOPOLOGY_LEVEL", "topology-level"),
    ("SBATCH_TRES_BIND", "tres-bind"),
    ("SBATCH_TRES_PER_TASK", "tres-per-task"),
    ("SBATCH_USE_MIN_NODES", "use-min-nodes"),
    ("SBATCH_WAIT", "wait"),
    ("SBATCH_WAIT_ALL_NODES", "wait-all-nodes"),
    ("SBATCH_WCKEY", "wckey"),
    ("SBATCH_ERROR", "error"),
    ("SBATCH_INPUT", "input"),
    ("SBATCH_OUTPUT", "output"),
)

#: --switches' max-time alone (Slurm's envvar-only option): read after the variables above.
WAIT4SWITCH = "SBATCH_WAIT4SWITCH"
