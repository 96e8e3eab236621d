"""The scheduler's snapshot, built by a pure function of the ledger and the configuration.

``build`` reads what the store owns (nodes, jobs, what they hold, dbd's
associations, reservations) and slurm.conf, and changes none of it: the same
inputs give the same ``Snapshot``. The store calls it for the loop, ``Why``
and ``sbatch --test-only``; tests can call it on values they made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from controller import assoclimits, gpushare, preemptrules, queueviews
from controller.admission import Capacity
from controller.associations import AssocSet
from controller.core import NodeView, Running, Snapshot, nodefree
from controller.core.devices import shared_gpus
from controller.core.fairshare import Usage
from controller.core.gpulinks import Links
from controller.core.priority import Ranking
from controller.core.schedule import order_key
from controller.core.snapshot import JobFacts, NodeDevices, PartitionView
from controller.drain import usable
from controller.elasticviews import views as elastic_views
from controller.holdings import Holdings, holds_nodes
from controller.jobstate import COMPLETING, GANG, JobState
from controller.model import Job, NodeRuntime
from controller.reservations import ReservationBook
from corral.config import NodeConfig, SlurmConfig


@dataclass(frozen=True, slots=True)
class Ledger:
    """What the store owns that a snapshot reads (the store's own maps, not copies)."""

    nodes: Mapping[str, NodeRuntime]
    partition_state: Mapping[str, str]
    jobs: Mapping[int, Job]
    pending: Iterable[int]  # ids of PENDING jobs, in submission order
    holdings: Holdings
    associations: AssocSet | None
    enforce: frozenset[str]
    usage: Usage
    reservations: ReservationBook
    ranking: Ranking  # pending jobs' priorities from the last PriorityCalcPeriod


def build(
    ledger: Ledger,
    conf: SlurmConfig,
    capacity: Capacity,
    views: NodeViews | None = None,
    kept: JobViews | None = None,
) -> Snapshot:
    """An immutable picture of the cluster for ``core.schedule`` (``views``: the node views
    of earlier snapshots, those of unchanged nodes taken again; ``kept``: likewise the
    running jobs' records and the pending jobs' places in the queue)."""
    pending = tuple(ledger.jobs[job_id] for job_id in ledger.pending)
    gates, usage = assoclimits.limits(
        ledger.jobs.values(), pending, ledger.associations, ledger.enforce, ledger.usage
    )
    rules = preemptrules.Rules(conf, ledger.associations)
    kept = kept or JobViews()
    running, running_per_array = kept.running(ledger, conf, capacity, rules)
    nodes = (views or NodeViews()).of(ledger, conf, capacity)
    partitions = {
        name: view
        if ledger.partition_state.get(name, view.state) == view.state
        else replace(view, state=ledger.partition_state[name])
        for name, view in capacity.partitions.items()
    }
    queues = None
    if conf.queue_conf is not None:
        queues = queueviews.view(
            conf.queue_conf,
            ledger.jobs.values(),
            pending,
            queueviews.capacity_of(capacity.nodes, nodes),
            ledger.associations,
            ledger.usage,
            ledger.ranking,
        )
    elastic = elastic_views(
        ledger.jobs.values(), ledger.associations, ledger.enforce, ledger.usage, conf.queue_conf
    )
    return Snapshot(
        nodes,
        partitions,
        pending,
        dependency_facts(ledger.jobs.values()) if any(j.dependency for j in pending) else {},
        running_per_array,
        running,
        gates,
        usage,
        ledger.reservations.views(),
        preemptrules.policy(conf, ledger.associations),
        ledger.ranking,
        queues,
        elastic,
        dict(conf.licenses),
        kept.queue_keys(pending, capacity, partitions, ledger.ranking),
    )


class JobViews:
    """The running jobs' records and the pending jobs' queue keys, kept from one snapshot
    to the next.

    Both are functions of the (immutable) job and of values replaced whole when they
    change (configuration, associations, capacity, ranking), so a record is made again
    only for a job that changed: with 10,000 running and 100,000 pending jobs, making
    them all anew was a third of every scheduling cycle.
    """

    def __init__(self) -> None:
        self._running_basis: tuple[object, ...] = ()
        self._running: dict[int, tuple[Job, Running | None]] = {}
        self._keys_basis: tuple[object, ...] = ()
        self._keys: dict[int, tuple[Job, tuple[int, ...]]] = {}

    def running(
        self, ledger: Ledger, conf: SlurmConfig, capacity: Capacity, rules: preemptrules.Rules
    ) -> tuple[tuple[Running, ...], dict[int, int]]:
        """The jobs on their nodes as the core sees them, and how many of each array run."""
        basis = (conf, ledger.associations, capacity, ledger.ranking)
        if not _same(basis, self._running_basis):
            self._running_basis, self._running = basis, {}
        before, now = self._running, {}
        running_per_array: dict[int, int] = {}
        running = []
        for job_id, job in ledger.jobs.items():
            entry = before.get(job_id)
            if entry is None or entry[0] is not job:
                entry = (job, _running_record(job, capacity, ledger.ranking, rules))
            now[job_id] = entry
            record = entry[1]
            if record is not None:
                running.append(record)
                if job.array_job_id:
                    array = job.array_job_id
                    running_per_array[array] = running_per_array.get(array, 0) + 1
        self._running = now
        return tuple(running), running_per_array

    def queue_keys(
        self,
        pending: tuple[Job, ...],
        capacity: Capacity,
        partitions: Mapping[str, PartitionView],
        ranking: Ranking,
    ) -> dict[int, tuple[Job, tuple[int, ...]]]:
        """Each pending job's place in the queue (``core.schedule.order_key``), with the
        job it was worked out for."""
        basis = (capacity, ranking)
        if not _same(basis, self._keys_basis):
            self._keys_basis, self._keys = basis, {}
        key = order_key(partitions, ranking.of)
        before, now = self._keys, {}
        for job in pending:
            entry = before.get(job.job_id)
            if entry is None or entry[0] is not job:
                entry = (job, key(job))
            now[job.job_id] = entry
        self._keys = now
        return now


def _same(basis: tuple[object, ...], kept: tuple[object, ...]) -> bool:
    return bool(kept) and all(a is b for a, b in zip(basis, kept, strict=True))


class NodeViews:
    """Every configured node with what is free on it, kept from one snapshot to the next.

    A node's view is a function of its configuration, its runtime record (immutable:
    replaced on every change) and what jobs hold on it (``Holdings.changes`` counts
    those changes), so a view is built again only for a node whose record or count
    moved. With 10,000 nodes that was a third of every scheduling cycle.
    """

    def __init__(self) -> None:
        self._basis: tuple[object, ...] = ()
        self._views: dict[str, tuple[NodeRuntime, int, NodeView]] = {}

    def of(self, ledger: Ledger, conf: SlurmConfig, capacity: Capacity) -> dict[str, NodeView]:
        """The views in configuration order."""
        basis = (conf, capacity, ledger.holdings)
        if not (self._basis and all(a is b for a, b in zip(basis, self._basis, strict=True))):
            self._basis, self._views = basis, {}  # reconfigured: every view anew
        fenced_only = gpushare.fenced_only(conf)
        holdings = ledger.holdings
        out = {}
        for rank, conf_node in enumerate(conf.nodes):
            name = conf_node.name
            runtime = ledger.nodes[name]
            changes = holdings.changes(name)
            kept = self._views.get(name)
            if kept is None or kept[0] is not runtime or kept[1] != changes:
                view = node_view(conf_node, runtime, holdings, capacity, fenced_only, rank)
                kept = (runtime, changes, view)
                self._views[name] = kept
            out[name] = kept[2]
        return out


def node_view(
    conf_node: NodeConfig,
    runtime: NodeRuntime,
    holdings: Holdings,
    capacity: Capacity,
    fenced_only: bool,
    rank: int = 0,
) -> NodeView:
    """One node with what is free on it: what the scheduler sees, and what the
    store's ``commit`` re-checks a start against (``nodefree.fits``).

    ``fenced_only``: ``gpushare.fenced_only(conf)``; ``rank``: the node's place
    in the configuration (selection order only).
    """
    name = conf_node.name
    held, memory = holdings.used(name)
    shared = holdings.shared(name)
    gres = capacity.gres_free(name, holdings.gres(name), holdings.gpus(name))
    kept_ids, shared_ids = holdings.cpu_ids(name)
    if fenced_only and not runtime.mps:
        gres = gpushare.unfenced(gres)
    return NodeView(
        name=name,
        cpus=conf_node.cpus,
        real_memory=conf_node.real_memory,
        weight=conf_node.weight,
        features=frozenset(conf_node.features),
        free_cpus=nodefree.free_cpus(conf_node.cpus, held, shared),
        free_memory=conf_node.real_memory - memory,
        usable=usable(runtime),
        idle=held == 0 and not shared,
        gres=gres,
        unshared=held > 0,
        shared=shared,
        unit=capacity.nodes[name].unit,
        rank=rank,
        devices=_devices(name, runtime, holdings, capacity),
        kept_ids=kept_ids,
        shared_ids=shared_ids,
        sockets=conf_node.sockets,
    )


def _devices(
    name: str, runtime: NodeRuntime, holdings: Holdings, capacity: Capacity
) -> NodeDevices | None:
    """A node's GPUs as the core names a start's devices
    (``core/devices.py``); None for a node without GPUs."""
    numbers = capacity.gpus(name)
    if not numbers:
        return None
    return NodeDevices(
        numbers=tuple(numbers),
        whole=frozenset(holdings.gpus(name)),
        shared=frozenset(shared_gpus((n, k, c) for (n, k), c in holdings.gres(name).items())),
        near=tuple(sorted(gpu_near(capacity, name, runtime).items())),
        links=gpu_links(capacity, name, runtime),
    )


def gpu_near(
    capacity: Capacity, name: str, runtime: NodeRuntime | None
) -> dict[int, tuple[int, ...]]:
    """A node's GPUs with known near CPUs -> those CPUs: gres.conf's Cores=, else what
    its agent probed. The one rule, for the snapshot and the store's step GPUs."""
    return capacity.gpu_cpus(name) or dict(runtime.gpu_cpus if runtime else ())


def gpu_links(capacity: Capacity, name: str, runtime: NodeRuntime | None) -> Links:
    """A node's NVLink counts between GPUs: gres.conf's Links=, else what its agent
    probed. The one rule, for the snapshot and the store's step GPUs."""
    return capacity.gpu_links(name) or (runtime.gpu_links if runtime else ())


def dependency_facts(jobs: Iterable[Job]) -> dict[int, JobFacts]:
    """What dependencies are checked against, for every job the store knows."""
    return {
        j.job_id: JobFacts(
            j.state.name,
            j.exit_status,
            j.name,
            j.uid,
            j.array_job_id,
            j.array_task_id,
            j.start_time,
            j.array_pending,
        )
        for j in jobs
    }


def _preemptable(job: Job) -> bool:
    """Whether ``job`` may be a victim: it runs and is not already ending, or the gang
    scheduler holds it suspended. Such a job keeps its CPUs counted while it waits
    for its turn, so a job that needs them must be able to take them from it, as
    Slurm's candidates include suspended jobs (``_add_preemptable_job``); it is
    taken at once, with no GraceTime (Slurm's gang scheduler preempts the jobs a
    shadow covers at once too)."""
    if COMPLETING in job.flags or job.preempt_time:
        return False
    if job.state is JobState.SUSPENDED:
        return job.suspended_by == GANG
    return job.state is JobState.RUNNING


def _running_record(
    job: Job, capacity: Capacity, ranking: Ranking, rules: preemptrules.Rules
) -> Running | None:
    """A job on its nodes as the core sees it; None for a job that holds none."""
    if not holds_nodes(job):
        return None
    own = rules.of(job) if rules.active else preemptrules.JobRules("OFF", 0, 0)
    return Running(
        job.job_id,
        job.nodes,
        # A suspended job lends its CPUs and keeps its memory and GRES;
        # when it will end is unknown until it is resumed.
        (0,) * len(job.cpus) if job.cpus_released else job.cpus,
        job.alloc_mem,
        0 if job.state is JobState.SUSPENDED else job.end_time,
        job.gres_alloc,
        preemptable=_preemptable(job),
        requeue=job.requeue,
        priority=ranking.of(job),
        qos=job.qos,
        partition=job.partition,
        start_time=job.start_time,
        user=job.user,
        share=capacity.sharing(job),
        mode=own.mode,
        # Frozen, waiting for its turn, it could do nothing with a GraceTime.
        grace=0 if job.state is JobState.SUSPENDED else own.grace,
        eligible=job.start_time + own.exempt,
        signal=job.signal_num > 0,
        checkpointed=job.checkpointed,
        preempted_for=job.preempted_by if job.preempt_time else 0,
        licenses=job.licenses,
        reservation=job.reservation,
    )
