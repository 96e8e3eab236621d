"""Accounting end to end: controller outbox -> corral-dbd -> SQLite or MariaDB -> sacct's query.

The daemons are real (controller, node agent, corral-dbd); the database is a
fresh SQLite file or a fresh MariaDB database per test (tests/databases.py).
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.errors import SlurmError
from tests.databases import BACKENDS, fresh_database
from tests.integration.cluster import Cluster
from tests.tcpcut import Relay

SETTINGS = ("KillWait=2", "SlurmdTimeout=6")


@pytest.fixture(params=BACKENDS)
def accounted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """Two nodes and a corral-dbd on a fresh database of each backend."""
    with fresh_database(request.param, tmp_path) as url:
        cluster = Cluster(tmp_path / "c", 2, SETTINGS, accounting=True, database=url)
        try:
            yield cluster.start()
        finally:
            cluster.stop()


def history(cluster: Cluster, **query: Any) -> list[dict[str, Any]]:
    return list(cluster.client.call("History", {"filter": query})["jobs"])


def backlog(cluster: Cluster) -> int:
    """sdiag's DBD Agent queue size: records not yet in dbd."""
    for line in cluster.run("sdiag").stdout.splitlines():
        if line.startswith("DBD Agent queue size:"):
            return int(line.split(":")[1])
    raise AssertionError("sdiag printed no DBD Agent queue size")


def test_finished_jobs_keep_their_final_states(accounted: Cluster) -> None:
    ok = accounted.sbatch("--wrap", "true")
    failed = accounted.sbatch("--wrap", "exit 3")
    cancelled = accounted.sbatch("--wrap", "sleep 60")
    accounted.wait_state(cancelled, {"RUNNING"})
    accounted.run("scancel", str(cancelled))
    for job in (ok, failed, cancelled):
        accounted.wait_done(job)
    accounted.wait_for(
        lambda: len([j for j in history(accounted) if j["end_time"]]) == 3,
        20,
        "the final records did not reach dbd",
    )
    got = {j["job_id"]: (j["state"], j["exit_status"] >> 8) for j in history(accounted)}
    assert got == {ok: ("COMPLETED", 0), failed: ("FAILED", 3), cancelled: ("CANCELLED", 0)}
    # What submitit and Snakemake run and parse.
    submitit = accounted.run(
        "sacct", "-o", "JobID,State", "--parsable2", "-j", str(ok), "-j", str(failed)
    )
    assert submitit.stdout.splitlines() == [
        "JobID|State",
        f"{ok}|COMPLETED",
        f"{ok}.batch|COMPLETED",
        f"{failed}|FAILED",
        f"{failed}.batch|FAILED",
    ]
    snakemake = accounted.run(
        "sacct",
        "-X",
        "--parsable2",
        "--clusters",
        "all",
        "--noheader",
        "--format=JobIdRaw,State",
        "--starttime",
        "now-1hour",
        "--endtime",
        "now",
    )
    assert snakemake.stdout.splitlines() == [
        f"{ok}|COMPLETED",
        f"{failed}|FAILED",
        f"{cancelled}|CANCELLED by 0",
    ]
    default = accounted.run("sacct", "-j", str(failed)).stdout.splitlines()
    assert default[0].split() == [
        "JobID",
        "JobName",
        "Partition",
        "Account",
        "AllocCPUS",
        "State",
        "ExitCode",
    ]
    assert default[2].split()[-2:] == ["FAILED", "3:0"]


def test_without_enforcement_a_job_still_gets_the_users_default_account(
    accounted: Cluster,
) -> None:
    def account_of_a_new_job() -> str:
        job = accounted.sbatch("--hold", "--wrap", "true")
        return str(accounted.job(job)["account"])

    # As soon as the controller has dbd's users (it asks at start): root's is root.
    accounted.wait_for(lambda: account_of_a_new_job() == "root", 15, "no DefaultAccount")


def test_a_job_is_in_sacct_as_soon_as_sbatch_returns(accounted: Cluster) -> None:
    for _ in range(3):
        job = accounted.sbatch("--hold", "--wrap", "true")
        (record,) = history(accounted, job_ids=[str(job)])
        assert (record["job_id"], record["state"]) == (job, "PENDING")
        shown = accounted.run("sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", str(job))
        assert shown.stdout == f"{job}|PENDING\n"


def test_nothing_is_lost_while_dbd_is_down(accounted: Cluster) -> None:
    """dbd is killed mid-workload; the controller keeps scheduling, and is killed
    too; once dbd is back every job is there exactly once, with its final state."""
    first = accounted.sbatch("--array=1-60", "--wrap", "true")
    accounted.kill("dbd")
    second = accounted.sbatch("--array=1-60", "--wrap", "true")
    accounted.wait_for(
        lambda: all(j["state"] == "COMPLETED" for j in accounted.jobs(first, second)),
        60,
        "the workload did not finish while dbd was down",
    )
    assert backlog(accounted) > 0  # sdiag shows what waits for dbd
    assert accounted.run("sdiag", "-r").stdout == "Reset scheduling statistics\n"
    assert "Jobs submitted: 0" in accounted.run("sdiag").stdout.splitlines()
    accounted.kill("controller", signal.SIGKILL)
    accounted.start_controller()
    accounted.start_dbd()

    def all_recorded() -> bool:
        try:
            return len(history(accounted, job_ids=[str(first), str(second)])) == 120
        except SlurmError:
            return False

    accounted.wait_for(all_recorded, 60, "the backlog did not reach dbd")
    records = history(accounted, job_ids=[str(first), str(second)])
    once = Counter((r["array_job_id"], r["array_task_id"]) for r in records)
    assert set(once.values()) == {1}
    assert {r["state"] for r in records} == {"COMPLETED"}


def test_without_accounting_history_is_disabled(cluster: Cluster) -> None:
    with pytest.raises(SlurmError, match="Slurm accounting storage is disabled"):
        history(cluster)
    sacct = cluster.run("sacct", check=False)
    assert (sacct.returncode, sacct.stderr) == (1, "Slurm accounting storage is disabled\n")


def admin(cluster: Cluster, verb: str, kind: str, where: dict[str, str], **values: str) -> None:
    request = {"verb": verb, "kind": kind, "where": where, "set": values, "commit": True}
    cluster.client.call("AcctAdmin", request)


def test_associations_and_limits_are_enforced_and_follow_sacctmgr(tmp_path: Path) -> None:
    """AccountingStorageEnforce=associations,limits,qos on SQLite; a change made
    through dbd reaches the controller within seconds, without a restart."""
    enforce = ("AccountingStorageEnforce=associations,limits,qos", *SETTINGS)
    cluster = Cluster(tmp_path / "c", 2, enforce, accounting=True).start()
    try:

        def submits(*account: str) -> bool:
            sbatch = cluster.run("sbatch", *account, "--hold", "--wrap", "true", check=False)
            return sbatch.returncode == 0

        # The controller learns root's default association once it has asked dbd.
        cluster.wait_for(submits, 15, "root's association did not reach the controller")
        first = cluster.sbatch("--wrap", "true")  # root's DefaultAccount: root
        assert cluster.wait_done(first)["account"] == "root"
        refused = cluster.run("sbatch", "-A", "nope", "--wrap", "true", check=False)
        assert refused.returncode == 1
        assert "Invalid account or account/partition combination specified" in refused.stderr
        admin(cluster, "add", "account", {"name": "lab"})
        admin(cluster, "add", "user", {"name": "root"}, account="lab", maxjobs="1")

        def submits_to_lab() -> bool:
            return (
                cluster.run(
                    "sbatch", "-A", "lab", "--hold", "--wrap", "true", check=False
                ).returncode
                == 0
            )

        cluster.wait_for(submits_to_lab, 15, "the new association did not reach the controller")
        running = cluster.sbatch("-A", "lab", "--wrap", "sleep 30")
        waiting = cluster.sbatch("-A", "lab", "--wrap", "true")
        cluster.wait_state(running, {"RUNNING"})
        cluster.wait_for(
            lambda: cluster.job(waiting)["reason"] == "AssocMaxJobsLimit",
            15,
            "the second job did not wait for AssocMaxJobsLimit",
        )
        admin(cluster, "modify", "user", {"name": "root", "account": "lab"}, maxjobs="-1")
        cluster.wait_done(waiting, timeout=20)
        bad_qos = cluster.run("sbatch", "--qos", "gold", "--wrap", "true", check=False)
        assert "Invalid qos specification" in bad_qos.stderr
    finally:
        cluster.stop()


def test_jobcomp_filetxt_writes_a_line_per_finished_job(make_cluster: Any, tmp_path: Path) -> None:
    """No database at all (AccountingStorageType none): the flat file still has every job."""
    log = tmp_path / "jobcomp.log"
    cluster = make_cluster(settings=("JobCompType=jobcomp/filetxt", f"JobCompLoc={log}"))
    ok = cluster.sbatch("-J", "fine", "--wrap", "true")
    bad = cluster.sbatch("-J", "broken", "--wrap", "exit 2")
    for job in (ok, bad):
        cluster.wait_done(job)
    cluster.wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 2, 10, "no log")
    lines = log.read_text().splitlines()
    fields = [dict(item.split("=", 1) for item in line.split()) for line in lines]
    fields.sort(key=lambda f: int(f["JobId"]))  # written as the jobs end, in either order
    assert [(f["JobId"], f["Name"], f["JobState"], f["ExitCode"]) for f in fields] == [
        (str(ok), "fine", "COMPLETED", "0:0"),
        (str(bad), "broken", "FAILED", "2:0"),
    ]
    assert all(line.endswith(" ") for line in lines)
    assert fields[0]["UserId"] == "root(0)" and fields[0]["TimeLimit"] == "UNLIMITED"


def test_sacctmgr_manages_accounts_users_and_limits(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "c", 1, SETTINGS, accounting=True).start()
    try:

        def sacctmgr(*args: str, check: bool = True) -> str:
            return cluster.run("sacctmgr", *args, check=check).stdout

        sacctmgr("-i", "add", "account", "physics", "Description=Physics", "Organization=sci")
        sacctmgr("-i", "add", "user", "root", "Account=physics")
        assert sacctmgr("show", "assoc", "-P", "-n", "format=Cluster,Account,User,Share") == (
            "corral|root||1\ncorral|root|root|1\ncorral|physics||1\ncorral|physics|root|1\n"
        )
        # Snakemake's account check
        accounts = sacctmgr("-n", "-s", "list", "user", "root", "format=account%256").split()
        assert sorted(accounts) == ["physics", "root"]
        sacctmgr("-i", "modify", "user", "root", "where", "account=physics", "set", "MaxJobs=3")
        limits = sacctmgr("show", "assoc", "-P", "-n", "format=Account,User,MaxJobs", "user=root")
        assert "physics|root|3" in limits.splitlines()
        # sshare's tree is dbd's associations, with their shares.
        sacctmgr("-i", "modify", "account", "physics", "set", "Fairshare=7")

        def physics_shares() -> list[str]:
            rows = cluster.run("sshare", "-a", "-P", "-o", "Account,User,RawShares").stdout
            return [row.strip() for row in rows.splitlines() if row.strip().startswith("physics")]

        cluster.wait_for(
            lambda: physics_shares() == ["physics||7", "physics|root|1"],
            15,
            "sshare did not show dbd's associations",
        )
        # Without -i and with no one to answer, nothing changes.
        unanswered = cluster.run("sacctmgr", "add", "account", "chem", check=False, input="")
        assert "Changes Discarded" in unanswered.stdout
        assert "chem" not in sacctmgr("show", "account", "-P", "-n", "format=Account")
        assert sacctmgr("show", "cluster", "-P", "-n", "format=Cluster").strip() == "corral"
        added = sacctmgr("-i", "add", "coordinator", "account=physics", "names=root")
        assert added.startswith(" Adding Coordinator User(s)\n  root\n")
        coords = sacctmgr("show", "user", "root", "withcoord", "-P", "-n", "format=User,Coord")
        assert coords == "root|physics\n"
        sacctmgr("-i", "delete", "coordinator", "names=root", "account=physics")
        sacctmgr("-i", "delete", "user", "root", "where", "account=physics")
        sacctmgr("-i", "delete", "account", "physics")
        assert sacctmgr("show", "account", "-P", "-n", "format=Account") == "root\n"
    finally:
        cluster.stop()


def test_nothing_is_lost_when_the_database_link_is_cut(tmp_path: Path) -> None:
    """A 2,000-job workload while the link between dbd and MariaDB is cut: the
    controller keeps scheduling, and once the link is back sacct has every job once."""
    with fresh_database("mariadb", tmp_path) as url:
        relay = Relay(("127.0.0.1", 3306))
        relayed = url.replace("127.0.0.1:3306", f"127.0.0.1:{relay.port}")
        cluster = Cluster(tmp_path / "c", 2, SETTINGS, accounting=True, database=relayed)
        try:
            cluster.start()
            first = cluster.sbatch("--array=1-1000", "--wrap", "true")
            relay.cut()
            second = cluster.sbatch("--array=1-1000", "--wrap", "true")
            cluster.wait_for(
                lambda: all(j["state"] == "COMPLETED" for j in cluster.jobs(first, second)),
                240,
                "the workload did not finish while the database was cut off",
            )
            assert backlog(cluster) > 0  # the records wait in the outbox
            relay.restore()
            ids = [str(first), str(second)]

            def all_recorded() -> bool:
                try:
                    return len(history(cluster, job_ids=ids)) == 2000
                except SlurmError:
                    return False

            cluster.wait_for(all_recorded, 120, "the backlog did not reach the database")
            records = history(cluster, job_ids=ids)
            once = Counter((r["array_job_id"], r["array_task_id"]) for r in records)
            assert set(once.values()) == {1}
            assert {r["state"] for r in records} == {"COMPLETED"}
        finally:
            cluster.stop()
            relay.close()


def test_two_clusters_share_one_dbd(tmp_path: Path) -> None:
    """Each controller registers its cluster and its GRES TRES; sacct -M and sacctmgr
    see both, and the TRES ids follow the order dbd first heard of them."""
    a100 = (*SETTINGS, "GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:2")
    v100 = (*SETTINGS, "GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:v100:2,gpu:a100:1")
    alpha = Cluster(tmp_path / "a", 1, a100, accounting=True, name="alpha")
    beta = Cluster(tmp_path / "b", 1, v100, accounting=True, name="beta", dbd_of=alpha)

    def gres_tres() -> list[str]:
        shown = alpha.run("sacctmgr", "-P", "-n", "show", "tres").stdout.splitlines()
        return [line for line in shown if line.startswith("gres|")]

    try:
        alpha.start()
        alpha.wait_for(lambda: len(gres_tres()) == 2, 20, "alpha's TRES did not reach dbd")
        assert gres_tres() == ["gres|gpu|1001", "gres|gpu:a100|1002"]
        beta.start()
        alpha.wait_for(lambda: len(gres_tres()) == 3, 20, "beta's TRES did not reach dbd")
        assert gres_tres() == ["gres|gpu|1001", "gres|gpu:a100|1002", "gres|gpu:v100|1003"]
        for cluster in (alpha, beta):
            cluster.wait_done(cluster.sbatch("--wrap", "true"))

        def both() -> list[str]:
            shown = alpha.run(
                "sacct", "-M", "alpha,beta", "-X", "-P", "-n", "-o", "Cluster,JobID,State"
            )
            return shown.stdout.splitlines()

        alpha.wait_for(lambda: len(both()) == 2, 20, "both clusters' jobs did not reach dbd")
        assert both() == ["alpha|1|COMPLETED", "beta|1|COMPLETED"]
        assert beta.run("sacct", "-X", "-P", "-n", "-o", "Cluster,JobID").stdout == "beta|1\n"
        clusters = alpha.run("sacctmgr", "show", "cluster", "-P", "-n", "format=Cluster")
        assert clusters.stdout.split() == ["alpha", "beta"]
    finally:
        beta.stop()
        alpha.stop()


def test_drained_nodes_are_events_in_sacctmgr(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "c", 2, SETTINGS, accounting=True).start()
    try:
        cluster.run("scontrol", "update", "nodename=node2", "state=drain", "reason=fan broken")

        def events() -> list[str]:
            out = cluster.run(
                "sacctmgr", "show", "event", "-P", "-n", "format=NodeName,State,Reason,TimeEnd"
            )
            return out.stdout.splitlines()

        cluster.wait_for(
            lambda: events() == ["node2|DRAIN|fan broken|Unknown"], 15, "no drain event"
        )
        cluster.run("scontrol", "update", "nodename=node2", "state=resume")
        cluster.wait_for(
            lambda: len(events()) == 1 and not events()[0].endswith("|Unknown"),
            15,
            "the drain event did not end",
        )
    finally:
        cluster.stop()


def test_the_batch_step_shows_what_the_script_used(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "c", 1, SETTINGS, accounting=True).start()
    try:
        script = "x = bytearray(80 * 1024 * 1024); sum(range(3_000_000))"
        job = cluster.sbatch("--wrap", f"python3 -c '{script}'")
        assert cluster.wait_done(job)["state"] == "COMPLETED"

        def batch() -> list[str]:
            out = cluster.run("sacct", "-j", f"{job}.batch", "-P", "-n", "-o", "MaxRSS,TotalCPU")
            return out.stdout.strip().split("|")

        cluster.wait_for(lambda: batch()[0] != "", 15, "no MaxRSS for the batch step")
        rss, cpu = batch()
        kib = int(rss[:-1]) * {"K": 1, "M": 1024, "G": 1024**2}[rss[-1]]
        assert kib >= 80 * 1024, rss
        assert cpu != "00:00:00", cpu
    finally:
        cluster.stop()


def test_an_output_directory_that_does_not_exist_fails_the_launch(tmp_path: Path) -> None:
    """Slurm 22.05 does not make a missing --output directory: the job fails at launch
    (FAILED, JobLaunchFailure, ExitCode 0:53 in scontrol and sacct) and nothing is made."""
    cluster = Cluster(tmp_path / "c", 1, SETTINGS, accounting=True).start()
    try:
        missing = tmp_path / "nowhere"
        job = cluster.sbatch("-o", str(missing / "%j.out"), "--wrap", "true")
        cluster.wait_done(job)
        shown = cluster.run("scontrol", "show", "job", str(job)).stdout
        assert "JobState=FAILED Reason=JobLaunchFailure " in shown
        assert " ExitCode=0:53\n" in shown
        query = ("sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", str(job))
        cluster.wait_for(
            lambda: cluster.run(*query).stdout == f"{job}|FAILED|0:53\n",
            15,
            "sacct did not record the launch failure",
        )
        assert not missing.exists()
    finally:
        cluster.stop()


def test_sacct_duplicates_lists_every_run_of_a_requeued_job(tmp_path: Path) -> None:
    """Slurm keeps each run of a requeued job; sacct shows the latest, -D every one,
    the earlier ones in the state they ended in (REQUEUED for scontrol requeuehold)."""
    cluster = Cluster(tmp_path / "c", 1, SETTINGS, accounting=True).start()
    try:
        job = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 60")
        cluster.wait_state(job, {"RUNNING"})
        cluster.run("scontrol", "requeuehold", str(job))  # held: its next run waits
        cluster.wait_state(job, {"PENDING"})
        query = ("sacct", "-X", "-n", "-P", "-o", "JobID,State,Submit", "-j", str(job))

        def runs(*args: str) -> list[list[str]]:
            return [line.split("|") for line in cluster.run(*query, *args).stdout.splitlines()]

        cluster.wait_for(lambda: len(runs("-D")) == 2, 15, "sacct -D did not list both runs")
        first, second = runs("-D")
        assert first[:2] == [str(job), "REQUEUED"]
        assert second[:2] == [str(job), "PENDING"]
        assert first[2] <= second[2]  # each run's own submit time
        assert runs() == [second]  # without -D: the latest run only
        assert runs("--duplicates") == [first, second]
        cluster.run("scancel", str(job))
    finally:
        cluster.stop()
