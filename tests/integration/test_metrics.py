"""The controller's Prometheus endpoint, scraped after a small workload: its numbers are
the ones squeue, sinfo and sdiag show."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cluster import Cluster, free_port


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def test_metrics_match_what_squeue_and_sinfo_say(make_cluster: Callable[..., Cluster]) -> None:
    port = free_port()
    settings = ("MetricsType=metrics/openmetrics", f"MetricsParameters=port={port}")
    cluster = make_cluster(nodes=2, settings=settings)
    running = [cluster.sbatch("-N1", "--exclusive", "--wrap", "sleep 60") for _ in range(2)]
    for job in running:
        cluster.wait_state(job, {"RUNNING"})
    waiting = cluster.sbatch("-N1", "--exclusive", "--wrap", "true")
    held = cluster.sbatch("-H", "--wrap", "true")
    cluster.wait_for(lambda: cluster.job(waiting)["reason"] == "Resources", 10, "no reason")
    samples = _scrape(port)
    by_state: dict[str, float] = {}
    for labels, value in samples["corral_jobs"]:
        assert labels["partition"] == "debug" and labels["user"]
        by_state[labels["state"]] = by_state.get(labels["state"], 0) + value
    squeue = cluster.run("squeue", "-h", "-o", "%T").stdout.split()
    assert by_state == {state: squeue.count(state) for state in set(squeue)}
    reasons = {labels["reason"]: value for labels, value in samples["corral_jobs_pending"]}
    assert reasons == {"Resources": 1, "JobHeldUser": 1}
    nodes = {labels["state"]: value for labels, value in samples["corral_nodes"]}
    assert nodes == {"ALLOCATED": 2}
    cpus = {labels["state"]: value for labels, value in samples["corral_cpus"]}
    total = int(cluster.run("sinfo", "-h", "-o", "%C").stdout.strip().split("/")[-1])
    assert cpus["allocated"] + cpus["idle"] == total and cpus["idle"] == 0
    passes = dict((s[0].get("le"), s[1]) for s in samples["corral_scheduler_pass_seconds_bucket"])
    assert passes["+Inf"] >= 1
    submits = {labels["method"]: value for labels, value in samples["corral_rpc_total"]}
    assert submits["Submit"] >= 4
    assert samples["corral_accounting_backlog"] == [({}, 0.0)]
    cluster.run("scancel", *map(str, [*running, waiting, held]))
