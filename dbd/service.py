"""corral-dbd's gRPC face: controllers record jobs, sacct's queries come through them.

Every call carries a ``Credential`` made for that call to dbd
(``corral.credentials``), so only a controller (or an administrator holding the
key) reaches the store, and no credential serves twice. Records
(``RegisterCluster``, ``RecordJobs``) are taken only from root or SlurmUser, as
slurmdbd takes them only from slurmctld, and so is ``Associations``, what a
controller enforces; a query is answered as the user the
credential names, within what ``PrivateData`` lets them see (``dbd.privacy``). Database work
runs on worker threads, so one slow query does not stall the deliveries.
A database that cannot be reached is ``UNAVAILABLE``: controllers keep their
outbox and try again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import grpc
from sqlalchemy.exc import DBAPIError

from corral import auth, credentials
from corral.credentials import Verifier
from corral.errors import ESLURM_ACCESS_DENIED, MESSAGES, SlurmError
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from dbd import privacy
from dbd.admin import Admin
from dbd.enforced import enforced
from dbd.entities import user_name
from dbd.privacy import Sight
from dbd.report import ReportQuery, usage_report
from dbd.storage import Query, Storage, parse_job_ids

log = logging.getLogger("corral.dbd")

#: The largest record sequence the database holds (BIGINT is signed in SQLite and MariaDB).
SEQ_MAX = 2**63 - 1


class AccountingService(pb_grpc.AccountingServicer):
    def __init__(
        self,
        storage: Storage,
        verifier: Verifier,
        private_data: tuple[str, ...],
        slurm_uid: int,
    ):
        self.storage = storage
        self.admin = Admin(storage.engine)
        self.verifier = verifier
        self.private_jobs = "jobs" in private_data
        self.private_usage = "usage" in private_data
        self.private_listings = tuple(p for p in private_data if p in ("users", "accounts"))
        self.slurm_uid = slurm_uid

    async def _caller(self, request: Any, method: str, context: grpc.aio.ServicerContext) -> int:
        """The uid a request's credential names, if it was made for this call to dbd."""
        try:
            cred = self.verifier.check(request, credentials.accounting_method(method))
        except auth.AuthError as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        uid: int = cred.uid
        return uid

    async def _daemon(self, request: Any, method: str, context: grpc.aio.ServicerContext) -> None:
        """Records come from controllers alone: root or SlurmUser (whoever holds a user's
        credential must not write accounting)."""
        uid = await self._caller(request, method, context)
        if uid not in (0, self.slurm_uid):
            log.warning("%s from uid %d refused: not root or SlurmUser", method, uid)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, MESSAGES[ESLURM_ACCESS_DENIED])

    def _sight(self, uid: int) -> Sight:
        return privacy.sight(self.storage.engine, uid, user_name(uid).lower(), self.slurm_uid)

    async def _run(self, context: grpc.aio.ServicerContext, work: Any, *args: Any) -> Any:
        try:
            return await asyncio.to_thread(work, *args)
        except DBAPIError as exc:  # the database is away, or refused: the caller tries again
            log.warning("database: %s", exc.orig)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "Unable to connect to database")

    async def RegisterCluster(
        self, request: pb.RegisterClusterRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterClusterReply:
        await self._daemon(request, "RegisterCluster", context)
        await self._run(
            context,
            self.storage.register_cluster,
            request.cluster,
            request.control_host,
            request.control_port,
            int(time.time()),
            request.cpus,
            list(request.tres),
        )
        log.info("cluster %s registered from %s", request.cluster, request.control_host)
        return pb.RegisterClusterReply()

    async def RecordJobs(
        self, request: pb.RecordJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordJobsReply:
        await self._daemon(request, "RecordJobs", context)
        if (
            len(request.jobs) != len(request.seqs)
            or len(request.events) != len(request.event_seqs)
            or len(request.reservations) != len(request.resv_seqs)
        ):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "one sequence per record")
        # Sequences are stored in signed 64-bit columns; a controller's count from 1.
        if any(seq > SEQ_MAX for seq in (*request.seqs, *request.event_seqs, *request.resv_seqs)):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "sequence out of range")
        stored = await self._run(
            context, self.storage.record_jobs, request.cluster, request.jobs, request.seqs
        )
        if request.events:
            stored += await self._run(
                context,
                self.storage.record_events,
                request.cluster,
                request.events,
                request.event_seqs,
            )
        if request.reservations:
            stored += await self._run(
                context,
                self.storage.record_reservations,
                request.cluster,
                request.reservations,
                request.resv_seqs,
            )
        return pb.RecordJobsReply(stored=stored)

    async def Associations(
        self, request: pb.AssociationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AssociationsReply:
        """What a controller enforces; only controllers ask (users list theirs through
        sacctmgr, within PrivateData)."""
        await self._daemon(request, "Associations", context)
        reply: pb.AssociationsReply = await self._run(
            context, enforced, self.storage.engine, request.cluster
        )
        return reply

    async def AcctAdmin(
        self, request: pb.AcctAdminRequest, context: grpc.aio.ServicerContext
    ) -> pb.AcctAdminReply:
        uid = await self._caller(request, "AcctAdmin", context)
        caller = user_name(uid)
        try:
            answer = await self._run(
                context,
                self.admin.run,
                request.verb,
                request.kind,
                dict(request.where),
                dict(request.set),
                request.commit,
                caller,
                uid in (0, self.slurm_uid),
            )
        except SlurmError as exc:
            code = (
                grpc.StatusCode.PERMISSION_DENIED
                if exc.code == ESLURM_ACCESS_DENIED
                else grpc.StatusCode.INVALID_ARGUMENT
            )
            await context.abort(code, exc.message)
        reply = pb.AcctAdminReply(columns=answer.columns, defaults=answer.defaults)
        rows = answer.rows
        if request.verb == "list" and self.private_listings:
            seen = await self._run(context, self._sight, uid)
            rows = privacy.rows_shown(
                request.kind, rows, caller.lower(), seen, self.private_listings
            )
        for row in rows:
            reply.rows.add().fields.update(row)
        return reply

    async def History(
        self, request: pb.HistoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.HistoryReply:
        uid = await self._caller(request, "History", context)
        f = request.filter
        try:
            job_ids = parse_job_ids(f.job_ids)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid job id: {exc}")
        visible = None
        if self.private_jobs:
            seen = await self._run(context, self._sight, uid)
            visible = None if seen.everything else (seen.uids, seen.accounts)
        query = Query(
            clusters=tuple(c for c in f.clusters if c.lower() != "all"),
            job_ids=job_ids,
            uids=tuple(f.uids),
            accounts=tuple(f.accounts),
            partitions=tuple(f.partitions),
            states=tuple(s.upper() for s in f.states),
            names=tuple(f.names),
            nodes=tuple(f.nodes),
            start=f.start,
            end=f.end,
            visible=visible,
            duplicates=f.duplicates,
        )
        records = await self._run(context, self.storage.history, query)
        reply = pb.HistoryReply(now=int(time.time()))
        for record in records:
            reply.jobs.add().MergeFromString(record)
        return reply

    async def Report(
        self, request: pb.ReportRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportReply:
        """sreport's reports, from the usage rollups (rolled up to now first).

        With ``PrivateData=usage`` a user who may not see everything (see
        ``dbd.privacy``) sees only their own usage: their user rows alone,
        without account rows, and nothing when they ask for other users.
        """
        uid = await self._caller(request, "Report", context)
        users = tuple(request.users)
        hidden = False
        if self.private_usage and not (await self._run(context, self._sight, uid)).everything:
            me = user_name(uid).lower()
            hidden = bool(users) and me not in (u.lower() for u in users)
            users = (me,)
        try:
            query = ReportQuery(
                report=request.report.lower(),
                start=request.start,
                end=request.end,
                clusters=tuple(c for c in request.clusters if c.lower() != "all"),
                accounts=tuple(request.accounts),
                users=users,
                top=request.top,
            )
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        rows, start, end = await self._run(
            context, usage_report, self.storage.engine, query, int(time.time())
        )
        reply = pb.ReportReply(start=start, end=end)
        for row in [] if hidden else rows:
            reply.rows.add(
                cluster=row.cluster,
                account=row.account,
                user=row.user,
                alloc_secs=row.alloc_secs,
                down_secs=row.down_secs,
                planned_down_secs=row.planned_down_secs,
                idle_secs=row.idle_secs,
                planned_secs=row.planned_secs,
                reported_secs=row.reported_secs,
                over_secs=row.over_secs,
            )
        return reply
