"""The accounting database's tables, as typed SQLAlchemy 2 models.

Only what queries filter and sort on is a column; the whole record as the
controller sent it (a ``JobInfo`` message, what sacct prints from) is kept in
``record``, so a new sacct field needs no schema change. The migrations in
``dbd/migrations`` create and upgrade these tables; a change here needs a new
revision there (tests/unit/test_dbd_storage.py checks they agree).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: MEDIUMBLOB on MySQL: a record with a long submit line or comment outgrows 64 KiB.
RECORD = LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb")
#: A BIGINT key that SQLite still treats as its rowid (and so numbers by itself).
ROW_ID = BigInteger().with_variant(Integer, "sqlite")


class Base(DeclarativeBase):
    pass


class Cluster(Base):
    """A cluster whose controller registered with this dbd (``sacctmgr show cluster``)."""

    __tablename__ = "clusters"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    control_host: Mapped[str] = mapped_column(String(255), default="")
    control_port: Mapped[int] = mapped_column(Integer, default=0)
    registered: Mapped[int] = mapped_column(BigInteger, default=0)  # epoch seconds
    cpus: Mapped[int] = mapped_column(Integer, default=0)  # configured, as last registered


class JobRecord(Base):
    """One job of one cluster: identified by (cluster, job id, submit time), as in Slurm.

    ``seq`` is the controller's outbox sequence of the newest record stored:
    a record that arrives again, or late, with a lower one changes nothing.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("cluster", "job_id", "submit_time", name="uq_jobs_identity"),
        Index("ix_jobs_cluster_uid_end", "cluster", "uid", "end_time"),
        Index("ix_jobs_cluster_end", "cluster", "end_time"),
        Index("ix_jobs_cluster_array", "cluster", "array_job_id"),
        Index("ix_jobs_cluster_seq", "cluster", "seq"),  # what changed since a rollup
    )

    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[int] = mapped_column(BigInteger)
    submit_time: Mapped[int] = mapped_column(BigInteger)
    seq: Mapped[int] = mapped_column(BigInteger)
    array_job_id: Mapped[int] = mapped_column(BigInteger, default=0)
    array_task_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    uid: Mapped[int] = mapped_column(BigInteger)
    account: Mapped[str] = mapped_column(String(64), default="")
    partition: Mapped[str] = mapped_column(String(64), default="")
    state: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(Text, default="")
    nodes: Mapped[str] = mapped_column(Text, default="")  # hostlist expression
    eligible_time: Mapped[int] = mapped_column(BigInteger, default=0)
    start_time: Mapped[int] = mapped_column(BigInteger, default=0)
    end_time: Mapped[int] = mapped_column(BigInteger, default=0)
    record: Mapped[bytes] = mapped_column(RECORD)


class Limits:
    """The limits associations and QOS share (sacctmgr's Grp* and Max* settings).

    A column left NULL is "no limit", as sacctmgr's ``-1`` makes it.
    """

    grp_tres: Mapped[str | None] = mapped_column(Text, nullable=True)
    grp_tres_mins: Mapped[str | None] = mapped_column(Text, nullable=True)
    grp_tres_run_mins: Mapped[str | None] = mapped_column(Text, nullable=True)
    grp_jobs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    grp_submit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    grp_wall: Mapped[int | None] = mapped_column(Integer, nullable=True)  # minutes
    max_tres: Mapped[str | None] = mapped_column(Text, nullable=True)
    max_tres_per_node: Mapped[str | None] = mapped_column(Text, nullable=True)
    max_tres_mins: Mapped[str | None] = mapped_column(Text, nullable=True)
    max_jobs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_submit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_wall: Mapped[int | None] = mapped_column(Integer, nullable=True)  # minutes


class Account(Base):
    __tablename__ = "accounts"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    description: Mapped[str] = mapped_column(String(255), default="")
    organization: Mapped[str] = mapped_column(String(255), default="")


class User(Base):
    __tablename__ = "users"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    default_account: Mapped[str] = mapped_column(String(64), default="")
    admin_level: Mapped[str] = mapped_column(String(16), default="None")


class Qos(Limits, Base):
    __tablename__ = "qos"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(String(255), default="")
    priority: Mapped[int | None] = mapped_column(Integer, nullable=True)
    grace_time: Mapped[int | None] = mapped_column(Integer, nullable=True)  # seconds
    preempt: Mapped[str] = mapped_column(Text, default="")  # QOS names, comma list
    preempt_exempt_time: Mapped[int | None] = mapped_column(Integer, nullable=True)
    preempt_mode: Mapped[str] = mapped_column(String(32), default="cluster")
    flags: Mapped[str] = mapped_column(Text, default="")
    usage_threshold: Mapped[float | None] = mapped_column(Float, nullable=True)
    usage_factor: Mapped[float] = mapped_column(Float, default=1.0)
    max_tres_pu: Mapped[str | None] = mapped_column(Text, nullable=True)
    max_jobs_pu: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_submit_pu: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_tres_pa: Mapped[str | None] = mapped_column(Text, nullable=True)
    max_jobs_pa: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_submit_pa: Mapped[int | None] = mapped_column(Integer, nullable=True)
    min_tres: Mapped[str | None] = mapped_column(Text, nullable=True)


class Association(Limits, Base):
    """(cluster, account, user, partition): who may run where, with shares and limits.

    An account's own association has ``user`` "" and its parent account in
    ``parent``; a user's has the account it belongs to there.
    """

    __tablename__ = "associations"
    __table_args__ = (
        UniqueConstraint("cluster", "account", "user", "partition", name="uq_associations"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(64))
    account: Mapped[str] = mapped_column(String(64))
    user: Mapped[str] = mapped_column(String(64), default="")
    partition: Mapped[str] = mapped_column(String(64), default="")
    parent: Mapped[str] = mapped_column(String(64), default="")
    shares: Mapped[int] = mapped_column(Integer, default=1)  # -1: parent
    priority: Mapped[int | None] = mapped_column(Integer, nullable=True)
    qos: Mapped[str] = mapped_column(Text, default="")  # QOS names, comma list
    def_qos: Mapped[str] = mapped_column(String(64), default="")


# ---------------------------------------------------------------- usage rollups
# Slurm's assoc_usage_{hour,day,month} and cluster_usage_* tables, CPU only: the
# rows of one period start at ``period`` (epoch seconds of a local hour, day or
# month start). dbd/rollup.py writes them, dbd/report.py reads them.


class AssocUsage:
    """CPU-seconds allocated to the jobs of one (account, user) of a cluster in a period."""

    cluster: Mapped[str] = mapped_column(String(64), primary_key=True)
    period: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    account: Mapped[str] = mapped_column(String(64), primary_key=True)
    user: Mapped[str] = mapped_column(String(64), primary_key=True)
    alloc_secs: Mapped[int] = mapped_column(BigInteger, default=0)


class ClusterUsage:
    """A cluster's CPU-seconds in a period: allocated, down, planned down, planned, idle,
    and reported in all.

    ``reported_secs`` is ``cpus`` times the seconds of the period the cluster was
    known; allocated, down, planned down, planned and idle add up to it.
    ``over_secs`` is the time eligible jobs waited beyond that (sreport's
    OverCommitted), outside the sum. See ``dbd.rollup`` for each figure.
    """

    cluster: Mapped[str] = mapped_column(String(64), primary_key=True)
    period: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    cpus: Mapped[int] = mapped_column(Integer, default=0)
    alloc_secs: Mapped[int] = mapped_column(BigInteger, default=0)
    down_secs: Mapped[int] = mapped_column(BigInteger, default=0)
    planned_down_secs: Mapped[int] = mapped_column(BigInteger, default=0)
    idle_secs: Mapped[int] = mapped_column(BigInteger, default=0)
    planned_secs: Mapped[int] = mapped_column(BigInteger, default=0)
    reported_secs: Mapped[int] = mapped_column(BigInteger, default=0)
    over_secs: Mapped[int] = mapped_column(BigInteger, default=0)


#: The CPU-seconds columns of ``ClusterUsage``.
CLUSTER_SECONDS = (
    "alloc_secs",
    "down_secs",
    "planned_down_secs",
    "idle_secs",
    "planned_secs",
    "reported_secs",
    "over_secs",
)


class AssocUsageHour(AssocUsage, Base):
    __tablename__ = "assoc_usage_hour"


class AssocUsageDay(AssocUsage, Base):
    __tablename__ = "assoc_usage_day"


class AssocUsageMonth(AssocUsage, Base):
    __tablename__ = "assoc_usage_month"


class ClusterUsageHour(ClusterUsage, Base):
    __tablename__ = "cluster_usage_hour"


class ClusterUsageDay(ClusterUsage, Base):
    __tablename__ = "cluster_usage_day"


class ClusterUsageMonth(ClusterUsage, Base):
    __tablename__ = "cluster_usage_month"


class UsageRollup(Base):
    """How far one cluster's usage is rolled up, and what the last rollup saw.

    Every hour before ``hour_end`` has its rows, from the hour of ``since`` (the
    cluster's registration or its first job, whichever came first). A job record
    with an id above ``job_mark`` or an outbox sequence above ``seq_mark`` arrived
    or changed after the last rollup, which then rolls its hours again.
    """

    __tablename__ = "usage_rollups"

    cluster: Mapped[str] = mapped_column(String(64), primary_key=True)
    since: Mapped[int] = mapped_column(BigInteger)
    hour_end: Mapped[int] = mapped_column(BigInteger)
    job_mark: Mapped[int] = mapped_column(BigInteger, default=0)
    seq_mark: Mapped[int] = mapped_column(BigInteger, default=0)
    # The same for reservation records: a row id above resv_mark, or an event outbox
    # sequence above resv_seq_mark, arrived or changed since.
    resv_mark: Mapped[int] = mapped_column(BigInteger, default=0)
    resv_seq_mark: Mapped[int] = mapped_column(BigInteger, default=0)


class RunningUsage(Base):
    """A job the last rollup counted as running (from ``start_time`` to its last hour).

    When such a job's record changes, only the hours from its end on are rolled
    again, not every hour since it started.
    """

    __tablename__ = "usage_running"

    cluster: Mapped[str] = mapped_column(String(64), primary_key=True)
    job: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # jobs.id
    start_time: Mapped[int] = mapped_column(BigInteger)


class NodeEventRecord(Base):
    """A node down or drained (``sacctmgr show event``), one per (cluster, node, start).

    ``seq`` is the controller's event outbox sequence of the newest record
    stored, so a resent or late one (the start resent after the end) changes
    nothing.
    """

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("cluster", "node", "time_start", name="uq_events_identity"),)

    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(64))
    node: Mapped[str] = mapped_column(String(64))
    time_start: Mapped[int] = mapped_column(BigInteger)
    time_end: Mapped[int] = mapped_column(BigInteger, default=0)  # 0 while it lasts
    state: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    reason_uid: Mapped[int] = mapped_column(BigInteger, default=0)
    cpus: Mapped[int] = mapped_column(Integer, default=0)
    seq: Mapped[int] = mapped_column(BigInteger)


class Coordinator(Base):
    """A user who may manage ``account`` and the accounts below it (sacctmgr's coordinators)."""

    __tablename__ = "coordinators"

    user: Mapped[str] = mapped_column(String(64), primary_key=True)
    account: Mapped[str] = mapped_column(String(64), primary_key=True)


class ReservationRecord(Base):
    """An advance reservation (``sacctmgr show reservation``), one per (cluster, id, start),
    as in Slurm: a change that keeps the start replaces the row, a new start makes a new
    one (``dbd.reservations`` says which of a reservation's rows still count, and until
    when).

    ``seq`` is the controller's event outbox sequence of the newest record stored,
    so a resent or late one changes nothing. ``state`` is the reservation's as the
    record was made (ACTIVE once it had begun); ``deleted`` marks its last record,
    when it ended or was removed (``time_end`` is then when).
    """

    __tablename__ = "reservations"
    __table_args__ = (
        UniqueConstraint("cluster", "resv_id", "time_start", name="uq_reservations_identity"),
    )

    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(64))
    resv_id: Mapped[int] = mapped_column(BigInteger)
    time_start: Mapped[int] = mapped_column(BigInteger)
    time_end: Mapped[int] = mapped_column(BigInteger, default=0)
    name: Mapped[str] = mapped_column(String(255), default="")
    nodes: Mapped[str] = mapped_column(Text, default="")  # hostlist expression
    node_count: Mapped[int] = mapped_column(Integer, default=0)
    cpus: Mapped[int] = mapped_column(Integer, default=0)
    flags: Mapped[str] = mapped_column(Text, default="")  # MAINT,IGNORE_JOBS,...
    users: Mapped[str] = mapped_column(Text, default="")
    accounts: Mapped[str] = mapped_column(Text, default="")
    partition: Mapped[str] = mapped_column(String(64), default="")
    tres: Mapped[str] = mapped_column(Text, default="")  # cpu=N
    state: Mapped[str] = mapped_column(String(32), default="")
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)
    seq: Mapped[int] = mapped_column(BigInteger)


class ReservationUsageHour(Base):
    """What the hourly rollup saw of one reservation row in one hour.

    ``wall_secs``: the seconds of the hour it covered; ``alloc_secs``: the
    CPU-seconds jobs ran on its nodes then. Its UnusedWall is the sum of the
    first less the sum of the second over its CPUs; sreport's reservation
    Utilization reads Allocated here too.
    """

    __tablename__ = "reservation_usage_hour"

    cluster: Mapped[str] = mapped_column(String(64), primary_key=True)
    period: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    resv_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    time_start: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    wall_secs: Mapped[int] = mapped_column(BigInteger, default=0)
    alloc_secs: Mapped[int] = mapped_column(BigInteger, default=0)


class Tres(Base):
    """A TRES beyond Slurm's fixed ones (``dbd.entities.BASE_TRES``), such as ``gres/gpu``
    or ``gres/gpu:a100``, as some cluster's controller registered it.

    Ids start at 1001, as in Slurm, in the order dbd first heard of each TRES, and
    never change: every cluster of this dbd shares them.
    """

    __tablename__ = "tres"
    __table_args__ = (UniqueConstraint("type", "name", name="uq_tres_identity"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(64))  # gres, license, bb
    name: Mapped[str] = mapped_column(String(255))  # gpu, gpu:a100


class Resource(Base):
    """A license served from outside the clusters (``sacctmgr add resource``): ``count``
    of ``name`` on ``server``, shared among the clusters given a percentage of it
    (``ResourceCluster``). Each such cluster's controller offers its share as license
    ``name@server``, as slurmctld does with Slurm's remote licenses.
    """

    __tablename__ = "resources"
    __table_args__ = (UniqueConstraint("name", "server", name="uq_resources_identity"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64))
    server: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(String(255), default="")
    server_type: Mapped[str] = mapped_column(String(64), default="")  # ServerType= (manager)
    count: Mapped[int] = mapped_column(Integer, default=0)
    type: Mapped[str] = mapped_column(String(16), default="License")  # the only type Slurm has


class ResourceCluster(Base):
    """The percentage of resource ``resource_id`` that cluster ``cluster`` may use."""

    __tablename__ = "resource_clusters"

    resource_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(64), primary_key=True)
    percent_allowed: Mapped[int] = mapped_column(Integer, default=0)
