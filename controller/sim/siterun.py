"""One replay on a configured cluster (``-f slurm.conf``), and its jobs' groups.

``site_of`` loads what a ``Setup`` names (slurm.conf and its
``--set`` lines, the accounting dump, the map); ``replay_site`` settles who
each trace job is, skips what the site would refuse (counted with the
replay's own skips) and replays the rest on a ``SiteCluster``;
``groups`` names each replayed job's partition and account for the reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from controller.sim import sitemap
from controller.sim.replay import JobResult, Progress, Replay, replay
from controller.sim.sitecluster import SiteCluster
from controller.sim.siteconf import Site, load
from controller.sim.swf import Record, Trace

__all__ = ["CLOCK_OFFSET", "Setup", "groups", "replay_site", "site_of"]

#: Seconds added to the trace's clock while the controller's code runs on it: that
#: code reads a time of 0 as "never" (a job that has not started, usage whose decay
#: has not begun, a job that accrues no age), as Slurm's does, whose clock never
#: reads 0; a trace's clock starts there. Results are given back on the trace's clock.
CLOCK_OFFSET = 1


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything one replay needs, as a worker process receives it
    (``compare.run_all``) or the command line gives it."""

    trace: str
    start: int = 0
    stop: int | None = None
    nodes: int | None = None  # None: the trace header's (ignored with ``conf``)
    cpus_per_node: int | None = None
    conf: str | None = None  # -f slurm.conf
    sets: tuple[str, ...] = ()
    accounts: str | None = None  # a sacctmgr dump file
    sitemap: str | None = None  # --map
    timeline: bool = False


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
    kept = replace(kept, records=tuple(_shifted(r, CLOCK_OFFSET) for r in kept.records))
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
        params=site.backfill,
    )
    skipped = Counter(result.skipped)
    skipped.update(refused)
    back = -CLOCK_OFFSET
    return replace(
        result,
        skipped=dict(skipped),
        jobs=tuple(
            replace(j, submit=j.submit + back, start=j.start + back, end=j.end + back)
            for j in result.jobs
        ),
        timeline=tuple((t + back, pending, busy) for t, pending, busy in result.timeline),
    )


def _shifted(record: Record, seconds: int) -> Record:
    """``record`` submitted ``seconds`` later (one the replay skips for its negative
    submit time stays as it is)."""
    return replace(record, submit=record.submit + seconds) if record.submit >= 0 else record


def groups(site: Site, trace: Trace) -> dict[str, Callable[[JobResult], str]]:
    """Each replayed job's partition and account ("(none)" without one), by trace number."""
    who = {record.number: site.identity(record) for record in trace.records}
    return {
        "partition": lambda job: who[job.number].partition,
        "account": lambda job: who[job.number].account or "(none)",
    }
