"""The controller's Prometheus metrics, served on a port of their own.

Enabled by ``MetricsType=metrics/openmetrics`` in slurm.conf; the port and
address come from ``MetricsParameters=port=N[,address=A]`` (default
``DEFAULT_PORT`` on the controller's address). Nothing here keeps state:
every scrape reads the owners (the job store, sdiag's counters in
``diag.py``, accounting's outbox, the queues: ``queuemetrics.py``), so the
numbers are the ones ``squeue``, ``sinfo``, ``sdiag`` and ``corral queues``
show at that moment. prometheus-client writes the
text format; the few lines of HTTP are served on the controller's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from controller import views
from controller.core.queuestatus import statuses
from controller.diag import AgentStats, Buckets, RpcStats, SchedulerStats
from controller.jobstate import JobState
from controller.queuemetrics import queue_metrics
from controller.store import JobStore
from corral.config import SlurmConfig

__all__ = ["DEFAULT_PORT", "ControllerCollector", "metrics_address", "serve_metrics"]

log = logging.getLogger(__name__)

#: The metrics port when MetricsParameters names none.
DEFAULT_PORT = 6830


def metrics_address(conf: SlurmConfig) -> tuple[str, int] | None:
    """(address, port) to serve metrics on, or None when MetricsType does not ask."""
    settings = dict(conf.settings)
    if settings.get("MetricsType", "").lower() != "metrics/openmetrics":
        return None
    params = dict(
        item.partition("=")[::2]
        for item in settings.get("MetricsParameters", "").split(",")
        if item
    )
    port = params.get("port", str(DEFAULT_PORT))
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bad MetricsParameters value 'port={port}': use 0 to 65535")
    return params.get("address", conf.controller_host[1]), int(port)


def _histogram(
    name: str, doc: str, series: list[tuple[dict[str, str], Buckets]]
) -> HistogramMetricFamily:
    """A histogram family of ``series`` (labels, counts), as Prometheus wants them:
    cumulative per bound."""
    family = HistogramMetricFamily(name, doc, labels=list(series[0][0]) if series else [])
    for labels, buckets in series:
        cumulative, running = [], 0
        counts = buckets.counts or [0] * (len(buckets.bounds) + 1)
        for bound, count in zip([*map(str, buckets.bounds), "+Inf"], counts, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        family.add_metric(list(labels.values()), cumulative, buckets.total)
    return family


class ControllerCollector(Collector):
    """Reads the controller's state at each scrape."""

    def __init__(
        self,
        store: JobStore,
        scheduler: SchedulerStats,
        rpcs: Callable[[], RpcStats],
        backlog: Callable[[], int],
        agents: AgentStats,
    ) -> None:
        self.store = store
        self.agents = agents
        self.scheduler = scheduler
        self.rpcs = rpcs  # sdiag -r replaces the RpcStats: always ask for the current one
        self.backlog = backlog

    def collect(self) -> Iterator[Metric]:
        yield from self._jobs()
        yield from self._nodes()
        yield from self._scheduler()
        yield from self._rpcs()
        if self.store.conf.queue_conf is not None:
            view = self.store.snapshot().queues
            if view is not None:
                yield from queue_metrics(statuses(view))
        backlog = GaugeMetricFamily(
            "corral_accounting_backlog", "Accounting records not yet stored by corral-dbd"
        )
        backlog.add_metric([], self.backlog())
        yield backlog

    def _jobs(self) -> Iterator[Metric]:
        jobs = list(self.store.jobs.values())
        by_state = Counter(
            (j.state.name, j.partition or ",".join(j.partitions), j.user) for j in jobs
        )
        family = GaugeMetricFamily(
            "corral_jobs",
            "Jobs the controller holds, by state",
            labels=["state", "partition", "user"],
        )
        for (state, partition, user), count in sorted(by_state.items()):
            family.add_metric([state, partition, user], count)
        yield family
        reasons = Counter(j.reason.value for j in jobs if j.state is JobState.PENDING)
        pending = GaugeMetricFamily(
            "corral_jobs_pending", "Pending jobs by the reason they wait", labels=["reason"]
        )
        for reason, count in sorted(reasons.items()):
            pending.add_metric([reason], count)
        yield pending
        counters = CounterMetricFamily(
            "corral_job_events", "Jobs since the controller started (sdiag's)", labels=["event"]
        )
        for event, count in sorted(self.store.counters.items()):
            counters.add_metric([event], count)
        yield counters

    def _nodes(self) -> Iterator[Metric]:
        states: Counter[str] = Counter()
        cpus = {"allocated": 0, "idle": 0}
        memory = {"allocated": 0, "idle": 0}
        gpus = {"allocated": 0, "idle": 0}
        for conf in self.store.conf.nodes:
            info = views.node_info(conf.name, self.store)
            states["+".join([info.state, *(f for f in info.state_flags if f == "DRAIN")])] += 1
            cpus["allocated"] += info.alloc_cpus
            cpus["idle"] += max(info.cpus - info.alloc_cpus, 0)
            memory["allocated"] += info.alloc_memory << 20
            memory["idle"] += max(info.real_memory - info.alloc_memory, 0) << 20
            total = len(self.store.gpu_numbering(conf.name))
            used = self.store.gpus_held(conf.name)
            gpus["allocated"] += used
            gpus["idle"] += max(total - used, 0)
        family = GaugeMetricFamily("corral_nodes", "Nodes by state", labels=["state"])
        for state, count in sorted(states.items()):
            family.add_metric([state], count)
        yield family
        for name, doc, values in (
            ("corral_cpus", "CPUs allocated and idle", cpus),
            ("corral_memory_bytes", "Memory allocated and idle", memory),
            ("corral_gpus", "GPUs allocated and idle", gpus),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["state"])
            for state, value in values.items():
                gauge.add_metric([state], value)
            yield gauge

    def _scheduler(self) -> Iterator[Metric]:
        s = self.scheduler
        yield _histogram(
            "corral_scheduler_pass_seconds", "Scheduling pass durations", [({}, s.pass_seconds)]
        )
        yield _histogram(
            "corral_backfill_pass_seconds", "Backfill pass durations", [({}, s.bf_seconds)]
        )
        yield _histogram(
            "corral_jobs_started_per_pass", "Jobs started by each pass", [({}, s.started)]
        )
        yield _histogram(
            "corral_agent_heartbeat_seconds",
            "Time the controller spends on one agent heartbeat (all its nodes marked heard)",
            [({}, self.agents.heartbeat)],
        )
        longest = GaugeMetricFamily(
            "corral_agent_heartbeat_max_seconds", "The longest agent heartbeat handling so far"
        )
        longest.add_metric([], self.agents.heartbeat_max_s)
        yield longest

    def _rpcs(self) -> Iterator[Metric]:
        rpcs = self.rpcs()
        calls = CounterMetricFamily("corral_rpc", "Client requests by method", labels=["method"])
        for method, (count, _) in sorted(rpcs.by_method.items()):
            calls.add_metric([method], count)
        yield calls
        series = [({"method": m}, b) for m, b in sorted(rpcs.latency.items())]
        yield _histogram("corral_rpc_seconds", "Client request durations", series)


async def serve_metrics(collector: Collector, address: str, port: int) -> asyncio.Server:
    """Serve ``collector`` as Prometheus text at ``http://address:port/metrics`` (port
    0: any free one). On the event loop, so a scrape reads the store between two of
    its changes, never in the middle of one."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            path = request.split(b" ", 2)[1] if request.count(b" ") >= 2 else b""
            if path.split(b"?")[0] in (b"/metrics", b"/"):
                status, body = b"200 OK", generate_latest(registry)
            else:
                status, body = b"404 Not Found", b"not found: try /metrics\n"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: " + CONTENT_TYPE_LATEST.encode()
                + b"\r\nContent-Length: " + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n" + body
            )  # fmt: skip
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # a scraper that went away, or not HTTP: nothing to answer
        finally:
            writer.close()

    server = await asyncio.start_server(answer, address, port)
    bound = server.sockets[0].getsockname()[1]
    log.info("metrics: http://%s:%d/metrics", address, bound)
    return server
