"""``scontrol show licenses`` (the Licenses RPC): each license of slurm.conf's
``Licenses=`` and each remote one accounting serves (``Remote=yes``), with its
total, how many jobs hold now and how many active reservations keep for their
jobs (``Reserved=``).

A job holds its licenses from its start until it has ended: running, suspended
(Slurm keeps a suspended job's licenses) or completing, the jobs that hold nodes.
Any authenticated user may read it, as in Slurm: counts per license, no user's data.
Also here: which of a job's licenses its TRES lists carry (sacct's ``license/fluent``).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping

from controller.core.snapshot import ResvView
from controller.holdings import holds_nodes
from controller.model import Job
from corral.config import SlurmConfig
from corral.licenses import parse
from corral.wire import corral_pb2 as pb


def tracked(text: str, conf: SlurmConfig) -> tuple[tuple[str, int], ...]:
    """The licenses of a job's ``text`` that accounting tracks as TRES: those slurm.conf's
    AccountingStorageTRES names (``license/fluent``), as Slurm records only those."""
    names = _tracked(dict(conf.settings).get("AccountingStorageTRES", ""))
    return tuple((name, count) for name, count in parse(text) if name in names)


@functools.lru_cache(maxsize=8)
def _tracked(storage_tres: str) -> frozenset[str]:
    items = (item.strip() for item in storage_tres.split(","))
    return frozenset(item.removeprefix("license/") for item in items if item.startswith("license/"))


def used(jobs: Iterable[Job]) -> dict[str, int]:
    """How many of each license the jobs that hold nodes hold."""
    counts: dict[str, int] = {}
    for job in jobs:
        if job.licenses and holds_nodes(job):
            for name, count in parse(job.licenses):
                counts[name] = counts.get(name, 0) + count
    return counts


def reserved(reservations: Iterable[ResvView], now: int) -> dict[str, int]:
    """How many of each license the reservations active at ``now`` keep for their jobs."""
    counts: dict[str, int] = {}
    for resv in reservations:
        if resv.start <= now < resv.end:
            for name, count in resv.licenses:
                counts[name] = counts.get(name, 0) + count
    return counts


def licenses_reply(
    conf: SlurmConfig,
    jobs: Iterable[Job],
    kept: Mapping[str, int] | None = None,
    remote: Collection[str] = (),
) -> pb.LicensesReply:
    """Every configured license, sorted by name as scontrol lists them; ``kept``: what
    active reservations keep of each (``reserved``); ``remote``: the names accounting
    serves (``Remote=yes``)."""
    held = used(jobs)
    kept = kept or {}
    return pb.LicensesReply(
        licenses=[
            pb.LicenseInfo(
                name=name,
                total=total,
                used=held.get(name, 0),
                reserved=kept.get(name, 0),
                remote=name in remote,
            )
            for name, total in sorted(conf.licenses)
        ]
    )
