"""One replay on a configured cluster (``-f slurm.conf``), and its jobs' groups.

``site_of`` loads what a ``compare.Setup`` names (slurm.conf and its
``--set`` lines, the accounting dump, the map); ``replay_site`` settles who
each trace job is, skips what the site would refuse (counted with the
replay's own skips) and replays the rest on a ``SiteCluster``;
``groups`` names each replayed job's partition and account for the reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from controller.sim import sitemap
from controller.sim.replay import JobResult, Progress, Replay, replay
from controller.sim.sitecluster import SiteCluster
from controller.sim.siteconf import Site, load
from controller.sim.swf import Record, Trace

if TYPE_CHECKING:
    from controller.sim.compare import Setup

__all__ = ["groups", "replay_site", "site_of"]


def site_of(setup: Setup) -> Site:
    """The site ``setup`` names (it has a ``conf``)."""
    assert setup.conf is not None
    mapping = sitemap.load(setup.sitemap) if setup.sitemap is not None else None
    return load(setup.conf, setup.sets, setup.accounts, mapping)


def replay_site(
    site: Site,
    trace: Trace,
    policy: str,
    *,
    timeline: bool = False,
    progress: Callable[[Progress], None] | None = None,
) -> Replay:
    """``trace`` replayed on ``site`` under ``policy``."""
    kept, refused = site.prepare(trace)
    biggest = max(node.cpus for node in site.conf.nodes)

    def make(records: list[Record]) -> SiteCluster:
        return SiteCluster(site, records)

    result = replay(
        kept,
        len(site.conf.nodes),
        biggest,  # with the node count, at least the cluster's CPUs: prepare did the skipping
        policy,
        timeline=timeline,
        progress=progress,
        cluster=make,
        backfill=site.backfill,
    )
    skipped = Counter(result.skipped)
    skipped.update(refused)
    return replace(result, skipped=dict(skipped))


def groups(site: Site, trace: Trace) -> dict[str, Callable[[JobResult], str]]:
    """Each replayed job's partition and account ("(none)" without one), by trace number."""
    who = {record.number: site.identity(record) for record in trace.records}
    return {
        "partition": lambda job: who[job.number].partition,
        "account": lambda job: who[job.number].account or "(none)",
    }
