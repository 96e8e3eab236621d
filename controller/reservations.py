"""Advance reservations: nodes set aside for some users or accounts over a time window.

``ReservationBook`` owns the cluster's reservations: ``scontrol create``,
``update`` and ``delete reservation`` go through it, the store journals it,
and the scheduling core sees each reservation as a ``ResvView`` (what
``core/resvwindows.py`` does with it). The rules are slurmctld's:

* A reservation names users and/or accounts (``-name`` excludes one); a job
  runs in it with ``--reservation`` when its user or its account is allowed.
* Nodes are named (``Nodes=``, ``ALL``) or counted (``NodeCnt=``, taken from
  ``PartitionName=`` or the default partition) among nodes that are up and in
  no other reservation at that time. Nodes running jobs past the start make
  the request "busy" unless ``Flags=MAINT`` or ``IGNORE_JOBS``; two
  reservations share no node at the same time unless one has ``OVERLAP`` or
  ``MAINT``.
* When a reservation ends, or is deleted, pending jobs still asking for it are
  held (reason ReservationDeleted) unless ``NO_HOLD_JOBS_AFTER_END``; jobs
  still running in it are timed out by their node agents at its end. A
  reservation with running jobs cannot be deleted.
* ``Licenses=`` keeps some of slurm.conf's licenses for its jobs over its time:
  no more than the reservations overlapping it leave, used by its jobs and by no
  other job (``core/licensebook.py``). A reservation of licenses alone has no
  nodes and needs ``Flags=ANY_NODES`` (22.05's spelling; ``LICENSE_ONLY`` is read
  as it): its jobs run in its window on any node (``core/resvwindows.py``).
  Licenses without nodes and without the flag are Slurm's "Invalid node name
  specified"; the flag with neither is its "must be specified".
"""

from __future__ import annotations

import json
import pwd
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from controller.core.snapshot import ResvView
from controller.journal import record_from_row
from corral import errors, hostlist, timefmt
from corral.errors import SlurmError
from corral.licenses import LicenseSyntaxError, format_licenses
from corral.licenses import parse as parse_licenses

#: Slurm's flags in the order ``scontrol show reservation`` prints them.
FLAG_ORDER = (
    "MAINT",
    "OVERLAP",
    "IGNORE_JOBS",
    "SPEC_NODES",
    "ALL_NODES",
    "ANY_NODES",
    "PART_NODES",
    "NO_HOLD_JOBS_AFTER_END",
)
#: Flags Slurm has that Corral does not implement (refused, not ignored).
UNSUPPORTED_FLAGS = frozenset(
    {
        "FLEX", "HOURLY", "DAILY", "WEEKDAY", "WEEKEND", "WEEKLY", "STATIC", "TIME_FLOAT",
        "REPLACE", "REPLACE_DOWN", "PURGE_COMP", "MAGNETIC", "USER_DELETE", "FIRST_CORES",
        "NO_MAINT", "NO_HOURLY", "NO_DAILY", "NO_WEEKLY",
    }
)  # fmt: skip
#: Flags read as another (scontrol(1): "LICENSE_ONLY  See ANY_NODES").
FLAG_ALIASES = {"LICENSE_ONLY": "ANY_NODES"}
#: Settings a user may give (the CLI turns Slurm's abbreviations into these).
SETTINGS = frozenset(
    {
        "reservationname", "starttime", "endtime", "duration", "flags", "nodecnt", "nodes",
        "partitionname", "users", "accounts", "comment", "licenses",
    }
)  # fmt: skip
#: The reach of Duration=UNLIMITED (Slurm: a year).
UNLIMITED_SECONDS = 365 * 86400


@dataclass(frozen=True, slots=True)
class Reservation:
    id: int
    name: str
    nodes: tuple[str, ...]
    start: int
    end: int
    cores: int = 0  # CPUs of its nodes
    flags: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    partition: str = ""
    comment: str = ""
    licenses: str = ""  # Licenses=: kept for its jobs over its time ("fluent:2")

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def active(self, now: int) -> bool:
        return self.start <= now < self.end

    def allows(self, user: str, account: str) -> bool:
        """Whether a job of ``user`` under ``account`` may run in it."""
        if f"-{user}" in self.users or (account and f"-{account}" in self.accounts):
            return False
        users = [u for u in self.users if not u.startswith("-")]
        accounts = [a for a in self.accounts if not a.startswith("-")]
        if not users and not accounts:  # only exclusions: everyone else
            return True
        return user in users or (bool(account) and account in accounts)

    def view(self) -> ResvView:
        held = parse_licenses(self.licenses) if self.licenses else ()
        any_nodes = self.has("ANY_NODES")
        return ResvView(self.name, frozenset(self.nodes), self.start, self.end, held, any_nodes)

    def shares_nodes_with(self, other: Reservation) -> bool:
        """Whether the two may not coexist: common nodes at a common time."""
        if self.has("OVERLAP") or self.has("MAINT") or other.has("OVERLAP") or other.has("MAINT"):
            return False
        overlap_in_time = self.start < other.end and other.start < self.end
        return overlap_in_time and not set(self.nodes).isdisjoint(other.nodes)


@dataclass(frozen=True, slots=True)
class Cluster:
    """What a reservation is checked against, as the store knows it now."""

    nodes: Mapping[str, int]  # every node, in configuration order -> CPUs
    usable: frozenset[str]  # up and not drained
    partitions: Mapping[str, tuple[str, ...]]
    default_partition: str
    # Running jobs: (nodes, when their limit ends (0: never), reservation name).
    running: Sequence[tuple[tuple[str, ...], int, str]] = ()
    accounts: frozenset[str] | None = None  # known accounts (None: not checked)
    licenses: Mapping[str, int] = field(default_factory=dict)  # slurm.conf Licenses= totals


def _invalid(message: str) -> SlurmError:
    return SlurmError(errors.EINVAL, message)


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


@dataclass
class _Request:
    """A create or update request, read from scontrol's settings."""

    settings: Mapping[str, str]
    now: int
    given: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        unknown = set(self.settings) - SETTINGS - {"flags+", "flags-"}
        if unknown:
            raise _invalid(f"Unknown parameter {sorted(unknown)[0]}")

    def time(self, key: str) -> int | None:
        text = self.settings.get(key)
        if text is None:
            return None
        try:
            return timefmt.parse_timestamp(text, self.now)
        except ValueError:
            label = "start" if key == "starttime" else "end"
            raise _invalid(f"Invalid {label} time {text}") from None

    def duration(self) -> int | None:
        text = self.settings.get("duration")
        if text is None:
            return None
        try:
            minutes = timefmt.parse_duration(text)
        except ValueError:
            raise _invalid(f"Invalid duration {text}") from None
        return UNLIMITED_SECONDS if minutes < 0 else minutes * 60

    def flags(self, current: Iterable[str] = ()) -> tuple[str, ...]:
        """``current`` with ``Flags=``/``Flags+=`` added and ``Flags-=`` taken away
        (the node flags SPEC_NODES, ALL_NODES, PART_NODES follow the nodes)."""
        flags = set(current)
        for key in ("flags", "flags+", "flags-"):
            if key not in self.settings:
                continue
            words = {FLAG_ALIASES.get(w.upper(), w.upper()) for w in _names(self.settings[key])}
            for word in words:
                if word in UNSUPPORTED_FLAGS:
                    raise SlurmError(errors.ESLURM_NOT_SUPPORTED, f"Flag {word} is not supported")
                if word not in FLAG_ORDER:
                    raise _invalid(f"Error parsing flags {self.settings[key]}")
            flags = flags - words if key == "flags-" else flags | words
        return tuple(f for f in FLAG_ORDER if f in flags)


class ReservationBook:
    """The cluster's reservations by name, and the next reservation id."""

    def __init__(self) -> None:
        self.by_name: dict[str, Reservation] = {}
        self.next_id = 1

    # ------------------------------------------------------------ journal form

    def to_json(self) -> str:
        return json.dumps(
            {"next_id": self.next_id, "reservations": [asdict(r) for r in self.by_name.values()]}
        )

    @classmethod
    def from_json(cls, text: str) -> ReservationBook:
        data = json.loads(text)
        book = cls()
        book.next_id = int(data["next_id"])
        for row in data["reservations"]:
            resv = record_from_row(Reservation, row)
            book.by_name[resv.name] = resv
        return book

    # ------------------------------------------------------------ queries

    def views(self) -> tuple[ResvView, ...]:
        return tuple(r.view() for r in self.by_name.values())

    def get(self, name: str) -> Reservation:
        resv = self.by_name.get(name)
        if resv is None:
            raise SlurmError(errors.ESLURM_RESERVATION_INVALID)
        return resv

    def admit(self, name: str, user: str, account: str) -> None:
        """A submission asking for reservation ``name``: SlurmError if it may not."""
        if not self.get(name).allows(user, account):
            raise SlurmError(errors.ESLURM_RESERVATION_ACCESS)

    # ------------------------------------------------------------ changes

    def create(self, settings: Mapping[str, str], cluster: Cluster, now: int) -> Reservation:
        request = _Request(settings, now)
        start = request.time("starttime")
        if start is None:
            raise _invalid("A start time must be given.  No reservation created.")
        start = max(start, now)
        end = request.time("endtime")
        duration = request.duration()
        if end is None and duration is None:
            raise _invalid("An end time or duration must be given.  No reservation created.")
        if end is not None and duration is not None and end != start + duration:
            raise _invalid("StartTime + Duration does not equal EndTime.  No reservation created.")
        end = end if end is not None else start + (duration or 0)
        if start > end:
            raise _invalid("Start time cannot be after end time.  No reservation created.")
        users, accounts = _names(settings.get("users", "")), _names(settings.get("accounts", ""))
        if not users and not accounts:
            raise SlurmError(errors.ESLURM_RESERVATION_EMPTY)
        name = settings.get("reservationname", "").strip()
        if name in self.by_name:
            raise SlurmError(errors.ESLURM_RESERVATION_NAME_DUP)
        resv = Reservation(
            id=self.next_id,
            name=name or f"{(users or accounts)[0].lstrip('-')}_{self.next_id}",
            nodes=(),
            start=start,
            end=end,
            flags=request.flags(),
            users=users,
            accounts=accounts,
            partition=settings.get("partitionname", ""),
            comment=settings.get("comment", ""),
        )
        resv = self._licensed(resv, settings, cluster)
        resv = self._settled(resv, settings, cluster, creating=True)
        self.next_id += 1
        self.by_name[resv.name] = resv
        return resv

    def update(self, settings: Mapping[str, str], cluster: Cluster, now: int) -> Reservation:
        name = settings.get("reservationname", "")
        old = self.get(name)
        request = _Request(settings, now)
        start = request.time("starttime")
        end = request.time("endtime")
        duration = request.duration()
        new_start = old.start if start is None else max(start, now)
        if start is not None and old.start <= now and start != old.start:
            raise SlurmError(errors.EINVAL, "Reservation already started")
        if end is None:
            end = new_start + duration if duration is not None else old.end
        if new_start > end:
            raise _invalid("Start time cannot be after end time.  No reservation update.")
        resv = replace(
            old,
            start=new_start,
            end=end,
            flags=request.flags(old.flags),
            users=_names(settings["users"]) if "users" in settings else old.users,
            accounts=_names(settings["accounts"]) if "accounts" in settings else old.accounts,
            partition=settings.get("partitionname", old.partition),
            comment=settings.get("comment", old.comment),
        )
        if not resv.users and not resv.accounts:
            raise SlurmError(errors.ESLURM_RESERVATION_EMPTY)
        resv = self._licensed(resv, settings, cluster)
        resv = self._settled(resv, settings, cluster, creating=False)
        self.by_name[name] = resv
        return resv

    def delete(self, name: str, cluster: Cluster) -> Reservation:
        resv = self.get(name)
        if any(job_resv == name for _, _, job_resv in cluster.running):
            raise SlurmError(errors.ESLURM_RESERVATION_BUSY)
        del self.by_name[name]
        return resv

    def ended(self, now: int) -> list[Reservation]:
        """Remove and return the reservations whose end has come."""
        gone = [r for r in self.by_name.values() if r.end <= now]
        for resv in gone:
            del self.by_name[resv.name]
        return gone

    # ------------------------------------------------------------ checks

    def _licensed(
        self, resv: Reservation, settings: Mapping[str, str], cluster: Cluster
    ) -> Reservation:
        """``resv`` holding the ``Licenses=`` asked for: each of slurm.conf's, and no
        more than the reservations overlapping it in time leave (ESLURM_INVALID_LICENSES)."""
        if "licenses" not in settings:
            return resv
        try:
            asked = parse_licenses(settings["licenses"]) if settings["licenses"] else ()
        except LicenseSyntaxError:
            raise SlurmError(errors.ESLURM_INVALID_LICENSES) from None
        for name, count in asked:
            kept = sum(
                held
                for other in self.by_name.values()
                if other.name != resv.name and other.start < resv.end and resv.start < other.end
                for held_name, held in other.view().licenses
                if held_name == name
            )
            if kept + count > cluster.licenses.get(name, 0):
                raise SlurmError(errors.ESLURM_INVALID_LICENSES)
        return replace(resv, licenses=format_licenses(asked))

    def _settled(
        self, resv: Reservation, settings: Mapping[str, str], cluster: Cluster, *, creating: bool
    ) -> Reservation:
        """``resv`` with its nodes chosen and every rule checked (SlurmError if one fails)."""
        for user in resv.users:
            try:
                pwd.getpwnam(user.lstrip("-"))
            except KeyError:
                raise SlurmError(errors.ESLURM_USER_ID_MISSING) from None
        if cluster.accounts is not None:
            for account in resv.accounts:
                if account.lstrip("-") not in cluster.accounts:
                    raise SlurmError(errors.ESLURM_INVALID_ACCOUNT)
        if resv.partition and resv.partition not in cluster.partitions:
            raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME)
        others = [r for r in self.by_name.values() if r.name != resv.name]
        flags = set(resv.flags)
        if "nodes" in settings:
            text = settings["nodes"].strip()
            if text.upper() == "ALL":
                pool = cluster.partitions.get(resv.partition, ()) if resv.partition else ()
                nodes = tuple(pool or cluster.nodes)
                flags |= {"ALL_NODES"} | ({"PART_NODES"} if resv.partition else set())
            else:
                try:
                    nodes = tuple(hostlist.expand(text))
                except ValueError:
                    raise SlurmError(errors.ESLURM_INVALID_NODE_NAME) from None
                if not nodes or any(n not in cluster.nodes for n in nodes):
                    raise SlurmError(errors.ESLURM_INVALID_NODE_NAME)
                flags |= {"SPEC_NODES"}
                flags -= {"ALL_NODES", "PART_NODES"}
            self._check_free(resv, nodes, cluster, others)
        elif "nodecnt" in settings:
            count = settings["nodecnt"].strip()
            if not count.isdigit() or int(count) < 1:
                raise _invalid(f'"{count}" is not a valid node count')
            nodes = self._pick(resv, int(count), cluster, others)
            flags -= {"SPEC_NODES", "ALL_NODES", "PART_NODES"}
        elif creating and not resv.partition and resv.has("ANY_NODES"):
            if not resv.licenses:
                raise _invalid(
                    "CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be "
                    "specified.  No reservation created."
                )
            nodes = ()  # licenses alone: its jobs use any node
        elif creating:
            if not resv.partition:
                if resv.licenses:
                    raise SlurmError(errors.ESLURM_INVALID_NODE_NAME)
                raise _invalid(
                    "CoreCnt, Nodes, NodeCnt, TRES or Watts must be specified.  "
                    "No reservation created."
                )
            nodes = tuple(cluster.partitions[resv.partition])
            flags |= {"ALL_NODES", "PART_NODES"}
            self._check_free(resv, nodes, cluster, others)
        else:  # an update that keeps the nodes: the new times must still fit them
            nodes = resv.nodes
            self._check_free(resv, nodes, cluster, others)
        ordered = tuple(n for n in cluster.nodes if n in set(nodes))
        return replace(
            resv,
            nodes=ordered,
            cores=sum(cluster.nodes[n] for n in ordered),
            flags=tuple(f for f in FLAG_ORDER if f in flags),
        )

    def _busy(self, resv: Reservation, node: str, cluster: Cluster) -> bool:
        """Whether a job not in ``resv`` runs on ``node`` past the reservation's start."""
        if resv.has("MAINT") or resv.has("IGNORE_JOBS"):
            return False
        return any(
            node in nodes and job_resv != resv.name and (not end or end > resv.start)
            for nodes, end, job_resv in cluster.running
        )

    def _check_free(
        self,
        resv: Reservation,
        nodes: Sequence[str],
        cluster: Cluster,
        others: Iterable[Reservation],
    ) -> None:
        trial = replace(resv, nodes=tuple(nodes))
        if any(trial.shares_nodes_with(other) for other in others):
            raise SlurmError(errors.ESLURM_RESERVATION_OVERLAP)
        if any(self._busy(resv, n, cluster) for n in nodes):
            raise SlurmError(errors.ESLURM_NODES_BUSY)

    def _pick(
        self, resv: Reservation, count: int, cluster: Cluster, others: list[Reservation]
    ) -> tuple[str, ...]:
        """``count`` usable nodes of the partition, in no other reservation then, not busy."""
        partition = resv.partition or cluster.default_partition
        if partition not in cluster.partitions:
            raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME)
        chosen: list[str] = []
        for node in cluster.partitions[partition]:
            if node not in cluster.usable or self._busy(resv, node, cluster):
                continue
            trial = replace(resv, nodes=(node,))
            if any(trial.shares_nodes_with(other) for other in others):
                continue
            chosen.append(node)
            if len(chosen) == count:
                return tuple(chosen)
        raise SlurmError(errors.ESLURM_NODES_BUSY)
