"""slurm.conf, read the way Slurm reads it.

Administrators bring their existing slurm.conf, so the syntax is Slurm's:
case-insensitive ``Key=Value`` pairs (several per line, ``"quoted values"``),
``#`` comments unless escaped as ``\\#``, a trailing ``\\`` continuing a line,
``Include <file>`` (``%c`` is the ClusterName), cumulative
``NodeName=DEFAULT``/``PartitionName=DEFAULT`` lines, ``DownNodes=`` and
``NodeSet=`` lines. Every key Slurm knows is accepted; keys Slurm does not
know are reported in ``SlurmConfig.warnings`` rather than refused, so a typo
never takes a cluster down. A known key Corral does not implement is warned
about or refused as ``corral.confkeys`` says, never ignored in silence. A
value Corral needs and cannot use is a ``ConfigError`` naming the file and
line, because guessing would schedule jobs on the wrong resources.

The lines themselves are read by ``corral.confsyntax``, the one tokenizer
shared with ``corral.clientconf``: client commands need only a few top-level
settings and read them with ``client_settings`` (re-exported here), never
importing this module, its dataclasses or ``re``.

Why this module is over 500 lines: it is the one model of slurm.conf, and each
key's parsing, default and check sits beside the field it fills, so that a key
is read in one place (the tokenizer is ``corral/confsyntax.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from corral import (
    bcastparams,
    cgroupconf,
    confkeys,
    confsyntax,
    gres,
    gresconf,
    hostlist,
    jobacct,
    mpitypes,
    preemptconf,
    queueconf,
    statestorage,
    timefmt,
    tlsconf,
    topologyconf,
)
from corral.clientconf import ClientSettings, client_settings
from corral.confkeys import KeyUse
from corral.confsyntax import (
    DEFAULT_PATH,
    MAX_ARRAY_SIZE,
    NOWHERE,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMD_SPOOL_DIR,
    STATE_SAVE_LOCATION,
    UINT32,
    ConfigError,
    Where,
    controllers,
    default_path,
    integer,
    port_range,
    read_text,
)
from corral.licenses import Licenses, LicenseSyntaxError
from corral.licenses import parse as parse_licenses

__all__ = [
    "DEFAULT_PATH",
    "ClientSettings",
    "ConfigError",
    "NodeConfig",
    "PartitionConfig",
    "PriorityConfig",
    "SlurmConfig",
    "client_settings",
    "default_path",
    "load",
    "parse",
    "show_config",
]


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """One node as slurm.conf defines it. ``sockets`` is the node's total socket count."""

    name: str
    node_addr: str
    node_hostname: str
    port: int
    cpus: int
    boards: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory: int
    tmp_disk: int
    gres: str
    features: tuple[str, ...]
    weight: int
    state: str
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    """One partition. Durations are minutes (-1 unlimited); memory is MiB, 0 unlimited.

    ``nodes`` is the expanded node list in the order slurm.conf defines the
    nodes, which is the order Slurm considers them in.
    """

    name: str
    nodes: tuple[str, ...]
    nodes_expr: str
    default: bool
    max_time: int
    default_time: int | None
    max_nodes: int | None
    min_nodes: int
    state: str
    priority_tier: int
    priority_job_factor: int
    oversubscribe: str
    allow_accounts: tuple[str, ...] | None
    allow_groups: tuple[str, ...] | None
    def_mem_per_cpu: int
    def_mem_per_node: int
    max_mem_per_node: int
    max_mem_per_cpu: int
    max_cpus_per_node: int | None
    hidden: bool
    root_only: bool
    # TRESBillingWeights as (TRES, weight per unit: MiB for mem); (): billing = CPUs.
    billing_weights: tuple[tuple[str, float], ...] = ()
    allow_qos: tuple[str, ...] | None = None  # None: ALL
    deny_accounts: tuple[str, ...] = ()
    deny_qos: tuple[str, ...] = ()
    # PreemptMode= of the partition: OFF, CANCEL, REQUEUE, SUSPEND ("": the global)
    preempt_mode: str = ""
    grace_time: int = 0  # GraceTime, seconds: a victim's warning before its mode's action
    # DefCpuPerGPU and DefMemPerGPU (MiB), the partition's or else the cluster's: what a
    # GPU job that asks for no CPUs per task or GPU (no memory) gets per GPU; 0: none.
    def_cpu_per_gpu: int = 0
    def_mem_per_gpu: int = 0
    # The partition's own (not the cluster's) as scontrol shows them: JobDefaults=...
    job_defaults: str = ""
    # Its own SuspendTime, SuspendTimeout and ResumeTimeout, as (key, value) pairs
    # (controller/powersave.py applies them to its nodes).
    power: tuple[tuple[str, str], ...] = ()


#: Slurm's PriorityFlags words, in the order ``scontrol show config`` lists them.
PRIORITY_FLAGS = (
    "ACCRUE_ALWAYS",
    "SMALL_RELATIVE_TO_TIME",
    "CALCULATE_RUNNING",
    "DEPTH_OBLIVIOUS",
    "NO_FAIR_TREE",
    "INCR_ONLY",
    "MAX_TRES",
    "NO_NORMAL_ASSOC",
    "NO_NORMAL_PART",
    "NO_NORMAL_QOS",
    "NO_NORMAL_TRES",
)
#: PriorityUsageResetPeriod values.
RESET_PERIODS = ("NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY")
PRIORITY_TYPES = ("priority/multifactor", "priority/basic")
_WEEK = 7 * 24 * 3600


@dataclass(frozen=True, slots=True)
class AccountingConfig:
    """Where job records go (slurm.conf(5), ``AccountingStorage*``, ``PrivateData``).

    ``storage`` is ``none`` (no accounting: sacct says it is disabled) or
    ``slurmdbd`` (corral-dbd at ``host``:``port``, default the controller's
    own host and port 6819). ``jobcomp`` ``filetxt`` appends a line per
    finished job to ``jobcomp_loc``, with or without dbd.
    """

    storage: str = "none"
    host: str = "localhost"
    port: int = 6819
    enforce: tuple[str, ...] = ()
    private_data: tuple[str, ...] = ()
    jobcomp: str = "none"  # JobCompType: none or filetxt (one line per finished job)
    jobcomp_loc: str = "/var/log/slurm_jobcomp.log"

    @property
    def enabled(self) -> bool:
        return self.storage == "slurmdbd"


@dataclass(frozen=True, slots=True)
class PriorityConfig:
    """The multifactor priority and fair-share settings (slurm.conf(5), ``Priority*``).

    Durations are seconds. ``weight_tres`` holds (TRES name, weight per unit)
    with names as Slurm prints them (``cpu``, ``mem``, ``gres/gpu``) and memory
    weights per MiB; ``weight_tres_text`` is the value as written, which
    ``sprio -w`` and ``scontrol show config`` print. ``flags`` holds the
    ``PRIORITY_FLAGS`` words in effect (``NO_NORMAL_ALL`` expanded; Fair Tree
    is on unless ``NO_FAIR_TREE`` is there).
    """

    type: str = "priority/multifactor"
    weight_age: int = 0
    weight_assoc: int = 0
    weight_fairshare: int = 0
    weight_job_size: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    weight_tres: tuple[tuple[str, float], ...] = ()
    weight_tres_text: str = ""
    max_age: int = _WEEK
    favor_small: bool = False
    decay_half_life: int = _WEEK
    usage_reset_period: str = "NONE"
    calc_period: int = 300
    flags: frozenset[str] = frozenset()
    fs_dampening_factor: int = 1

    @property
    def multifactor(self) -> bool:
        return self.type == "priority/multifactor"

    @property
    def fair_tree(self) -> bool:
        """Fair Tree (the default since Slurm 19.05) rather than classic fair share."""
        return "NO_FAIR_TREE" not in self.flags

    def flag(self, name: str) -> bool:
        return name in self.flags


#: HealthCheckNodeState's words (Slurm's, ``NONDRAINED_IDLE`` from later releases).
HEALTH_STATES = ("ANY", "ALLOC", "MIXED", "IDLE", "NONDRAINED_IDLE", "CYCLE")


@dataclass(frozen=True, slots=True)
class HookConfig:
    """The site programs slurm.conf names, and when they give up (``nodeagent/hooks.py``
    and ``corral/hooks.py`` run them; docs/design.md, "Site hooks").

    Paths are as written (a glob runs every match, sorted); ``""`` is none.
    ``timeout`` is PrologEpilogTimeout in seconds (0: wait for ever);
    ``health_states`` holds HealthCheckNodeState's words, upper case.
    """

    prolog: str = ""
    epilog: str = ""
    prolog_slurmctld: str = ""
    epilog_slurmctld: str = ""
    task_prolog: str = ""
    task_epilog: str = ""
    srun_prolog: str = ""
    srun_epilog: str = ""
    timeout: int = 0
    health_program: str = ""
    health_interval: int = 0
    health_timeout: int = 60
    health_states: tuple[str, ...] = ("ANY",)
    mail_prog: str = "/bin/mail"
    mail_domain: str = ""
    primary_on_prog: str = ""
    primary_off_prog: str = ""


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    """The whole parsed configuration.

    ``settings`` holds every top-level key as written (canonical Slurm
    spelling, last value wins); ``warnings`` the ``path:line: ...`` notes about
    keys that were ignored or values that were corrected.
    """

    path: str
    cluster_name: str
    slurmctld_hosts: tuple[tuple[str, str], ...]
    slurmctld_port: int
    slurmd_port: int
    state_save_location: str
    slurmd_spool_dir: str
    slurmd_timeout: int
    kill_wait: int
    kill_on_bad_exit: bool
    min_job_age: int
    max_job_count: int
    first_job_id: int
    job_requeue: bool
    max_array_size: int
    job_file_append: bool
    scheduler_parameters: tuple[tuple[str, str], ...]
    nodes: tuple[NodeConfig, ...]
    partitions: tuple[PartitionConfig, ...]
    settings: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    priority: PriorityConfig = PriorityConfig()
    accounting: AccountingConfig = AccountingConfig()
    prolog_flags: tuple[str, ...] = ()  # lower case; "contain" gives every job an extern step
    hooks: HookConfig = HookConfig()
    preempt_type: str = "PREEMPT/NONE"  # or PREEMPT/QOS, PREEMPT/PARTITION_PRIO
    preempt_mode: str = "OFF"  # what preemption does to a victim: OFF, CANCEL, REQUEUE, SUSPEND
    # PreemptMode's WITHIN, PreemptExemptTime and PreemptParameters (corral/preemptconf.py).
    preemption: preemptconf.PreemptConfig = field(default_factory=preemptconf.PreemptConfig)
    gres_conf: gresconf.GresConf | None = None  # gres.conf beside slurm.conf (load() reads it)
    # cgroup.conf beside slurm.conf (load() reads it; Slurm's defaults without one).
    cgroup_conf: cgroupconf.CgroupConf = field(default_factory=cgroupconf.CgroupConf)
    # queues.conf beside slurm.conf (load() reads it): the team queues; None without one.
    queue_conf: queueconf.QueueConf | None = None
    # topology.conf beside slurm.conf, read (by load()) for TopologyPlugin=topology/tree or
    # topology/block; None: nodes form one flat list (topology/flat, the default).
    topology: topologyconf.TopologyConf | None = None
    # TopologyParam=TopoOptional: only jobs that ask for a topology (--switches,
    # --segment, --topology-level) are placed by it.
    topo_optional: bool = False
    tls: tlsconf.TlsConfig = field(default_factory=tlsconf.TlsConfig)  # TLSType, TLSParameters
    # JobAcctGatherType and JobAcctGatherFrequency: what agents sample for sstat.
    job_acct: jobacct.JobAcctGather = field(default_factory=jobacct.JobAcctGather)
    # UnkillableStepTimeout: how long a run's processes may outlive their SIGKILL
    # before the node is drained "Kill task failed".
    unkillable_step_timeout: int = 60
    # Licenses=: the cluster-wide counts jobs ask for with -L (corral/licenses.py), in
    # configuration order.
    licenses: Licenses = ()
    # MpiDefault: the MPI type of a step that names none (corral/mpitypes.py).
    mpi_default: str = "none"
    # StateStorage* and SlurmctldTimeout: the journal's backend and the leader lease
    # (corral/statestorage.py, docs/ha.md).
    state_storage: statestorage.StateStorage = field(default_factory=statestorage.StateStorage)
    # BcastParameters and BcastExclude: sbcast's defaults (corral/bcastparams.py), checked
    # here so that a daemon refuses a word sbcast would not honour.
    bcast: bcastparams.BcastParams = field(default_factory=bcastparams.BcastParams)
    bcast_exclude: tuple[str, ...] = bcastparams.DEFAULT_EXCLUDE
    _by_name: dict[str, NodeConfig] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {node.name: node for node in self.nodes})

    def node(self, name: str) -> NodeConfig:
        """The node called ``name``; KeyError if slurm.conf defines none."""
        return self._by_name[name]

    def partition(self, name: str) -> PartitionConfig | None:
        return next((p for p in self.partitions if p.name == name), None)

    @property
    def default_partition(self) -> PartitionConfig | None:
        """The first partition with ``Default=YES``, as Slurm picks it."""
        return next((p for p in self.partitions if p.default), None)

    def scheduler_param(self, name: str) -> str | None:
        """A SchedulerParameters value; ``""`` for a bare flag, None when absent."""
        wanted = name.lower()
        return next((v for k, v in self.scheduler_parameters if k.lower() == wanted), None)

    @property
    def topology_plugin(self) -> str:
        """TopologyPlugin, lower case (``corral.config`` checked it): ``topology/tree``,
        ``topology/block``, or ``topology/flat`` for the default and its other names."""
        plugin = dict(self.settings).get("TopologyPlugin", "").lower()
        return plugin if plugin in TOPOLOGY_PLUGINS else "topology/flat"

    @property
    def controller_host(self) -> tuple[str, str]:
        """The primary controller's (host name, address)."""
        return self.slurmctld_hosts[0]

    @property
    def controller_target(self) -> str:
        """``host:port`` of the primary controller's gRPC services."""
        return self.controller_targets[0]

    @property
    def controller_targets(self) -> list[str]:
        """``host:port`` of every SlurmctldHost line's gRPC services, in the order a
        daemon tries them (docs/ha.md)."""
        return [self._target(addr or name) for name, addr in self.slurmctld_hosts]

    @property
    def ctld_addr_target(self) -> str | None:
        """``host:port`` of SlurmctldAddr, the serving controller's own address, if set."""
        addr = dict(self.settings).get("SlurmctldAddr", "")
        return self._target(addr) if addr else None

    @property
    def active_targets(self) -> list[str]:
        """Where node agents and restd reach the controller that serves: SlurmctldAddr
        alone when set (it moves with the serving controller), else every line's."""
        vip = self.ctld_addr_target
        return [vip] if vip else self.controller_targets

    def _target(self, host: str) -> str:
        return f"[{host}]:{self.slurmctld_port}" if ":" in host else f"{host}:{self.slurmctld_port}"

    @property
    def slurm_user(self) -> str:
        """SlurmUser: who the daemons run as (root by default)."""
        return dict(self.settings).get("SlurmUser", "root")

    @property
    def proctrack_cgroup(self) -> bool:
        """ProctrackType=proctrack/cgroup (the default): a job's processes are those
        of its cgroup, all killed at its end."""
        return dict(self.settings).get("ProctrackType", "proctrack/cgroup").lower() == (
            "proctrack/cgroup"
        )

    @property
    def task_cgroup(self) -> bool:
        """TaskPlugin names task/cgroup: cgroup.conf's limits hold jobs and steps."""
        return "task/cgroup" in _words(dict(self.settings).get("TaskPlugin", "").lower())

    @property
    def task_affinity(self) -> bool:
        """TaskPlugin names task/affinity: a step's tasks are bound to cores unless
        srun's --cpu-bind says otherwise (controller/cpubind.py), as in Slurm."""
        return "task/affinity" in _words(dict(self.settings).get("TaskPlugin", "").lower())

    @property
    def cgroups_asked(self) -> bool:
        """Whether slurm.conf itself asks for cgroups (ProctrackType=proctrack/cgroup
        set, or task/cgroup): an agent that cannot use them then does not start, as
        slurmd does not when its cgroup plugin fails."""
        settings = dict(self.settings)
        return self.task_cgroup or (self.proctrack_cgroup and "ProctrackType" in settings)


#: PrologFlags values Corral honours (lower case); Slurm's others are refused.
PROLOG_FLAGS = ("alloc", "contain", "nohold", "serial")


#: The SuspendExcStates words the controller applies (controller/powersave.py).
SUSPEND_EXC_STATES = ("DOWN", "DRAIN", "NOT_RESPONDING")


def _power_saving(settings: _Pairs) -> None:
    """Refuse the power-saving settings the controller could not carry out: a node
    state it cannot test, a count after SuspendExcNodes (``tux[0-9]:2``), suspending
    without both programs."""
    if "SuspendExcStates" in settings:
        value, where = settings["SuspendExcStates"]
        for word in _words(value.upper()):
            if word not in SUSPEND_EXC_STATES:
                raise ConfigError(
                    *where,
                    f"bad SuspendExcStates value '{word}': use {', '.join(SUSPEND_EXC_STATES)}",
                )
    if "SuspendExcNodes" in settings and ":" in settings["SuspendExcNodes"][0]:
        raise ConfigError(*settings["SuspendExcNodes"][1], "SuspendExcNodes counts are not read")
    suspend = settings.get("SuspendTime", ("", NOWHERE))
    if suspend[0].upper() not in ("", "NONE", "INFINITE", "-1"):
        integer("SuspendTime", suspend[0], suspend[1])
        for key in ("SuspendProgram", "ResumeProgram"):
            if not settings.get(key, ("", NOWHERE))[0]:
                raise ConfigError(*suspend[1], f"SuspendTime needs a {key} (power saving)")


def _prolog_flags(settings: _Pairs) -> tuple[str, ...]:
    """PrologFlags, each value one that Corral does what Slurm documents for: a flag
    it would skip (DeferBatch, ForceRequeueOnFail, RunInJob, X11) or a misspelt one
    stops the daemon rather than change nothing."""
    if "PrologFlags" not in settings:
        return ()
    value, where = settings["PrologFlags"]
    flags = _words(value.lower())
    for flag in flags:
        if flag not in PROLOG_FLAGS:
            raise ConfigError(
                *where,
                f"PrologFlags={value}: {flag} is not supported "
                f"(supported: {', '.join(PROLOG_FLAGS)})",
            )
    return flags


#: The TopologyPlugin values Corral places jobs by; topology/flat, topology/default and
#: topology/none (22.05's name) are the one-dimensional default.
TOPOLOGY_PLUGINS = (topologyconf.TREE, topologyconf.BLOCK)
_FLAT_TOPOLOGY = ("topology/flat", "topology/default", "topology/none")
#: TopologyParam words that change nothing here (routing of messages between daemons,
#: the addresses daemons listen on): warned, as TreeWidth is.
_TOPOLOGY_PARAMS_WARNED = ("routepart", "routetree", "noctldinaddrany", "noinaddrany")


def _network_topology(settings: _Pairs, warnings: list[str]) -> bool:
    """Check TopologyPlugin and TopologyParam; whether TopologyParam has TopoOptional.

    Dragonfly, SwitchAsNodeRank, BlockAsNodeRank and TopoMaxSizeUnroll change where
    jobs go or how nodes are ranked and are not implemented: refused.
    """
    if "TopologyPlugin" in settings:
        value, where = settings["TopologyPlugin"]
        if value.lower() not in TOPOLOGY_PLUGINS + _FLAT_TOPOLOGY:
            raise ConfigError(
                *where,
                f"TopologyPlugin={value} is not supported "
                f"(supported: {', '.join(TOPOLOGY_PLUGINS + _FLAT_TOPOLOGY[:2])})",
            )
    if "TopologyParam" not in settings:
        return False
    value, where = settings["TopologyParam"]
    optional = False
    for word in _words(value.lower()):
        if word == "topooptional":
            optional = True
        elif word in _TOPOLOGY_PARAMS_WARNED:
            warnings.append(
                f"{where[0]}:{where[1]}: TopologyParam {word} has no effect: the controller "
                "talks to every agent directly"
            )
        else:
            raise ConfigError(*where, f"TopologyParam={value}: {word} is not supported")
    return optional


def _plugins(settings: _Pairs, warnings: list[str]) -> None:
    """Note the ProctrackType and TaskPlugin values Corral does not implement."""
    if "ProctrackType" in settings:
        value, where = settings["ProctrackType"]
        if value.lower() != "proctrack/cgroup":
            warnings.append(
                f"{where[0]}:{where[1]}: ProctrackType={value}: a job's processes are its "
                "process group (only proctrack/cgroup is implemented)"
            )
    if "TaskPlugin" in settings:
        value, where = settings["TaskPlugin"]
        for word in _words(value.lower()):
            if word not in ("task/cgroup", "task/affinity", "task/none"):
                warnings.append(
                    f"{where[0]}:{where[1]}: TaskPlugin {word} has no effect: tasks keep "
                    "the default binding"
                )


# ------------------------------------------------------------------ known keys
# Every key Slurm's slurm.conf accepts, with what Corral does with it, is in
# corral.confkeys. Record keys belong to NodeName=, PartitionName=, DownNodes=,
# NodeSet= and PowerAction= lines.
_RECORD_KEYS: dict[str, dict[str, KeyUse]] = {
    "NodeName": confkeys.NODE,
    "PartitionName": confkeys.PARTITION,
    "DownNodes": confkeys.DOWNNODES,
    "NodeSet": confkeys.NODESET,
    "PowerAction": confkeys.POWERACTION,
}
_TOP = confkeys.TOP
_RECORD_TYPES = confsyntax.RECORD_TYPES  # the keys of _RECORD_KEYS, lowercase

_Pairs = dict[str, tuple[str, Where]]
# One NodeName=/PartitionName=/... line: where it is, the value of its first key
# (the names it defines) and its other pairs.
_Record = tuple[Where, str, _Pairs]


class _Reader(confsyntax.Reader):
    """Collects settings and records from slurm.conf and the files it includes."""

    def __init__(self) -> None:
        self.settings: _Pairs = {}
        self.records: dict[str, list[_Record]] = {kind: [] for kind in _RECORD_KEYS}
        self.hosts: list[tuple[str, Where]] = []
        self.warnings: list[str] = []

    def cluster_name(self) -> str | None:
        entry = self.settings.get("ClusterName")
        return None if entry is None else entry[0]

    def line(self, pairs: list[tuple[str, str]], where: Where) -> None:
        for index, (key, value) in enumerate(pairs):
            lowered = key.lower()
            kind = _RECORD_TYPES.get(lowered)
            if kind is not None:
                self.records[kind].append(self._record(kind, pairs[index:], where))
                return
            row = _TOP.get(lowered)
            if row is None:
                self._unknown(key, where)
                continue
            confkeys.check(row, value, where, self.warnings)
            if row.key == "SlurmctldHost":
                self.hosts.append((value, where))
            else:
                self.settings[row.key] = (value, where)

    def _record(self, kind: str, pairs: list[tuple[str, str]], where: Where) -> _Record:
        known = _RECORD_KEYS[kind]
        kept: _Pairs = {}
        for key, value in pairs[1:]:
            row = known.get(key.lower())
            if row is None:
                self._unknown(key, where)
            else:
                confkeys.check(row, value, where, self.warnings)
                kept[row.key] = (value, where)
        return where, pairs[0][1], kept

    def _unknown(self, key: str, where: Where) -> None:
        self.warnings.append(f"{where[0]}:{where[1]}: unknown key '{key}' ignored")


# ------------------------------------------------------------------ values
def _limit(key: str, value: str, where: Where) -> int | None:
    """An integer where ``UNLIMITED``/``INFINITE`` (None) is also allowed."""
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return None
    return integer(key, value, where)


_bool = confsyntax.boolean


def _duration(key: str, value: str, where: Where) -> int:
    try:
        return timefmt.parse_duration(value)
    except ValueError as exc:
        raise ConfigError(*where, f"bad {key} value '{value}': not a time") from exc


def _hosts(key: str, value: str, where: Where) -> list[str]:
    try:
        names = hostlist.expand(value)
    except ValueError as exc:
        raise ConfigError(*where, f"bad {key} value '{value}': invalid hostlist") from exc
    if not names:
        raise ConfigError(*where, f"bad {key} value '{value}': no host names")
    return names


def _choice(key: str, value: str, where: Where, allowed: tuple[str, ...]) -> str:
    upper = value.upper()
    if upper not in allowed:
        raise ConfigError(*where, f"bad {key} value '{value}': use {', '.join(allowed)}")
    return upper


def _mpi_default(setting: tuple[str, Where] | None) -> str:
    """MpiDefault: a type Corral serves (corral/mpitypes.py), else refused: a step that
    named none would otherwise start without the wire-up the site asked for."""
    if setting is None or not setting[0]:
        return mpitypes.NONE
    value, where = setting
    if value not in mpitypes.SERVED:
        served = " and ".join(f"mpi/{name}" for name in mpitypes.SERVED)
        raise ConfigError(*where, f"MpiDefault={value} is not supported: Corral serves {served}")
    return value


def _health_states(value: str, where: Where) -> tuple[str, ...]:
    """HealthCheckNodeState's comma list, checked against Slurm's words."""
    words = tuple(w.strip().upper() for w in value.split(",") if w.strip())
    for word in words:
        if word not in HEALTH_STATES:
            raise ConfigError(
                *where, f"bad HealthCheckNodeState value '{word}': use {', '.join(HEALTH_STATES)}"
            )
    return words or ("ANY",)


def _words(value: str) -> tuple[str, ...]:
    """A comma list without empty items."""
    return tuple(word for word in value.split(",") if word)


# ------------------------------------------------------------------ nodes
_NODE_STATES = ("UNKNOWN", "DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE", "CLOUD", "IDLE")
_DOWN_STATES = ("DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE")


def _per_node(key: str, values: list[str], count: int, where: Where) -> list[str]:
    """One value per node: the list itself, or its single value repeated."""
    if len(values) == count:
        return values
    if len(values) == 1:
        return values * count
    raise ConfigError(*where, f"{key} must name one host per node, or a single one")


def _topology(pairs: _Pairs, warnings: list[str]) -> tuple[int, int, int, int, int]:
    """(cpus, boards, sockets, cores, threads), inferring what is missing as Slurm does.

    Sockets (or SocketsPerBoard) counts sockets per board; without either,
    sockets come from CPUs / (CoresPerSocket x ThreadsPerCore). CPUs default
    to boards x sockets x cores x threads, and a CPUs count that matches no
    level of that hierarchy is reset to it with a warning, as in Slurm.
    """

    def count(key: str) -> int | None:
        entry = pairs.get(key)
        return None if entry is None else integer(key, entry[0], entry[1], minimum=1, maximum=65535)

    boards = count("Boards") or 1
    cores = count("CoresPerSocket") or 1
    threads = count("ThreadsPerCore") or 1
    cpus = count("CPUs") or count("Procs")
    per_board = count("SocketsPerBoard") or count("Sockets")
    if per_board is not None:
        sockets = boards * per_board
    elif cpus is not None and cpus % (cores * threads) == 0:
        sockets = cpus // (cores * threads)
        boards = boards if sockets >= boards else 1
    else:
        sockets = boards
    full = sockets * cores * threads
    if cpus is None:
        cpus = full
    elif cpus not in (sockets, sockets * cores, full):
        where = (pairs.get("CPUs") or pairs["Procs"])[1]
        warnings.append(
            f"{where[0]}:{where[1]}: CPUs={cpus} matches no Sockets, Sockets*CoresPerSocket "
            f"or Sockets*CoresPerSocket*ThreadsPerCore; using CPUs={full}"
        )
        cpus = full
    return cpus, boards, sockets, cores, threads


def _nodes(records: list[_Record], slurmd_port: int, warnings: list[str]) -> list[NodeConfig]:
    """Every node of the NodeName= lines, defaults applied, in definition order."""
    defaults: _Pairs = {}
    nodes: list[NodeConfig] = []
    seen: set[str] = set()
    for line, name_expr, own in records:
        if name_expr.upper() == "DEFAULT":
            for forbidden in ("NodeHostname", "NodeAddr"):
                if forbidden in own:
                    raise ConfigError(*line, f"{forbidden} not allowed with NodeName=DEFAULT")
            defaults.update(own)
            continue
        if name_expr.upper() == "ALL":
            raise ConfigError(*line, "'ALL' is reserved and cannot be a NodeName")
        names = _hosts("NodeName", name_expr, line)
        for name in names:
            if name in seen:
                raise ConfigError(*line, f"duplicate node name '{name}'")
            seen.add(name)
        nodes.extend(_node_line(names, {**defaults, **own}, slurmd_port, warnings))
    return nodes


def _node_line(
    names: list[str], pairs: _Pairs, slurmd_port: int, warnings: list[str]
) -> list[NodeConfig]:
    """The nodes of one NodeName= line; NodeHostname defaults to the name, NodeAddr to that."""

    def text(key: str) -> str:
        return pairs.get(key, ("", ("", 0)))[0]

    def number(key: str, default: int) -> int:
        entry = pairs.get(key)
        return default if entry is None else integer(key, *entry, maximum=2**63 - 1)

    count = len(names)
    hostnames = names
    if "NodeHostname" in pairs:
        value, where = pairs["NodeHostname"]
        hostnames = _per_node("NodeHostname", _hosts("NodeHostname", value, where), count, where)
    addrs = hostnames
    if "NodeAddr" in pairs:
        value, where = pairs["NodeAddr"]
        addrs = _per_node("NodeAddr", _hosts("NodeAddr", value, where), count, where)
    ports = [slurmd_port] * count
    if "Port" in pairs:
        value, where = pairs["Port"]
        ports = port_range("Port", value, where)
        if len(ports) not in (1, count):
            raise ConfigError(
                *where, f"bad Port value '{value}': {len(ports)} ports, {count} nodes"
            )
        ports = ports * count if len(ports) == 1 else ports
    cpus, boards, sockets, cores, threads = _topology(pairs, warnings)
    state = "UNKNOWN"
    if "State" in pairs:
        state = _choice("State", *pairs["State"], _NODE_STATES)
    if "Gres" in pairs:
        value, where = pairs["Gres"]
        try:
            gres.parse_node(value)
        except ValueError as exc:
            raise ConfigError(*where, f"bad Gres value '{value}': {exc}") from None
    shared = (
        number("RealMemory", 1),
        number("TmpDisk", 0),
        text("Gres"),
        _words(text("Features") or text("Feature")),
        number("Weight", 1),
        state,
        text("Reason"),
    )
    return [
        NodeConfig(name, addr, hostname, port, cpus, boards, sockets, cores, threads, *shared)
        for name, hostname, addr, port in zip(names, hostnames, addrs, ports, strict=True)
    ]


def _down_nodes(records: list[_Record], nodes: list[NodeConfig]) -> list[NodeConfig]:
    """Apply ``DownNodes=`` lines: they set State (default DOWN) and Reason on defined nodes."""
    index = {node.name: i for i, node in enumerate(nodes)}
    for line, names_expr, pairs in records:
        names = _hosts("DownNodes", names_expr, line)
        missing = [name for name in names if name not in index]
        if missing:
            raise ConfigError(*line, f"DownNodes: node {hostlist.compress(missing)} not defined")
        state = "DOWN"
        if "State" in pairs:
            state = _choice("State", *pairs["State"], _DOWN_STATES)
        reason = pairs.get("Reason", ("Set in slurm.conf", line))[0]
        for name in names:
            nodes[index[name]] = replace(nodes[index[name]], state=state, reason=reason)
    return nodes


def _node_sets(records: list[_Record], nodes: list[NodeConfig]) -> dict[str, list[str]]:
    """``NodeSet=name Nodes=<hostlist>`` or ``Feature=<f>``: names partitions may use."""
    sets: dict[str, list[str]] = {}
    for _, set_name, pairs in records:
        members: list[str] = []
        if "Nodes" in pairs:
            members = _hosts("Nodes", *pairs["Nodes"])
        if "Feature" in pairs:
            feature = pairs["Feature"][0]
            members += [node.name for node in nodes if feature in node.features]
        sets[set_name] = members
    return sets


# ------------------------------------------------------------------ partitions
_PART_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
_OVERSUBSCRIBE = re.compile(r"(NO|EXCLUSIVE|YES|FORCE)(?::(\d{1,5}))?", re.IGNORECASE | re.ASCII)


def _oversubscribe(value: str, where: Where) -> str:
    """Normalise to what scontrol prints: NO, EXCLUSIVE, YES:n or FORCE:n (n defaults to 4)."""
    match = _OVERSUBSCRIBE.fullmatch(value)
    mode = "" if match is None else match.group(1).upper()
    jobs = None if match is None or match.group(2) is None else int(match.group(2))
    if match is None or (mode in ("NO", "EXCLUSIVE") and jobs is not None):
        raise ConfigError(
            *where, f"bad OverSubscribe value '{value}': use NO, YES, FORCE, EXCLUSIVE"
        )
    if mode in ("NO", "EXCLUSIVE"):
        return mode
    if jobs is not None and jobs < (2 if mode == "YES" else 1):
        raise ConfigError(*where, f"bad OverSubscribe value '{value}': job count too small")
    return f"{mode}:{jobs or 4}"


def _memory_pair(
    pairs: _Pairs, cluster: _Pairs, node_key: str, cpu_key: str, warnings: list[str]
) -> tuple[int, int]:
    """(per-node, per-CPU) MiB: the partition's pair if it sets either, else the cluster's.

    The two are exclusive in Slurm; when both are given the per-node value wins.
    """
    source = pairs if (node_key in pairs or cpu_key in pairs) else cluster
    per_node = per_cpu = 0
    if node_key in source:
        per_node = _limit(node_key, *source[node_key]) or 0
    if cpu_key in source:
        per_cpu = _limit(cpu_key, *source[cpu_key]) or 0
        if node_key in source:
            where = source[cpu_key][1]
            warnings.append(f"{where[0]}:{where[1]}: {cpu_key} ignored, {node_key} is set")
            per_cpu = 0
    return per_node, per_cpu


def _partition_nodes(
    expr: str, where: Where, order: dict[str, int], sets: dict[str, list[str]], name: str
) -> tuple[str, ...]:
    """The partition's nodes (``ALL``, hostlists, NodeSet names) in node-definition order.

    ``Nodes=`` may be empty, and whitespace separates items like commas do.
    """
    if expr.upper() == "ALL":
        return tuple(order)
    wanted: set[str] = set()
    missing: list[str] = []
    for item in _hosts("Nodes", expr, where) if expr.strip() else []:
        members = sets.get(item, [item])
        wanted.update(members)
        missing.extend(member for member in members if member not in order)
    if missing:
        raise ConfigError(
            *where, f"PartitionName={name}: node {hostlist.compress(missing)} not defined"
        )
    return tuple(sorted(wanted, key=order.__getitem__))


def _partitions(
    records: list[_Record],
    nodes: list[NodeConfig],
    sets: dict[str, list[str]],
    cluster: _Pairs,
    warnings: list[str],
) -> list[PartitionConfig]:
    order = {node.name: i for i, node in enumerate(nodes)}
    defaults: _Pairs = {}
    partitions: list[PartitionConfig] = []
    for line, name, own in records:
        if name.upper() == "DEFAULT":
            defaults.update(own)
            continue
        if any(p.name == name for p in partitions):
            raise ConfigError(*line, f"duplicate PartitionName '{name}'")
        pairs = {**defaults, **own}
        partitions.append(_partition(name, pairs, line, order, sets, cluster, warnings))
    return partitions


def _partition(
    name: str,
    pairs: _Pairs,
    where: Where,
    order: dict[str, int],
    sets: dict[str, list[str]],
    cluster: _Pairs,
    warnings: list[str],
) -> PartitionConfig:
    def flag(key: str) -> bool:
        entry = pairs.get(key)
        return False if entry is None else _bool(key, *entry)

    def count(key: str, default: int) -> int:
        entry = pairs.get(key)
        return default if entry is None else integer(key, *entry)

    def limit(key: str) -> int | None:
        entry = pairs.get(key)
        return None if entry is None else _limit(key, *entry)

    def names(key: str) -> tuple[str, ...] | None:
        entry = pairs.get(key)
        return None if entry is None or entry[0].upper() == "ALL" else _words(entry[0])

    nodes_expr, nodes_where = pairs.get("Nodes", ("", where))
    tier = count("PriorityTier", 1)
    factor = count("PriorityJobFactor", 1)
    if "Priority" in pairs:
        tier = factor = count("Priority", 1)
    oversubscribe = "NO"
    shared = pairs.get("OverSubscribe") or pairs.get("Shared")
    if shared is not None:
        oversubscribe = _oversubscribe(*shared)
    exclusive = pairs.get("Exclusive")
    if exclusive is not None:
        mode = _choice("Exclusive", *exclusive, ("NO", "NONE", "NODE", "USER", "TOPO"))
        if mode in ("NODE", "TOPO"):
            oversubscribe = "EXCLUSIVE"
        elif mode in ("NO", "NONE") and oversubscribe == "EXCLUSIVE":
            oversubscribe = "NO"
    def_node, def_cpu = _memory_pair(pairs, cluster, "DefMemPerNode", "DefMemPerCPU", warnings)
    max_node, max_cpu = _memory_pair(pairs, cluster, "MaxMemPerNode", "MaxMemPerCPU", warnings)
    default_time = pairs.get("DefaultTime")
    accounts = names("AllowAccounts")
    weights = pairs.get("TRESBillingWeights")
    preempt_mode = ""
    if "PreemptMode" in pairs:
        overall = cluster.get("PreemptMode", ("OFF", where))[0]
        preempt_mode, _, _ = preemptconf.mode(
            *pairs["PreemptMode"],
            owner=f"PartitionName={name}",
            gang="GANG" in overall.upper().replace(" ", "").split(","),
        )
    grace = pairs.get("GraceTime")
    per_gpu = {
        key: integer(key, *(pairs.get(key) or cluster[key]))
        if key in pairs or key in cluster
        else 0
        for key in ("DefCpuPerGPU", "DefMemPerGPU")
    }
    return PartitionConfig(
        name=name,
        nodes=_partition_nodes(nodes_expr, nodes_where, order, sets, name),
        nodes_expr=nodes_expr,
        default=flag("Default"),
        max_time=_duration("MaxTime", *pairs.get("MaxTime", ("UNLIMITED", where))),
        default_time=None if default_time is None else _duration("DefaultTime", *default_time),
        max_nodes=limit("MaxNodes"),
        min_nodes=count("MinNodes", 0),
        state=_choice("State", *pairs.get("State", ("UP", where)), _PART_STATES),
        priority_tier=tier,
        priority_job_factor=factor,
        oversubscribe=oversubscribe,
        allow_accounts=None if accounts is None else tuple(a.lower() for a in accounts),
        allow_groups=names("AllowGroups"),
        def_mem_per_cpu=def_cpu,
        def_mem_per_node=def_node,
        max_mem_per_node=max_node,
        max_mem_per_cpu=max_cpu,
        max_cpus_per_node=limit("MaxCPUsPerNode"),
        hidden=flag("Hidden"),
        root_only=flag("RootOnly"),
        billing_weights=_tres_weights(*weights, key="TRESBillingWeights") if weights else (),
        allow_qos=names("AllowQos"),
        deny_accounts=tuple(a.lower() for a in names("DenyAccounts") or ()),
        deny_qos=names("DenyQos") or (),
        preempt_mode=preempt_mode,
        grace_time=0 if grace is None else preemptconf.grace_seconds(*grace),
        def_cpu_per_gpu=per_gpu["DefCpuPerGPU"],
        def_mem_per_gpu=per_gpu["DefMemPerGPU"],
        job_defaults=",".join(f"{k}={per_gpu[k]}" for k in per_gpu if k in pairs),
        power=tuple(
            (key, _power_time(key, *pairs[key]))
            for key in ("SuspendTime", "SuspendTimeout", "ResumeTimeout")
            if key in pairs
        ),
    )


def _power_time(key: str, value: str, where: Where) -> str:
    """A partition's power-saving time: seconds, or NONE/INFINITE (SuspendTime)."""
    if value.upper() in ("NONE", "INFINITE", "-1") and key == "SuspendTime":
        return value.upper()
    integer(key, value, where, minimum=0)
    return value


# ------------------------------------------------------------------ top level
#: The SchedulerParameters the controller applies, with Slurm's ranges (slurm.conf(5)).
SCHEDULER_NUMBERS = {
    "bf_interval": (-1, 10800),
    "bf_window": (1, 43200),
    "bf_resolution": (1, 3600),
    "bf_max_job_test": (1, 1_000_000),
    "bf_max_job_user": (0, 1_000_000),
    "bf_job_part_count_reserve": (0, 1),  # Corral: 0 conservative, 1 EASY
    "default_queue_depth": (1, 10_000_000),
    "sched_interval": (0, 10_000_000),
    "max_switch_wait": (0, 100_000_000),
    # Corral's own (controller/moves.py, docs/federation.md): pending jobs moved to a
    # cluster that starts them sooner; seconds between looks (0: never) and how much
    # sooner.
    "corral_move_interval": (0, 86400),
    "corral_move_margin": (0, 86400),
}


def _scheduler_parameters(value: str, where: Where) -> tuple[tuple[str, str], ...]:
    """``a,b=1`` as ``(("a", ""), ("b", "1"))``; numbers the controller uses are checked."""
    params = tuple((key, val) for key, _, val in (item.partition("=") for item in _words(value)))
    for key, val in params:
        bounds = SCHEDULER_NUMBERS.get(key.lower())
        if bounds is None:
            continue
        lo, hi = bounds
        digits = val[1:] if val.startswith("-") else val
        if not (digits.isascii() and digits.isdigit()) or not lo <= int(val) <= hi:
            raise ConfigError(
                *where, f"bad SchedulerParameters value '{key}={val}': use {lo} to {hi}"
            )
    return params


# ------------------------------------------------------------------ priority
#: TRES types a weight may name (Slurm's defaults; gres/, license/ and bb/ take a name).
_TRES_TYPES = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")
_NAMED_TRES = ("gres", "license", "bb")
_UNIT_INDEX = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_RESET_REQUIRED = (
    "You have to either have PriorityDecayHalfLife != 0 or PriorityUsageResetPeriod set "
    "to something or the priority plugin will result in rolling over."
)


def _seconds(key: str, value: str, where: Where, *, minimum: int = 0) -> int:
    """A Slurm time string (``7-0``, ``5``, ``1:00:00``) in seconds; ``0`` is zero.

    Slurm reads these with ``time_str2mins``: whole minutes, seconds rounded up.
    ``UNLIMITED`` has no meaning for them and is refused.
    """
    try:
        if value.strip().lower() in ("-1", "unlimited", "infinite"):
            raise ValueError(value)
        minutes = timefmt.parse_duration(value)
    except ValueError as exc:
        raise ConfigError(*where, f"bad {key} value '{value}': not a time") from exc
    seconds = 0 if minutes == timefmt.UNLIMITED else minutes * 60  # "0", "0-0"
    if seconds < minimum:
        raise ConfigError(*where, f"bad {key} value '{value}': at least {minimum // 60} minute")
    return seconds


def _tres_weights(
    value: str, where: Where, *, key: str = "PriorityWeightTRES"
) -> tuple[tuple[str, float], ...]:
    """``CPU=1000,Mem=2000,GRES/gpu=3000`` as ((name, weight), ...), Slurm's names.

    A weight may carry a unit (``Mem=1G``: the weight of a GiB), which divides
    it down to the TRES's own unit as Slurm's ``_tres_weight_item`` does
    (memory counts MiB, everything else units).
    """
    found: dict[str, float] = {}
    for item in _words(value):
        name, eq, amount = item.partition("=")
        kind, slash, sub = name.partition("/")
        kind = kind.lower()
        canonical = f"{kind}/{sub}" if slash else kind
        known = canonical in _TRES_TYPES or (slash and sub and kind in _NAMED_TRES)
        if not eq or not amount:
            raise ConfigError(*where, f"bad {key} value '{value}': '{item}'")
        if not known:
            raise ConfigError(
                *where,
                f"bad {key} value '{value}': '{name}' is not a configured TRES type",
            )
        number, unit = amount, ""
        if amount[-1:].upper() in _UNIT_INDEX:
            number, unit = amount[:-1], amount[-1].upper()
        try:
            weight = float(number)
        except ValueError:
            weight = -1.0
        if not weight >= 0 or weight == float("inf"):
            raise ConfigError(*where, f"bad {key} value '{value}': '{item}'")
        if unit:
            base = 2 if kind in ("mem", "bb") else 0
            weight /= 1024 ** max(0, _UNIT_INDEX[unit] - base)
        found[canonical] = weight
    return tuple(found.items())


def _priority_flags(value: str, where: Where, warnings: list[str]) -> frozenset[str]:
    """PriorityFlags words; Slurm ignores words it does not know, Corral warns about them."""
    flags: set[str] = set()
    for word in _words(value.upper()):
        if word == "NO_NORMAL_ALL":
            flags.update(("NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES"))
        elif word == "DEPTH_OBLIVIOUS":
            flags.update((word, "NO_FAIR_TREE"))  # a variant of classic fair share
        elif word in PRIORITY_FLAGS:
            flags.add(word)
        elif word != "FAIR_TREE":  # the default since 19.05, once a flag
            warnings.append(f"{where[0]}:{where[1]}: PriorityFlags: unknown flag '{word}' ignored")
    return frozenset(flags)


def _priority(settings: _Pairs, warnings: list[str]) -> PriorityConfig:
    """The Priority* settings, checked as Slurm's read_config does."""

    def weight(key: str) -> int:
        entry = settings.get(key)
        return 0 if entry is None else integer(key, *entry)

    def seconds(key: str, default: int, minimum: int = 0) -> int:
        entry = settings.get(key)
        return default if entry is None else _seconds(key, *entry, minimum=minimum)

    kind = "priority/multifactor"
    if "PriorityType" in settings:
        value, where = settings["PriorityType"]
        kind = value.lower()
        if kind not in PRIORITY_TYPES:
            raise ConfigError(
                *where, f"bad PriorityType value '{value}': use {', '.join(PRIORITY_TYPES)}"
            )
    half_life = seconds("PriorityDecayHalfLife", _WEEK)
    reset = "NONE"
    if "PriorityUsageResetPeriod" in settings:
        reset = _choice(
            "PriorityUsageResetPeriod", *settings["PriorityUsageResetPeriod"], RESET_PERIODS
        )
    elif half_life == 0:
        raise ConfigError(*settings["PriorityDecayHalfLife"][1], _RESET_REQUIRED)
    tres_text, tres_where = settings.get("PriorityWeightTRES", ("", NOWHERE))
    favor_small = settings.get("PriorityFavorSmall")
    flags = settings.get("PriorityFlags")
    damping = settings.get("FairShareDampeningFactor")
    return PriorityConfig(
        type=kind,
        weight_age=weight("PriorityWeightAge"),
        weight_assoc=weight("PriorityWeightAssoc"),
        weight_fairshare=weight("PriorityWeightFairshare"),
        weight_job_size=weight("PriorityWeightJobSize"),
        weight_partition=weight("PriorityWeightPartition"),
        weight_qos=weight("PriorityWeightQOS"),
        weight_tres=_tres_weights(tres_text, tres_where),
        weight_tres_text=tres_text,
        max_age=seconds("PriorityMaxAge", _WEEK),
        favor_small=False if favor_small is None else _bool("PriorityFavorSmall", *favor_small),
        decay_half_life=half_life,
        usage_reset_period=reset,
        calc_period=seconds("PriorityCalcPeriod", 300, minimum=60),
        flags=frozenset() if flags is None else _priority_flags(*flags, warnings),
        fs_dampening_factor=(
            1
            if damping is None
            else integer("FairShareDampeningFactor", *damping, minimum=1, maximum=65535)
        ),
    )


def parse(text: str, path: str) -> SlurmConfig:
    """Parse slurm.conf ``text``; ``path`` names it in messages and anchors Include."""
    reader = _Reader()
    reader.feed(text, path, (os.path.abspath(path),))
    settings = reader.settings

    def get(key: str, default: str) -> str:
        return settings.get(key, (default, NOWHERE))[0]

    def number(key: str, default: int, *, minimum: int = 0, maximum: int = UINT32) -> int:
        entry = settings.get(key)
        if entry is None:
            return default
        return integer(key, *entry, minimum=minimum, maximum=maximum)

    cluster = settings.get("ClusterName")
    if cluster is None or not cluster[0]:
        raise ConfigError(path, None, "ClusterName needs to be specified")
    hosts = controllers(reader.hosts, settings, path)
    ctld_ports = settings.get("SlurmctldPort")
    # A SlurmctldPort range lets Slurm spread RPCs; Corral listens on its first port.
    ctld_port = (
        SLURMCTLD_PORT if ctld_ports is None else port_range("SlurmctldPort", *ctld_ports)[0]
    )
    slurmd_port = number("SlurmdPort", SLURMD_PORT, minimum=1, maximum=65535)
    number("ReturnToService", 0, maximum=2)  # checked here; the controller reads settings
    records = reader.records
    nodes = _nodes(records["NodeName"], slurmd_port, reader.warnings)
    nodes = _down_nodes(records["DownNodes"], nodes)
    sets = _node_sets(records["NodeSet"], nodes)
    partitions = _partitions(records["PartitionName"], nodes, sets, settings, reader.warnings)
    priority = _priority(settings, reader.warnings)
    _plugins(settings, reader.warnings)
    topo_optional = _network_topology(settings, reader.warnings)
    if "SchedulerType" in settings:
        _choice("SchedulerType", *settings["SchedulerType"], ("SCHED/BACKFILL", "SCHED/BUILTIN"))
    preempt_type, preempt_mode, preemption = preemptconf.parse(settings)
    tls = tlsconf.parse(
        settings.get("TLSType"), settings.get("TLSParameters"), path, reader.warnings
    )
    hook_timeout = number("PrologEpilogTimeout", 0, maximum=65535)
    storage = settings.get("AccountingStorageType")
    accounting = AccountingConfig(
        storage="none"
        if storage is None
        else _choice(
            "AccountingStorageType",
            *storage,
            ("ACCOUNTING_STORAGE/NONE", "ACCOUNTING_STORAGE/SLURMDBD"),
        )
        .split("/")[1]
        .lower(),
        host=get("AccountingStorageHost", hosts[0][1]),
        port=number("AccountingStoragePort", 6819, minimum=1, maximum=65535),
        enforce=_words(get("AccountingStorageEnforce", "").lower()),
        private_data=_words(get("PrivateData", "").lower()),
        jobcomp=_choice(
            "JobCompType",
            *settings.get("JobCompType", ("jobcomp/none", NOWHERE)),
            ("JOBCOMP/NONE", "JOBCOMP/FILETXT"),
        )
        .split("/")[1]
        .lower(),
        jobcomp_loc=get("JobCompLoc", "/var/log/slurm_jobcomp.log"),
    )
    _power_saving(settings)
    return SlurmConfig(
        path=path,
        cluster_name=cluster[0].lower(),
        slurmctld_hosts=hosts,
        slurmctld_port=ctld_port,
        slurmd_port=slurmd_port,
        state_save_location=get("StateSaveLocation", STATE_SAVE_LOCATION),
        slurmd_spool_dir=get("SlurmdSpoolDir", SLURMD_SPOOL_DIR),
        slurmd_timeout=number("SlurmdTimeout", 300),
        kill_wait=number("KillWait", 30),
        kill_on_bad_exit=number("KillOnBadExit", 0) != 0,
        min_job_age=number("MinJobAge", 300),
        max_job_count=number("MaxJobCount", 10000, minimum=1),
        first_job_id=number("FirstJobId", 1, minimum=1),
        job_requeue=number("JobRequeue", 1) != 0,
        max_array_size=number("MaxArraySize", MAX_ARRAY_SIZE),
        job_file_append=number("JobFileAppend", 0) != 0,
        prolog_flags=_prolog_flags(settings),
        hooks=HookConfig(
            prolog=get("Prolog", ""),
            epilog=get("Epilog", ""),
            prolog_slurmctld=get("PrologSlurmctld", ""),
            epilog_slurmctld=get("EpilogSlurmctld", ""),
            task_prolog=get("TaskProlog", ""),
            task_epilog=get("TaskEpilog", ""),
            srun_prolog=get("SrunProlog", ""),
            srun_epilog=get("SrunEpilog", ""),
            timeout=hook_timeout if hook_timeout < 65534 else 0,  # 65534: Slurm's "for ever"
            health_program=get("HealthCheckProgram", ""),
            health_interval=number("HealthCheckInterval", 0),
            health_timeout=number("HealthCheckTimeout", 60, minimum=1),
            health_states=_health_states(*settings.get("HealthCheckNodeState", ("ANY", NOWHERE))),
            mail_prog=get("MailProg", "/bin/mail") or "/bin/mail",
            mail_domain=get("MailDomain", ""),
            primary_on_prog=get("SlurmctldPrimaryOnProg", ""),
            primary_off_prog=get("SlurmctldPrimaryOffProg", ""),
        ),
        preempt_type=preempt_type,
        preempt_mode=preempt_mode,
        preemption=preemption,
        scheduler_parameters=_scheduler_parameters(
            *settings.get("SchedulerParameters", ("", NOWHERE))
        ),
        nodes=tuple(nodes),
        partitions=tuple(partitions),
        settings=tuple((key, value) for key, (value, _) in settings.items()),
        warnings=tuple(dict.fromkeys(reader.warnings)),  # a cluster-wide note once
        priority=priority,
        accounting=accounting,
        tls=tls,
        job_acct=jobacct.parse_gather(
            settings.get("JobAcctGatherType"), settings.get("JobAcctGatherFrequency")
        ),
        unkillable_step_timeout=number("UnkillableStepTimeout", 60, maximum=65535),
        topo_optional=topo_optional,
        licenses=_licenses(settings),
        mpi_default=_mpi_default(settings.get("MpiDefault")),
        state_storage=statestorage.parse(settings),
        bcast=_checked(
            bcastparams.parse, settings.get("BcastParameters"), bcastparams.BcastParams()
        ),
        bcast_exclude=_checked(
            bcastparams.parse_exclude, settings.get("BcastExclude"), bcastparams.DEFAULT_EXCLUDE
        ),
    )


_T = TypeVar("_T")


def _checked(read: Callable[[str], _T], setting: tuple[str, Where] | None, default: _T) -> _T:
    """``read`` of a setting's value, its ValueError a ConfigError where it was written."""
    if setting is None:
        return default
    value, where = setting
    try:
        return read(value)
    except ValueError as exc:
        raise ConfigError(*where, str(exc)) from None


def _licenses(settings: _Pairs) -> Licenses:
    """Licenses=, or a ConfigError in the key's words for a malformed list."""
    entry = settings.get("Licenses")
    if entry is None:
        return ()
    value, where = entry
    try:
        return parse_licenses(value)
    except LicenseSyntaxError as exc:
        raise ConfigError(*where, f"Licenses={value}: {exc}") from None


def load(path: str | None = None) -> SlurmConfig:
    """Read and parse slurm.conf (``default_path()`` unless given), the cgroup.conf
    and queues.conf beside it, its topology.conf when TopologyPlugin is topology/tree or
    topology/block, and the gres.conf beside it when one exists and GresTypes is set
    (Slurm reads none without it)."""
    path = path or default_path()
    conf = parse(read_text(path, (path, None), ""), path)
    cgroups = cgroupconf.load(os.path.join(os.path.dirname(path), "cgroup.conf"))
    conf = replace(conf, cgroup_conf=cgroups, warnings=conf.warnings + cgroups.warnings)
    types = _words(dict(conf.settings).get("GresTypes", "").lower())
    queues_path = os.path.join(os.path.dirname(path), "queues.conf")
    queues = queueconf.load(queues_path, types, conf.cluster_name)
    if queues is not None:
        conf = replace(conf, queue_conf=queues)
    if conf.topology_plugin in TOPOLOGY_PLUGINS:
        topology = topologyconf.load(
            os.path.join(os.path.dirname(path), "topology.conf"),
            conf.topology_plugin,
            [node.name for node in conf.nodes],
        )
        conf = replace(conf, topology=topology, warnings=conf.warnings + topology.warnings)
    gres_path = os.path.join(os.path.dirname(path), "gres.conf")
    if not types or not os.path.exists(gres_path):
        return conf
    nodes = [node.name for node in conf.nodes]
    found = gresconf.load(gres_path, gres_types=types, nodes=nodes, cluster_name=conf.cluster_name)
    return replace(conf, gres_conf=found)


# ------------------------------------------------------------------ show config
_UNITS = {
    "sec": """AcctGatherNodeFreq BatchStartTimeout CompleteWait GroupUpdateTime
        HealthCheckInterval HealthCheckTimeout InactiveLimit MessageTimeout ResumeTimeout
        SchedulerTimeSlice SlurmctldTimeout SuspendTime SuspendTimeout TCPTimeout
        UnkillableStepTimeout WaitTime""",
    "usec": "EpilogMsgTime",
    "min": "OverTimeLimit ResvOverRun",
    "nodes/min": "ResumeRate SuspendRate",
}
_UNIT_OF = {key: unit for unit, keys in _UNITS.items() for key in keys.split()}
_LEGACY_HOST_KEYS = frozenset({"ControlMachine", "ControlAddr", "BackupController", "BackupAddr"})


def show_config(conf: SlurmConfig) -> list[tuple[str, str]]:
    """The effective settings as ``scontrol show config`` lists them, sorted by key.

    Keys Corral uses print their effective value (default included) in Slurm's
    format; every other key written in slurm.conf prints as written, with the
    unit Slurm appends to it.
    """
    raw = dict(conf.settings)
    shown: dict[str, str] = {
        key: (f"{value} {_UNIT_OF[key]}" if key in _UNIT_OF and value.isdigit() else value)
        for key, value in raw.items()
        if key not in _LEGACY_HOST_KEYS
    }
    defaults = {
        "AuthType": "auth/munge",
        "BcastExclude": ",".join(bcastparams.DEFAULT_EXCLUDE),
        "BcastParameters": "(null)",
        "MpiDefault": "(null)",
        "ProctrackType": "proctrack/cgroup",
        "SchedulerType": "sched/backfill",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "SlurmctldLogFile": "(null)",
        "SlurmdLogFile": "(null)",
        "TaskPlugin": "(null)",
    }
    for key, default in defaults.items():
        shown[key] = raw.get(key, default)
    shown.pop("StateStoragePass", None)  # slurm.conf's readers need not see it printed
    shown.update(
        {
            "ClusterName": conf.cluster_name,
            "FirstJobId": str(conf.first_job_id),
            "JobAcctGatherFrequency": conf.job_acct.frequency_text,
            "JobAcctGatherType": conf.job_acct.type_name,
            "JobFileAppend": str(int(conf.job_file_append)),
            "JobRequeue": str(int(conf.job_requeue)),
            "KillOnBadExit": str(int(conf.kill_on_bad_exit)),
            "KillWait": f"{conf.kill_wait} sec",
            "MaxArraySize": str(conf.max_array_size),
            "MaxJobCount": str(conf.max_job_count),
            "MinJobAge": f"{conf.min_job_age} sec",
            "ReturnToService": raw.get("ReturnToService", "0"),
            "SchedulerParameters": raw.get("SchedulerParameters") or "(null)",
            "SchedulerTimeSlice": f"{conf.preemption.time_slice} sec",
            "SlurmctldPort": str(conf.slurmctld_port),
            "SlurmdPort": str(conf.slurmd_port),
            "SlurmdSpoolDir": conf.slurmd_spool_dir,
            "UnkillableStepTimeout": f"{conf.unkillable_step_timeout} sec",
            "SlurmdTimeout": f"{conf.slurmd_timeout} sec",
            "SlurmUser": _user_with_id(raw.get("SlurmUser", "root")),
            "SlurmctldTimeout": f"{conf.state_storage.lease_s} sec",
            "StateSaveLocation": conf.state_save_location,
            "StateStorageType": f"state/{conf.state_storage.kind}",
        }
    )
    for index, (host, addr) in enumerate(conf.slurmctld_hosts):
        shown[f"SlurmctldHost[{index}]"] = host if addr == host else f"{host}({addr})"
    for key in _PRIORITY_KEYS:
        shown.pop(key, None)
    shown.update(_show_priority(conf.priority))
    return sorted(shown.items(), key=lambda item: item[0].lower())


#: Keys ``_show_priority`` prints in Slurm's form (or, under priority/basic, leaves out).
_PRIORITY_KEYS = (
    "FairShareDampeningFactor",
    "PriorityCalcPeriod",
    "PriorityDecayHalfLife",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityMaxAge",
    "PriorityType",
    "PriorityUsageResetPeriod",
    "PriorityWeightAge",
    "PriorityWeightAssoc",
    "PriorityWeightFairshare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityWeightTRES",
)


def _show_priority(prio: PriorityConfig) -> dict[str, str]:
    """The priority settings as Slurm's ``config_info.c`` prints them.

    Under priority/basic only PriorityType is listed. The fair-share weight is
    spelled ``PriorityWeightFairShare`` there, unlike in slurm.conf.
    """
    if not prio.multifactor:
        return {"PriorityType": prio.type}
    return {
        "FairShareDampeningFactor": str(prio.fs_dampening_factor),
        "PriorityCalcPeriod": timefmt.format_hms(prio.calc_period),
        "PriorityDecayHalfLife": timefmt.format_hms(prio.decay_half_life),
        "PriorityFavorSmall": "yes" if prio.favor_small else "no",
        "PriorityFlags": priority_flags_text(prio.flags),
        "PriorityMaxAge": timefmt.format_hms(prio.max_age),
        "PriorityType": prio.type,
        "PriorityUsageResetPeriod": prio.usage_reset_period,
        "PriorityWeightAge": str(prio.weight_age),
        "PriorityWeightAssoc": str(prio.weight_assoc),
        "PriorityWeightFairShare": str(prio.weight_fairshare),
        "PriorityWeightJobSize": str(prio.weight_job_size),
        "PriorityWeightPartition": str(prio.weight_partition),
        "PriorityWeightQOS": str(prio.weight_qos),
        "PriorityWeightTRES": prio.weight_tres_text or "(null)",
    }


def priority_flags_text(flags: frozenset[str]) -> str:
    """PriorityFlags as Slurm's ``priority_flags_string`` writes them.

    Slurm prints ``NO_NORMAL_ALL`` as soon as any one ``NO_NORMAL_*`` flag is
    set (its test covers all four), and so does this.
    """
    words = [flag for flag in PRIORITY_FLAGS if flag in flags and "NO_NORMAL" not in flag]
    if any(flag.startswith("NO_NORMAL_") for flag in flags):
        words.append("NO_NORMAL_ALL")
    return ",".join(words)


def _user_with_id(name: str) -> str:
    """``root(0)``, as Slurm shows SlurmUser; the id is unknown (NO_VAL) off this host."""
    import pwd  # only the controller shows config; clients never pay for this import

    try:
        return f"{name}({pwd.getpwnam(name).pw_uid})"
    except KeyError:
        return f"{name}(4294967294)"
