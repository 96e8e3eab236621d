"""The queues' Prometheus gauges, named after KAI Scheduler's (``queue_deserved_gpus``,
``queue_allocated_gpus``, ...) with the resource as a label, since Corral's queues
govern any TRES: ``corral_queue_deserved{queue="teama",resource="gres/gpu"}``.

The numbers are ``core/queuestatus.statuses``, the ones ``corral queues`` and
``GET /corral/v1/queues`` show, read at each scrape. ``corral_queue_limit`` has
a sample only for a queue with a limit of that resource (none: unlimited).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from controller.core.queuestatus import QueueStatus

__all__ = ["GAUGES", "queue_metrics"]

#: Metric name, help text, and the ``ResourceStatus`` field it reads.
GAUGES = (
    ("corral_queue_deserved", "The queue's guaranteed quota (KAI's deserved)", "guarantee"),
    ("corral_queue_fair_share", "The queue's fair share in this pass", "fair_share"),
    ("corral_queue_allocated", "What the queue's running jobs hold", "allocated"),
    ("corral_queue_borrowed", "What the queue holds above its guarantee", "borrowed"),
    ("corral_queue_lent", "The queue's unused guarantee other queues hold", "lent"),
    ("corral_queue_pending", "What the queue's pending jobs ask for", "pending"),
    ("corral_queue_limit", "The queue's limit (no sample: unlimited)", "limit"),
)


def queue_metrics(statuses: Iterable[QueueStatus]) -> Iterator[Metric]:
    """One gauge family per number, a sample per queue and governed resource."""
    shown = list(statuses)
    for name, text, field in GAUGES:
        family = GaugeMetricFamily(name, text, labels=["queue", "resource"])
        for queue in shown:
            for status in queue.resources:
                value = getattr(status, field)
                if value is not None:
                    family.add_metric([queue.name, status.resource], value)
        yield family
    jobs = GaugeMetricFamily(
        "corral_queue_jobs", "The queue's jobs, running or pending", labels=["queue", "state"]
    )
    for queue in shown:
        jobs.add_metric([queue.name, "RUNNING"], queue.running_jobs)
        jobs.add_metric([queue.name, "PENDING"], queue.pending_jobs)
    yield jobs
