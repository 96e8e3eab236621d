"""Authorization as strict as Slurm's, attacked by real ordinary users.

Two Unix users (the ``users`` fixture) run the real clients against real
daemons: they try partitions closed to them, at submission and by moving a
pending job with ``scontrol update``, look for partitions and jobs hidden from
them (Hidden, PrivateData=jobs,reservations) through squeue, sinfo, scontrol, sprio and
restd, ask for tokens longer than AuthAltParameters allows, and act on jobs
and nodes that are not theirs before and after sacctmgr makes one of them a
coordinator or an operator.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral import errors
from tests.integration.cluster import Cluster
from tests.integration.rest import Rest
from tests.integration.test_private_data import (  # noqa: F401 - the clients fixture
    Clients,
    User,
    attempt,
    clients,
)

V = "/slurm/v0.0.42"
PARTITIONS = (
    "PartitionName=secret Nodes=node1 Hidden=YES",
    "PartitionName=rootonly Nodes=node1 RootOnly=YES",
    "PartitionName=staff Nodes=node1 AllowGroups=root",
    "PartitionName=chem Nodes=node1 AllowAccounts=chem",
    "PartitionName=nobio Nodes=node1 DenyAccounts=bio",
    "PartitionName=highqos Nodes=node1 AllowQos=high",
    "PartitionName=nolow Nodes=node1 DenyQos=low",
    "PartitionName=short Nodes=node1 MaxTime=5 MaxNodes=1",
    "PartitionName=narrow Nodes=node1 MaxCPUsPerNode=1",
)
SETTINGS = (
    "KillWait=2",
    "SlurmdTimeout=6",
    "EnforcePartLimits=ALL",
    "PrivateData=jobs,reservations",
    "AuthAltParameters=max_token_lifespan=600",
)


@dataclass
class Site:
    """A running cluster, its restd, and the two users with their own directories."""

    cluster: Cluster
    clients: Clients
    people: tuple[User, User]
    rest: str

    def run(self, user: User | None, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return attempt(self.cluster, self.clients, user, name, *args)

    def ok(self, user: User | None, name: str, *args: str) -> str:
        done = self.run(user, name, *args)
        assert done.returncode == 0, (name, args, done.stderr)
        return done.stdout

    def sbatch(self, user: User | None, *args: str) -> int:
        out = self.ok(user, "sbatch", "--parsable", "--wrap", "true", *args)
        return int(out.strip().split(";")[0])


def _people(top: Path, names: tuple[str, ...]) -> tuple[User, User]:
    found = []
    for name in names:
        entry = pwd.getpwnam(name)
        work = top / name
        work.mkdir()
        os.chown(work, entry.pw_uid, entry.pw_gid)
        found.append(User(name, entry.pw_uid, entry.pw_gid, work))
    return found[0], found[1]


@pytest.fixture(scope="module")
def site(users: tuple[str, ...], clients: Clients) -> Iterator[Site]:  # noqa: F811
    top = Path(tempfile.mkdtemp(prefix="corral-authz-", dir="/tmp"))
    top.chmod(0o755)
    cluster = Cluster(top / "c", 1, SETTINGS)
    with open(cluster.conf, "a") as conf:
        conf.write("\n".join(PARTITIONS) + "\n")
    try:
        cluster.start()
        yield Site(cluster, clients, _people(top, users), cluster.start_restd())
    finally:
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)


def _message(code: int) -> str:
    return errors.MESSAGES[code]


SUBMISSIONS = [
    ("rootonly", (), errors.ESLURM_ACCESS_DENIED),
    ("staff", (), errors.ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP),
    ("chem", ("-A", "bio"), errors.ESLURM_INVALID_ACCOUNT),
    ("nobio", ("-A", "bio"), errors.ESLURM_INVALID_ACCOUNT),
    ("highqos", (), errors.ESLURM_INVALID_QOS),
    ("nolow", ("--qos", "low"), errors.ESLURM_INVALID_QOS),
    ("short", ("-t", "10"), errors.ESLURM_INVALID_TIME_LIMIT),
    ("short", ("-N", "2"), errors.ESLURM_INVALID_NODE_COUNT),
    ("narrow", ("-c", "2"), errors.ESLURM_TOO_MANY_REQUESTED_CPUS),
]


def test_each_partition_rule_refuses_a_submission(site: Site) -> None:
    user = site.people[0]
    for partition, args, code in SUBMISSIONS:
        done = site.run(user, "sbatch", "-H", "-p", partition, *args, "--wrap", "true")
        assert (done.returncode, done.stderr) == (
            1,
            f"sbatch: error: Batch job submission failed: {_message(code)}\n",
        ), (partition, args)
    # The same rules let a fitting job in, and root into RootOnly and AllowGroups=root.
    assert site.sbatch(user, "-H", "-p", "short", "-t", "5", "-N", "1")
    assert site.sbatch(user, "-H", "-p", "nobio", "-A", "chem")
    assert site.sbatch(None, "-H", "-p", "rootonly")
    assert site.sbatch(None, "-H", "-p", "staff")


UPDATES = [
    (("partition=staff",), errors.ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP),
    (("partition=rootonly",), errors.ESLURM_ACCESS_DENIED),
    (("partition=short",), errors.ESLURM_INVALID_TIME_LIMIT),  # its 10 minutes > MaxTime 5
    (("partition=highqos",), errors.ESLURM_INVALID_QOS),
    (("partition=nolow", "qos=low"), errors.ESLURM_INVALID_QOS),
    (("partition=nobio", "account=bio"), errors.ESLURM_INVALID_ACCOUNT),
    (("partition=chem",), errors.ESLURM_INVALID_ACCOUNT),
]


def test_a_pending_job_cannot_be_moved_where_submission_is_refused(site: Site) -> None:
    user = site.people[0]
    job = site.sbatch(user, "-H", "-t", "10")
    for words, code in UPDATES:
        done = site.run(user, "scontrol", "update", f"jobid={job}", *words)
        assert done.returncode == 1, (words, done.stdout)
        assert f"{_message(code)} for job {job}" in done.stderr, (words, done.stderr)
    shown = site.ok(user, "squeue", "-h", "-j", str(job), "-o", "%P %q %a")
    assert shown.split()[:2] == ["debug", "normal"]
    # A move the rules allow still works; limits hold for it too.
    site.ok(user, "scontrol", "update", f"jobid={job}", "timelimit=5")
    site.ok(user, "scontrol", "update", f"jobid={job}", "partition=short")
    assert site.ok(user, "squeue", "-h", "-j", str(job), "-o", "%P").strip() == "short"
    for words, message in (
        (("numnodes=2",), _message(errors.ESLURM_INVALID_NODE_COUNT)),  # MaxNodes=1
        (("partition=narrow", "mincpusnode=2"), _message(errors.ESLURM_TOO_MANY_REQUESTED_CPUS)),
        (("minmemorynode=100T",), _message(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)),
        # What cannot be checked is refused whole, not half applied.
        (("timelimit=4", "numcpus=2"), "Update of numcpus is not supported"),
    ):
        done = site.run(user, "scontrol", "update", f"jobid={job}", *words)
        assert done.returncode == 1 and f"{message} for job {job}" in done.stderr, done.stderr
    assert site.ok(user, "squeue", "-h", "-j", str(job), "-o", "%D %l").split() == ["1", "5:00"]


def test_hidden_partitions_and_their_jobs_need_all(site: Site) -> None:
    user = site.people[0]
    job = str(site.sbatch(user, "-H", "-p", "secret"))
    assert job not in site.ok(user, "squeue", "-h", "-o", "%i").split()
    assert job in site.ok(user, "squeue", "-a", "-h", "-o", "%i").split()
    listed = set(site.ok(user, "sinfo", "-h", "-o", "%P").split())
    assert "secret" not in listed and "staff" not in listed  # staff: AllowGroups=root
    assert {"debug*", "rootonly", "short"} <= listed
    assert {"secret", "staff"} <= set(site.ok(user, "sinfo", "-a", "-h", "-o", "%P").split())
    assert "PartitionName=secret" not in site.ok(user, "scontrol", "show", "partition")
    assert "PartitionName=secret" in site.ok(user, "scontrol", "-a", "show", "partition", "secret")
    assert "PartitionName=secret" in site.ok(None, "scontrol", "show", "partition")  # root
    rest = Rest(site.rest, _token(site, user, 300))
    status, reply = rest.call("GET", f"{V}/partitions")
    assert status == 200, reply
    assert "secret" not in {p["name"] for p in reply["partitions"]}


def _token(site: Site, user: User | None, lifespan: int) -> str:
    out = site.ok(user, "scontrol", "token", f"lifespan={lifespan}")
    return out.strip().split("=", 1)[1]


def test_private_data_hides_other_users_jobs(site: Site) -> None:
    user, other = site.people
    held = site.sbatch(None, "-H")
    waiting = site.sbatch(None, f"--dependency=afterok:{held}")
    theirs = site.sbatch(other, "-H")
    mine_held = site.sbatch(user, "-H")
    mine = site.sbatch(user, f"--dependency=afterok:{mine_held}")
    others = {str(held), str(waiting), str(theirs)}
    seen = set(site.ok(user, "squeue", "-h", "-o", "%i").split())
    assert {str(mine), str(mine_held)} <= seen and not seen & others
    assert others <= set(site.ok(None, "squeue", "-h", "-o", "%i").split())
    for job in (held, theirs):
        done = site.run(user, "scontrol", "show", "job", str(job))
        assert done.returncode == 1
        assert "Invalid job id specified" in done.stderr + done.stdout
    priorities = set(site.ok(user, "sprio", "-h", "-o", "%i").split())
    assert str(mine) in priorities and str(waiting) not in priorities
    assert str(waiting) in site.ok(None, "sprio", "-h", "-o", "%i").split()
    rest = Rest(site.rest, _token(site, user, 300))
    status, reply = rest.call("GET", f"{V}/jobs")
    assert status == 200, reply
    ids = {str(j["job_id"]) for j in reply["jobs"]}
    assert str(mine) in ids and not ids & others
    status, reply = rest.call("GET", f"{V}/job/{theirs}")
    assert status != 200 and not reply.get("jobs"), reply


def test_private_data_hides_reservations_one_may_not_use(site: Site) -> None:
    user, other = site.people
    for name, who, start in (("rootres", "root", 3600), ("theirs", other.name, 7200)):
        site.ok(None, "scontrol", "create", "reservation", f"ReservationName={name}",
                f"Users={who}", f"StartTime=now+{start}", "Duration=10", "Nodes=node1")  # fmt: skip
    assert site.ok(user, "scontrol", "show", "reservation") == "No reservations in the system\n"
    assert "ReservationName=theirs" in site.ok(other, "scontrol", "show", "reservation")
    assert "ReservationName=rootres" not in site.ok(other, "scontrol", "show", "reservation")
    assert "ReservationName=rootres" in site.ok(None, "scontrol", "show", "reservation")
    mine = ("ReservationName=mine", f"Users={user.name}", "StartTime=now+9000", "Duration=10")
    done = site.run(user, "scontrol", "create", "reservation", *mine, "Nodes=node1")
    assert done.returncode == 1 and "Access/permission denied" in done.stderr


def test_a_token_longer_than_max_token_lifespan_is_refused(site: Site) -> None:
    user = site.people[0]
    done = site.run(user, "scontrol", "token", "lifespan=3600")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "Unable to create token: requested token lifespan 3600 exceeds limit of 600\n"
    )
    # The default lifespan (1800 s) is over the limit too, as in Slurm.
    assert site.run(user, "scontrol", "token").returncode == 1
    assert _token(site, user, 600)
    assert _token(site, None, 3600)  # the limit does not apply to root and SlurmUser


def test_private_nodes_are_for_operators_only(
    users: tuple[str, ...],
    clients: Clients,  # noqa: F811
) -> None:
    top = Path(tempfile.mkdtemp(prefix="corral-authz-nodes-", dir="/tmp"))
    top.chmod(0o755)
    cluster = Cluster(top / "c", 1, ("KillWait=2", "SlurmdTimeout=6", "PrivateData=nodes"))
    try:
        cluster.start()
        site = Site(cluster, clients, _people(top, users), cluster.start_restd())
        user = site.people[0]
        denied = _message(errors.ESLURM_ACCESS_DENIED)
        shown = site.run(user, "scontrol", "show", "node")
        assert (shown.returncode, shown.stderr) == (1, f"slurm_load_node error: {denied}\n")
        listed = site.run(user, "sinfo")
        assert (listed.returncode, listed.stderr) == (1, f"slurm_load_node: {denied}\n")
        status, reply = Rest(site.rest, _token(site, user, 300)).call("GET", f"{V}/nodes")
        assert status == 403, reply
        assert "NodeName=node1" in site.ok(None, "scontrol", "show", "node")
        assert site.ok(user, "squeue", "-h") == ""  # jobs are not private here
    finally:
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)


# ---------------------------------------------------------------- accounting's rights


def _cancel(site: Site, user: User, job: int) -> subprocess.CompletedProcess[str]:
    return site.run(user, "scancel", str(job))


def _state(site: Site, job: int) -> str:
    return str(site.cluster.job(job)["state"])


def test_operators_and_coordinators_act_on_jobs_as_slurm_allows(
    users: tuple[str, ...],
    clients: Clients,  # noqa: F811
) -> None:
    top = Path(tempfile.mkdtemp(prefix="corral-authz-acct-", dir="/tmp"))
    top.chmod(0o755)
    settings = ("KillWait=2", "SlurmdTimeout=6", "PrivateData=usage")
    cluster = Cluster(top / "c", 1, settings, accounting=True)
    with open(cluster.conf, "a") as conf:
        conf.write("PartitionName=bioonly Nodes=node1 AllowAccounts=bio\n")
    try:
        cluster.start()
        site = Site(cluster, clients, _people(top, users), "")
        first, second = site.people
        for account in ("chem", "bio", "other"):
            cluster.run("sacctmgr", "-i", "add", "account", account)
        cluster.run("sacctmgr", "-i", "add", "user", first.name, "Account=chem")
        cluster.run("sacctmgr", "-i", "add", "user", second.name, "Account=bio")
        # AllowAccounts against each user's DefaultAccount, for submission and for sinfo.
        cluster.wait_for(
            lambda: "bioonly" not in site.ok(first, "sinfo", "-h", "-o", "%P"),
            30,
            "sinfo kept showing a partition closed to the user's accounts",
        )
        assert "bioonly" in site.ok(second, "sinfo", "-h", "-o", "%P")
        assert site.sbatch(second, "-H", "-p", "bioonly")
        refused = site.run(first, "sbatch", "-H", "-p", "bioonly", "--wrap", "true")
        assert refused.returncode == 1
        assert _message(errors.ESLURM_INVALID_ACCOUNT) in refused.stderr

        # PrivateData=usage: sshare -a shows a user their own rows and the accounts above.
        def shares(user: User | None) -> set[tuple[str, str]]:
            out = site.ok(user, "sshare", "-a", "-n", "-P", "-o", "Account,User")
            return {(a.strip(), u) for a, _, u in (line.partition("|") for line in out.split())}

        cluster.wait_for(
            lambda: ("bio", second.name) in shares(None), 30, "sshare never showed bio's user"
        )
        assert shares(first) == {("root", ""), ("chem", ""), ("chem", first.name)}
        bio_job = site.sbatch(second, "-H", "-A", "bio")
        root_job = site.sbatch(None, "-H", "-A", "other")
        # Ordinary users: their own jobs only, no node rights.
        denied = _cancel(site, first, bio_job)
        assert (denied.returncode, denied.stderr) == (
            210,  # Slurm 22.05's scancel: the error code (2002) cut to a byte
            f"scancel: error: Kill job error on job id {bio_job}: Access/permission denied\n",
        )
        node = site.run(first, "scontrol", "update", "nodename=node1", "state=drain", "reason=x")
        assert node.returncode == 1 and "Access/permission denied" in node.stderr
        # A coordinator of bio: bio's jobs, nothing else.
        cluster.run("sacctmgr", "-i", "add", "coordinator", "account=bio", f"names={first.name}")
        cluster.wait_for(
            lambda: site.run(first, "scontrol", "hold", str(bio_job)).returncode == 0,
            30,
            "the coordinator was never given bio's jobs",
        )
        assert _cancel(site, first, bio_job).returncode == 0
        assert _state(site, bio_job) == "CANCELLED"
        assert _cancel(site, first, root_job).returncode == 210  # 2002, cut to a byte
        assert _state(site, root_job) == "PENDING"
        # An operator: every job, and nodes.
        cluster.run("sacctmgr", "-i", "modify", "user", second.name, "set", "adminlevel=operator")
        cluster.wait_for(
            lambda: _cancel(site, second, root_job).returncode == 0,
            30,
            "the operator was never given other users' jobs",
        )
        assert _state(site, root_job) == "CANCELLED"
        site.ok(second, "scontrol", "update", "nodename=node1", "state=drain", "reason=op")
        assert "DRAIN" in site.ok(None, "scontrol", "show", "node", "node1")
        assert site.run(second, "scontrol", "shutdown").returncode == 1  # Administrator only
    finally:
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)
