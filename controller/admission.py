"""Admission: turn a submitted JobSpec into Job records, or refuse it.

Refusals use Slurm's errno and wording. A request that can never run in any
partition it names ("never") is refused here; one that only has to wait
("not now") is accepted and the scheduler gives it a pending reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller import (
    bounds,
    flavoradmit,
    gpuaffinity,
    gpulists,
    gpushare,
    gpuspec,
    licenseadmit,
    partitionaccess,
)
from controller.core import dependency, features, topology
from controller.core.gpulinks import Links
from controller.core.placement import place, selection_order
from controller.core.plan import Start
from controller.core.request import gres_left, gres_request, node_gres, share
from controller.core.snapshot import Gres, NodeDevices, NodeView, PartitionView, oversubscribe
from controller.core.topomodel import BLOCK, TREE
from controller.jobspec import JobSpec
from controller.jobstate import JobState, Reason
from controller.model import Job, Payload
from controller.principal import Principal, group_name
from corral import arrayspec, distribution, errors, hostlist, mailtype
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.gpunumbers import gpu_numbering


@dataclass(frozen=True, slots=True)
class Admitted:
    """The new job record; for an array, the one record of all its tasks."""

    job: Job
    payload: Payload

    @property
    def tasks(self) -> int:
        """How many jobs the submission stands for (an array's task count)."""
        return arrayspec.count(self.job.array_pending) or 1


def parse_array(spec: str, max_size: int) -> tuple[list[int], int]:
    """``1-10:2%3`` -> ([1, 3, 5, 7, 9], 3); SlurmError if malformed."""
    try:
        return arrayspec.parse(spec, max_size)
    except ValueError:
        raise SlurmError(errors.ESLURM_INVALID_ARRAY) from None


class Capacity:
    """The cluster as configured, empty and healthy: what "can this ever run?" asks.

    Built once per configuration (``JobStore.apply_config``), not per
    submission: with 10,000 nodes that is the difference between microseconds
    and milliseconds for every ``sbatch``.
    """

    def __init__(self, conf: SlurmConfig) -> None:
        self.conf = conf
        self.nodes = static_nodes(conf)
        self.partitions = {p.name: partition_view(conf, p.name) for p in conf.partitions}
        self._gpus: dict[str, list[tuple[str, int]]] = {}
        self._gpu_cpus: dict[str, dict[int, tuple[int, ...]]] = {}
        self._gpu_sockets: dict[str, dict[str, str]] = {}
        self._gpu_links: dict[str, Links] = {}

    # How running jobs use nodes, for JobStore's accounting of used resources.

    def sharing(self, job: Job) -> int:
        """How many jobs may share each CPU ``job`` holds (0: it keeps them to itself)."""
        part = self.partitions.get(job.partition)
        return 0 if part is None else share(job, part)

    def gres_held(self, job: Job, index: int) -> tuple[tuple[str, str | None, int], ...]:
        """The GRES ``job`` holds on ``job.nodes[index]``: as allocated, else as it asked.

        A job whose start recorded no allocation (started before GRES were
        recorded) holds its request: typed items their type, untyped ones
        "any type" (None); a whole-node job holds all the node's GRES.
        """
        if job.gres_alloc:
            return job.gres_alloc[index]
        node = self.nodes.get(job.nodes[index])
        part = self.partitions.get(job.partition)
        if node is None:
            return ()
        if job.exclusive or (part is not None and part.exclusive):
            return node.gres
        try:
            request = gres_request(job.gres)
        except ValueError:
            return ()
        return tuple((name, kind or None, count) for name, kind, count in request)

    def gres_free(
        self, name: str, used: Mapping[tuple[str, str | None], int], whole: set[int]
    ) -> Gres:
        """What is free of node ``name``'s GRES when ``used`` is in use and the
        GPUs ``whole`` are given whole (``gpushare.couple``)."""
        node = self.nodes.get(name)
        if node is None:
            return ()
        free = gres_left(node.gres, used)
        shared = gpushare.shared_gpus((n, k, c) for (n, k), c in used.items())
        if not shared and not (whole and any("#" in kind for _, kind, _ in free)):
            return free
        return gpushare.couple(free, whole, shared, self.gpus(name))

    def gpu_cpus(self, name: str) -> dict[int, tuple[int, ...]]:
        """Node ``name``'s GPUs with known near cores -> their CPUs (``gpuaffinity``)."""
        if name not in self._gpu_cpus:
            self._gpu_cpus[name] = gpuaffinity.gpu_cpus(self.conf, name)
        return self._gpu_cpus[name]

    def gpu_links(self, name: str) -> Links:
        """Node ``name``'s links between GPUs from gres.conf (``gpuaffinity``)."""
        if name not in self._gpu_links:
            self._gpu_links[name] = gpuaffinity.gpu_links(self.conf, name)
        return self._gpu_links[name]

    def gpu_sockets(self, name: str) -> dict[str, str]:
        """Node ``name``'s GPU types -> the sockets near them (``gpuaffinity``)."""
        if name not in self._gpu_sockets:
            self._gpu_sockets[name] = gpuaffinity.gpu_sockets(self.conf, name)
        return self._gpu_sockets[name]

    def gpus(self, name: str) -> list[tuple[str, int]]:
        """Node ``name``'s GPUs as (type, index), computed once per configuration."""
        if name not in self._gpus:
            self._gpus[name] = gpu_numbering(self.conf, name)
        return self._gpus[name]


def static_nodes(conf: SlurmConfig) -> dict[str, NodeView]:
    """Every configured node as if empty and up: for "can this ever fit?"."""
    cores = allocates_cores(conf)
    return {
        n.name: NodeView(
            n.name,
            n.cpus,
            n.real_memory,
            n.weight,
            frozenset(n.features),
            n.cpus,
            n.real_memory,
            True,
            True,
            gres=gpushare.pools(conf, n.name, node_gres(n.gres)),
            unit=max(n.threads_per_core, 1) if cores else 1,
            rank=rank,
            devices=_static_devices(conf, n.name),
            sockets=n.sockets,
        )
        for rank, n in enumerate(conf.nodes)
    }


def _static_devices(conf: SlurmConfig, name: str) -> NodeDevices | None:
    """A node's GPUs, none in use, with the cores gres.conf puts near them: what
    --gres-flags=enforce-binding and --gpus-per-socket need to know to say "never"."""
    numbers = gpu_numbering(conf, name)
    if not numbers:
        return None
    near = gpuaffinity.gpu_cpus(conf, name)
    return NodeDevices(
        numbers=tuple(numbers),
        near=tuple(sorted(near.items())),
        links=gpuaffinity.gpu_links(conf, name),
    )


def allocates_cores(conf: SlurmConfig) -> bool:
    """Whether jobs get whole cores (CR_Core*, the default) rather than threads (CR_CPU*)."""
    params = dict(conf.settings).get("SelectTypeParameters", "CR_Core_Memory").upper()
    return not params.startswith("CR_CPU")


def partition_view(conf: SlurmConfig, name: str, state: str | None = None) -> PartitionView:
    p = conf.partition(name)
    assert p is not None
    exclusive, max_share, force = oversubscribe(p.oversubscribe)
    topo, nodes = topology.of_partition(conf, p.nodes)
    return PartitionView(
        name=p.name,
        nodes=nodes,
        state=state or p.state,
        max_time=p.max_time,
        max_nodes=p.max_nodes,
        min_nodes=p.min_nodes,
        priority_tier=p.priority_tier,
        def_mem_per_cpu=p.def_mem_per_cpu,
        def_mem_per_node=p.def_mem_per_node,
        max_mem_per_node=p.max_mem_per_node,
        exclusive=exclusive,
        max_share=max_share,
        force=force,
        max_cpus_per_node=p.max_cpus_per_node,
        def_cpu_per_gpu=p.def_cpu_per_gpu,
        def_mem_per_gpu=p.def_mem_per_gpu,
        order=selection_order(
            nodes,
            {n.name: n.weight for n in conf.nodes},
            {n.name: i for i, n in enumerate(conf.nodes)},
        ),
        topology=topo,
    )


def _partitions(spec: JobSpec, conf: SlurmConfig, who: Principal) -> tuple[str, ...]:
    names = [p for p in spec.partitions if p]
    if not names:
        default = conf.default_partition
        if default is None:
            raise SlurmError(errors.ESLURM_DEFAULT_PARTITION_NOT_SET)
        names = [default.name]
    groups = who.group_names()
    for name in names:
        part = conf.partition(name)
        if part is None:  # slurmctld's message names it: the clients print it first
            detail = f"invalid partition specified: {name}"
            raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME, detail=detail)
        qos = spec.qos or "normal"
        refused = partitionaccess.access_refusal(part, who, spec.account, qos, groups)
        if refused:
            raise SlurmError(refused)
    return tuple(dict.fromkeys(names))


def _mail_type(text: str) -> str:
    """A submitted --mail-type in its canonical form; a word Slurm does not know is
    refused here too (the clients check it, but the wire is anyone's)."""
    try:
        return mailtype.parse(text) if text else ""
    except ValueError:
        raise SlurmError(errors.EINVAL, "Invalid --mail-type specification") from None


def _recipient(given: str, types: str, user: str, domain: str) -> str:
    """Whom the job's mail goes to, as Slurm stores it: --mail-user, else (when mail
    is asked for) the job's user, at MailDomain when that is set and no domain given."""
    recipient = given or (user if types else "")
    if recipient and domain and "@" not in recipient:
        recipient = f"{recipient}@{domain}"
    return recipient


def _hosts(expr: str) -> tuple[str, ...]:
    if not expr:
        return ()
    try:
        return tuple(dict.fromkeys(hostlist.expand(expr)))
    except ValueError:
        raise SlurmError(errors.ESLURM_INVALID_NODE_NAME) from None


def _check_constraint(
    constraint: str, nodes: Mapping[str, NodeView], parts: list[PartitionView]
) -> None:
    """``-C`` as Slurm's ``build_feature_list`` checks it, then some node must qualify.

    Every feature named must exist on some node of the cluster; and as
    Corral always did, some node of the job's partitions must pass the
    expression (counts aside, which the "never" check covers).
    """
    if not constraint:
        return
    try:
        parsed = features.parse(constraint)
    except ValueError:
        raise SlurmError(errors.ESLURM_INVALID_FEATURE) from None
    known = frozenset[str]().union(*(n.features for n in nodes.values()))
    if not parsed.names <= known or not any(
        parsed.admits(nodes[n].features) for p in parts for n in p.nodes
    ):
        raise SlurmError(errors.ESLURM_INVALID_FEATURE)


def _check_gres(gres: str, nodes: Mapping[str, NodeView], parts: list[PartitionView]) -> None:
    """``--gres`` must parse, and each name (and type, if given) exist in the partitions."""
    try:
        request = gres_request(gres)
    except ValueError:
        raise SlurmError(errors.ESLURM_INVALID_GRES) from None
    if not request:
        return  # nothing asked: no need to gather what thousands of nodes offer
    # A per-GPU pool (``a100#0``) offers its GPU's type.
    have = {(g[0], g[1].split("#")[0]) for p in parts for n in p.nodes for g in nodes[n].gres}
    names = {name for name, _ in have}
    for name, kind, _ in request:
        if (name, kind) not in have if kind else name not in names:
            raise SlurmError(errors.ESLURM_INVALID_GRES)


#: Slurm 22.05's err_msg for a job asking more sockets, cores or threads than its nodes have.
THREADS_UNSATISFIED = "Socket, core and/or thread specification can not be satisfied"


def _check_shape(job: Job, conf: SlurmConfig, parts: list[PartitionView]) -> None:
    """Sockets per node, cores per socket or threads per core (--sockets-per-node,
    --cores-per-socket, -B, --threads-per-core) that no node of the job's partitions
    has are refused at submission, as Slurm 22.05 refuses them, its err_msg line
    first (measured on nodes of two 4-core sockets: ``-B 3``, ``-B 3-4``, ``-B 2:5``,
    ``--cores-per-socket=5``, ``-B 1:2:2``; and on nodes of 2 threads a core:
    ``-n2 --threads-per-core=3``)."""
    wanted = (job.sockets_per_node, job.cores_per_socket, job.threads_per_core)
    if all(count <= 1 for count in wanted):
        return
    names = {name for part in parts for name in part.nodes}
    if not any(_holds(conf, name, wanted) for name in names):
        raise SlurmError(
            errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, detail=THREADS_UNSATISFIED
        )


#: The JobSpec counts a submission may name as given 0 (``node_info_zeros``).
ZERO_COUNTS = ("sockets_per_node", "cores_per_socket")


def _zeros(spec: JobSpec) -> tuple[str, ...]:
    """``spec.node_info_zeros``, each a count of ``ZERO_COUNTS`` left 0; EINVAL for
    another name or a count that is not 0 (a client that says what it did not send)."""
    for name in spec.node_info_zeros:
        if name not in ZERO_COUNTS or getattr(spec, name):
            raise SlurmError(errors.EINVAL, f"Invalid node_info_zeros entry {name}")
    return tuple(sorted(set(spec.node_info_zeros)))


def _holds(conf: SlurmConfig, name: str, wanted: tuple[int, int, int]) -> bool:
    """Whether node ``name`` has the (sockets, cores per socket, threads per core)
    ``wanted`` (False for one slurm.conf does not define)."""
    try:
        node = conf.node(name)
    except KeyError:
        return False
    have = (node.sockets, node.cores_per_socket, node.threads_per_core)
    return all(w <= h for w, h in zip(wanted, have, strict=True))


def _empty_place(nodes: Mapping[str, NodeView]) -> flavoradmit.Place:
    """Placement on the empty cluster ``nodes``: "could this ever run?"."""
    return lambda job, part: place(job, part, nodes)


@dataclass(frozen=True, slots=True)
class _Counts:
    """How many nodes and tasks a submission asks for, defaults applied."""

    min_nodes: int
    max_nodes: int
    num_tasks: int
    ntasks_per_node: int
    tasks_given: bool
    nodes_given: bool


def _counts(spec: JobSpec, required: int) -> _Counts:
    """``-N``, ``-n`` and ``--ntasks-per-node`` with the ``required`` nodes ``-w`` names."""
    min_nodes = spec.min_nodes
    ntasks_per_node = spec.ntasks_per_node or 0
    num_tasks = spec.num_tasks or 0
    if min_nodes is None:
        if ntasks_per_node and num_tasks:
            min_nodes = -(-num_tasks // ntasks_per_node)
        else:
            min_nodes = max(1, required)
    min_nodes = max(min_nodes, required)  # -w names nodes the job must get
    if min_nodes < 1 or num_tasks < 0:
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)
    if not num_tasks:
        num_tasks = min_nodes * (ntasks_per_node or 1)
    max_nodes = spec.max_nodes or 0
    if max_nodes and max_nodes < min_nodes:
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)
    return _Counts(
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        num_tasks=num_tasks,
        ntasks_per_node=ntasks_per_node,
        tasks_given=spec.num_tasks is not None,
        # -w alone does not fix the count: more nodes are added if the tasks need them.
        nodes_given=spec.min_nodes is not None or spec.ntasks_per_node is not None,
    )


def _ever(job: Job, capacity: Capacity, partitions: tuple[str, ...]) -> bool:
    """Whether an empty, healthy partition of ``job``'s could take it."""
    nodes = capacity.nodes
    return any(isinstance(place(job, capacity.partitions[p], nodes), Start) for p in partitions)


#: SchedulerParameters max_switch_wait's default: the most a --switches wait may be.
MAX_SWITCH_WAIT = 300


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A job's topology fields (``Job``'s names), defaults applied."""

    switches: int = 0
    switch_wait: int = 0  # seconds
    segment: int = 0
    required: int = -1  # --topology-level's levels; -1: none
    preferred: int = -1


def switch_request(count: int, wait: int | None, conf: SlurmConfig) -> tuple[int, int]:
    """``--switches=count[@wait]`` (or scontrol's ``Switches=``) as the Job's
    ``switches`` and ``switch_wait``: refused without topology/tree, the wait (None:
    not given) capped by ``max_switch_wait`` as slurmctld caps it."""
    if not count:
        return 0, 0
    if conf.topology is None or conf.topology.plugin != TREE:
        raise SlurmError(errors.ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE)
    ceiling = int(conf.scheduler_param("max_switch_wait") or MAX_SWITCH_WAIT)
    return count, ceiling if wait is None else min(wait, ceiling)


def topology_request(
    spec: JobSpec, conf: SlurmConfig, min_nodes: int, required: bool
) -> TopologyRequest:
    """The Job fields of ``--switches``, ``--segment`` and ``--topology-level``.

    Each is refused (Slurm 24.11's "Requested topology configuration is not
    available") where it would be ignored: ``--switches`` without topology/tree,
    ``--segment`` without topology/block, bigger than the base block, not dividing
    the node count or with ``-w`` (24.11's own checks), a level the topology lacks.
    The wait is capped by ``max_switch_wait``, as slurmctld caps it.
    """
    plugin = conf.topology.plugin if conf.topology is not None else ""
    topo = conf.topology
    refused = SlurmError(errors.ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE)
    segment = spec.segment
    if segment and (
        topo is None
        or plugin != BLOCK
        or segment > topo.block_size
        or min_nodes % segment
        or required
    ):
        raise refused
    levels = [v for v in (spec.topology_required, spec.topology_preferred) if v is not None]
    if levels and (topo is None or max(levels) >= topo.levels):
        raise refused
    if None not in (spec.topology_required, spec.topology_preferred) and (
        (spec.topology_preferred or 0) > (spec.topology_required or 0)
    ):
        raise refused
    switches, wait = switch_request(spec.switches, spec.switch_wait, conf)
    return TopologyRequest(
        switches=switches,
        switch_wait=wait,
        segment=segment,
        required=-1 if spec.topology_required is None else spec.topology_required,
        preferred=-1 if spec.topology_preferred is None else spec.topology_preferred,
    )


def admit(
    spec: JobSpec,
    who: Principal,
    conf: SlurmConfig,
    partition_states: Mapping[str, str],
    first_id: int,
    now: int,
    requeue_delay: int,
    capacity: Capacity | None = None,
) -> Admitted:
    """Validate ``spec`` and build its jobs from ``first_id`` on.

    ``capacity`` is ``Capacity(conf)``, passed in by callers that keep one.
    """
    capacity = capacity if capacity is not None and capacity.conf is conf else Capacity(conf)
    bounds.check_submission(spec, conf)  # before any parsing: every text has a ceiling
    script = spec.script
    if not script and not spec.interactive:
        raise SlurmError(errors.ESLURM_JOB_SCRIPT_MISSING)
    partitions = _partitions(spec, conf, who)
    for name in partitions:
        if partition_states.get(name, "UP") in ("INACTIVE", "DRAIN"):
            raise SlurmError(
                errors.ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE,
                "Required partition not available (inactive or drain)",
            )
    implied = gpuspec.check(spec)
    gpulists.check(spec)
    if implied.min_nodes != spec.min_nodes or implied.num_tasks != spec.num_tasks:
        spec = replace(spec, min_nodes=implied.min_nodes, num_tasks=implied.num_tasks)
    req_nodes = _hosts(spec.req_nodes)
    exc_nodes = _hosts(spec.exc_nodes)
    if req_nodes or exc_nodes:  # the set of every node name only when a name needs it
        known = {n.name for n in conf.nodes}
        if any(n not in known for n in req_nodes + exc_nodes):
            raise SlurmError(errors.ESLURM_INVALID_NODE_NAME)
    counts = _counts(spec, len(req_nodes))
    topo = topology_request(spec, conf, counts.min_nodes, bool(req_nodes))
    if spec.elastic_signal and counts.max_nodes <= counts.min_nodes:
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)  # --elastic needs -N min-max
    if spec.elastic_signal > 64:
        raise SlurmError(errors.EINVAL, "Invalid --elastic signal")
    if spec.container and not spec.container.startswith("/"):
        # sbatch(1): "Absolute path to OCI container bundle"; the nodes cannot know
        # which directory a relative one was relative to (REST sends it unchecked).
        raise SlurmError(errors.EINVAL, f"--container {spec.container}: not an absolute path")
    time_limit = spec.time_limit
    if time_limit is None:
        default = conf.partition(partitions[0])
        assert default is not None
        time_limit = default.default_time if default.default_time is not None else default.max_time
    if spec.mem_per_node is not None and spec.mem_per_cpu is not None:
        raise SlurmError(errors.EINVAL, "--mem and --mem-per-cpu are mutually exclusive")
    dep = spec.dependency
    if dep:
        try:
            dependency.parse(dep)
        except ValueError:
            raise SlurmError(errors.ESLURM_DEPENDENCY) from None
    if spec.distribution:
        try:
            distribution.parse(spec.distribution)
        except ValueError:
            raise SlurmError(errors.ESLURM_BAD_DIST) from None
    nice = spec.nice
    if nice < 0 and not who.is_admin:
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)
    priority = spec.priority
    if priority is not None and not who.is_admin:
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)
    first = conf.partition(partitions[0])
    assert first is not None
    cpus_per_task, mem_per_cpu = spec.cpus_per_task or 1, spec.mem_per_cpu
    if mem_per_cpu is not None:
        cpus_per_task, mem_per_cpu = partitionaccess.fit_mem_per_cpu(
            cpus_per_task, mem_per_cpu, first.max_mem_per_cpu
        )
    base = Job(
        job_id=first_id,
        name=spec.name or "sbatch",
        uid=who.uid,
        gid=who.gid,
        user=who.user,
        group=group_name(who.gid),
        state=JobState.PENDING,
        reason=Reason.JOB_HELD_USER if spec.hold else Reason.NONE,
        submit_time=now,
        partitions=partitions,
        account=spec.account,
        qos=spec.qos or "normal",
        held="user" if spec.hold else "",
        admin_priority=priority,
        nice=nice,
        begin_time=spec.begin_time,
        eligible_time=max(now, spec.begin_time),
        time_limit=time_limit,
        time_min=spec.time_min or 0,
        min_nodes=counts.min_nodes,
        max_nodes=counts.max_nodes,
        num_tasks=counts.num_tasks,
        cpus_per_task=cpus_per_task,
        ntasks_per_node=counts.ntasks_per_node,
        ntasks_per_socket=spec.ntasks_per_socket,
        min_cpus=spec.min_cpus,
        tasks_given=counts.tasks_given,
        nodes_given=counts.nodes_given,
        cpus_per_task_given=spec.cpus_per_task is not None or cpus_per_task > 1,
        mem_per_node=spec.mem_per_node,
        mem_per_cpu=mem_per_cpu,
        req_nodes=req_nodes,
        exc_nodes=exc_nodes,
        constraint=spec.constraint,
        exclusive=spec.exclusive,
        dependency=dep,
        work_dir=spec.work_dir or "/",
        std_out=spec.std_out,
        std_err=spec.std_err,
        std_in=spec.std_in or "/dev/null",
        open_mode=spec.open_mode,
        command=spec.command,
        comment=spec.comment,
        submit_line=spec.submit_line,
        submit_host=spec.submit_host,
        submit_dir=spec.submit_dir,
        export_env=spec.export_env,
        requeue=conf.job_requeue if spec.requeue is None else spec.requeue,
        requeue_delay=requeue_delay,
        signal_num=spec.signal_num,
        signal_time=spec.signal_time,
        signal_batch_only=spec.signal_batch_only,
        deadline=spec.deadline,
        kill_on_invalid_dep=conf.scheduler_param("kill_invalid_depend") is not None
        if spec.kill_on_invalid_dep is None
        else spec.kill_on_invalid_dep,
        gres=spec.gres,
        gpus_per_job=spec.gpus,
        gpus_per_socket=spec.gpus_per_socket,
        gpus_per_task=spec.gpus_per_task,
        gpu_type=spec.gpu_type,
        gpus_also=spec.gpus_also,
        gpus_listed=spec.gpus_listed,
        gpus_per_node_listed=spec.gpus_per_node_listed,
        sockets_per_node=spec.sockets_per_node,
        cpus_per_gpu=spec.cpus_per_gpu,
        mem_per_gpu=spec.mem_per_gpu,
        ntasks_per_gpu=spec.ntasks_per_gpu,
        gpu_bind=spec.gpu_bind,
        gres_flags=spec.gres_flags,
        distribution=spec.distribution,
        threads_per_core=spec.threads_per_core,
        cores_per_socket=spec.cores_per_socket,
        node_info_zeros=_zeros(spec),
        prefer=spec.prefer,
        licenses=licenseadmit.checked(spec.licenses, conf),
        oversubscribe=spec.oversubscribe,
        reservation=spec.reservation,
        interactive=spec.interactive,
        switches=topo.switches,
        switch_wait=topo.switch_wait,
        segment=topo.segment,
        topology_required=topo.required,
        topology_preferred=topo.preferred,
        elastic_signal=spec.elastic_signal,
        container=spec.container,
        container_id=spec.container_id,
        mail_type=_mail_type(spec.mail_type),
        mail_user=_recipient(spec.mail_user, spec.mail_type, who.user, conf.hooks.mail_domain),
    )
    if time_limit == 0 or time_limit < -1:
        raise SlurmError(errors.ESLURM_INVALID_TIME_LIMIT)
    parts = [p for p in conf.partitions if p.name in partitions]
    refused = partitionaccess.limit_refusal(
        base, parts, partitionaccess.enforce_mode(conf.settings)
    )
    if refused:
        raise SlurmError(refused)
    nodes = capacity.nodes
    views = [capacity.partitions[p] for p in partitions]
    base = flavoradmit.admit(
        base, conf, nodes, views, lambda g: _check_gres(g, nodes, views), _empty_place(nodes)
    )
    _check_constraint(base.constraint, nodes, [capacity.partitions[p] for p in partitions])
    _check_gres(base.gres, nodes, [capacity.partitions[p] for p in partitions])
    _check_shape(base, conf, [capacity.partitions[p] for p in partitions])
    # "Never": not even an empty, healthy partition could take it.
    if not _ever(base, capacity, partitions):
        flat = replace(base, topology_required=-1, topology_preferred=-1, segment=0)
        if _ever(flat, capacity, partitions):  # its topology request is what cannot be met
            raise SlurmError(errors.ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE)
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    payload = Payload(
        script=script,
        argv=spec.argv,
        environment=tuple(sorted(spec.environment.items())),
    )
    array = spec.array
    if not array:
        return Admitted(base, payload)
    indices, throttle = parse_array(array, conf.max_array_size)
    meta = replace(
        base,
        array_job_id=first_id,
        array_max_tasks=throttle,
        array_spec=array,
        array_pending=arrayspec.compress(indices),
    )
    return Admitted(meta, payload)
