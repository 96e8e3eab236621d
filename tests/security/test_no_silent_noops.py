"""No silent no-ops: an option or key accepted and ignored must not change what happens.

The attacks (or accidents): ``scancel -R X`` sent an empty filter and cancelled
every job of its caller (of the whole cluster as root); ``scancel --wckey``
the same; ``sbatch --uid=alice`` run by root ran the job as root, and any user
could ask for another uid. Each is now honoured as Slurm documents, or refused
with Slurm's wording and a non-zero exit; nothing is cancelled or run by mistake.
"""

from __future__ import annotations

import grp
import json
import pwd
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster
from tests.integration.rest import Rest
from tests.security.asuser import open_cluster, run_as, run_code_as, shared_top

SETTINGS = ("KillWait=1",)


@pytest.fixture
def shared() -> Iterator[Path]:
    yield from shared_top()


@pytest.fixture
def open_one(shared: Path) -> Iterator[Cluster]:
    """One node, in a directory every user can reach."""
    cluster = open_cluster(shared, SETTINGS)
    try:
        yield cluster
    finally:
        cluster.stop()


def running(cluster: Cluster, *jobs: int) -> list[str]:
    return [cluster.job(job)["state"] for job in jobs]


def test_scancel_by_reservation_cancels_only_that_reservations_jobs(cluster: Cluster) -> None:
    cluster.run(
        "scontrol", "create", "reservation", "ReservationName=r1", "Nodes=node1",
        "StartTime=now", "Duration=60", "Users=root",
    )  # fmt: skip
    inside = cluster.sbatch("--reservation=r1", "-w", "node1", "--wrap", "sleep 60")
    outside = cluster.sbatch("-w", "node2", "--wrap", "sleep 60")
    cluster.wait_state(inside, {"RUNNING"})
    cluster.wait_state(outside, {"RUNNING"})
    # No job in that reservation: nothing is cancelled (it used to be every job).
    missing = cluster.run("scancel", "-R", "nosuch", check=False)
    assert missing.returncode == 0, missing.stderr
    assert running(cluster, inside, outside) == ["RUNNING", "RUNNING"]
    cluster.run("scancel", "--reservation=r1")
    assert cluster.wait_done(inside)["state"] == "CANCELLED"
    assert running(cluster, outside) == ["RUNNING"]


def test_scancel_by_wckey_is_refused_and_cancels_nothing(cluster: Cluster) -> None:
    job = cluster.sbatch("--wrap", "sleep 60")
    cluster.wait_state(job, {"RUNNING"})
    refused = cluster.run("scancel", "--wckey=x", check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "scancel: error: --wckey is not supported: WCKeys are not tracked\n"
    ), refused.stderr
    other = cluster.run("scancel", "-M", "elsewhere", str(job), check=False)
    assert other.returncode == 1
    assert "'elsewhere' can't be reached now" in other.stderr
    assert running(cluster, job) == ["RUNNING"]
    cluster.run("scancel", "-M", "corral", str(job))  # this cluster's own name
    assert cluster.wait_done(job)["state"] == "CANCELLED"


def test_sbatch_options_that_cannot_be_honoured_are_refused(cluster: Cluster) -> None:
    for args, env in (
        (("--network=sn_all",), {}),
        (("--no-kill",), {}),
        ((), {"SBATCH_CORE_SPEC": "2"}),
    ):
        done = cluster.run("sbatch", *args, "--wrap", "true", check=False, env=env)
        assert done.returncode == 255, done
        assert "sbatch: error: --" in done.stderr and "is not supported" in done.stderr
    # Another cluster's name: refused by the controller, not run here.
    elsewhere = cluster.run("sbatch", "-M", "elsewhere", "--wrap", "true", check=False)
    assert elsewhere.returncode != 0
    assert "'elsewhere' can't be reached now" in elsewhere.stderr
    assert cluster.jobs() == []
    # Labels and sampling rates cannot change what runs: said once, then submitted.
    warned = cluster.run("sbatch", "--acctg-freq=10", "--wckey=w", "--wrap", "true")
    assert "sbatch: warning: --acctg-freq has no effect: accounting samples once per job" in (
        warned.stderr
    )
    assert "sbatch: warning: --wckey has no effect: WCKeys are not tracked" in warned.stderr
    mpi = cluster.run("srun", "--mpi=pmix", "true", check=False)
    assert mpi.returncode == 1
    assert "srun: error: Invalid MPI type 'pmix', --mpi=list for acceptable types" in mpi.stderr
    # A binding Corral does not do: the tasks would see all the job's CPUs.
    before = len(cluster.jobs())
    bind = cluster.run("srun", "--cpu-bind=map_ldom:0", "true", check=False)
    assert bind.returncode == 1
    assert bind.stderr.startswith("srun: error: --cpu-bind=map_ldom:0 is not supported"), bind
    mode = cluster.run("srun", "--open-mode=overwrite", "true", check=False)
    assert mode.stderr == "srun: error: Invalid --open-mode specification\n", mode
    assert len(cluster.jobs()) == before  # refused before any allocation is asked for


def test_root_submits_for_another_user_with_uid_and_gid(
    users: tuple[str, ...], open_one: Cluster
) -> None:
    user = pwd.getpwnam(users[0])
    group = grp.getgrnam(users[1]) if _has_group(users[1]) else grp.getgrgid(user.pw_gid)
    out = open_one.dir.parent / "work" / "ids.out"
    job = open_one.sbatch(
        f"--uid={users[0]}", f"--gid={group.gr_name}", "-o", str(out), "--wrap", "id -u; id -g"
    )
    assert open_one.wait_done(job)["state"] == "COMPLETED"
    assert out.read_text().split() == [str(user.pw_uid), str(group.gr_gid)]
    shown = open_one.run("scontrol", "show", "job", str(job)).stdout
    assert f"UserId={users[0]}({user.pw_uid})" in shown, shown


def _has_group(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def test_only_root_may_submit_as_another_user(users: tuple[str, ...], open_one: Cluster) -> None:
    user = pwd.getpwnam(users[0])
    ours = run_as(open_one, user.pw_uid, user.pw_gid, "sbatch", "--uid=root", "--wrap", "id")
    assert ours.returncode == 255
    assert ours.stderr == "sbatch: error: --uid only permitted by root user\n"
    gid = run_as(open_one, user.pw_uid, user.pw_gid, "sbatch", "--gid=0", "--wrap", "id")
    assert gid.stderr == "sbatch: error: --gid only permitted by root user\n"
    # A client of the user's own making skips that check: the controller refuses.
    forged = run_code_as(
        open_one,
        user.pw_uid,
        user.pw_gid,
        "import os, sys; os.getuid = lambda: 0; "
        "sys.argv = ['sbatch', '--uid=root', '--wrap', 'id']; "
        "from cli.sbatch import main; main()",
    )
    assert forged.returncode != 0
    assert "Batch job submission failed: Invalid user id" in forged.stderr, forged.stderr
    assert open_one.jobs() == []


def test_a_refused_slurm_conf_key_stops_the_controller(tmp_path: Path) -> None:
    """ResvProlog= would not run: the controller does not start rather than skip it."""
    cluster = Cluster(tmp_path, 1, ("ResvProlog=/etc/slurm/resv_prolog.sh",))
    done = subprocess.run(
        [sys.executable, "-m", "controller.main", "-f", cluster.conf],
        capture_output=True,
        text=True,
        timeout=60,
        env=cluster.env,
        check=False,
    )
    assert done.returncode != 0
    assert (
        "ResvProlog=/etc/slurm/resv_prolog.sh is not supported: "
        "reservation prolog scripts are not run" in done.stderr
    ), done.stderr


def test_restd_refuses_job_fields_it_would_drop_and_warns_of_labels(cluster: Cluster) -> None:
    """A REST client's CPU binding or user-shared nodes used to be dropped or taken
    for whole nodes (exclusive=user); each is a 400 now, and nothing is submitted."""
    token = cluster.run("scontrol", "token", "username=root").stdout.strip().split("=", 1)[1]
    rest = Rest(cluster.start_restd(), token)
    desc = {
        "script": "#!/bin/sh\ntrue\n",
        "environment": ["PATH=/bin:/usr/bin"],
        "current_working_directory": str(cluster.dir),
    }
    submit = "/slurm/v0.0.42/job/submit"
    for field, words in (
        ({"cpu_binding": "map_cpu:0"}, "job.cpu_binding is not supported: CPU binding"),
        ({"exclusive": ["user"]}, "job.exclusive=user is not supported: only whole nodes"),
        ({"mcs_label": "x"}, "job.mcs_label is not supported: MCS labels"),
        ({"tres_per_node": "license/matlab:1"}, "job.tres_per_node=license/matlab:1"),
    ):
        status, reply = rest.call("POST", submit, {"job": {**desc, **field}})
        assert status == 400, (field, reply)
        assert reply["errors"][0]["description"].startswith(words), reply
        assert reply["errors"][0]["error"] == "Requested operation not supported on this system"
    assert cluster.jobs() == []
    status, reply = rest.call("POST", submit, {"job": {**desc, "wckey": "w"}})
    assert status == 200 and reply["errors"] == [], reply
    assert [w["description"] for w in reply["warnings"]] == [
        "job.wckey has no effect: WCKeys are not tracked"
    ]
    assert cluster.wait_done(reply["job_id"])["state"] == "COMPLETED"
    status, reply = rest.call("POST", f"/slurm/v0.0.42/job/{reply['job_id']}", {"mail_user": "x"})
    assert status == 400 and "Update of mail_user is not supported" in json.dumps(reply)


def test_report_options_that_would_misreport_are_refused(cluster: Cluster) -> None:
    """sacct -T printed untruncated times; sacct --json=v0.0.40 got v0.0.42 records;
    the corral command's subcommands take only the options their tables list."""
    for args, words in (
        (("sacct", "-T"), "sacct: error: --truncate is not supported: times are not truncated"),
        (("sacct", "--json=v0.0.40"), "sacct: error: --json=v0.0.40 is not supported"),
        (("sacctmgr", "--yaml", "show", "user"), "sacctmgr: error: --yaml is not supported"),
        (("corral", "down", "--force"), "corral: error: unrecognized option '--force'"),
    ):
        done = cluster.run(*args, check=False)
        assert done.returncode == 1, (args, done)
        assert done.stderr.startswith(words), (args, done.stderr)
        assert done.stdout == "", args


def test_srun_in_a_batch_job_refuses_a_step_limit_and_warns_of_job_options(
    cluster: Cluster,
) -> None:
    """Inside a job, a non-GPU --gres used to run the step with nothing held, and
    -p/-A/-q or --exclusive=user to be dropped without a word: the step is refused in
    the first case, runs with a warning in the second. A step's --mem is its memory
    limit now (tests/integration/test_containment.py): it runs."""
    script = cluster.dir / "step-options.sh"
    script.write_text(
        "#!/bin/sh\n"
        "srun --mem=4G echo limited; echo mem=$?\n"
        "srun --gres=tmpdisk:10 echo leaked; echo gres=$?\n"
        "srun --exclusive=user -p nosuch echo ran; echo warned=$?\n"
        "srun --mem=0 -p $SLURM_JOB_PARTITION echo quiet\n"
    )
    out = cluster.dir / "step-options.out"
    job = cluster.sbatch("-o", str(out), str(script))
    assert cluster.wait_done(job, 60)["state"] == "COMPLETED"
    lines = out.read_text().splitlines()
    assert "leaked" not in lines, lines
    assert lines[:4] == [
        "limited",
        "mem=0",
        "srun: error: --gres=tmpdisk:10 is not supported in a job step: only GPUs are "
        "divided among a job's steps",
        "gres=1",
    ], lines
    assert lines[4].startswith("srun: warning: --exclusive=user has no effect in a job step")
    assert lines[5].startswith(
        f"srun: warning: --partition=nosuch has no effect in a job step: job {job}'s partition ("
    ), lines
    assert lines[6:] == ["ran", "warned=0", "quiet"], lines
