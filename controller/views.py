"""Records as clients see them: Job/node/partition -> wire messages.

Part of the service layer (the only code besides ``service.py`` and
``agentlink.py`` that touches generated wire types). Pending array tasks that
have not started live in the array's one record and show as ``123_[5-10%2]``,
or as one record per task when the client asks for that (``squeue -r``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controller import (
    gpuaffinity,
    gpulists,
    gpushare,
    hetjobs,
    jobdetail,
    licenseviews,
    nodefeatures,
    powersave,
    preemptrules,
    queuereply,
)
from controller.core import dependency as depcheck
from controller.core.snapshot import Gres
from controller.gpuspec import tasks_held
from controller.jobenv import run_length
from controller.jobstate import COMPLETING, JobState
from controller.model import Job, NodeRuntime, Step
from controller.reservations import Reservation
from controller.snapshots import dependency_facts
from controller.store import JobStore
from corral import arrayspec, hostlist, jobinfo, topologyconf
from corral import gres as gres_syntax
from corral.config import PartitionConfig, SlurmConfig
from corral.wire import corral_pb2 as pb


def _mem_text(mib: int) -> str:
    return f"{mib}M"


def tres(
    cpus: int,
    mem: int,
    nodes: int,
    gres: Iterable[Gres] = (),
    billing: int | None = None,
    licenses: Iterable[tuple[str, int]] = (),
) -> str:
    """A TRES list as Slurm writes it: cpu, mem, node, billing (the CPUs unless
    ``billing`` says otherwise), then each GRES allocated (``gres/gpu`` in all and
    ``gres/gpu:a100`` per type), summed over nodes, then the licenses accounting
    tracks (``license/fluent``, as ``licenseviews.tracked`` chose them)."""
    parts = [f"cpu={cpus}"]
    if mem:
        parts.append(f"mem={_mem_text(mem)}")
    parts += [f"node={nodes}", f"billing={cpus if billing is None else billing}"]
    totals: dict[str, int] = {}
    for node in gres:
        for name, pool, count in node:
            kind = gres_syntax.shown_type(pool)
            for key in (f"gres/{name}", f"gres/{name}:{kind}" if kind else ""):
                if key:
                    totals[key] = totals.get(key, 0) + count
    parts += [f"{key}={count}" for key, count in totals.items() if count]
    parts += [f"license/{name}={count}" for name, count in licenses]
    return ",".join(parts)


#: The ``jobinfo.DERIVED`` fields ``job_info`` sets once the record exists (an
#: array's task, the canceller, the usage); the rest are given to ``_record``.
_SET_AFTER = frozenset(
    {"array_task_id", "array_task_str", "cancelled_by", "max_rss_kb", "user_cpu_us", "sys_cpu_us"}
)


def _constructor() -> Callable[..., pb.JobInfo]:
    """``_record(job, **derived)``: a ``JobInfo`` with the ``jobinfo.COPIED`` fields
    read from ``job`` and the derived ones as given, written out once from the table
    as one constructor call. Generated, not looped over: building the copied fields
    as a mapping first made each record a quarter slower (a cold listing of 10,000
    jobs, and every first ``squeue`` after a restart, build one per job)."""
    derived = sorted(jobinfo.DERIVED - _SET_AFTER)
    for name in (*jobinfo.COPIED, *jobinfo.COPIED.values(), *derived):
        if not name.isidentifier():
            raise ValueError(f"corral.jobinfo: {name!r} is not a name")
    copied = ", ".join(f"{field}=job.{attribute}" for field, attribute in jobinfo.COPIED.items())
    given = ", ".join(f"{name}={name}" for name in derived)
    source = f"def record(job, *, {', '.join(derived)}):\n    return JobInfo({copied}, {given})\n"
    names: dict[str, Any] = {"JobInfo": pb.JobInfo}
    exec(compile(source, "<views.record>", "exec"), names)
    record: Callable[..., pb.JobInfo] = names["record"]
    return record


_record = _constructor()


def topology_records(conf: SlurmConfig) -> list[pb.TopologyRecord]:
    """topology.conf's switches or blocks, as ``scontrol show topology`` lists them."""
    if conf.topology is None:
        return []
    block = conf.topology.plugin == topologyconf.BLOCK
    return [
        pb.TopologyRecord(name=name, nodes=nodes, line=line, block=block)
        for name, nodes, line in conf.topology.records()
    ]


def topology_level(job: Job) -> str:
    """``--topology-level`` as given: ``R``, ``R:P`` or ``:P``; "" when not."""
    required = str(job.topology_required) if job.topology_required >= 0 else ""
    preferred = f":{job.topology_preferred}" if job.topology_preferred >= 0 else ""
    return required + preferred


class Dependencies:
    """Each job's ``--dependency`` as Slurm shows it, for one listing.

    What is shown depends on the other jobs (a reference is dropped once met,
    marked ``(failed)`` once it cannot be), so it is worked out when a listing
    asks for it, against one index of every job the store holds, built the first
    time a listed job needs it. A job that has started shows none: Slurm clears
    a job's dependency once it is satisfied.
    """

    def __init__(self, store: JobStore, now: int) -> None:
        self.store = store
        self.now = now
        self._index: depcheck.Index | None = None

    def text(self, job: Job) -> str:
        if job.deps is None or not job.dependency or job.start_time:
            return ""
        if self._index is None:
            self._index = depcheck.Index(dependency_facts(self.store.jobs.values()))
        return depcheck.shown(
            job.deps, job.job_id, job.name, job.uid, self._index, self.now, job.array_task_id
        )


def real_memory(conf: SlurmConfig, nodes: Iterable[str]) -> dict[str, int] | None:
    """Each of ``nodes``' RealMemory (MiB), one a reconfiguration removed left out;
    None where SelectTypeParameters makes memory no consumable resource."""
    params = dict(conf.settings).get("SelectTypeParameters", "CR_Core_Memory")
    if "MEMORY" not in params.upper():
        return None
    out: dict[str, int] = {}
    for name in nodes:
        with contextlib.suppress(KeyError):
            out[name] = conf.node(name).real_memory
    return out


def tres_memory(job: Job, real: Mapping[str, int] | None) -> int:
    """The memory a started job's TRES (scontrol's TRES=, sacct's and restd's AllocTRES)
    count, as Slurm 22.05 counts it: each node's allocation where memory is a
    consumable resource, a node's whole RealMemory (``real``) where the job set no
    limit there (``--gpus=2 -n6 -N2`` on two 16000 MiB nodes: ``mem=32000M``), and
    none where SelectTypeParameters leaves memory out (``real`` None: ``TRES=cpu=1,
    node=1,billing=1`` even with ``--mem=100``; measured, tests/unit/test_tres_memory.py)."""
    if real is None:
        return 0
    held = (*job.alloc_mem, *(0,) * (len(job.nodes) - len(job.alloc_mem)))
    return sum(mem or real.get(name, 0) for name, mem in zip(job.nodes, held, strict=False))


@dataclasses.dataclass(frozen=True, slots=True)
class GpuRequest:
    """A job's GPU request as JobInfo shows it, one attribute per JobInfo field (scontrol's
    TresPerJob, CpusPerTres, ...): the listing's field table is derived from these."""

    tres_per_job: str
    tres_per_socket: str
    tres_per_task: str
    cpus_per_tres: str
    mem_per_tres: str
    tres_bind: str
    ntasks_per_tres: int
    gres_enforce_bind: str


class _Facts:
    """One job's record in the making: what several of its fields are worked out
    from (its CPU count, output path, licenses, GPU request, per-node detail), each
    worked out once and only when a field asked for needs it."""

    __slots__ = ("_detail", "_gpu", "_licenses", "_real", "conf", "dependency", "job", "store")

    def __init__(self, job: Job, store: JobStore, dependency: str | None) -> None:
        self.job, self.store, self.conf, self.dependency = job, store, store.conf, dependency
        self._real: tuple[dict[str, int] | None] | None = None  # once worked out
        self._gpu: GpuRequest | None = None
        self._detail: jobdetail.JobDetail | None = None
        self._licenses: tuple[tuple[str, int], ...] | None = None

    @property
    def num_cpus(self) -> int:
        job = self.job
        return sum(job.cpus) if job.cpus else job.cpus_needed

    @property
    def num_nodes(self) -> int:
        job = self.job
        return len(job.nodes) if job.nodes else job.min_nodes

    @property
    def std_out(self) -> str:
        return self.job.std_out or _default_out(self.job)

    @property
    def licenses(self) -> tuple[tuple[str, int], ...]:
        if self._licenses is None:
            job = self.job
            self._licenses = licenseviews.tracked(job.licenses, self.conf) if job.licenses else ()
        return self._licenses

    @property
    def gpu(self) -> GpuRequest:
        if self._gpu is None:
            self._gpu = gpu_request(self.job, self.conf)
        return self._gpu

    @property
    def real(self) -> dict[str, int] | None:
        """Its nodes' RealMemory where memory is consumable (``real_memory``)."""
        if self._real is None:
            self._real = (real_memory(self.conf, self.job.nodes),)
        return self._real[0]

    @property
    def detail(self) -> jobdetail.JobDetail:
        if self._detail is None:
            job, store = self.job, self.store
            self._detail = jobdetail.of_job(
                job,
                {name: store.gpu_numbering(name) for name in job.nodes},
                self.real,
                frozenset(n for n in job.nodes if job.gpus_per_job and store.gpu_near(n)),
            )
        return self._detail


def _state_flags(f: _Facts) -> list[str]:
    job = f.job
    flags = sorted(job.flags)
    if job.state is JobState.RUNNING and powersave.configuring(job, f.store.nodes):
        return [*flags, "CONFIGURING"]
    return flags


def _alloc_tres(f: _Facts) -> str:
    job = f.job
    if not job.nodes:
        return ""
    mem = tres_memory(job, f.real)
    billing = f.store.priorities.billing(job)
    return tres(f.num_cpus, mem, f.num_nodes, job.gres_alloc, billing, f.licenses)


def _preempt_eligible_time(f: _Facts) -> int:
    if f.job.state is not JobState.RUNNING:
        return 0
    return preemptrules.Rules(f.conf, f.store.associations).eligible_time(f.job)


def _gpu_field(name: str) -> Callable[[_Facts], Any]:
    return lambda f: getattr(f.gpu, name)


def _detail_field(name: str) -> Callable[[_Facts], Any]:
    return lambda f: getattr(f.detail, name)


#: How each ``jobinfo.DERIVED`` field given to ``_record`` is worked out: one table,
#: read whole for a full record and field by field for a listing that names its
#: fields (squeue asks for 21 of them: a first listing of 100,000 jobs built every
#: field of every record and spent most of its time on fields no one read).
_DERIVE: dict[str, Callable[[_Facts], Any]] = {
    "partition": lambda f: f.job.partition or ",".join(f.job.partitions),
    "dependency": lambda f: f.job.dependency if f.dependency is None else f.dependency,
    # A requeue submits the job again, as Slurm shows it (and files its next run).
    "submit_time": lambda f: f.job.requeue_time or f.job.submit_time,
    "priority": lambda f: f.store.ranking.of(f.job),
    "state": lambda f: f.job.state.name,
    "state_flags": _state_flags,
    "reason": lambda f: f.job.reason.value,
    "batch_flag": lambda f: not hetjobs.leader_of(f.store.jobs, f.job).interactive,
    "eligible_time": lambda f: 0 if f.job.held else f.job.eligible_time,
    "accrue_time": lambda f: 0 if f.job.held else f.job.eligible_time,
    "start_time": lambda f: f.job.start_time or f.job.expected_start,
    "sched_nodes": lambda f: (
        hostlist.compress(f.job.expected_nodes) if f.job.expected_nodes else ""
    ),
    "nodes": lambda f: hostlist.compress(f.job.nodes) if f.job.nodes else "",
    "batch_host": lambda f: f.job.nodes[0] if f.job.nodes else "",
    "req_nodes": lambda f: hostlist.compress(f.job.req_nodes) if f.job.req_nodes else "",
    "exc_nodes": lambda f: hostlist.compress(f.job.exc_nodes) if f.job.exc_nodes else "",
    "num_nodes": lambda f: f.num_nodes,
    "num_cpus": lambda f: f.num_cpus,
    "num_tasks": lambda f: tasks_held(f.job),
    "min_cpus_node": lambda f: max(f.job.min_cpus, f.job.cpus_per_task),
    "min_mem_node": lambda f: f.job.mem_per_node or 0,
    "min_mem_cpu": lambda f: f.job.mem_per_cpu or 0,
    "mem_all": lambda f: f.job.mem_per_node == 0,
    "gres": lambda f: tres_per_node(f.job),
    "oversubscribe": lambda f: "NO" if f.job.exclusive else "YES" if f.job.oversubscribe else "OK",
    "std_out": lambda f: f.std_out,
    "std_err": lambda f: f.job.std_err or f.std_out,
    "steps": lambda f: [step_info(step) for step in f.job.steps],
    "extern_step": lambda f: "contain" in f.conf.prolog_flags and f.job.start_time > 0,
    "req_tres": lambda f: tres(
        f.job.cpus_needed,
        (f.job.mem_per_node or 0) * f.job.min_nodes,
        f.job.min_nodes,
        licenses=f.licenses,
    ),
    "alloc_tres": _alloc_tres,
    "cluster": lambda f: f.conf.cluster_name,
    "cpus_per_node": lambda f: list(f.job.cpus),
    "node_info_zeros": lambda f: list(f.job.node_info_zeros),
    "signal": lambda f: f"{f.job.signal_num}@{f.job.signal_time}" if f.job.signal_num else "",
    "held": lambda f: bool(f.job.held),
    "last_sched_eval": lambda f: f.job.start_time or f.job.submit_time,
    "preempt_eligible_time": _preempt_eligible_time,
    "queue": lambda f: queuereply.job_queue(f.store, f.job),
    "topology_level": lambda f: topology_level(f.job),
    **{field.name: _gpu_field(field.name) for field in dataclasses.fields(GpuRequest)},
    **{name: _detail_field(name) for name in ("job_gres", "node_cpu_ids", "node_mem", "node_gres")},
}


def job_info(
    job: Job,
    store: JobStore,
    *,
    array_tasks: list[int] | None = None,
    dependency: str | None = None,
) -> pb.JobInfo:
    """One job record; for an array's record, ``array_tasks`` shows only those tasks.

    The fields copied as they are come from ``corral.jobinfo.COPIED``; the ones
    worked out here are that module's ``DERIVED`` (``_DERIVE`` says how).
    ``dependency`` is the list as ``Dependencies`` shows it; None keeps the text as
    submitted.
    """
    facts = _Facts(job, store, dependency)
    info = _record(job, **{name: derive(facts) for name, derive in _DERIVE.items()})
    _set_after(info, job, array_tasks)
    return info


def _set_after(info: pb.JobInfo, job: Job, array_tasks: list[int] | None) -> None:
    """The ``_SET_AFTER`` fields: an array's tasks, the canceller, the usage."""
    if job.array_pending:
        # Shown as stored unless the client named some tasks: never expanded to be
        # compressed again (a 100,000-task array is one short string).
        text = job.array_pending if array_tasks is None else arrayspec.compress(array_tasks)
        if "," in text or "-" in text:
            throttle = f"%{job.array_max_tasks}" if job.array_max_tasks else ""
            info.array_task_str = text + throttle
        else:
            info.array_task_id = int(text)
    elif job.array_task_id is not None:
        info.array_task_id = job.array_task_id
    if job.cancelled_by >= 0:
        info.cancelled_by = job.cancelled_by
    info.max_rss_kb, info.user_cpu_us, info.sys_cpu_us = job.usage


def _narrow(fields: tuple[str, ...]) -> Callable[[Job, JobStore, str | None], pb.JobInfo]:
    """A builder of the record holding just ``fields`` (``_only`` of ``job_info``,
    byte for byte) that works out those fields alone."""
    copied = tuple((name, jobinfo.COPIED[name]) for name in fields if name in jobinfo.COPIED)
    derived = tuple((name, _DERIVE[name]) for name in fields if name in _DERIVE)
    after = [name for name in fields if name in _SET_AFTER]
    cleared = tuple(name for name in sorted(_SET_AFTER) if name not in after)

    def build(job: Job, store: JobStore, dependency: str | None) -> pb.JobInfo:
        facts = _Facts(job, store, dependency)
        values = {name: getattr(job, attribute) for name, attribute in copied}
        for name, derive in derived:
            values[name] = derive(facts)
        info = pb.JobInfo(**values)
        if after:
            _set_after(info, job, None)
            for name in cleared:
                info.ClearField(name)
        return info

    return build


_BUILDERS: dict[tuple[str, ...], Callable[[Job, JobStore, str | None], pb.JobInfo]] = {}


def listed_info(
    job: Job, store: JobStore, fields: tuple[str, ...], dependency: str | None = None
) -> pb.JobInfo:
    """``job``'s record with only ``fields`` (all when none are named), working out
    only those: what ``_only(job_info(...), fields)`` gives, at a fraction of the cost."""
    if not fields:
        return job_info(job, store, dependency=dependency)
    build = _BUILDERS.get(fields)
    if build is None:
        if len(_BUILDERS) > 256:  # field lists come from clients: keep the table small
            _BUILDERS.clear()
        build = _BUILDERS[fields] = _narrow(fields)
    return build(job, store, dependency)


def _only(info: pb.JobInfo, fields: tuple[str, ...]) -> pb.JobInfo:
    """A copy of ``info`` holding just ``fields`` (all of it when none are named)."""
    if not fields:
        return info
    part = pb.JobInfo()
    for name in fields:
        if info.HasField(name) if name in _PRESENCE else True:
            value = getattr(info, name)
            if isinstance(value, (str, bytes, int, float, bool)):
                setattr(part, name, value)
            else:
                getattr(part, name).extend(value)
    return part


_PRESENCE = frozenset(f.name for f in pb.JobInfo.DESCRIPTOR.fields if f.has_presence)
JOB_FIELDS = frozenset(f.name for f in pb.JobInfo.DESCRIPTOR.fields)


def _reads_dependency(fields: tuple[str, ...]) -> bool:
    return not fields or "dependency" in fields


class JobsEncoder:
    """Serialized job records, cached per immutable ``Job`` value.

    A record depends only on the job, the configuration and the priority
    ranking, so the bytes are reused until the job changes (or either of the
    others is replaced): listing 10,000 pending jobs costs a join.
    Each entry is a one-job ``JobsReply``; concatenated protobuf messages
    merge, so the entries of many jobs concatenate into one reply.
    """

    def __init__(self, store: JobStore) -> None:
        self.store = store
        # job id -> requested field list -> (the Job it was made from, its bytes)
        self._cache: dict[int, dict[tuple[str, ...], tuple[Job, str | None, bytes]]] = {}
        self._conf = store.conf
        self._ranking = store.ranking

    def entry(
        self,
        job: Job,
        array_tasks: list[int] | None = None,
        fields: tuple[str, ...] = (),
        deps: Dependencies | None = None,
    ) -> bytes:
        """One job's reply entry, with only ``fields`` when any are named.

        ``deps`` shows the job's dependency as it stands now (the text as submitted
        without it); a cached entry is reused only while that text is unchanged.
        """
        shown = deps.text(job) if deps is not None and _reads_dependency(fields) else None
        if array_tasks is not None:
            info = job_info(job, self.store, array_tasks=array_tasks, dependency=shown)
            one: bytes = pb.JobsReply(jobs=[_only(info, fields)]).SerializeToString()
            return one
        if self._conf is not self.store.conf or self._ranking is not self.store.ranking:
            self._cache.clear()
            self._conf, self._ranking = self.store.conf, self.store.ranking
        per_job = self._cache.setdefault(job.job_id, {})
        cached = per_job.get(fields)
        if cached is not None and cached[0] is job and cached[1] == shown:
            return cached[2]
        data: bytes = pb.JobsReply(
            jobs=[listed_info(job, self.store, fields, shown)]
        ).SerializeToString()
        per_job[fields] = (job, shown, data)
        return data

    def reply(self, entries: list[bytes], now: int) -> bytes:
        if len(self._cache) > 2 * len(self.store.jobs) + 1024:
            self._cache = {k: v for k, v in self._cache.items() if k in self.store.jobs}
        head: bytes = pb.JobsReply(now=now, last_update=self.store.last_update).SerializeToString()
        return head + b"".join(entries)


def _gpu_tres(kind: str, count: int) -> str:
    return f"gres/gpu:{kind}:{count}" if kind else f"gres/gpu:{count}"


def _per_gpu_defaults(job: Job, conf: SlurmConfig) -> tuple[int, int]:
    """DefCpuPerGPU and DefMemPerGPU of the partition the job runs in (else its first),
    where they apply to it: a GPU job that asked for neither (``core/gpus.py``)."""
    part = conf.partition(job.partition or job.partitions[0]) if job.partitions else None
    if part is None or not (
        job.gres
        or job.gpus_per_job
        or job.gpus_per_task
        or job.gpus_per_socket
        or job.ntasks_per_gpu
    ):
        return 0, 0
    cpus = 0 if job.cpus_per_task_given else part.def_cpu_per_gpu
    mem_given = job.mem_per_node is not None or job.mem_per_cpu is not None
    return cpus, 0 if mem_given else part.def_mem_per_gpu


def gpu_request(job: Job, conf: SlurmConfig) -> GpuRequest:
    """``job``'s GPU request: its options as given, and the partition's
    DefCpuPerGPU/DefMemPerGPU where they apply, as Slurm records them on the job."""
    def_cpus, def_mem = _per_gpu_defaults(job, conf)
    cpus = job.cpus_per_gpu or def_cpus
    mem = job.mem_per_gpu if job.mem_per_gpu is not None else def_mem
    kind = job.gpu_type
    return GpuRequest(
        tres_per_job=gpulists.shown(job.gpus_listed)
        if job.gpus_listed
        else ",".join(
            [_gpu_tres(kind, job.gpus_per_job)] * bool(job.gpus_per_job)
            + [f"gres/gpu:{also}" for also in job.gpus_also.split(",") if also]
        ),
        tres_per_socket=_gpu_tres(kind, job.gpus_per_socket) if job.gpus_per_socket else "",
        tres_per_task=_gpu_tres(kind, job.gpus_per_task) if job.gpus_per_task else "",
        cpus_per_tres=f"gres/gpu:{cpus}" if cpus else "",
        mem_per_tres=f"gres/gpu:{mem}" if mem else "",
        tres_bind=f"gpu:{job.gpu_bind}" if job.gpu_bind else "",
        ntasks_per_tres=job.ntasks_per_gpu,
        gres_enforce_bind={"enforce-binding": "Yes", "disable-binding": "No"}.get(
            job.gres_flags, ""
        ),
    )


def _tres_per_node(gres: str) -> str:
    """``gpu:2,craynetwork:1`` as Slurm's TresPerNode: ``gres/gpu:2,gres/craynetwork:1``."""
    items = (item.removeprefix("gres/").removeprefix("gres:") for item in gres.split(","))
    return ",".join(f"gres/{item}" for item in items if item)


def tres_per_node(job: Job) -> str:
    """TresPerNode: what the job asks on each node; a pending job naming alternatives
    (``--gres=a|b``) asks for any of them, a started one got the one it runs with."""
    if job.gres_alternatives and job.state is JobState.PENDING:
        return "|".join(_tres_per_node(option) for option in job.gres_alternatives)
    shown = _tres_per_node(job.gres)
    if job.gpus_per_node_listed:  # --gpus-per-node=1,2 as given
        return ",".join(gpulists.per_node_shown(shown.split(","), job.gpus_per_node_listed))
    return shown


def _default_out(job: Job) -> str:
    name = "slurm-%A_%a.out" if job.array_job_id else "slurm-%j.out"
    return f"{job.work_dir.rstrip('/')}/{name}"


class _NodePartitions:
    """Each node's partitions, worked out once per partition table: a listing of 10,000
    nodes asked every partition's 10,000 names for each node. The table is an immutable
    tuple, held here, so its identity says when it changed."""

    def __init__(self) -> None:
        self._table: tuple[PartitionConfig, ...] | None = None
        self._by_node: dict[str, list[str]] = {}

    def of(self, table: tuple[PartitionConfig, ...], node: str) -> list[str]:
        if table is not self._table:
            by_node: dict[str, list[str]] = {}
            for part in table:
                for name in part.nodes:
                    by_node.setdefault(name, []).append(part.name)
            self._table, self._by_node = table, by_node
        return list(self._by_node.get(node, ()))


_PARTITIONS = _NodePartitions()


def node_info(name: str, store: JobStore) -> pb.NodeInfo:
    conf = store.conf.node(name)
    runtime: NodeRuntime = store.nodes[name]
    used_mem = store.used(name)[1]
    used_cpus = store.allocated_cpus(name)
    jobs = store.jobs_on(name)
    if runtime.state == "DOWN":
        base = "DOWN"
    elif runtime.state == "UNKNOWN":
        base = "UNKNOWN"
    elif used_cpus >= conf.cpus:
        base = "ALLOCATED"
    elif used_cpus:
        base = "MIXED"
    else:
        base = "IDLE"
    flags = []
    if runtime.drain:
        flags.append("DRAIN")
    if runtime.reboot:
        flags.append("REBOOT_ISSUED" if runtime.reboot == "issued" else "REBOOT_REQUESTED")
    if any(COMPLETING in j.flags for j in jobs):
        flags.append("COMPLETING")
    if conf.state.upper() == "CLOUD":
        flags.append("CLOUD")
    if runtime.power:
        flags.append(powersave.FLAGS[runtime.power])
    # A node in power saving has no agent to answer: only a DOWN one says so (down~*).
    asleep = powersave.asleep(runtime) and runtime.state == "UP"
    if not runtime.responding and runtime.state != "UNKNOWN" and not asleep:
        flags.append("NOT_RESPONDING")
    now = int(time.time())
    for resv in store.reservations.by_name.values():
        if name in resv.nodes and resv.active(now):
            flags.append("MAINTENANCE" if resv.has("MAINT") else "RESERVED")
    return pb.NodeInfo(
        name=name,
        addr=conf.node_addr,
        hostname=conf.node_hostname,
        state=base,
        state_flags=flags,
        cpus=conf.cpus,
        alloc_cpus=used_cpus,
        boards=conf.boards,
        sockets=conf.sockets,
        cores_per_socket=conf.cores_per_socket,
        threads_per_core=conf.threads_per_core,
        real_memory=conf.real_memory,
        alloc_memory=used_mem,
        free_memory=max(conf.real_memory - used_mem, 0),
        features=",".join(conf.features),
        available_features=",".join(nodefeatures.available_of(runtime, conf)),
        gres=gpuaffinity.gres_with_sockets(
            conf.gres, store.capacity.gpu_sockets(name), runtime.gres_found
        ),
        gres_used=gres_used(conf.gres, jobs, name, store.gpu_numbering(name)),
        weight=conf.weight,
        partitions=_PARTITIONS.of(store.conf.partitions, name),
        reason=runtime.reason if runtime.drain or runtime.state == "DOWN" or runtime.reboot else "",
        reason_user=runtime.reason_user,
        reason_time=runtime.reason_time,
        boot_time=runtime.boot_time,
        agent_start_time=runtime.agent_start_time,
        arch=runtime.arch,
        os=runtime.os,
        version=runtime.version,
        tmp_disk=conf.tmp_disk,
        port=conf.port,
    )


def partition_info(part: PartitionConfig, store: JobStore) -> pb.PartitionInfo:
    nodes = [store.conf.node(n) for n in part.nodes]
    total_cpus = sum(n.cpus for n in nodes)
    total_mem = sum(n.real_memory for n in nodes)
    return pb.PartitionInfo(
        name=part.name,
        # Slurm shows the nodes themselves, whatever Nodes= said (ALL, a NodeSet).
        nodes=hostlist.compress(part.nodes, sort=False),
        node_names=list(part.nodes),
        is_default=part.default,
        max_time=part.max_time,
        default_time=part.default_time if part.default_time is not None else 0,
        max_nodes=part.max_nodes or 0,
        min_nodes=part.min_nodes,
        state=store.partition_state.get(part.name, part.state),
        priority_tier=part.priority_tier,
        priority_job_factor=part.priority_job_factor,
        oversubscribe=part.oversubscribe,
        allow_accounts="ALL" if part.allow_accounts is None else ",".join(part.allow_accounts),
        allow_groups="ALL" if part.allow_groups is None else ",".join(part.allow_groups),
        def_mem_per_cpu=part.def_mem_per_cpu,
        max_mem_per_node=part.max_mem_per_node,
        def_mem_per_node=part.def_mem_per_node,
        max_mem_per_cpu=part.max_mem_per_cpu,
        total_cpus=total_cpus,
        total_nodes=len(nodes),
        tres=tres(total_cpus, total_mem, len(nodes)),
        grace_time=part.grace_time,
        preempt_mode=preempt_mode_shown(part, store.conf),
        job_defaults=part.job_defaults,
    )


def preempt_mode_shown(part: PartitionConfig, conf: SlurmConfig) -> str:
    """The partition's PreemptMode as scontrol shows it: its own, else slurm.conf's
    (OFF wherever PreemptType is preempt/none, and GANG added where slurm.conf's
    has it, as Slurm prints it)."""
    if conf.preempt_type == "PREEMPT/NONE":
        return "GANG" if conf.preemption.gang else "OFF"
    mode = part.preempt_mode or conf.preempt_mode
    return f"{mode},GANG" if conf.preemption.gang else mode


def reservation_info(resv: Reservation, now: int) -> pb.ReservationInfo:
    """A reservation as scontrol and sinfo show it."""
    return pb.ReservationInfo(
        name=resv.name,
        id=resv.id,
        nodes=hostlist.compress(resv.nodes),
        node_count=len(resv.nodes),
        core_count=resv.cores,
        start=resv.start,
        end=resv.end,
        flags=",".join(resv.flags),
        users=",".join(resv.users),
        accounts=",".join(resv.accounts),
        partition=resv.partition,
        state="ACTIVE" if resv.start <= now <= resv.end else "INACTIVE",
        tres=f"cpu={resv.cores}" if resv.cores else "",  # a reservation of licenses: (null)
        licenses=resv.licenses,
    )


def step_info(step: Step) -> pb.StepInfo:
    rss, user, system = step.usage
    return pb.StepInfo(
        step_id=step.step_id,
        name=step.name,
        nodes=hostlist.compress(step.nodes),
        node_count=len(step.nodes),
        ntasks=step.ntasks,
        cpus=sum(step.cpus),
        start_time=step.start_time,
        end_time=step.end_time,
        state=step.state,
        exit_status=step.exit_status,
        time_limit=step.time_limit,
        max_rss_kb=rss,
        user_cpu_us=user,
        sys_cpu_us=system,
        tasks_per_node=run_length(list(step.tasks)),
        submit_line=step.submit_line,
        ave_rss_kb=step.sum_rss // step.ntasks if step.ntasks else 0,
        het_step=step.het_comp >= 0,
        het_comp=max(step.het_comp, 0),
    )


def gres_used(
    configured: str, jobs: Iterable[Job], node: str, numbering: list[tuple[str, int]]
) -> str:
    """scontrol's GresUsed of a node: each configured item's use, GPUs with their
    indices (``gpu:a100:1(IDX:0),gpu:v100:0(IDX:N/A)``); "" without GRES.
    ``numbering`` is the node's GPUs as (type, index)."""
    try:
        items = gres_syntax.parse_node(configured)
    except ValueError:
        return ""
    if not items:
        return ""  # no GRES: no need to find the node among each job's (thousands of) nodes
    used: dict[tuple[str, str], int] = {}
    ids: list[int] = []
    shared: dict[str, set[int]] = {}  # per shared GRES, the GPUs it is used on
    for job in jobs:
        index = job.nodes.index(node)
        for name, pool, count in job.gres_alloc[index] if job.gres_alloc else ():
            gpu = gpushare.pool_gpu(pool)
            if gpu is not None:
                shared.setdefault(name, set()).add(gpu[1])
            kind = pool if gpu is None else ""
            used[name, kind] = used.get((name, kind), 0) + count
        if job.gpus:
            ids += job.gpus[index]
    type_of = {index: kind for kind, index in numbering}
    out = []
    for name, kind, _count in items:
        label = f"{name}:{kind}" if kind else name
        n = used.get((name, kind), 0)
        if name == "gpu" or name in shared:
            whole = (i for i in ids if type_of.get(i) == kind)
            mine = sorted(whole if name == "gpu" else shared[name])
            where = arrayspec.compress(mine) if mine else "N/A"
            out.append(f"{label}:{gres_syntax.size_text(n)}(IDX:{where})")
        else:
            out.append(f"{label}:{gres_syntax.size_text(n)}")
    return ",".join(out)
