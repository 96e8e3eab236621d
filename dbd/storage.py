"""The accounting store: idempotent job records and sacct's queries, over SQLAlchemy.

Controllers deliver each job's newest record at least once, in outbox order.
``record_jobs`` keeps, per (cluster, job id, submit time), the record with the
highest outbox sequence: a resent batch, or one that crosses a newer one,
changes nothing, so at-least-once delivery stores every job exactly once.

Queries are built with SQLAlchemy expressions, never from strings, and use the
indexes of ``dbd.models``. The time window follows sacct: a job is in
``[start, end]`` when it was eligible by ``end`` and had not ended before
``start``; without job ids only jobs that ever became eligible count (a held
job is found by its id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import ColumnElement, and_, create_engine, func, or_, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from corral import hostlist
from corral.wire import corral_pb2 as pb
from dbd.admin import ensure_cluster
from dbd.entities import BASE_TRES, FIRST_TRES_ID
from dbd.models import Cluster, JobRecord, NodeEventRecord, ReservationRecord, Tres

T = TypeVar("T")
K = TypeVar("K")
R = TypeVar("R")


def engine_for(url: str) -> Engine:
    """An engine for a SQLAlchemy URL (``sqlite:///file`` or ``mysql+pymysql://...``)."""
    if url.startswith("sqlite"):
        return create_engine(url, connect_args={"timeout": 30})
    return create_engine(url, pool_pre_ping=True, pool_recycle=3600)


@dataclass(frozen=True, slots=True)
class Query:
    """What sacct asks for (``HistoryFilter``), with the clusters resolved."""

    clusters: tuple[str, ...] = ()  # empty: every cluster
    job_ids: tuple[str, ...] = ()
    uids: tuple[int, ...] = ()
    accounts: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    start: int = 0
    end: int = 0  # 0: no upper bound
    # PrivateData=jobs: only jobs of these uids or in these accounts (None: any job).
    visible: tuple[tuple[int, ...], tuple[str, ...]] | None = None
    duplicates: bool = False  # sacct -D: every run of a requeued job


def _job_id_clauses(text: str) -> list[ColumnElement[bool]]:
    """``123`` (a job, or every task of array 123), ``123_4``, ``123_[1-3]``: the
    alternatives that select it, each usable by an index; ValueError if malformed."""
    head, _, tasks = text.partition("_")
    if not head.isdigit():
        raise ValueError(text)
    job_id = int(head)
    if not tasks:
        return [JobRecord.job_id == job_id, JobRecord.array_job_id == job_id]
    spec = tasks[1:-1] if tasks.startswith("[") and tasks.endswith("]") else tasks
    spans: list[ColumnElement[bool]] = []
    for part in spec.split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(text)
        spans.append(
            and_(
                JobRecord.array_job_id == job_id,
                JobRecord.array_task_id.between(int(lo), int(hi if dash else lo)),
            )
        )
    return spans


#: Job ids in one ``IN`` list: far below SQLite's limit on a statement's variables.
IDS_PER_LIST = 5000


def _job_ids_clauses(texts: Sequence[str]) -> list[ColumnElement[bool]]:
    """The alternatives that select the jobs ``texts`` name (see :func:`_job_id_clauses`):
    plain ids go in ``IN`` lists, so that thousands of them (``sacct -j`` of a whole
    array's ids, a script's list) make a few terms, not an expression SQLite finds too
    deep; ValueError if one is malformed."""
    plain = sorted({int(text) for text in texts if text.isdigit()})
    alternatives = [c for text in texts if not text.isdigit() for c in _job_id_clauses(text)]
    for at in range(0, len(plain), IDS_PER_LIST):
        chunk = plain[at : at + IDS_PER_LIST]
        alternatives += [JobRecord.job_id.in_(chunk), JobRecord.array_job_id.in_(chunk)]
    return alternatives


class Storage:
    """One accounting database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def register_cluster(
        self, name: str, host: str, port: int, now: int, cpus: int = 0, tres: Sequence[str] = ()
    ) -> None:
        """A controller (re)started: its cluster exists, with Slurm's defaults.

        ``cpus`` (its configured CPUs in all) is what the usage rollups report the
        cluster had from then on. ``tres`` (``gres/gpu``, ``gres/gpu:a100``) are the
        TRES it accounts beyond Slurm's fixed ones: those new to this dbd get the
        next ids (``sacctmgr show tres``).
        """

        def register() -> None:
            with Session(self.engine) as session, session.begin():
                row = ensure_cluster(session, name)
                row.control_host, row.control_port, row.registered = host, port, now
                row.cpus = cpus
                _ensure_tres(session, tres)

        _once_more_if_raced(register)

    def clusters(self) -> list[Cluster]:
        with Session(self.engine) as session:
            return list(session.scalars(select(Cluster).order_by(Cluster.name)))

    def record_jobs(self, cluster: str, jobs: Sequence[pb.JobInfo], seqs: Sequence[int]) -> int:
        """Store the records newer than what is stored; returns how many were."""
        newest = _newest(jobs, seqs, lambda info: (info.job_id, info.submit_time))
        if not newest:
            return 0
        return _once_more_if_raced(lambda: self._upsert(cluster, newest))

    def _upsert(self, cluster: str, newest: dict[tuple[int, int], tuple[int, pb.JobInfo]]) -> int:
        stored = 0
        with Session(self.engine) as session, session.begin():
            ids = sorted({job_id for job_id, _ in newest})
            existing = {
                (row.job_id, row.submit_time): row
                for row in session.scalars(
                    select(JobRecord).where(JobRecord.cluster == cluster, JobRecord.job_id.in_(ids))
                )
            }
            for key, (seq, info) in newest.items():
                row = existing.get(key)
                if row is None:
                    row = JobRecord(
                        cluster=cluster, job_id=info.job_id, submit_time=info.submit_time
                    )
                    session.add(row)
                elif row.seq >= seq:
                    continue
                _fill(row, info, seq)
                stored += 1
        return stored

    def record_events(
        self, cluster: str, events: Sequence[pb.NodeEvent], seqs: Sequence[int]
    ) -> int:
        """Store the node events newer than what is stored; returns how many were."""
        newest = _newest(events, seqs, lambda event: (event.node, event.start))
        return _once_more_if_raced(lambda: self._upsert_events(cluster, newest))

    def _upsert_events(
        self, cluster: str, newest: dict[tuple[str, int], tuple[int, pb.NodeEvent]]
    ) -> int:
        stored = 0
        with Session(self.engine) as session, session.begin():
            for (node, start), (seq, event) in newest.items():
                row = session.scalar(
                    select(NodeEventRecord).where(
                        NodeEventRecord.cluster == cluster,
                        NodeEventRecord.node == node,
                        NodeEventRecord.time_start == start,
                    )
                )
                if row is None:
                    row = NodeEventRecord(cluster=cluster, node=node, time_start=start)
                    session.add(row)
                elif row.seq >= seq:
                    continue
                row.time_end, row.state, row.reason = event.end, event.state, event.reason
                row.reason_uid, row.cpus, row.seq = event.reason_uid, event.cpus, seq
                stored += 1
        return stored

    def record_reservations(
        self, cluster: str, infos: Sequence[pb.ReservationInfo], seqs: Sequence[int]
    ) -> int:
        """Store the reservation records newer than what is stored; returns how many were.

        One row per (cluster, reservation id, start): a record with the start of a
        stored row replaces it if its sequence is higher, one with a new start is a
        new row (``dbd.reservations`` says how the rows of one reservation count).
        """
        newest = _newest(infos, seqs, lambda info: (info.id, info.start))
        if not newest:
            return 0
        return _once_more_if_raced(lambda: self._upsert_reservations(cluster, newest))

    def _upsert_reservations(
        self, cluster: str, newest: dict[tuple[int, int], tuple[int, pb.ReservationInfo]]
    ) -> int:
        stored = 0
        with Session(self.engine) as session, session.begin():
            ids = sorted({resv_id for resv_id, _ in newest})
            existing = {
                (row.resv_id, row.time_start): row
                for row in session.scalars(
                    select(ReservationRecord).where(
                        ReservationRecord.cluster == cluster, ReservationRecord.resv_id.in_(ids)
                    )
                )
            }
            for (resv_id, start), (seq, info) in newest.items():
                row = existing.get((resv_id, start))
                if row is None:
                    row = ReservationRecord(cluster=cluster, resv_id=resv_id, time_start=start)
                    session.add(row)
                elif row.seq >= seq:
                    continue
                _fill_reservation(row, info, seq)
                stored += 1
        return stored

    def history(self, query: Query) -> list[bytes]:
        """The serialized ``JobInfo`` records ``query`` selects, by cluster, submit time, id."""
        clauses: list[ColumnElement[bool]] = []
        where = JobRecord.cluster.in_(query.clusters) if query.clusters else None
        if query.job_ids:
            # Each alternative carries the cluster, so every one can use an index.
            alternatives = _job_ids_clauses(query.job_ids)
            clauses.append(or_(*(c if where is None else and_(where, c) for c in alternatives)))
        else:
            if where is not None:
                clauses.append(where)
            clauses.append(JobRecord.eligible_time > 0)
        for column, values in (
            (JobRecord.uid, query.uids),
            (JobRecord.account, query.accounts),
            (JobRecord.partition, query.partitions),
            (JobRecord.state, query.states),
            (JobRecord.name, query.names),
        ):
            if values:
                clauses.append(column.in_(values))
        if query.visible is not None:
            uids, accounts = query.visible
            clauses.append(or_(JobRecord.uid.in_(uids), JobRecord.account.in_(accounts)))
        if query.end:
            eligible = [JobRecord.eligible_time <= query.end, JobRecord.eligible_time == 0]
            if query.job_ids:  # a named job is shown while a requeue makes it wait
                eligible.append(JobRecord.submit_time <= query.end)
            clauses.append(or_(*eligible))
        if query.start:
            clauses.append(or_(JobRecord.end_time == 0, JobRecord.end_time >= query.start))
        statement = (
            select(
                JobRecord.record,
                JobRecord.nodes,
                JobRecord.cluster,
                JobRecord.job_id,
                JobRecord.submit_time,
                JobRecord.state,
            )
            .where(*clauses)
            .order_by(JobRecord.cluster, JobRecord.submit_time, JobRecord.job_id)
        )
        wanted = set(query.nodes)
        with Session(self.engine) as session:
            rows: list[_Listed] = [
                (record, nodes, cluster, job_id, submitted, state)
                for record, nodes, cluster, job_id, submitted, state in session.execute(statement)
                if not wanted or _ran_on(nodes, wanted)
            ]
        if not query.duplicates:
            rows = _latest_runs(rows)
        return [row[0] for row in rows]


#: A record as history lists it: (record, nodes, cluster, job id, submit time, state).
_Listed = tuple[bytes, str, str, int, int, str]
#: The state of a record a resize closed (the controller's ``accounting.sized``).
_RESIZING = "RESIZING"


def _latest_runs(rows: Sequence[_Listed]) -> list[_Listed]:
    """Without ``sacct -D``: of each job's records the query selected, the latest run's
    only, as slurmdbd lists them; a record a resize closed (RESIZING) stays beside it."""
    latest: dict[tuple[str, int], int] = {}
    for _, _, cluster, job_id, submitted, state in rows:
        if state != _RESIZING:
            key = (cluster, job_id)
            latest[key] = max(latest.get(key, submitted), submitted)
    return [row for row in rows if row[5] == _RESIZING or latest[(row[2], row[3])] == row[4]]


def _newest(
    items: Sequence[T], seqs: Sequence[int], key: Callable[[T], K]
) -> dict[K, tuple[int, T]]:
    """Per key, the item with the highest outbox sequence (and that sequence)."""
    newest: dict[K, tuple[int, T]] = {}
    for item, seq in zip(items, seqs, strict=True):
        k = key(item)
        if k not in newest or newest[k][0] < seq:
            newest[k] = (seq, item)
    return newest


def _once_more_if_raced(work: Callable[[], R]) -> R:
    """Run ``work``; if a concurrent writer inserted the same row first, run it again
    (it then finds the row and updates it)."""
    try:
        return work()
    except IntegrityError:
        return work()


def _ensure_tres(session: Session, tres: Sequence[str]) -> None:
    """Store the ``type/name`` TRES not stored yet, numbered from the highest id on
    (1001 first, as Slurm numbers them), so ids never change once given. Slurm's
    fixed TRES and items without both a type and a name are not stored."""
    fixed = {(kind, name) for kind, name, _ in BASE_TRES}
    known = {(row.type, row.name) for row in session.scalars(select(Tres))}
    last = session.scalar(select(func.max(Tres.id))) or FIRST_TRES_ID - 1
    for item in tres:
        kind, _, name = item.partition("/")
        if not kind or not name or (kind, name) in fixed | known:
            continue
        last += 1
        session.add(Tres(id=last, type=kind, name=name))
        known.add((kind, name))


def _ran_on(nodes: str, wanted: set[str]) -> bool:
    return bool(nodes) and not wanted.isdisjoint(hostlist.expand(nodes))


def _fill(row: JobRecord, info: pb.JobInfo, seq: int) -> None:
    row.seq = seq
    row.array_job_id = info.array_job_id
    row.array_task_id = info.array_task_id if info.HasField("array_task_id") else None
    row.uid = info.uid
    row.account = info.account
    row.partition = info.partition
    row.state = info.state
    row.name = info.name
    row.nodes = info.nodes
    row.eligible_time = info.eligible_time
    row.start_time = info.start_time
    row.end_time = info.end_time
    row.record = info.SerializeToString()


def _fill_reservation(row: ReservationRecord, info: pb.ReservationInfo, seq: int) -> None:
    row.seq = seq
    row.time_end = info.end
    row.name = info.name[:255]
    row.nodes = info.nodes
    row.node_count = info.node_count
    row.cpus = info.core_count or tres_count(info.tres, "cpu")
    row.flags = info.flags
    row.users = info.users
    row.accounts = info.accounts
    row.partition = info.partition[:64]
    row.tres = info.tres or (f"cpu={info.core_count}" if info.core_count else "")
    row.state = info.state[:32]
    row.deleted = info.deleted


def tres_count(tres: str, name: str) -> int:
    """The count of ``name`` in a ``cpu=4,mem=1G`` list (0 if absent or not a number)."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key.strip().lower() == name and value.strip().isdigit():
            return int(value)
    return 0


def parse_job_ids(texts: Iterable[str]) -> tuple[str, ...]:
    """The job ids of a filter, each checked (ValueError names a bad one)."""
    checked = tuple(texts)
    for text in checked:
        _job_id_clauses(text)
    return checked
