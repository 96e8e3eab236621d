"""The Controller service: decode → authorize → post → reply.

``Handlers`` holds one method per RPC; each takes the request message and the
calling ``Principal`` (already authenticated by its transport) and returns the
reply message. Two transports call them: the gRPC server
(``controller/grpcface.py``, for restd, agents' peers and API users) and the
framed Unix socket the CLI uses (``controller/framed.py``). What scancel and
scontrol do to jobs is ``controller/jobcontrol.py``; what agents hear of a
change, ``controller/effects.py``. Domain errors are ``SlurmError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from controller import (
    assocmgr,
    broadcast,
    crontabs,
    diag,
    hetjobs,
    hetsteps,
    jobcontrol,
    jobspec,
    jobtop,
    licenseviews,
    movespec,
    mpmdsteps,
    pingall,
    powersave,
    priorityviews,
    queries,
    queuereply,
    reboots,
    stepattach,
    stepusage,
    testonly,
    triggerops,
    views,
    visibility,
    whyviews,
)
from controller.accounting import Delivery
from controller.admission import admit
from controller.agentlink import AgentLink
from controller.associations import AssocSet
from controller.core import BackfillParams, schedule
from controller.diag import RpcStats, SchedulerStats
from controller.jobenv import allocation_environment
from controller.jobspec import JobSpec
from controller.jobstate import JobState
from controller.journal import JournalWriteError
from controller.notices import NoticeBoard
from controller.principal import Principal, submitting_as
from controller.privilege import elevate
from controller.schedparams import scheduler_settings
from controller.steps import StepRequest, step_environment
from controller.store import JobStore
from corral import (
    SLURM_VERSION,
    arrayspec,
    authalt,
    errors,
    hostlist,
    mpitypes,
    timefmt,
    tokens,
)
from corral.config import ConfigError, load, show_config
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)


class Encoded(bytes):
    """A reply already serialized (large listings); ``kind`` parses it if needed."""

    def __new__(cls, data: bytes, kind: Any) -> Encoded:
        self = super().__new__(cls, data)
        self.kind = kind
        return self

    kind: Any

    def message(self) -> Any:
        return self.kind.FromString(bytes(self))


class Dispatcher(Protocol):
    """What the gRPC face and the clients' socket call: ``Handlers``, or a standby's
    (controller/standby.py)."""

    async def dispatch(self, method: str, request: Any, who: Principal) -> Any: ...


class Handlers:
    """One method per Controller RPC. ``now`` comes from ``clock``."""

    def __init__(
        self,
        store: JobStore,
        link: AgentLink,
        kick: Callable[[], None],
        stop: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.link = link
        self.kick = kick
        self.stop = stop
        self.clock = clock
        self.started = int(clock())
        self.encoder = views.JobsEncoder(store)
        self.accounting: Delivery | None = None  # set by main when AccountingStorageType is on
        self.jwt_key = b""  # set by main: the key scontrol token's JWTs are signed with
        self.scheduler_stats = SchedulerStats()  # main shares the loop's
        self.rpc_stats = RpcStats()
        self.stats_since = self.started
        self._in_flight = 0
        self._what_ifs = asyncio.Lock()  # --test-only passes, one at a time off the loop
        self.control = jobcontrol.JobControl(store)
        self.notices = NoticeBoard()
        self.ctld_index = 0  # main sets it: this controller's SlurmctldHost line
        # main sets it where the state is shared: hand the lease to that line's controller
        self.hand_over: Callable[[int], None] | None = None

    def now(self) -> int:
        return int(self.clock())

    async def dispatch(self, method: str, request: Any, who: Principal) -> Any:
        """Run one client request (gRPC or the CLI socket), counting those in flight."""
        self._in_flight += 1
        began = time.perf_counter()
        try:
            return await getattr(self, method)(request, elevate(who, self.store.associations))
        finally:
            self._in_flight -= 1
            self.rpc_stats.count(method, who.uid, int((time.perf_counter() - began) * 1e6))

    async def _commit(self) -> None:
        """Make this request's changes durable before it is answered.

        A request alone in the controller commits on the event loop (lowest
        latency); while others are in flight the writer thread commits, and the
        loop admits them meanwhile into the next commit.
        """
        await self.store.flush(inline=self._in_flight <= 1)

    def _check_writable(self) -> None:
        """Refuse a change before making it while the journal cannot be written: it
        could not be kept, so it is not made (a retry writes what was made before)."""
        failure = self.store.durable.failure
        if failure is not None:
            raise JournalWriteError(failure)

    # ------------------------------------------------------------ jobs

    async def Submit(self, req: pb.SubmitRequest, who: Principal) -> pb.SubmitReply:
        spec = jobspec.from_wire(req.spec)
        who = submitting_as(who, spec.run_as_uid, spec.run_as_gid)
        self._check_clusters(spec.clusters)
        spec = self._default_account(spec, who)
        now = self.now()
        rest = [self._default_account(jobspec.from_wire(c), who) for c in req.het_components]
        if rest and any(each.array for each in (spec, *rest)):
            raise SlurmError(errors.ESLURM_INVALID_ARRAY)  # Slurm has no arrays of het jobs
        if req.test_only:
            return await self._test_only([spec, *rest], who, now)
        if req.moved_from:  # another cluster moves its job here (controller/moves.py)
            if rest or not movespec.valid_key(req.moved_from):
                raise SlurmError(errors.EINVAL, "Invalid moved job key")
            again = self.store.moved_here(req.moved_from, who.uid)
            if again is not None:  # a retried move: the job it made already
                return pb.SubmitReply(job_id=again.job_id, cluster=self.store.conf.cluster_name)
        self._check_writable()
        if rest:
            admitted = self.store.submit_het([spec, *rest], who, now)[0]
        else:
            admitted = self.store.submit(spec, who, now, req.moved_from)
        await self._commit()
        job = admitted.job
        if not job.held and job.begin_time <= now:
            self.kick()  # a held or future job cannot start: no cycle for it
        log.info("job_id=%d submitted by uid=%d (%d jobs)", job.job_id, who.uid, admitted.tasks)
        return pb.SubmitReply(job_id=job.job_id, cluster=self.store.conf.cluster_name)

    def _default_account(self, spec: JobSpec, who: Principal) -> JobSpec:
        """``spec`` with the user's DefaultAccount when it names none, before the
        partitions' AllowAccounts look at it."""
        assocs = self.store.associations
        if not spec.account and assocs is not None and who.user in assocs.users:
            return replace(spec, account=assocs.users[who.user])
        return spec

    def _check_clusters(self, clusters: str) -> None:
        """sbatch -M: the job is this cluster's only if the list names it; a job meant
        for another cluster is refused rather than run here."""
        names = [name.strip().lower() for name in clusters.split(",") if name.strip()]
        if names and self.store.conf.cluster_name.lower() not in names:
            raise SlurmError(
                errors.EINVAL,
                f"'{clusters}' can't be reached now, or it is an invalid entry for --cluster.  "
                "Use 'sacctmgr list clusters' to see available clusters.",
            )

    async def _test_only(self, specs: list[JobSpec], who: Principal, now: int) -> pb.SubmitReply:
        """Where and when the job (every component of a heterogeneous one, planned
        together) would start: a whole scheduling pass over a snapshot.

        The pass runs in a worker thread, one at a time, so ``--test-only``
        calls queue behind each other instead of stalling the event loop.
        """
        store = self.store
        first = store.next_job_id
        admitted = [
            admit(
                each, who, store.conf, store.partition_state, first + offset, now, 0, store.capacity
            )
            for offset, each in enumerate(hetjobs.component_specs(specs))
        ]
        if len(admitted) > 1:
            admitted = [hetjobs.component(a, first, len(admitted)) for a in admitted]
        jobs = [a.job for a in admitted]
        snap = self.store.snapshot()
        snap = replace(snap, pending=(*snap.pending, *jobs))
        # The same plan as the scheduler's, with backfill for the estimate.
        params = scheduler_settings(store.conf).backfill or BackfillParams()
        async with self._what_ifs:
            plan = await asyncio.to_thread(schedule, snap, now, params)
        found = testonly.answer(plan, jobs, now)
        return pb.SubmitReply(
            job_id=first,
            start_time=found.start_time,
            num_cpus=found.num_cpus,
            nodes=found.nodes,
            partition=found.partition,
        )

    async def Jobs(self, req: pb.JobsRequest, who: Principal) -> Encoded:
        flt = jobcontrol.to_dict(req.filter)
        named = bool(flt.get("job_ids"))
        # Named ids must exist in any state (else Slurm's "Invalid job id specified");
        # the state filter then applies to them as to any listing: a job that ended is
        # known but not in squeue's default states, so squeue prints no row for it.
        jobs = visibility.jobs_shown(
            queries.select(self.store.jobs, {**flt, "states": []} if named else flt),
            self.store.conf,
            who,
            self.store.associations,
            everything=req.all_partitions,
            named=named,
        )
        if named and not jobs:
            raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
        if named and flt.get("states"):
            jobs = queries.in_states(jobs, flt["states"])
        fields = tuple(f for f in req.fields if f in views.JOB_FIELDS)
        deps = views.Dependencies(self.store, self.now())
        entries = []
        for job in jobs:
            if not job.array_pending:
                entries.append(self.encoder.entry(job, None, fields, deps))
                continue
            tasks = queries.named_tasks(job, flt)
            if req.expand_arrays:
                for task in arrayspec.expand(job.array_pending) if tasks is None else tasks:
                    entries.append(self.encoder.entry(job, [task], fields, deps))
            else:
                entries.append(self.encoder.entry(job, tasks, fields, deps))
        return Encoded(self.encoder.reply(entries, self.now()), pb.JobsReply)

    async def Signal(self, req: pb.SignalRequest, who: Principal) -> pb.SignalReply:
        self._check_writable()
        reply = self.control.signal(req, who, self.now())
        await self._commit()
        self.kick()
        return reply

    async def JobControl(self, req: pb.JobControlRequest, who: Principal) -> pb.JobControlReply:
        self._check_writable()
        reply = self.control.control(req, who, self.now())
        await self._commit()
        self.kick()
        return reply

    # ------------------------------------------------------------ nodes, partitions, config

    async def Nodes(self, req: pb.NodesRequest, who: Principal) -> pb.NodesReply:
        visibility.check_nodes(self.store.conf, who)
        names = self._node_names(list(req.names))
        conf, nodes, down = self.store.conf, self.store.nodes, powersave.POWERED_DOWN
        names = [n for n in names if not visibility.hidden_cloud(conf, n, nodes[n].power == down)]
        return pb.NodesReply(nodes=[views.node_info(n, self.store) for n in names], now=self.now())

    def _node_names(self, exprs: list[str]) -> list[str]:
        if not exprs:
            return [n.name for n in self.store.conf.nodes]
        names: list[str] = []
        for expr in exprs:
            try:
                names += hostlist.expand(expr)
            except ValueError:
                raise SlurmError(errors.ESLURM_INVALID_NODE_NAME) from None
        if any(n not in self.store.nodes for n in names):
            raise SlurmError(errors.ESLURM_INVALID_NODE_NAME)
        return names

    async def Partitions(self, req: pb.PartitionsRequest, who: Principal) -> pb.PartitionsReply:
        conf = self.store.conf
        shown = visibility.shown_partitions(conf, who, self.store.associations, req.all_partitions)
        parts = tuple(p for p in conf.partitions if p.name in shown)
        if req.names:
            parts = tuple(p for p in parts if p.name in req.names)
            if len(parts) != len(set(req.names)):
                raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME)
        return pb.PartitionsReply(
            partitions=[views.partition_info(p, self.store) for p in parts], now=self.now()
        )

    async def NodeUpdate(self, req: pb.NodeUpdateRequest, who: Principal) -> pb.NodeUpdateReply:
        if not who.is_operator:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        state = req.state.upper()
        if state == "CANCEL_REBOOT":  # scontrol update NodeName=.. State=CANCEL_REBOOT
            return await self.NodeReboot(pb.NodeRebootRequest(nodes=req.nodes, cancel=True), who)
        features = req.set_available or req.set_active  # controller/nodefeatures.py
        if state in powersave.UPDATE_STATES:  # controller/powersave.py
            names = self._node_names([req.nodes])
            self._check_writable()
            self.link.power.ask(names, state, self.now())
            await self._commit()
            self.kick()
            return pb.NodeUpdateReply()
        if (state or not features) and state not in NODE_STATES:
            raise SlurmError(errors.EINVAL, f"Invalid node state specified: {req.state}")
        names = self._node_names([req.nodes])
        self._check_writable()
        now = self.now()
        if features:
            available = req.available_features if req.set_available else None
            active = req.active_features if req.set_active else None
            self.store.set_node_features(names, available, active, now)
        if state:
            self.store.set_node_admin_state(names, state, req.reason, who, now)
        if state in ("DOWN", "FAIL"):
            for name in names:
                self.store.fail_jobs_on(name, now)
        await self._commit()
        self.kick()
        return pb.NodeUpdateReply()

    async def NodeReboot(self, req: pb.NodeRebootRequest, who: Principal) -> pb.NodeRebootReply:
        """``scontrol reboot`` and ``cancel_reboot`` (``controller/reboots.py``): Slurm's
        super users only."""
        if not who.is_super_user:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        names = self._node_names([] if req.nodes.upper() == "ALL" else [req.nodes])
        self._check_writable()
        reboots.ask(
            self.store,
            names,
            who,
            self.now(),
            asap=req.asap,
            next_state=req.next_state.upper(),
            reason=req.reason,
            cancel_it=req.cancel,
        )
        await self._commit()
        self.kick()
        return pb.NodeRebootReply()

    async def Clusters(self, req: pb.ClustersRequest, who: Principal) -> pb.ClustersReply:
        """The clusters ``-M`` may name (corral/clusterroute.py): this one, and those
        registered with the accounting daemon it uses, with their controllers'
        addresses. Any user may ask, as any may run ``sacctmgr show cluster``."""
        conf = self.store.conf
        host = conf.slurmctld_hosts[self.ctld_index][1]
        own = pb.ClusterAddress(name=conf.cluster_name, host=host, port=conf.slurmctld_port)
        others = await self.accounting.clusters() if self.accounting is not None else []
        named = {own.name.lower()}
        shown = [own, *(c for c in others if c.name.lower() not in named)]
        return pb.ClustersReply(clusters=shown, own=conf.cluster_name)

    async def PartitionUpdate(
        self, req: pb.PartitionUpdateRequest, who: Principal
    ) -> pb.PartitionUpdateReply:
        """A partition's State (``scontrol update PartitionName=``): Slurm's super users only.
        DOWN starts nothing new, DRAIN takes no new jobs, INACTIVE neither."""
        if not who.is_super_user:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        state = req.state.upper()
        if state not in PARTITION_STATES:
            raise SlurmError(errors.EINVAL, f"Invalid partition state specified: {req.state}")
        if req.name not in self.store.partition_state:
            raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME)
        self._check_writable()
        self.store.set_partition_state(req.name, state)
        await self._commit()
        self.kick()
        return pb.PartitionUpdateReply()

    async def Config(self, req: pb.ConfigRequest, who: Principal) -> pb.ConfigReply:
        conf = self.store.conf
        entries = [pb.ConfigEntry(key=k, value=v) for k, v in show_config(conf)]
        entries.append(
            pb.ConfigEntry(key="BOOT_TIME", value=timefmt.format_timestamp(self.started))
        )
        entries.append(pb.ConfigEntry(key="SLURM_CONF", value=conf.path))
        entries.append(pb.ConfigEntry(key="SLURM_VERSION", value=SLURM_VERSION))
        entries.sort(key=lambda e: e.key.lower())
        return pb.ConfigReply(
            entries=entries,
            now=self.now(),
            config_file=conf.path,
            last_update=self.started,
            topology=views.topology_records(conf),
        )

    async def Priorities(self, req: pb.PrioritiesRequest, who: Principal) -> pb.PrioritiesReply:
        store = self.store
        hide = visibility.private(store.conf, "jobs")
        return priorityviews.priorities(
            store, self.now(), lambda job: who.may_see(job.uid, job.account, hide)
        )

    async def Why(self, req: pb.WhyRequest, who: Principal) -> pb.WhyReply:
        """``corral why``: why a pending job waits and what would start it sooner."""
        return await whyviews.why(self.store, req.job_id, who, self.now())

    async def Shares(self, req: pb.SharesRequest, who: Principal) -> pb.SharesReply:
        store = self.store
        hide = visibility.private(store.conf, "usage")
        return priorityviews.shares(
            store,
            list(req.users),
            list(req.accounts),
            self.now(),
            lambda rows: visibility.share_rows_shown(rows, who, store.associations, hide),
        )

    async def Queues(self, req: pb.QueuesRequest, who: Principal) -> pb.QueuesReply:
        """``corral queues``: every queue's quota, share and holdings now (any user:
        amounts per queue, no user's data)."""
        return queuereply.queues_reply(self.store, self.now())

    async def Licenses(self, req: pb.LicensesRequest, who: Principal) -> pb.LicensesReply:
        """``scontrol show licenses``: each license's total and what jobs hold (any
        user: counts per license, no user's data)."""
        kept = licenseviews.reserved(self.store.reservations.views(), self.now())
        remote = (self.store.associations or AssocSet()).remote_licenses
        return licenseviews.licenses_reply(
            self.store.conf, self.store.jobs.values(), kept, remote.keys()
        )

    async def AssocMgr(self, req: pb.AssocMgrRequest, who: Principal) -> pb.AssocMgrReply:
        """``scontrol show assoc_mgr``: the cached associations, users and QOS with
        their use now (PrivateData usage and users hide others' from non-operators)."""
        store = self.store
        wanted = assocmgr.Wanted.of(req, who, frozenset(store.conf.accounting.private_data))
        keeper = store.priorities
        return assocmgr.reply(
            store.conf.cluster_name,
            store.associations,
            store.jobs.values(),
            keeper.tree,
            keeper.usage,
            wanted,
            who,
            self.now(),
        )

    async def History(self, req: pb.HistoryRequest, who: Principal) -> pb.HistoryReply:
        if self.accounting is None:
            raise SlurmError(errors.ESLURM_DISABLED, "Slurm accounting storage is disabled")
        return await self.accounting.history(req, who)

    async def AcctAdmin(self, req: pb.AcctAdminRequest, who: Principal) -> pb.AcctAdminReply:
        if self.accounting is None:
            raise SlurmError(errors.ESLURM_DISABLED, "Slurm accounting storage is disabled")
        return await self.accounting.admin(req, who)

    async def Report(self, req: pb.ReportRequest, who: Principal) -> pb.ReportReply:
        if self.accounting is None:
            raise SlurmError(errors.ESLURM_DISABLED, "Slurm accounting storage is disabled")
        return await self.accounting.report(req, who)

    async def Diag(self, req: pb.DiagRequest, who: Principal) -> pb.DiagReply:
        now = self.now()
        if req.reset:
            if not who.is_admin:
                raise SlurmError(errors.ESLURM_ACCESS_DENIED)
            self.store.counters = dict.fromkeys(self.store.counters, 0)
            self.scheduler_stats.reset()
            self.rpc_stats = RpcStats()
            self.stats_since = now
        jobs = self.store.jobs.values()
        return diag.reply(
            now,
            self.stats_since,
            self.store.counters,
            sum(1 for j in jobs if j.state is JobState.PENDING),
            sum(1 for j in jobs if j.state is JobState.RUNNING),
            self.scheduler_stats,
            self.rpc_stats,
            self.link.load(),
            self.accounting.backlog if self.accounting is not None else 0,
        )

    async def Reservations(
        self, req: pb.ReservationsRequest, who: Principal
    ) -> pb.ReservationsReply:
        now = self.now()
        book = self.store.reservations
        if req.name and req.name not in book.by_name:
            raise SlurmError(errors.ESLURM_RESERVATION_INVALID)
        chosen = [book.by_name[req.name]] if req.name else list(book.by_name.values())
        if not who.sees_all(visibility.private(self.store.conf, "reservations")):
            account = (self.store.associations or AssocSet()).users.get(who.user, "")
            chosen = [r for r in chosen if r.allows(who.user, account)]
            if req.name and not chosen:
                raise SlurmError(errors.ESLURM_RESERVATION_INVALID)
        return pb.ReservationsReply(
            reservations=[views.reservation_info(r, now) for r in chosen], now=now
        )

    async def ReservationControl(
        self, req: pb.ReservationControlRequest, who: Principal
    ) -> pb.ReservationControlReply:
        if not who.is_operator:  # sacctmgr(1): operators create, alter and delete them
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        self._check_writable()
        now = self.now()
        resv = self.store.change_reservation(req.action, dict(req.settings), now)
        await self._commit()
        self.kick()
        log.info("reservation %s: %s by uid=%d", resv.name, req.action, who.uid)
        return pb.ReservationControlReply(name=resv.name)

    async def Triggers(self, req: pb.TriggersRequest, who: Principal) -> pb.TriggersReply:
        """strigger --set, --get and --clear (``controller/triggerops.py``)."""
        if req.action != "get":
            self._check_writable()
        reply = triggerops.handle(self.store, req, who)
        if req.action != "get":
            await self._commit()
        return reply

    async def StepCreate(self, req: pb.StepCreateRequest, who: Principal) -> pb.StepCreateReply:
        """srun in an allocation: a step laid out, journaled, then launched on its nodes."""
        if req.het_parts:
            return await self._het_step(req, who)
        request = self._step_request(req)
        name = req.name or (os.path.basename(req.argv[0]) if req.argv else "step")
        job, step = self.store.create_step(
            req.job_id, request, name, req.time_limit, req.submit_line, who
        )
        # The launch goes out while the step's record is committed: a step is not a job
        # (its job is durable already), and srun's latency is Slurm's to match. A step
        # launched but lost with a crash before the commit is reported by its nodes for
        # nothing and leaves no record; its tasks still end with the job. So a journal
        # that cannot be written does not stop srun in a running job: the step's record
        # waits in the batch put back, written when the retry is.
        self.link.launch_step(job, step, req)
        with contextlib.suppress(JournalWriteError):
            await self._commit()
        return pb.StepCreateReply(
            step_id=step.step_id,
            nodes=step.nodes,
            tasks=step.tasks,
            task_ids=[task for ids in step.ids for task in ids],
        )

    async def _het_step(self, req: pb.StepCreateRequest, who: Principal) -> pb.StepCreateReply:
        """A step spanning heterogeneous job components (``controller/hetsteps.py``):
        every part recorded or none, then each launched with the ids numbered across
        them; the reply is the whole step's, as one step's."""
        requests = [req, *req.het_parts]
        parts = [
            hetsteps.StepPart(
                part.job_id,
                self._step_request(part),
                part.name or (os.path.basename(part.argv[0]) if part.argv else "step"),
                part.time_limit,
                req.submit_line,
            )
            for part in requests
        ]
        if len({part.job_id for part in requests}) == 1:  # one ordinary job's MPMD step
            return await self._mpmd_step(requests, parts, who)
        made = self.store.create_het_step(parts, who)
        envs = [
            step_environment(job, step, {}, part.distribution)
            for (job, step), part in zip(made, requests, strict=True)
        ]
        for (job, step), part, het in zip(
            made, requests, hetsteps.parts(made, envs, req.own_het_job), strict=True
        ):
            self.link.launch_step(job, step, part, het)
        with contextlib.suppress(JournalWriteError):  # as StepCreate's
            await self._commit()
        reply = pb.StepCreateReply(step_id=made[0][1].step_id)
        offset = 0
        for _, step in made:
            reply.nodes.extend(step.nodes)
            reply.tasks.extend(step.tasks)
            reply.task_ids.extend(task + offset for ids in step.ids for task in ids)
            reply.het_task_offsets.extend([offset] * len(step.nodes))
            offset += step.ntasks
        return reply

    async def _mpmd_step(
        self, requests: list[pb.StepCreateRequest], parts: list[hetsteps.StepPart], who: Principal
    ) -> pb.StepCreateReply:
        """``srun a : b`` in an ordinary job (``controller/mpmdsteps.py``): one step
        recorded, each part launched on its nodes with its own request; the reply is the
        whole step's, each node's part's first task id as a het step's."""
        job, whole, made = self.store.create_mpmd_step(parts, who)
        env = step_environment(job, whole, {}, requests[0].distribution)
        launches = mpmdsteps.parts(whole, made, env)
        for (step, place), part in zip(launches, requests, strict=True):
            self.link.launch_step(job, step, part, place)
        with contextlib.suppress(JournalWriteError):  # as StepCreate's
            await self._commit()
        reply = pb.StepCreateReply(step_id=whole.step_id, nodes=whole.nodes, tasks=whole.tasks)
        reply.task_ids.extend(task for ids in whole.ids for task in ids)
        for step, place in launches:
            reply.het_task_offsets.extend([place.task_offset] * len(step.nodes))
        return reply

    def _step_request(self, req: pb.StepCreateRequest) -> StepRequest:
        """The step's shape from srun's request (SlurmError for what no step may ask)."""
        if req.container and not req.container.startswith("/"):  # as admission refuses it
            raise SlurmError(errors.EINVAL, f"--container {req.container}: not an absolute path")
        if req.mpi and req.mpi not in mpitypes.SERVED:  # srun refuses it first, in Slurm's words
            raise SlurmError(errors.ESLURM_NOT_SUPPORTED)
        return StepRequest(
            ntasks=req.ntasks,
            min_nodes=req.min_nodes,
            cpus_per_task=req.cpus_per_task or 1,
            ntasks_per_node=req.ntasks_per_node,
            # each node once: -m arbitrary's -w may name one per task
            nodelist=tuple(dict.fromkeys(self._node_names([req.nodelist]))) if req.nodelist else (),
            exclude=tuple(self._node_names([req.exclude])) if req.exclude else (),
            overlap=req.overlap,
            exact=req.exact,
            overcommit=req.overcommit,
            gpus=req.gpus,
            gpus_per_node=req.gpus_per_node,
            gpus_per_task=req.gpus_per_task,
            mem_per_node=req.mem_per_node,
            mem_per_cpu=req.mem_per_cpu,
            mem_per_gpu=req.mem_per_gpu,
            cpus_per_gpu=req.cpus_per_gpu,
            distribution=req.distribution,
            task_nodes=tuple(req.task_nodes),
            relative=req.relative,
            cpu_bind=req.cpu_bind,
            ntasks_per_core=req.ntasks_per_core,
            ntasks_per_socket=req.ntasks_per_socket,
        )

    async def StepStats(self, req: pb.StepStatsRequest, who: Principal) -> pb.StepStatsReply:
        """sstat: the running steps of a job and their agents' latest samples."""
        return stepusage.step_stats(self.store.jobs, self.store.conf, self.link.usage, req, who)

    async def Broadcast(self, req: pb.BroadcastRequest, who: Principal) -> pb.BroadcastReply:
        """sbcast: one block of a file to the nodes of a job the caller may use."""
        job, nodes = broadcast.target(self.store.jobs, self.store.conf, req, who)
        return await self.link.files.send(job, nodes, req, self.link.sessions)

    async def StepAttach(self, req: pb.StepAttachRequest, who: Principal) -> pb.StepAttachReply:
        """sattach: a running step's layout, and its runners sent to the caller's socket."""
        return stepattach.attach(self.store.jobs, self.store.conf, req, who, self.link.sessions)

    async def BatchScript(self, req: pb.BatchScriptRequest, who: Principal) -> pb.BatchScriptReply:
        """``scontrol write batch_script``: the script of a batch job ``who`` may manage."""
        try:
            jobs = queries.select(self.store.jobs, {"job_ids": [req.job_id], "states": ["ALL"]})
        except SlurmError:
            jobs = []
        if not jobs:
            raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
        job = jobs[0]
        jobcontrol.owned(job, who)
        payload = None if job.interactive else self.store.payload(job)
        if payload is None or not payload.script:
            raise SlurmError(errors.ESLURM_JOB_SCRIPT_MISSING)
        return pb.BatchScriptReply(script=payload.script)

    async def Crontab(self, req: pb.CrontabRequest, who: Principal) -> pb.CrontabReply:
        """scrontab: read (``get``), replace (``set``) or remove a user's crontab.

        As scrontab(1) says: anyone their own; operators may read another's, and
        only root and SlurmUser change it. Each entry's job is admitted as its
        owner's submission; a refused one is named by its lines, and nothing of the
        new crontab is kept."""
        if not crontabs.enabled(self.store.conf):
            raise SlurmError(errors.ESLURM_DISABLED, "scrontab is disabled on this cluster")
        uid = req.uid if req.HasField("uid") else who.uid
        if req.action not in ("get", "set", "remove"):
            raise SlurmError(errors.EINVAL, f"unknown crontab action {req.action!r}")
        if uid != who.uid and not (who.is_operator if req.action == "get" else who.is_admin):
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        book = self.store.crontabs
        if req.action == "get":
            tab = book.tabs.get(uid)
            if tab is None:
                return pb.CrontabReply(exists=False)
            return pb.CrontabReply(
                exists=True, crontab=tab.text, disabled_lines=book.disabled_lines(uid)
            )
        self._check_writable()
        now = self.now()
        if req.action == "remove":
            crontabs.remove(self.store, uid, now)
            await self._commit()
            return pb.CrontabReply()
        owner = who if uid == who.uid else submitting_as(who, uid, None)
        entries = [
            crontabs.NewEntry(jobspec.from_wire(e.spec), e.cron_spec, e.line_start, e.line_end)
            for e in req.entries
        ]
        try:
            job_ids = crontabs.install(self.store, owner, req.crontab, entries, now)
        except crontabs.EntryRefused as exc:
            await self._commit()  # the jobs cancelled on the way are records too
            return pb.CrontabReply(failed_lines=exc.lines, error=exc.message)
        await self._commit()
        self.kick()
        return pb.CrontabReply(job_ids=job_ids)

    async def Allocation(self, req: pb.AllocationRequest, who: Principal) -> pb.AllocationReply:
        """An interactive allocation's state, and its SLURM_* environment once it runs."""
        job = self.store.jobs.get(req.job_id)
        if job is None:
            raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
        jobcontrol.owned(job, who)
        reply = pb.AllocationReply(state=job.state.name, reason=job.reason.value)
        if job.job_id in self.store.configuring or powersave.configuring(job, self.store.nodes):
            # its site programs run, or its nodes power up: not yet
            reply.state = "CONFIGURING"
        elif job.state is JobState.RUNNING and job.nodes:
            reply.nodes = hostlist.compress(job.nodes)
            reply.resize_time = job.resize_time
            env = allocation_environment(job, self.store.conf.cluster_name)
            if job.het_job_id:  # salloc's heterogeneous job: every component by its number
                members = hetjobs.components(self.store.jobs, job)
                env = hetjobs.allocation_environment(members, self.store.conf.cluster_name)
            reply.environment.update({**env, **self.store.shares(job, 0).environment()})
        reply.notices.extend(self.notices.after(job, req.notices_seen))
        return reply

    async def Notify(self, req: pb.NotifyRequest, who: Principal) -> pb.NotifyReply:
        """``scontrol notify``: a message for the job's salloc or srun (``notices``)."""
        self.notices.post(self.store.jobs, req.job_id, req.message, who)
        return pb.NotifyReply()

    async def TopJob(self, req: pb.TopJobRequest, who: Principal) -> pb.TopJobReply:
        """``scontrol top``: the named jobs first in their owner's queue (``jobtop``)."""
        if not jobtop.allowed(self.store, who):  # before ids naming array tasks split them
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        self._check_writable()
        refused = jobtop.top(self.store, self.control.targets(list(req.job_ids), {}), who)
        await self._commit()
        self.kick()
        if refused is None:
            return pb.TopJobReply()
        return pb.TopJobReply(code=refused.code, message=refused.message)

    async def Token(self, req: pb.TokenRequest, who: Principal) -> pb.TokenReply:
        """``scontrol token``: a JWT for the caller, or for another user if an operator
        asks (as Slurm allows only SlurmUser and root)."""
        user = req.username or who.user
        if user != who.user and not who.is_admin:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        if not self.jwt_key:
            raise SlurmError(errors.ESLURM_DISABLED, "JWT authentication is not configured")
        rules = authalt.from_settings(dict(self.store.conf.settings))
        if rules.disable_token_creation and not who.is_admin:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        lifespan = req.lifespan or tokens.DEFAULT_LIFESPAN
        cap = rules.max_token_lifespan
        if cap is not None and lifespan > cap and not who.is_admin:
            # slurmctld's refusal, and its errno (ESLURM_INVALID_TIME_LIMIT)
            raise SlurmError(
                errors.ESLURM_INVALID_TIME_LIMIT,
                f"requested token lifespan {lifespan} exceeds limit of {cap}",
            )
        return pb.TokenReply(token=tokens.mint(self.jwt_key, user, self.now(), lifespan))

    async def Ping(self, req: pb.PingRequest, who: Principal) -> pb.PingReply:
        conf = self.store.conf
        host = conf.slurmctld_hosts[self.ctld_index][0]
        reply = pb.PingReply(host=host, now=self.now(), cluster=conf.cluster_name)
        if req.all:
            reply.controllers.extend(await pingall.controllers(conf, self.ctld_index, False))
        return reply

    async def Takeover(self, req: pb.TakeoverRequest, who: Principal) -> pb.TakeoverReply:
        """``scontrol takeover INDEX``: this controller saves its state, hands the
        lease to line INDEX's controller and waits in standby (SuperUser only)."""
        if not who.is_super_user:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        if not 0 <= req.index < len(self.store.conf.slurmctld_hosts) or self.hand_over is None:
            raise SlurmError(errors.EINVAL, "Invalid backup controller index")
        if req.index != self.ctld_index:
            log.info("takeover: uid %d hands control to %s", who.uid, self._line(req.index))
            self.hand_over(req.index)
        return pb.TakeoverReply()

    def _line(self, index: int) -> str:
        return self.store.conf.slurmctld_hosts[index][0]

    async def Reconfigure(self, req: pb.ReconfigureRequest, who: Principal) -> pb.ReconfigureReply:
        if not who.is_super_user:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        self.reconfigure()
        return pb.ReconfigureReply()

    def reconfigure(self) -> None:
        """Re-read slurm.conf; a broken file leaves the running config in place."""
        try:
            conf = load(self.store.conf.path)
        except ConfigError as exc:
            log.error("reconfigure failed: %s", exc)
            raise SlurmError(errors.EINVAL, f"reconfigure failed: {exc}") from None
        for warning in conf.warnings:
            log.warning("%s", warning)
        self.store.apply_config(conf)
        self.store.triggers.note_reconfig()
        log.info("reconfigured from %s", conf.path)
        self.kick()

    async def Shutdown(self, req: pb.ShutdownRequest, who: Principal) -> pb.ShutdownReply:
        if not who.is_super_user:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        self.stop()
        return pb.ShutdownReply()


#: The states ``scontrol update NodeName=`` may set (CANCEL_REBOOT aside).
NODE_STATES = ("DRAIN", "RESUME", "DOWN", "IDLE", "UNDRAIN", "FAIL")

#: The states ``scontrol update PartitionName=`` may set.
PARTITION_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")

METHODS = (
    "Submit",
    "Jobs",
    "Nodes",
    "Partitions",
    "Signal",
    "JobControl",
    "NodeUpdate",
    "Config",
    "Ping",
    "Reconfigure",
    "Shutdown",
    "Takeover",
    "Priorities",
    "Shares",
    "History",
    "AcctAdmin",
    "Diag",
    "Report",
    "Reservations",
    "ReservationControl",
    "StepCreate",
    "Allocation",
    "Token",
    "Why",
    "BatchScript",
    "PartitionUpdate",
    "StepStats",
    "Queues",
    "Licenses",
    "AssocMgr",
    "Crontab",
    "Triggers",
    "Broadcast",
    "StepAttach",
    "TopJob",
    "Notify",
    "NodeReboot",
    "Clusters",
)
