"""The gateway's own Prometheus metrics, at ``GET /metrics`` (no token needed,
as the controller's endpoint): requests by method, route and status, and
their durations by route."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE", "RequestMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: Seconds: from a ping's milliseconds to a 10,000-job listing's second.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class RequestMetrics:
    """One registry per gateway, so that tests can run several in one process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "corral_restd_requests",
            "HTTP requests answered, by method, route and status",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.duration = Histogram(
            "corral_restd_request_parse_seconds",
            "Time to answer a request, by route",
            ("route",),
            buckets=BUCKETS,
            registry=self.registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.duration.labels(route).observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)
