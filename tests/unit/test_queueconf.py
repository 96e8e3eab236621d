"""queues.conf (corral/queueconf.py): the team queue tree, every key as docs/queues.md
gives it, and each tree that cannot hold refused with its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral import queueconf
from corral.config import load
from corral.confsyntax import ConfigError
from corral.queueconf import QueueConf, QueueSpec, ResourceQuota

PATH = "/etc/slurm/queues.conf"
GRES = ("gpu", "shard")

EXAMPLE = """\
# the brief's example: two levels under the root
QueueName=ai Parent=root Guarantee=gres/gpu=32 Limit=gres/gpu=48
QueueName=team-a Parent=ai Accounts=teama,TeamX Guarantee=cpu=64,mem=256G,gres/gpu=16 \\
    Limit=gres/gpu=32 BorrowLimit=gres/gpu=8 LendLimit=gres/gpu=8 OverQuotaWeight=2 \\
    Priority=1 Preemptible=yes ReclaimMinRuntime=10:00 PreemptMinRuntime=5:00 \\
    PreemptionDelay=2:00 WithinQueue=LowerPriority ReclaimWithinCohort=Any \\
    BorrowWithinCohort=LowerPriority:100
QueueName=team-b Parent=ai QOS=Normal Partitions=gpu Guarantee=gres/gpu=16
"""


def parse(text: str) -> QueueConf:
    return queueconf.parse(text, PATH, GRES)


def test_every_field_of_a_queue_is_read() -> None:
    conf = parse(EXAMPLE)
    assert conf.queues["team-a"] == QueueSpec(
        name="team-a",
        parent="ai",
        quotas={
            "cpu": ResourceQuota(guarantee=64),
            "mem": ResourceQuota(guarantee=256 * 1024),
            "gres/gpu": ResourceQuota(guarantee=16, limit=32, borrow_limit=8, lend_limit=8),
        },
        over_quota_weight=2.0,
        priority=1,
        accounts=("teama", "teamx"),
        preemptible=True,
        reclaim_min_runtime=600,
        preempt_min_runtime=300,
        preemption_delay=120,
        within_queue="LowerPriority",
        reclaim_within_cohort="Any",
        borrow_within_cohort="LowerPriority",
        borrow_priority_threshold=100,
        file=PATH,
        line=3,
    )
    # Defaults: what a queue line that names nothing else has.
    assert conf.queues["team-b"] == QueueSpec(
        name="team-b",
        parent="ai",
        quotas={"gres/gpu": ResourceQuota(guarantee=16)},
        qos=("normal",),
        partitions=("gpu",),
        file=PATH,
        line=8,
    )


def test_the_tree_runs_from_the_implicit_root_down() -> None:
    conf = parse(EXAMPLE)
    assert list(conf.queues) == ["root", "ai", "team-a", "team-b"]
    assert conf.queues["root"] == QueueSpec(name="root", parent=None, quotas={}, file=PATH)
    assert conf.children("root") == ("ai",)
    assert conf.children("ai") == ("team-a", "team-b")
    assert conf.children("team-a") == ()
    assert conf.leaves() == ("team-a", "team-b")


def test_parents_come_before_children_whatever_the_file_order() -> None:
    conf = parse(
        "QueueName=a2 Parent=a\nQueueName=b1 Parent=b\nQueueName=a1 Parent=a\n"
        "QueueName=b\nQueueName=a\nQueueName=root Priority=3\n"
    )
    assert list(conf.queues) == ["root", "b", "b1", "a", "a2", "a1"]
    assert conf.queues["root"].line == 6
    assert conf.queues["root"].priority == 3
    assert conf.queues["b"].parent == "root"  # Parent= defaults to the root
    assert conf.leaves() == ("b1", "a2", "a1")


@pytest.mark.parametrize(
    ("line", "resource", "quota"),
    [
        ("Guarantee=cpu=8", "cpu", ResourceQuota(guarantee=8)),
        ("Guarantee=mem=1T", "mem", ResourceQuota(guarantee=1024 * 1024)),
        ("Guarantee=mem=512", "mem", ResourceQuota(guarantee=512)),  # MiB, as sacctmgr
        ("Limit=mem=1500K", "mem", ResourceQuota(limit=2)),  # KiB round up
        ("Guarantee=node=2", "node", ResourceQuota(guarantee=2)),
        ("Guarantee=GRES/GPU:A100=4", "gres/gpu:a100", ResourceQuota(guarantee=4)),
        ("Limit=gres/shard=-1", "gres/shard", ResourceQuota()),  # -1: no limit, as KAI
        ("Limit=gres/gpu=0", "gres/gpu", ResourceQuota(limit=0)),
        ("Guarantee=gres/gpu=0 BorrowLimit=gres/gpu=0", "gres/gpu", ResourceQuota(borrow_limit=0)),
        ("Guarantee=gres/gpu=2 LendLimit=gres/gpu=1", "gres/gpu", ResourceQuota(2, lend_limit=1)),
        ("BorrowLimit=gres/gpu=3", "gres/gpu", ResourceQuota(borrow_limit=3)),
    ],
)
def test_resources_are_grptres_words(line: str, resource: str, quota: ResourceQuota) -> None:
    spec = parse(f"QueueName=q {line}\n").queues["q"]
    assert spec.quotas == {resource: quota}
    assert spec.quota(resource) == quota
    assert spec.quota("cpu" if resource != "cpu" else "node") == ResourceQuota()


@pytest.mark.parametrize(
    ("words", "field", "value"),
    [
        ("overquotaweight=0.5", "over_quota_weight", 0.5),
        ("Priority=4294967295", "priority", 4294967295),
        ("Preemptible=NO", "preemptible", False),
        ("ReclaimMinRuntime=1-00:00:01", "reclaim_min_runtime", 86401),
        ("PreemptMinRuntime=0:30", "preempt_min_runtime", 30),  # seconds stay seconds
        ("PreemptionDelay=0", "preemption_delay", 0),
        ("PreemptionDelay=1:00:00", "preemption_delay", 3600),
        ("WithinQueue=lowerornewerequalpriority", "within_queue", "LowerOrNewerEqualPriority"),
        ("WithinQueue=never", "within_queue", "Never"),
        ("ReclaimWithinCohort=NEVER", "reclaim_within_cohort", "Never"),
        ("ReclaimWithinCohort=LowerPriority", "reclaim_within_cohort", "LowerPriority"),
        ("BorrowWithinCohort=lowerpriority", "borrow_within_cohort", "LowerPriority"),
        ("BorrowWithinCohort=LowerPriority:7", "borrow_priority_threshold", 7),
        ("BorrowWithinCohort=Never", "borrow_priority_threshold", None),
        ("QueueingStrategy=strictfifo", "queueing_strategy", "StrictFIFO"),
        ("queueingstrategy=BESTEFFORTFIFO", "queueing_strategy", "BestEffortFIFO"),
        ("Accounts=A,b,a", "accounts", ("a", "b")),
        ("QOS=High", "qos", ("high",)),
        ("Partitions=GPU,cpu", "partitions", ("GPU", "cpu")),  # partition names keep case
        ('Accounts="x,y"', "accounts", ("x", "y")),
    ],
)
def test_each_key_is_read_in_any_case(words: str, field: str, value: object) -> None:
    spec = parse(f"QueueName=q {words}\n").queues["q"]
    assert getattr(spec, field) == value


def test_a_parent_without_a_guarantee_guarantees_its_childrens() -> None:
    """A child's guarantee needs one above it: a parent that names none holds the sum of
    its children's (the root excepted: it has the whole cluster)."""
    conf = parse(
        "QueueName=org Limit=gres/gpu=20\nQueueName=ai Parent=org\n"
        "QueueName=a Parent=ai Guarantee=gres/gpu=6,cpu=4\n"
        "QueueName=b Parent=ai Guarantee=gres/gpu=10\n"
    )
    assert conf.queues["ai"].quotas == {
        "gres/gpu": ResourceQuota(guarantee=16),
        "cpu": ResourceQuota(guarantee=4),
    }
    assert conf.queues["org"].quotas == {
        "gres/gpu": ResourceQuota(guarantee=16, limit=20),
        "cpu": ResourceQuota(guarantee=4),
    }
    assert conf.queues["root"].quotas == {}


def test_children_may_guarantee_less_than_their_parent() -> None:
    conf = parse(
        "QueueName=ai Guarantee=gres/gpu=16\nQueueName=a Parent=ai Guarantee=gres/gpu=8\n"
        "QueueName=b Parent=ai Guarantee=gres/gpu=8\nQueueName=c Parent=ai\n"
    )
    assert conf.queues["ai"].quota("gres/gpu").guarantee == 16
    assert conf.queues["c"].quotas == {}


@pytest.mark.parametrize(
    ("queue", "field", "seconds"),
    [
        ("root", "reclaim_min_runtime", 60),
        ("ai", "reclaim_min_runtime", 60),  # from the root
        ("a", "reclaim_min_runtime", 300),  # its own
        ("b", "reclaim_min_runtime", 60),  # from the root through ai
        ("a", "preempt_min_runtime", 120),  # from ai
        ("b", "preempt_min_runtime", 0),  # its own 0 stops the inheritance
        ("a", "preemption_delay", 0),  # nobody sets it
    ],
)
def test_min_runtimes_and_delay_are_inherited(queue: str, field: str, seconds: int) -> None:
    conf = parse(
        "QueueName=root ReclaimMinRuntime=1\nQueueName=ai PreemptMinRuntime=2\n"
        "QueueName=a Parent=ai ReclaimMinRuntime=5\n"
        "QueueName=b Parent=ai PreemptMinRuntime=0\n"
    )
    assert conf.effective(queue, field) == seconds


@pytest.mark.parametrize(
    ("text", "strategies"),
    [
        pytest.param("QueueName=a\n", ["BestEffortFIFO"] * 2, id="default"),
        pytest.param(
            "QueueName=root QueueingStrategy=StrictFIFO\nQueueName=a\n",
            ["StrictFIFO"] * 2,
            id="from the root",
        ),
        pytest.param(
            "QueueName=root QueueingStrategy=StrictFIFO\n"
            "QueueName=a QueueingStrategy=BestEffortFIFO\n",
            ["StrictFIFO", "BestEffortFIFO"],
            id="a leaf's own",
        ),
    ],
)
def test_the_queueing_strategy_is_inherited(text: str, strategies: list[str]) -> None:
    conf = parse(text)
    assert [conf.strategy("root"), conf.strategy("a")] == strategies


def test_only_the_three_times_are_inherited() -> None:
    with pytest.raises(ValueError, match="priority is not inherited"):
        parse(EXAMPLE).effective("team-a", "priority")


@pytest.mark.parametrize(
    ("account", "qos", "partition", "queue"),
    [
        ("teama", "normal", "gpu", "team-a"),  # the account first
        ("TEAMX", "", "", "team-a"),  # accounts in any case
        ("other", "NORMAL", "gpu", "team-b"),  # then the QOS
        ("other", "high", "gpu", "team-b"),  # then the partition
        ("other", "high", "GPU", None),  # partitions keep their case
        ("other", "high", "cpu", None),  # not in a queue
        ("", "", "", None),
    ],
)
def test_a_job_lands_by_account_then_qos_then_partition(
    account: str, qos: str, partition: str, queue: str | None
) -> None:
    conf = parse(EXAMPLE)
    assert conf.queue_of(account, qos, partition) == queue


def test_a_file_of_comments_is_the_root_alone() -> None:
    conf = parse("# nothing yet\n\n")
    assert list(conf.queues) == ["root"]
    assert conf.leaves() == ("root",)
    assert conf.queue_of("a", "normal", "p") is None


def test_included_files_are_read_in_place(tmp_path: Path) -> None:
    (tmp_path / "teams.conf").write_text("QueueName=a Parent=ai Guarantee=gres/gpu=1\n")
    path = tmp_path / "queues.conf"
    path.write_text("QueueName=ai\nInclude teams.conf\nQueueName=b Parent=ai\n")
    conf = queueconf.load(str(path), ["gpu"])
    assert conf is not None
    assert conf.children("ai") == ("a", "b")
    assert conf.queues["a"].file == str(tmp_path / "teams.conf")


HEAD = "ClusterName=t\nSlurmctldHost=ctl\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=ALL\n"


def test_slurm_conf_loads_the_queues_beside_it(tmp_path: Path) -> None:
    slurm_conf = tmp_path / "slurm.conf"
    slurm_conf.write_text(HEAD + "GresTypes=GPU\n")
    assert load(str(slurm_conf)).queue_conf is None
    assert queueconf.load(str(tmp_path / "queues.conf")) is None
    (tmp_path / "queues.conf").write_text("QueueName=b\nInclude queues-%c.conf\n")
    (tmp_path / "queues-t.conf").write_text("QueueName=a Accounts=x Guarantee=gres/gpu=2\n")
    conf = load(str(slurm_conf))
    assert conf.queue_conf is not None
    assert conf.queue_conf.queue_of("x", "", "") == "a"


def test_slurm_conf_refuses_a_bad_queues_conf(tmp_path: Path) -> None:
    """GRES named in a queue must be in slurm.conf's GresTypes."""
    slurm_conf = tmp_path / "slurm.conf"
    slurm_conf.write_text(HEAD)
    (tmp_path / "queues.conf").write_text("QueueName=a Guarantee=gres/gpu=2\n")
    with pytest.raises(ConfigError) as caught:
        load(str(slurm_conf))
    assert str(caught.value) == (
        f"{tmp_path}/queues.conf:1: bad Guarantee value 'gres/gpu=2': "
        "unknown resource 'gres/gpu' (known: cpu, mem, node)"
    )


BAD = [
    # the line itself
    ("Parent=ai QueueName=a", "1: a queue line starts with QueueName=, not 'Parent'"),
    ("QueueName=a Color=red", "1: unknown key 'Color'"),
    ("QueueName=a QueueName=b", "1: QueueName given twice"),
    ("QueueName=a Priority=1 priority=2", "1: Priority given twice"),
    ("QueueName=a b", '1: cannot parse "b"'),
    ("QueueName=a/b", "1: bad QueueName value 'a/b': letters, digits, '-', '_' and '.' only"),
    ("QueueName=a\n\nQueueName=a", "3: queue a is defined twice (first at {path}:1)"),
    ("QueueName=root Parent=ai", "1: queue root is the top of the tree: it has no Parent"),
    # resources
    (
        "QueueName=a Guarantee=gres/foo=1",
        "1: bad Guarantee value 'gres/foo=1': unknown resource 'gres/foo' "
        "(known: cpu, mem, node, gres/gpu, gres/shard)",
    ),
    (
        "QueueName=a Limit=license/x=1",
        "1: bad Limit value 'license/x=1': unknown resource 'license/x' "
        "(known: cpu, mem, node, gres/gpu, gres/shard)",
    ),
    (
        "QueueName=a Limit=gres/gpu:=1",
        "1: bad Limit value 'gres/gpu:=1': unknown resource 'gres/gpu:' "
        "(known: cpu, mem, node, gres/gpu, gres/shard)",
    ),
    ("QueueName=a Guarantee=cpu", "1: bad Guarantee value 'cpu': 'cpu' is not RESOURCE=COUNT"),
    ("QueueName=a Guarantee=cpu=1,", "1: bad Guarantee value 'cpu=1,': '' is not RESOURCE=COUNT"),
    ("QueueName=a Guarantee=cpu=1,CPU=2", "1: bad Guarantee value 'cpu=1,CPU=2': cpu given twice"),
    ("QueueName=a Guarantee=cpu=many", "1: bad Guarantee value 'cpu=many': 'many' is not a count"),
    ("QueueName=a Guarantee=cpu=+1", "1: bad Guarantee value 'cpu=+1': '+1' is not a count"),
    ("QueueName=a Guarantee=mem=1X", "1: bad Guarantee value 'mem=1X': '1X' is not a size"),
    ("QueueName=a Guarantee=cpu=-1", "1: bad Guarantee value 'cpu=-1': cpu is negative"),
    ("QueueName=a Limit=cpu=-2", "1: bad Limit value 'cpu=-2': cpu is negative"),
    (
        "QueueName=a BorrowLimit=gres/gpu=-1",
        "1: bad BorrowLimit value 'gres/gpu=-1': gres/gpu is negative",
    ),
    (
        "QueueName=a LendLimit=gres/gpu=-3",
        "1: bad LendLimit value 'gres/gpu=-3': gres/gpu is negative",
    ),
    (
        "QueueName=a Guarantee=gres/gpu=9 Limit=gres/gpu=8",
        "1: queue a: Guarantee gres/gpu=9 is above its Limit gres/gpu=8",
    ),
    (
        "QueueName=a Guarantee=mem=2G Limit=mem=1G",
        "1: queue a: Guarantee mem=2048M is above its Limit mem=1024M",
    ),
    (
        "QueueName=a Guarantee=gres/gpu=2 LendLimit=gres/gpu=3",
        "1: queue a: LendLimit gres/gpu=3 is above its Guarantee gres/gpu=2",
    ),
    # words and numbers
    ("QueueName=a OverQuotaWeight=0", "1: bad OverQuotaWeight value '0': must be above 0"),
    ("QueueName=a OverQuotaWeight=-1", "1: bad OverQuotaWeight value '-1': must be above 0"),
    ("QueueName=a OverQuotaWeight=nan", "1: bad OverQuotaWeight value 'nan': must be above 0"),
    ("QueueName=a OverQuotaWeight=inf", "1: bad OverQuotaWeight value 'inf': must be above 0"),
    ("QueueName=a Priority=-1", "1: bad Priority value '-1': not a number"),
    ("QueueName=a Preemptible=maybe", "1: bad Preemptible value 'maybe': expected YES or NO"),
    ("QueueName=a PreemptionDelay=soon", "1: bad PreemptionDelay value 'soon': not a time"),
    ("QueueName=a ReclaimMinRuntime=-1", "1: bad ReclaimMinRuntime value '-1': not a time"),
    (
        "QueueName=a PreemptMinRuntime=UNLIMITED",
        "1: bad PreemptMinRuntime value 'UNLIMITED': not a time",
    ),
    (
        "QueueName=a WithinQueue=Always",
        "1: bad WithinQueue value 'Always': use Never, LowerPriority, LowerOrNewerEqualPriority",
    ),
    (
        "QueueName=a ReclaimWithinCohort=Some",
        "1: bad ReclaimWithinCohort value 'Some': use Never, LowerPriority, Any",
    ),
    (
        "QueueName=a BorrowWithinCohort=Any",
        "1: bad BorrowWithinCohort value 'Any': use Never, LowerPriority",
    ),
    (
        "QueueName=a BorrowWithinCohort=Never:5",
        "1: bad BorrowWithinCohort value 'Never:5': a threshold needs LowerPriority",
    ),
    (
        "QueueName=a BorrowWithinCohort=LowerPriority:high",
        "1: bad BorrowWithinCohort value 'LowerPriority:high': 'high' is not a priority",
    ),
    ("QueueName=a Accounts=x,,y", "1: bad Accounts value 'x,,y': an empty name"),
    (
        "QueueName=a QueueingStrategy=FIFO",
        "1: bad QueueingStrategy value 'FIFO': use BestEffortFIFO, StrictFIFO",
    ),
    # where jobs land
    ("QueueName=a Accounts=x\nQueueName=b Accounts=y,X", "2: account x is already in queue a"),
    ("QueueName=a QOS=hi\nQueueName=b QOS=HI", "2: QOS hi is already in queue a"),
    ("QueueName=a Partitions=p\nQueueName=b Partitions=p", "2: partition p is already in queue a"),
    (
        "QueueName=ai Accounts=x QOS=y\nQueueName=a Parent=ai",
        "1: queue ai has child queues, so it takes no jobs: Accounts=, QOS= belong on a leaf queue",
    ),
    (
        "QueueName=root Partitions=p\nQueueName=a",
        "1: queue root has child queues, so it takes no jobs: Partitions= belong on a leaf queue",
    ),
    (  # read on the leaf a job lands in: on a parent they would do nothing
        "QueueName=ai Preemptible=no WithinQueue=LowerPriority\nQueueName=a Parent=ai",
        "1: queue ai has child queues, so it takes no jobs: Preemptible=, WithinQueue= belong"
        " on a leaf queue",
    ),
    (
        "QueueName=ai ReclaimWithinCohort=Never BorrowWithinCohort=LowerPriority:5\n"
        "QueueName=a Parent=ai",
        "1: queue ai has child queues, so it takes no jobs: ReclaimWithinCohort=,"
        " BorrowWithinCohort= belong on a leaf queue",
    ),
    # the tree
    ("QueueName=a Parent=ai", "1: queue a: Parent ai is not a queue"),
    ("QueueName=a Parent=Root", "1: queue a: Parent Root is not a queue"),
    ("QueueName=a Parent=a", "1: queue a: its parents make a cycle (a -> a)"),
    (
        "QueueName=x Parent=b\nQueueName=a Parent=c\nQueueName=b Parent=a\nQueueName=c Parent=b",
        "2: queue a: its parents make a cycle (a -> c -> b -> a)",
    ),
    (
        "QueueName=ai Guarantee=gres/gpu=8\nQueueName=a Parent=ai Guarantee=gres/gpu=9",
        "2: queue a: Guarantee gres/gpu=9 is above its parent ai's gres/gpu=8",
    ),
    (
        "QueueName=ai Guarantee=gres/gpu=8\nQueueName=a Parent=ai\n"
        "QueueName=b Parent=a Guarantee=gres/gpu=9",
        # a's guarantee is its child's 9, above ai's 8
        "2: queue a: Guarantee gres/gpu=9 is above its parent ai's gres/gpu=8",
    ),
    (
        "QueueName=ai Guarantee=gres/gpu=8\nQueueName=a Parent=ai Guarantee=gres/gpu=5\n"
        "QueueName=b Parent=ai Guarantee=gres/gpu=4",
        "1: queue ai: its children's guarantees add up to gres/gpu=9, above its own "
        "Guarantee gres/gpu=8",
    ),
    (
        "QueueName=root Guarantee=cpu=10\nQueueName=a Guarantee=cpu=6\nQueueName=b Guarantee=cpu=6",
        "1: queue root: its children's guarantees add up to cpu=12, above its own Guarantee cpu=10",
    ),
    (
        "QueueName=ai Limit=gres/gpu=8\nQueueName=a Parent=ai Guarantee=gres/gpu=5\n"
        "QueueName=b Parent=ai Guarantee=gres/gpu=4",
        "1: queue ai: its children's guarantees add up to gres/gpu=9, above its Limit gres/gpu=8",
    ),
    ("QueueName=a \\\n  Priority=x", "1: bad Priority value 'x': not a number"),
    ("QueueName=a\nInclude missing.conf", "2: Include missing.conf: cannot read: "),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_file_is_refused_with_its_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text + "\n")
    expected = f"{PATH}:{message.format(path=PATH)}"
    if message.endswith(": "):  # the system's own words follow
        assert str(caught.value).startswith(expected)
    else:
        assert str(caught.value) == expected


def test_the_example_of_docs_queues_md_holds() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "queues.md").read_text()
    example = page.split("## EXAMPLE", 1)[1].split("## SEE ALSO", 1)[0]
    text = "\n".join(line[4:] for line in example.splitlines() if line.startswith("    "))
    conf = queueconf.parse(text, "queues.conf", ["gpu"])
    assert conf.leaves() == ("team-a", "team-b-train", "team-b-serve")
    assert conf.queue_of("nlp", "normal", "p") == "team-b-train"
    assert conf.queue_of("other", "serve", "p") == "team-b-serve"
    assert conf.queues["team-b-serve"].preemptible is False
    assert conf.effective("team-b-serve", "preemption_delay") == 120
    assert conf.queues["gpus"].quotas["cpu"] == ResourceQuota(guarantee=64)


#: A random tree: each queue's parent (an earlier queue or the root), its GPU guarantee
#: (None: not given) and its GPU limit (None: not given), written in reverse order.
TREES = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=20),
        st.none() | st.integers(min_value=0, max_value=12),
        st.none() | st.integers(min_value=0, max_value=12),
    ),
    min_size=1,
    max_size=8,
)


@given(TREES)
def test_any_tree_read_holds_its_guarantees(tree: list[tuple[int, int | None, int | None]]) -> None:
    lines = []
    for index, (parent, guarantee, limit) in enumerate(tree):
        words = [f"QueueName=q{index}", f"Parent=q{parent % index}" if index else ""]
        words += [f"Guarantee=gres/gpu={guarantee}"] if guarantee is not None else []
        words += [f"Limit=gres/gpu={limit}"] if limit is not None else []
        lines.append(" ".join(words))
    try:
        conf = parse("\n".join(reversed(lines)))
    except ConfigError:
        return
    seen = set()
    for name, spec in conf.queues.items():
        assert spec.parent is None or spec.parent in seen  # parents first
        seen.add(name)
        own = spec.quota("gres/gpu")
        assert own.limit is None or own.guarantee <= own.limit
        children = [conf.queues[c].quota("gres/gpu").guarantee for c in conf.children(name)]
        if name != "root":
            assert sum(children) <= own.guarantee
    assert len(conf.queues) == len(tree) + 1
