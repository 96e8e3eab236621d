"""corral sim -f slurm.conf: the map, the site's configuration and dump, and replays
whose order the site's priorities and limits decide (worked out by hand in each test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.sim import SimError, read, siteconf, sitemap
from controller.sim.siteconf import (
    SKIP_ACCOUNT,
    SKIP_LIMIT,
    SKIP_PARTITION_ACCESS,
    SKIP_PARTITION_CPUS,
    SKIP_PARTITION_TIME,
    SKIP_QOS,
)
from controller.sim.sitemap import Rule
from controller.sim.siterun import groups, replay_site

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
ClusterName=sim
SlurmctldHost=localhost
NodeName=n1 CPUs=2 RealMemory=1000
PartitionName=lo Nodes=n1 Default=YES PriorityJobFactor=1
PartitionName=hi Nodes=n1 PriorityJobFactor=10
PriorityType=priority/multifactor
SchedulerType=sched/builtin
"""


Jobs = list[tuple[int, ...]]


def swf(tmp_path: Path, jobs: Jobs, name: str = "t.swf") -> Path:
    """A trace of (submit, run, procs, user, group[, limit]) jobs, numbered from 1;
    the limit (requested time) is 600 s unless given."""
    lines = []
    for number, (submit, run, procs, user, group, *limit) in enumerate(jobs, 1):
        req = limit[0] if limit else 600
        fields = [number, submit, -1, run, procs, -1, -1, procs, req, -1, 1, user, group]
        lines.append(" ".join(map(str, fields + [-1] * 5)))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def starts(
    tmp_path: Path,
    jobs: Jobs,
    conf: str = BASE,
    sets: tuple[str, ...] = (),
    mapping: str = "",
    dump: str | None = None,
    policy: str = "fcfs",
) -> dict[int, int]:
    """Trace job number -> start time of a replay on ``conf``."""
    site = siteconf.load(
        write(tmp_path, "slurm.conf", conf),
        sets,
        write(tmp_path, "dump.cfg", dump) if dump is not None else None,
        sitemap.parse(mapping, "map"),
    )
    result = replay_site(site, read(str(swf(tmp_path, jobs))), policy)
    return {job.number: job.start for job in result.jobs}


# ---------------------------------------------------------------- the map


def test_the_map_gives_a_user_its_rule_then_its_groups_then_the_default() -> None:
    m = sitemap.parse(
        "# comment\n"
        "user=12 name=alice account=Physics qos=high   # alice\n"
        "group=3 account=chem partition=big\n"
        "default account=other qos=normal\n"
        "qos high Priority=100 maxjobspu=4\n",
        "map",
    )
    assert m.rule(12, 3) == Rule("alice", "physics", "big", "high")
    assert m.rule(7, 3) == Rule("", "chem", "big", "normal")
    assert m.rule(7, 9) == Rule("", "other", "", "normal")
    assert m.qos == {"high": {"Name": "high", "Priority": "100", "MaxJobsPU": "4"}}
    assert ("partition", "big") in m.named() and ("account", "physics") in m.named()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("user=x account=a", "map:1: user wants the trace's number"),
        ("user=1 account=a\nuser=1 account=b", "map:2: user 1 is mapped twice"),
        ("default account=a\ndefault account=b", "map:2: a second default line"),
        ("default name=bob", "map:1: default cannot name a user"),
        ("group=2 name=bob", "map:1: name= is for a user=N rule"),
        ("user=1", "map:1: a rule gives at least one of"),
        ("user=1 colour=red", "map:1: expected name=, account=, partition=, qos= with a value"),
        ("user=1 account=a account=b", "map:1: account= given twice"),
        ("users=1 account=a", "map:1: expected user=N, group=N, default or qos first"),
        ("qos high Preempt=low", "map:1: QOS high: expected one of Priority"),
        ("qos high Priority=1\nqos high Priority=2", "map:2: QOS high is defined twice"),
        ("qos Priority=1", "map:1: expected qos NAME Column=value"),
    ],
)
def test_a_bad_map_line_is_refused_with_its_line(text: str, message: str) -> None:
    with pytest.raises(SimError, match=message):
        sitemap.parse(text, "map")


# ---------------------------------------------------------------- the site


def test_the_site_has_slurm_confs_nodes_partitions_and_policy(tmp_path: Path) -> None:
    conf = BASE.replace("NodeName=n1 CPUs=2", "NodeName=n1 CPUs=2\nNodeName=n[2-3] CPUs=4")
    conf = conf.replace("Nodes=n1 Default", "Nodes=n[1-3] Default").replace(
        "SchedulerType=sched/builtin", "SchedulerParameters=bf_job_part_count_reserve=1"
    )
    site = siteconf.load(write(tmp_path, "slurm.conf", conf))
    assert [n.cpus for n in site.node_views().values()] == [2, 4, 4]
    assert site.total_cpus == 10
    assert site.partition_views()["lo"].nodes == ("n1", "n2", "n3")
    assert site.default_policy == "easy"
    assert site.backfill.easy
    again = siteconf.load(str(tmp_path / "slurm.conf"), ("SchedulerType=sched/builtin",))
    assert again.default_policy == "fcfs"
    plain = siteconf.load(str(tmp_path / "slurm.conf"), ("SchedulerParameters=bf_window=60",))
    assert plain.default_policy == "conservative"
    assert plain.backfill.window == 3600


@pytest.mark.parametrize(
    ("sets", "mapping", "message"),
    [
        (("PriorityWeightAge=abc",), "", "--set PriorityWeightAge=abc: bad PriorityWeightAge"),
        (("Foo",), "", "--set wants Key=Value, got 'Foo'"),
        (("PreemptType=preempt/qos",), "", "the sim does not model preemption"),
        ((), "user=1 partition=gpu", "the map names partition 'gpu'"),
        ((), "user=1 qos=high", "the map names QOS 'high' but defines it in no qos line"),
        ((), "qos high MaxSubmitPU=3", "QOS high: MaxSubmitPU: the sim has no submissions"),
    ],
)
def test_a_bad_site_is_refused(
    tmp_path: Path, sets: tuple[str, ...], mapping: str, message: str
) -> None:
    path = write(tmp_path, "slurm.conf", BASE)
    with pytest.raises(SimError, match=message):
        siteconf.load(path, sets, None, sitemap.parse(mapping, "map"))


DUMP = """\
# as sacctmgr dump writes it
Cluster - 'sim':Fairshare=1:QOS='normal,high'
Parent - 'root'
Account - 'physics':Description='physics':Fairshare=30:MaxJobs=1
Account - 'chem':Fairshare=10
Parent - 'physics'
User - 'alice':DefaultAccount='physics':Fairshare=1
Parent - 'chem'
User - 'bob':DefaultAccount='chem':QOS='normal'
"""


def test_a_dump_gives_accounts_users_shares_limits_and_inherited_qos(tmp_path: Path) -> None:
    path = write(tmp_path, "slurm.conf", BASE)
    site = siteconf.load(path, (), write(tmp_path, "dump.cfg", DUMP))
    site.prepare(read(str(swf(tmp_path, [(0, 10, 1, 1, 1)]))))
    assert site.assocs is not None
    alice = site.assocs.find("alice", "physics", "lo")
    bob = site.assocs.find("bob", "chem", "lo")
    assert alice is not None and bob is not None
    assert alice.qos == ("normal", "high") and bob.qos == ("normal",)
    assert alice.max_jobs == 1  # inherited from physics
    assert site.assocs.users == {"alice": "physics", "bob": "chem"}
    physics = site.assocs.find("", "physics", "")
    assert physics is not None and physics.shares == 30


@pytest.mark.parametrize(
    ("dump", "message"),
    [
        (DUMP + "User - 'carol':MaxSubmitJobs=3\n", "dump.cfg:10: User carol: maxsubmitjobs"),
        (DUMP + "User - 'carol':GrpJobsAccrue=3\n", "does not model"),
        ("Parent - 'root'\n", "dump.cfg: You need to specify a cluster name first"),
    ],
)
def test_a_bad_dump_is_refused(tmp_path: Path, dump: str, message: str) -> None:
    path = write(tmp_path, "slurm.conf", BASE)
    with pytest.raises(SimError, match=message):
        siteconf.load(path, (), write(tmp_path, "dump.cfg", dump))


def test_what_the_site_would_refuse_or_never_start_is_skipped_and_counted(
    tmp_path: Path,
) -> None:
    conf = BASE.replace("PartitionName=hi Nodes=n1", "PartitionName=hi Nodes=n1 MaxTime=5")
    path = write(tmp_path, "slurm.conf", conf + "AccountingStorageEnforce=limits,qos\n")
    mapping = sitemap.parse(
        "user=1 name=alice\nuser=2 name=bob qos=high\nuser=3 name=alice partition=hi\n"
        "qos high Priority=1\nqos normal MaxTRES=cpu=1\n",
        "map",
    )
    site = siteconf.load(path, (), write(tmp_path, "dump.cfg", DUMP), mapping)
    jobs = [
        (0, 10, 1, 1, 1),  # alice: runs
        (0, 10, 3, 1, 1),  # more than the partition's 2 CPUs
        (0, 10, 2, 1, 1),  # over QOS normal's MaxTRES=cpu=1 by itself
        (0, 10, 1, 2, 1),  # bob may not use QOS high
        (0, 10, 1, 4, 1),  # u4 has no association
        (0, 10, 1, 3, 1),  # 600 s over partition hi's MaxTime=5
    ]
    kept, skipped = site.prepare(read(str(swf(tmp_path, jobs))))
    assert [r.number for r in kept.records] == [1]
    assert skipped == {
        SKIP_PARTITION_CPUS: 1,
        SKIP_LIMIT: 1,
        SKIP_QOS: 1,
        SKIP_ACCOUNT: 1,
        SKIP_PARTITION_TIME: 1,
    }


# ---------------------------------------------------------------- replays


# Job 1 fills the node until 100; jobs 2 (partition lo) and 3 (hi) wait for it.
FILL_THEN_TWO = [(0, 100, 2, 1, 1), (10, 10, 2, 1, 1), (20, 10, 2, 2, 1)]


@pytest.mark.parametrize(("weight", "second"), [("0", 2), ("1000", 3)])
def test_partition_factor_orders_the_queue(tmp_path: Path, weight: str, second: int) -> None:
    """With PriorityWeightPartition, job 3 in partition hi passes job 2 (lo)."""
    got = starts(
        tmp_path,
        FILL_THEN_TWO,
        sets=(f"PriorityWeightPartition={weight}",),
        mapping="user=2 partition=hi",
    )
    assert got[1] == 0
    assert got[second] == 100 and got[5 - second] == 110


@pytest.mark.parametrize(("weight", "second"), [("0", 2), ("1000", 3)])
def test_qos_priority_orders_the_queue(tmp_path: Path, weight: str, second: int) -> None:
    got = starts(
        tmp_path,
        FILL_THEN_TWO,
        sets=(f"PriorityWeightQOS={weight}",),
        mapping="user=2 qos=high\nqos high Priority=10\n",
    )
    assert got[second] == 100 and got[5 - second] == 110


@pytest.mark.parametrize(("weight", "second"), [("0", 2), ("10000", 3)])
def test_fair_share_favours_the_user_who_used_less(
    tmp_path: Path, weight: str, second: int
) -> None:
    """u1 holds the node from 0 to 1000; at 1000 the calculation (every minute of
    simulated time) charges u1, so u2's job 3 goes before u1's job 2."""
    jobs = [(0, 1000, 2, 1, 1), (500, 10, 2, 1, 1), (510, 10, 2, 2, 1)]
    got = starts(
        tmp_path,
        jobs,
        sets=(f"PriorityWeightFairshare={weight}", "PriorityCalcPeriod=1"),
    )
    assert got[second] == 1000 and got[5 - second] == 1010


def test_age_lets_an_old_small_job_pass(tmp_path: Path) -> None:
    """Job size favours the 2-CPU job 3; age (max after 10 minutes) outweighs it for
    job 2, submitted 590 s earlier."""
    jobs = [(0, 1000, 2, 1, 1), (10, 10, 1, 1, 1), (600, 10, 2, 2, 1)]
    size_only = starts(tmp_path, jobs, sets=("PriorityWeightJobSize=1000",))
    assert size_only[3] == 1000 and size_only[2] == 1010
    aged = starts(
        tmp_path,
        jobs,
        sets=(
            "PriorityWeightJobSize=1000",
            "PriorityWeightAge=10000",
            "PriorityMaxAge=10",
            "PriorityCalcPeriod=1",
        ),
    )
    assert aged[2] == 1000 and aged[3] == 1010


def test_a_qos_limit_holds_a_users_second_job(tmp_path: Path) -> None:
    jobs = [(0, 100, 1, 1, 1), (1, 100, 1, 1, 1)]
    free = starts(tmp_path, jobs, mapping="qos normal MaxJobsPU=1\n")
    assert free == {1: 0, 2: 1}  # AccountingStorageEnforce has no limits: not enforced
    held = starts(
        tmp_path,
        jobs,
        sets=("AccountingStorageEnforce=limits",),
        mapping="qos normal MaxJobsPU=1\n",
    )
    assert held == {1: 0, 2: 100}


def test_a_dump_limit_holds_an_accounts_second_job(tmp_path: Path) -> None:
    jobs = [(0, 100, 1, 1, 1), (1, 100, 1, 2, 1)]
    got = starts(
        tmp_path,
        jobs,
        sets=("AccountingStorageEnforce=limits",),
        mapping="user=1 name=alice\nuser=2 name=bob\n",
        dump=(
            "Cluster - 'sim'\nParent - 'root'\nAccount - 'physics':GrpJobs=1\n"
            "Parent - 'physics'\nUser - 'alice'\nUser - 'bob'\n"
        ),
    )
    assert got == {1: 0, 2: 100}


def test_heterogeneous_nodes_and_backfill_from_slurm_conf(tmp_path: Path) -> None:
    """n1 has 2 CPUs, n2 4. Job 1 holds n2's 4 until 100; job 2 (6 CPUs) waits for
    it; job 3 (2 CPUs, 50 s) fits on n1 before 100: backfill starts it at once."""
    conf = BASE.replace("NodeName=n1 CPUs=2", "NodeName=n1 CPUs=2\nNodeName=n2 CPUs=4")
    conf = conf.replace("Nodes=n1 Default", "Nodes=n[1-2] Default")
    jobs = [(0, 100, 4, 1, 1, 100), (1, 10, 6, 1, 1, 60), (2, 50, 2, 1, 1, 60)]
    fifo = starts(tmp_path, jobs, conf=conf)
    assert fifo == {1: 0, 2: 100, 3: 110}
    easy = starts(tmp_path, jobs, conf=conf, policy="easy")
    assert easy == {1: 0, 2: 100, 3: 2}


def test_groups_name_each_jobs_partition_and_account(tmp_path: Path) -> None:
    path = write(tmp_path, "slurm.conf", BASE)
    site = siteconf.load(path, (), None, sitemap.parse("user=2 partition=hi account=x", "m"))
    trace = read(str(swf(tmp_path, FILL_THEN_TWO)))
    result = replay_site(site, trace, "fcfs")
    named = groups(site, trace)
    assert [named["partition"](j) for j in result.jobs] == ["lo", "lo", "hi"]
    assert [named["account"](j) for j in result.jobs] == ["g1", "g1", "x"]
    assert result.total_cpus == 2


# ---------------------------------------------------------------- the command


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.corral", "sim", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_site_errors_are_one_line(tmp_path: Path) -> None:
    trace = str(swf(tmp_path, FILL_THEN_TWO))
    conf = write(tmp_path, "slurm.conf", BASE)
    bad_map = write(tmp_path, "bad.map", "user=1 partition=nowhere\n")
    cases = [
        (("-f", str(tmp_path / "none.conf")), "none.conf: cannot read"),
        (("-f", conf, "--set", "PriorityWeightAge=x"), "--set PriorityWeightAge=x: bad"),
        (("-f", conf, "--map", bad_map), "the map names partition 'nowhere'"),
        (("-f", conf, "--map", str(tmp_path / "none.map")), "none.map: cannot read"),
        (("-f", conf, "--nodes", "2"), "--nodes and -f do not go together"),
        (("--map", bad_map), "--set, --accounts and --map describe a slurm.conf's cluster"),
        (("--policy", "fcfs,fcfs"), "--policy names a policy twice"),
        (("--policy", "fcfs,,easy"), "--policy wants names separated by commas"),
        (("--policy", "fcfs,sjf"), "unknown policy 'sjf'"),
        (("--policy", "fcfs,easy", "--csv", str(tmp_path / "o.csv")), "--csv writes one"),
    ]
    for args, message in cases:
        result = _cli(trace, *args)
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr.startswith("corral sim: error: "), (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)


def test_cli_warns_of_what_the_controller_would_ignore(tmp_path: Path) -> None:
    """An unknown key, in the file or a --set line, changes nothing: warned of as the
    controller logs it, with the line it came from."""
    trace = str(swf(tmp_path, FILL_THEN_TWO))
    conf = write(tmp_path, "slurm.conf", BASE + "Frobnicate=1\n")
    result = _cli(trace, "-f", conf, "--set", "Wibble=2", "--quiet")
    assert result.returncode == 0, result.stderr
    own = len(BASE.splitlines()) + 1
    assert result.stderr.splitlines() == [
        f"corral sim: warning: {conf}:{own}: unknown key 'Frobnicate' ignored",
        "corral sim: warning: --set Wibble=2: unknown key 'Wibble' ignored",
    ]


def test_cli_one_policy_on_a_site_prints_per_partition_and_account(tmp_path: Path) -> None:
    trace = str(swf(tmp_path, FILL_THEN_TWO))
    conf = write(tmp_path, "slurm.conf", BASE)
    mapping = write(tmp_path, "m.map", "user=2 partition=hi account=x\n")
    result = _cli(trace, "-f", conf, "--map", mapping, "--set", "PriorityWeightPartition=9")
    assert result.returncode == 0, result.stderr
    assert "3 nodes" not in result.stdout and "1 node, 2 CPUs, policy fcfs" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[-6][:7] == ["fcfs", "hi", "1", "80.0", "s", "80", "s"]  # job 3 waited 80 s
    assert rows[-1][:3] == ["fcfs", "x", "1"]


def test_cli_json_on_a_site_has_the_clusters_cpus_and_groups(tmp_path: Path) -> None:
    trace = str(swf(tmp_path, FILL_THEN_TWO))
    conf = write(tmp_path, "slurm.conf", BASE.replace("CPUs=2", "CPUs=2\nNodeName=n2 CPUs=4"))
    result = _cli(trace, "-f", conf, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["cpus"] == 6 and data["nodes"] == 2 and "cpus_per_node" not in data
    assert data["partitions"]["lo"]["jobs"] == 3
    assert data["accounts"]["g1"]["jobs"] == 3


def test_cli_png_of_a_comparison(tmp_path: Path) -> None:
    png = tmp_path / "cmp.png"
    trace = str(swf(tmp_path, FILL_THEN_TWO))
    result = _cli(
        trace, "--nodes", "1", "--cpus-per-node", "2", "--policy", "fcfs,easy", "--png", str(png)
    )
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert result.returncode == 1
        assert result.stderr.startswith("corral sim: error: --png needs matplotlib")
        assert not png.exists()
    else:
        assert result.returncode == 0, result.stderr
        assert png.read_bytes().startswith(b"\x89PNG")


def test_a_partitions_access_lists_and_max_nodes_skip_jobs(tmp_path: Path) -> None:
    conf = (
        BASE.replace("NodeName=n1 CPUs=2", "NodeName=n[1-3] CPUs=2")
        .replace("Nodes=n1 Default=YES", "Nodes=n[1-3] Default=YES MaxNodes=2 AllowQos=normal")
        .replace("PartitionName=hi Nodes=n1", "PartitionName=hi Nodes=n1 AllowGroups=g7")
    )
    path = write(tmp_path, "slurm.conf", conf)
    mapping = sitemap.parse("user=2 qos=high\nuser=3 partition=hi\nqos high\n", "map")
    site = siteconf.load(path, (), None, mapping)
    jobs = [
        (0, 10, 4, 1, 1),  # 2 nodes x 2 CPUs: fits MaxNodes=2
        (0, 10, 5, 1, 1),  # 5 CPUs need 3 nodes
        (0, 10, 1, 2, 1),  # QOS high: not in lo's AllowQos
        (0, 10, 1, 3, 1),  # group g1 is not hi's AllowGroups g7
        (0, 10, 1, 3, 7),  # group g7 is
    ]
    kept, skipped = site.prepare(read(str(swf(tmp_path, jobs))))
    assert [r.number for r in kept.records] == [1, 5]
    assert skipped == {SKIP_PARTITION_CPUS: 1, SKIP_PARTITION_ACCESS: 2}
