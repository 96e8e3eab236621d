"""The outbox to corral-dbd, and sacct's queries through it.

Every change accounting cares about puts the job's whole record (a
``JobInfo``, as squeue shows it) into the store's outbox, in the same journal
transaction as the change itself (``JobStore._record``). ``Delivery`` sends
the committed records to dbd oldest first and drops them only once dbd has
them; dbd keeps the newest record per job by outbox sequence. The event
outbox (node events, and reservation records as ``{"reservation": ...}``)
goes along in the same calls, each kind in its own fields (``batch``). So records
reach dbd at least once and are stored exactly once, whatever stops in
between: dbd, its database, the network or the controller itself. The
scheduler never waits for any of it.

sacct asks the controller (``History``): it first lets the outbox drain (for a
moment at most), then forwards the query as the calling user, so a job is in
sacct as soon as sbatch has returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from dataclasses import replace
from itertools import islice
from typing import Any

import grpc

from controller.associations import AssocSet
from controller.jobstate import COMPLETING, REQUEUED, RESIZING
from controller.journal import JournalWriteError
from controller.model import Job
from controller.principal import Principal
from controller.store import JobStore
from controller.views import job_info
from corral import auth, credentials, errors, grpctls
from corral import gres as gres_syntax
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.munge import Munge
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc

log = logging.getLogger("corral.accounting")

#: Records per RecordJobs call.
BATCH = 500
#: How long sacct waits for the outbox to reach dbd before asking anyway.
DRAIN_WAIT_S = 2.0
RETRY_FIRST_S = 0.5
RETRY_MOST_S = 30.0
#: How often the controller asks dbd for its associations, users and QOS.
ASSOC_POLL_S = 2.0


def record(store: JobStore, job: Job) -> bytes:
    """The accounting record of ``job`` now (no backfill estimate: that is not history)."""
    info = job_info(replace(job, expected_start=0, expected_nodes=()), store)
    if job.resize_time or RESIZING in job.flags:
        sized(info, job)
    if REQUEUED in job.flags and COMPLETING not in job.flags:  # a run a requeue ended
        info.state = REQUEUED
    for name in ("job_gres", "node_cpu_ids", "node_mem", "node_gres"):
        info.ClearField(name)  # scontrol -d's lines (jobdetail): slurmdbd keeps none
    data: bytes = info.SerializeToString()
    return data


def sized(info: pb.JobInfo, job: Job) -> None:
    """``info`` as the record of one size of a resized job, as slurmdbd keeps them
    (docs/design.md, "Elastic jobs"): after a resize the job's record is a new one,
    submitted, eligible and started at the resize (the key dbd files it under), and
    the record of the size it left ends there in state RESIZING. The steps, the
    batch script's among them, are the newest record's, whose ``run_start`` says
    when the run began."""
    if job.resize_time:
        info.submit_time = job.resize_time
        info.eligible_time = max(info.eligible_time, job.resize_time)
        if info.start_time:
            info.start_time = max(info.start_time, job.resize_time)
    info.run_start = job.start_time
    if RESIZING in job.flags:
        info.state = RESIZING
        del info.state_flags[:]
        info.state_flags.append(RESIZING)
        info.batch_flag = info.extern_step = False
        del info.steps[:]


_RESV_FIELDS = frozenset(pb.ReservationInfo.DESCRIPTOR.fields_by_name)


def batch(
    outbox: dict[int, bytes], events: dict[int, str]
) -> tuple[pb.RecordJobsRequest, list[int], list[int]]:
    """The next ``RecordJobs`` request (without credential and cluster): the oldest
    ``BATCH`` job records and event outbox items, and the sequences it carries of each.

    The event outbox holds node events (a ``NodeEvent``'s fields) and reservation
    records (``{"reservation": {...}}``, a ``ReservationInfo``'s fields); each goes
    with its sequence into its own pair of fields. dbd acknowledges the events by
    the last of ``event_seqs``, whichever kind it was.
    """
    seqs = list(islice(outbox, BATCH))
    event_seqs = list(islice(events, BATCH))
    request = pb.RecordJobsRequest(seqs=seqs)
    for seq in seqs:
        request.jobs.add().MergeFromString(outbox[seq])
    for seq in event_seqs:
        item = json.loads(events[seq])
        if "reservation" in item:
            # Only the fields the wire has: a key it lacks must not stop every delivery.
            fields = item["reservation"].items()
            request.reservations.add(**{k: v for k, v in fields if k in _RESV_FIELDS})
            request.resv_seqs.append(seq)
        else:
            request.events.add(**item)
            request.event_seqs.append(seq)
    return request, seqs, event_seqs


def _failure(exc: grpc.aio.AioRpcError) -> SlurmError:
    """dbd's refusal as the client should see it; anything else is dbd unreachable."""
    code = {
        grpc.StatusCode.INVALID_ARGUMENT: errors.EINVAL,
        grpc.StatusCode.PERMISSION_DENIED: errors.ESLURM_ACCESS_DENIED,
    }.get(exc.code())
    if code is not None:
        return SlurmError(code, exc.details() or None)
    return SlurmError(
        errors.ESLURM_DB_CONNECTION, f"Problem talking to the database: {exc.details()}"
    )


def gres_tres(conf: SlurmConfig) -> list[str]:
    """The TRES this cluster accounts beyond Slurm's fixed ones, for dbd's tres table:
    ``gres/NAME`` for each of GresTypes, ``gres/NAME:TYPE`` for each type nodes have
    (job records' AllocTRES carry both), then AccountingStorageTRES's own entries."""
    settings = dict(conf.settings)
    names = [n.strip().lower() for n in settings.get("GresTypes", "").split(",") if n.strip()]
    tres = [f"gres/{name}" for name in names]
    for node in conf.nodes:
        for name, kind, _ in gres_syntax.parse_node(node.gres):
            if name.lower() in names and kind:
                tres.append(f"gres/{name}:{kind}")
    for item in settings.get("AccountingStorageTRES", "").split(","):
        if "/" in item:
            tres.append(item.strip())
    return list(dict.fromkeys(tres))


def _changed(fetched: AssocSet, known: AssocSet | None) -> bool:
    """Whether dbd's answer differs from the set kept: in what is enforced, or in
    what only ``scontrol show assoc_mgr`` shows (ids, Lft, GrpTRESRunMins...),
    which the serialized reply alone carries."""
    return known is None or fetched != known or fetched.reply != known.reply


class Delivery:
    """Sends the store's outbox to dbd, and forwards sacct's queries to it."""

    def __init__(self, store: JobStore, key: bytes | Munge, ttl: int = auth.DEFAULT_TTL) -> None:
        conf = store.conf
        self.store = store
        self.key = key  # the credential key (or munged)
        self.ttl = ttl
        self.cluster = conf.cluster_name
        # The address registered as the cluster's ControlHost: the serving controller's.
        self.control_host = conf.controller_host[1]
        self.target = f"{conf.accounting.host}:{conf.accounting.port}"
        # dbd asks for the controller's certificate (mutual TLS): ctld's is shown.
        self._channel = grpctls.channel(self.target, conf.tls, role="ctld")
        self._stub = pb_grpc.AccountingStub(self._channel)  # type: ignore[no-untyped-call]
        self.sent = 0  # highest outbox sequence dbd confirmed
        self.failing = ""  # why the last delivery failed ("" while it works)
        self._progress = asyncio.Event()
        self._registered = False
        self._registering = asyncio.Lock()
        store.durable.recorder = lambda job: record(store, job)

    def _signed(self, method: str, request: Any, who: Principal | None = None) -> Any:
        """``request`` with a credential for this one call of dbd's ``method``: the
        caller's, or this controller's own (its uid: root or SlurmUser, the only ones
        dbd takes records from)."""
        uid, gid = (who.uid, who.gid) if who is not None else (os.getuid(), os.getgid())
        return credentials.stamp(
            request,
            self.key,
            uid=uid,
            gid=gid,
            method=credentials.accounting_method(method),
            receiver=auth.DBD_RECEIVER,
            ttl=self.ttl,
        )

    async def _register(self) -> None:
        """Tell dbd this cluster exists (it then has Slurm's default associations)."""
        async with self._registering:  # run() and follow() both start with it: once
            if not self._registered:
                await self._register_now()

    async def _register_now(self) -> None:
        conf = self.store.conf
        request = pb.RegisterClusterRequest(
            cluster=self.cluster,
            control_host=self.control_host,
            control_port=conf.slurmctld_port,
            cpus=sum(node.cpus for node in conf.nodes),
            tres=gres_tres(conf),
        )
        await self._stub.RegisterCluster(self._signed("RegisterCluster", request), timeout=10)
        self._registered = True
        self._reachable()

    def _reachable(self) -> None:
        if self.failing:
            log.info("accounting: dbd at %s reachable again", self.target)
            self.store.triggers.note_dbd(reachable=True)
        self.failing = ""

    async def run(self) -> None:
        """Deliver forever (cancel to stop); waits, with backoff, while dbd is away."""
        wait = RETRY_FIRST_S
        while True:
            outbox, events = self.store.durable.outbox, self.store.durable.event_outbox
            if self._registered and not outbox and not events:
                self.store.durable.outbox_ready.clear()
                await self.store.durable.outbox_ready.wait()
                continue
            try:
                if not self._registered:
                    await self._register()
                    continue
                request, seqs, event_seqs = batch(outbox, events)
                request.cluster = self.cluster
                await self._stub.RecordJobs(self._signed("RecordJobs", request), timeout=30)
            except grpc.aio.AioRpcError as exc:
                if not self.failing:
                    log.warning("accounting: dbd at %s: %s", self.target, exc.details())
                    self.store.triggers.note_dbd(reachable=False)
                self.failing = exc.details() or exc.code().name
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MOST_S)
                continue
            self._reachable()
            wait = RETRY_FIRST_S
            if event_seqs:
                self.store.durable.events_delivered(event_seqs[-1])
            if seqs:
                self.store.durable.delivered(seqs[-1])
                self.sent = seqs[-1]
                self._progress.set()
            # Forget the delivered records on disk too; a journal that refuses keeps
            # the deletion in the batch put back and writes it with its retry.
            with contextlib.suppress(JournalWriteError):
                await self.store.flush()

    async def follow(self) -> None:
        """Keep the store's associations, users and QOS as dbd has them (cancel to stop).

        Asked every ``ASSOC_POLL_S``, so a sacctmgr change applies within
        seconds; while dbd is away the last set known stays in force.
        """
        while True:
            try:
                if not self._registered:
                    await self._register()
                assocs = await self._fetch()
            except grpc.aio.AioRpcError:
                assocs = None  # Delivery.run reports dbd's absence
            if assocs is not None and _changed(assocs, self.store.associations):
                self.store.set_associations(assocs)
                with contextlib.suppress(JournalWriteError):  # kept, written by the retry
                    await self.store.flush()
                log.info(
                    "accounting: %d associations, %d users, %d QOS",
                    len(assocs.assocs),
                    len(assocs.users),
                    len(assocs.qos),
                )
            # Until dbd first answers, ask again soon: jobs may be waiting on it.
            await asyncio.sleep(ASSOC_POLL_S if self.store.associations else RETRY_FIRST_S)

    async def _fetch(self) -> AssocSet:
        request = self._signed("Associations", pb.AssociationsRequest(cluster=self.cluster))
        reply = await self._stub.Associations(request, timeout=30)
        return AssocSet.from_reply(reply)

    @property
    def backlog(self) -> int:
        """Records committed and not yet in dbd (sdiag's "DBD Agent queue size")."""
        return len(self.store.durable.outbox) + len(self.store.durable.event_outbox)

    async def drain(self, timeout: float) -> bool:
        """Wait until every record committed so far is in dbd (False: gave up)."""
        if not self.store.durable.outbox:
            return True
        target = max(self.store.durable.outbox)
        deadline = asyncio.get_running_loop().time() + timeout
        while self.sent < target:  # while dbd is away too: it may be back within the wait
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), left)
            except TimeoutError:
                return False
        return self.sent >= target

    async def _forward(self, method: str, request: Any, who: Principal, timeout: float) -> Any:
        """Call dbd's ``method`` with a copy of ``request`` signed as the calling user."""
        forwarded = type(request)()
        forwarded.CopyFrom(request)
        forwarded.ClearField("cred")
        try:
            signed = self._signed(method, forwarded, who)
            return await getattr(self._stub, method)(signed, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise _failure(exc) from None

    async def history(self, request: pb.HistoryRequest, who: Principal) -> pb.HistoryReply:
        """Answer sacct: dbd's records, once this controller's own have reached it."""
        await self.drain(DRAIN_WAIT_S)
        query = pb.HistoryRequest(filter=request.filter)
        if not query.filter.clusters:
            query.filter.clusters.append(self.cluster)
        reply: pb.HistoryReply = await self._forward("History", query, who, 60)
        return reply

    async def admin(self, request: pb.AcctAdminRequest, who: Principal) -> pb.AcctAdminReply:
        """Forward a sacctmgr request to dbd as the calling user."""
        reply: pb.AcctAdminReply = await self._forward("AcctAdmin", request, who, 60)
        return reply

    async def report(self, request: pb.ReportRequest, who: Principal) -> pb.ReportReply:
        """Forward an sreport request to dbd as the calling user (own cluster by default)."""
        query = pb.ReportRequest()
        query.CopyFrom(request)
        if not query.clusters:
            query.clusters.append(self.cluster)
        reply: pb.ReportReply = await self._forward("Report", query, who, 120)
        return reply

    async def clusters(self) -> list[pb.ClusterAddress]:
        """The clusters dbd knows, each with the controller address it registered
        (``sacctmgr show cluster``'s ControlHost and ControlPort), asked as this
        controller: every user may list them, as with sacctmgr."""
        query = self._signed("AcctAdmin", pb.AcctAdminRequest(verb="list", kind="cluster"))
        try:
            reply = await self._stub.AcctAdmin(query, timeout=10)
        except grpc.aio.AioRpcError as exc:
            raise _failure(exc) from None
        found = []
        for row in reply.rows:
            port = row.fields.get("ControlPort", "")
            found.append(
                pb.ClusterAddress(
                    name=row.fields.get("Cluster", ""),
                    host=row.fields.get("ControlHost", ""),
                    port=int(port) if port.isdigit() else 0,
                )
            )
        return found

    async def close(self) -> None:
        await self._channel.close()
