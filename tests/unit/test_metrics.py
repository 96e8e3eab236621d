"""The metrics endpoint's pieces: where it listens, and histograms kept as counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.diag import Buckets
from controller.metrics import DEFAULT_PORT, _histogram, metrics_address
from corral import config


def _conf(tmp_path: Path, *lines: str) -> config.SlurmConfig:
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=c\nSlurmctldHost=ctl(10.0.0.1)\nNodeName=n1 CPUs=2\n"
        "PartitionName=p Nodes=ALL\n" + "".join(f"{line}\n" for line in lines)
    )
    return config.load(str(tmp_path / "slurm.conf"))


def test_metrics_listen_only_when_asked(tmp_path: Path) -> None:
    assert metrics_address(_conf(tmp_path)) is None
    asked = _conf(tmp_path, "MetricsType=metrics/openmetrics")
    assert metrics_address(asked) == ("10.0.0.1", DEFAULT_PORT)
    there = _conf(
        tmp_path, "MetricsType=metrics/openmetrics", "MetricsParameters=port=9100,address=0.0.0.0"
    )
    assert metrics_address(there) == ("0.0.0.0", 9100)
    bad = _conf(tmp_path, "MetricsType=metrics/openmetrics", "MetricsParameters=port=http")
    with pytest.raises(ValueError, match="bad MetricsParameters value 'port=http'"):
        metrics_address(bad)


def test_histograms_are_cumulative_per_bound() -> None:
    kept = Buckets((0.1, 1.0))
    for value in (0.05, 0.5, 0.7, 3.0):
        kept.observe(value)
    assert kept.counts == [1, 2, 1] and kept.total == pytest.approx(4.25)
    family = _histogram("x_seconds", "x", [({"method": "Submit"}, kept)])
    buckets = [(s.labels["le"], s.value) for s in family.samples if s.name == "x_seconds_bucket"]
    assert buckets == [("0.1", 1.0), ("1.0", 3.0), ("+Inf", 4.0)]
    assert all(s.labels["method"] == "Submit" for s in family.samples)
    empty = _histogram("y", "y", [({}, Buckets((1.0,)))])
    assert [s.value for s in empty.samples if s.name == "y_bucket"] == [0.0, 0.0]


def test_queue_gauges_carry_each_queue_and_resource() -> None:
    from controller.core.queuestatus import QueueStatus, ResourceStatus
    from controller.queuemetrics import queue_metrics

    gpu = ResourceStatus("gres/gpu", 4, None, 6, 6, 2, 0, 1)
    cpu = ResourceStatus("cpu", 0, 8, 3, 2, 2, 0, 0)
    team = QueueStatus("teama", "root", 1, 0, 1.0, 3, 1, (gpu, cpu))
    families = {f.name: f for f in queue_metrics([team])}
    samples = {
        (name, s.labels.get("resource", s.labels.get("state"))): s.value
        for name, f in families.items()
        for s in f.samples
    }
    assert samples[("corral_queue_deserved", "gres/gpu")] == 4
    assert samples[("corral_queue_allocated", "gres/gpu")] == 6
    assert samples[("corral_queue_borrowed", "gres/gpu")] == 2
    assert samples[("corral_queue_fair_share", "cpu")] == 3
    assert samples[("corral_queue_limit", "cpu")] == 8
    assert ("corral_queue_limit", "gres/gpu") not in samples  # unlimited: no sample
    assert samples[("corral_queue_jobs", "RUNNING")] == 3
    assert all(s.labels["queue"] == "teama" for f in families.values() for s in f.samples)
