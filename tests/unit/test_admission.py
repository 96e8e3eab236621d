"""controller.admission: defaults, refusals with Slurm's errno, arrays and parse_array."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import GID, NOW, UID, slurm_conf

from controller.admission import Admitted, admit, parse_array, partition_view, static_nodes
from controller.core.placement import place
from controller.core.plan import Start
from controller.core.priority import NO_RANKING
from controller.jobspec import JobSpec, from_fields
from controller.jobstate import JobState, Reason
from controller.principal import Principal, principal_for
from corral import arrayspec, errors
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.wire import codec

CONF = slurm_conf(
    "NodeName=n[1-4] CPUs=4 RealMemory=4000 Feature=a",
    "NodeName=big CPUs=16 RealMemory=64000 Feature=b Weight=5",
    "PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=60 DefaultTime=10",
    "PartitionName=long Nodes=n[1-4],big PriorityTier=2",
    "PartitionName=capped Nodes=big MaxTime=120",
    "PartitionName=excl Nodes=n[1-2] OverSubscribe=EXCLUSIVE DefMemPerCPU=500",
    "PartitionName=wheel Nodes=n1 AllowGroups=corral-no-such-group",
    "PartitionName=physics Nodes=n1 AllowAccounts=physics",
    max_array_size=100,
)
NO_DEFAULT = slurm_conf("NodeName=n1 CPUs=4 RealMemory=4000", "PartitionName=p Nodes=n1")
NO_REQUEUE = slurm_conf(
    "JobRequeue=0", "NodeName=n1 CPUs=4 RealMemory=4000", "PartitionName=p Nodes=n1 Default=YES"
)

USER = principal_for(UID, GID)
ADMIN = principal_for(0, 0)
FIRST = 500
SCRIPT = "#!/bin/sh\ntrue\n"


def spec(**fields: Any) -> JobSpec:
    """A JobSpec as the controller receives it: through the wire codec, every field present."""
    return from_fields(
        codec.decode("JobSpec", codec.encode("JobSpec", {"script": SCRIPT, **fields}))
    )


def submit(
    conf: SlurmConfig = CONF,
    who: Principal = USER,
    states: dict[str, str] | None = None,
    **fields: Any,
) -> Admitted:
    return admit(spec(**fields), who, conf, states or {}, FIRST, NOW, 0)


def test_principal_is_not_an_operator() -> None:
    assert not USER.is_admin  # the refusals below depend on it
    assert ADMIN.is_admin
    assert (USER.uid, USER.gid) == (UID, GID)


# ---------------------------------------------------------------- defaults

DEFAULTS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "plain",
        {},
        {
            "partitions": ("debug",),
            "time_limit": 10,
            "min_nodes": 1,
            "max_nodes": 0,
            "num_tasks": 1,
            "cpus_per_task": 1,
            "tasks_given": False,
            "nodes_given": False,
            "name": "sbatch",
            "state": JobState.PENDING,
            "reason": Reason.NONE,
            "held": "",
            "submit_time": NOW,
            "eligible_time": NOW,
            "work_dir": "/",
            "std_in": "/dev/null",
            "qos": "normal",
            "requeue": True,
            "array_task_id": None,
            "job_id": FIRST,
        },
    ),
    ("partition-without-default-time-uses-max", {"partitions": ["capped"]}, {"time_limit": 120}),
    ("unlimited-partition", {"partitions": ["long"]}, {"time_limit": -1}),
    (
        "first-partition-gives-time-default",
        {"partitions": ["long", "debug"]},
        {"partitions": ("long", "debug"), "time_limit": -1},
    ),
    (
        "duplicate-partitions-collapse",
        {"partitions": ["debug", "debug"]},
        {"partitions": ("debug",)},
    ),
    ("explicit-time", {"time_limit": 30}, {"time_limit": 30}),
    ("unlimited-time-in-bounded-partition", {"time_limit": -1}, {"time_limit": -1}),
    (
        "nodes",
        {"min_nodes": 2},
        {"min_nodes": 2, "num_tasks": 2, "tasks_given": False, "nodes_given": True},
    ),
    ("one-node-given", {"min_nodes": 1}, {"min_nodes": 1, "nodes_given": True}),
    (
        "tasks",
        {"num_tasks": 3},
        {"min_nodes": 1, "num_tasks": 3, "tasks_given": True, "nodes_given": False},
    ),
    (
        "tasks-beyond-one-node-are-packed-later",
        {"num_tasks": 8},
        {"min_nodes": 1, "num_tasks": 8, "nodes_given": False},
    ),
    (
        "nodes-and-tasks",
        {"min_nodes": 2, "num_tasks": 5},
        {"min_nodes": 2, "num_tasks": 5, "tasks_given": True, "nodes_given": True},
    ),
    (
        "nodes-times-tasks-per-node",
        {"min_nodes": 2, "ntasks_per_node": 2},
        {"min_nodes": 2, "num_tasks": 4, "ntasks_per_node": 2, "nodes_given": True},
    ),
    (
        "tasks-over-tasks-per-node",
        {"num_tasks": 6, "ntasks_per_node": 2},
        {"min_nodes": 3, "num_tasks": 6, "nodes_given": True},
    ),
    ("cpus-per-task", {"cpus_per_task": 4}, {"cpus_per_task": 4}),
    (
        "required-nodes-set-count",
        {"req_nodes": "n[1-2]"},
        {"min_nodes": 2, "req_nodes": ("n1", "n2"), "nodes_given": False},
    ),
    (
        "required-nodes-raise-given-count",
        {"min_nodes": 1, "req_nodes": "n[1-2]"},
        {"min_nodes": 2, "req_nodes": ("n1", "n2"), "nodes_given": True},
    ),
    (
        "more-nodes-than-required",
        {"min_nodes": 3, "req_nodes": "n1"},
        {"min_nodes": 3, "req_nodes": ("n1",), "nodes_given": True},
    ),
    ("excluded-nodes", {"exc_nodes": "n[1-3]"}, {"exc_nodes": ("n1", "n2", "n3")}),
    ("hold", {"hold": True}, {"held": "user", "reason": Reason.JOB_HELD_USER}),
    ("begin-later", {"begin_time": NOW + 60}, {"begin_time": NOW + 60, "eligible_time": NOW + 60}),
    ("begin-past", {"begin_time": NOW - 60}, {"eligible_time": NOW}),
    (
        "name-and-paths",
        {"name": "train", "work_dir": "/w", "std_out": "o-%j"},
        {"name": "train", "work_dir": "/w", "std_out": "o-%j"},
    ),
    ("no-requeue", {"requeue": False}, {"requeue": False}),
    ("mem", {"mem_per_node": 1000}, {"mem_per_node": 1000, "mem_per_cpu": None}),
    ("mem-zero-is-whole-node", {"mem_per_node": 0}, {"mem_per_node": 0}),
    ("mem-per-cpu", {"mem_per_cpu": 100}, {"mem_per_cpu": 100, "mem_per_node": None}),
    ("constraint", {"constraint": "a"}, {"constraint": "a"}),
    ("constraint-count", {"constraint": "a*2"}, {"constraint": "a*2"}),
    (
        "constraint-matching-or",
        {"partitions": ["long"], "constraint": "[a|b]"},
        {"constraint": "[a|b]"},
    ),
    ("oversubscribe", {"oversubscribe": True}, {"oversubscribe": True}),
    ("no-oversubscribe-by-default", {}, {"oversubscribe": False, "gres": ""}),
    ("dependency-kept", {"dependency": "afterok:1"}, {"dependency": "afterok:1"}),
    ("account-allowed", {"partitions": ["physics"], "account": "physics"}, {"account": "physics"}),
    ("exclusive", {"exclusive": True}, {"exclusive": True}),
    (
        "big-cpu-request-on-big-node",
        {"partitions": ["long"], "cpus_per_task": 16},
        {"cpus_per_task": 16},
    ),
]


@pytest.mark.parametrize(
    ("fields", "expected"), [c[1:] for c in DEFAULTS], ids=[c[0] for c in DEFAULTS]
)
def test_defaults(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    job = submit(**fields).job
    assert {k: getattr(job, k) for k in expected} == expected
    assert (job.uid, job.gid, job.user) == (USER.uid, USER.gid, USER.user)


def test_requeue_default_comes_from_job_requeue() -> None:
    job = submit(NO_REQUEUE).job
    assert job.requeue is False
    job = submit(NO_REQUEUE, requeue=True).job
    assert job.requeue is True


def test_payload_holds_script_argv_and_sorted_environment() -> None:
    admitted = submit(argv=["a", "b c"], environment={"Z": "1", "A": "ü"})
    assert admitted.payload.script == SCRIPT
    assert admitted.payload.argv == ("a", "b c")
    assert admitted.payload.environment == (("A", "ü"), ("Z", "1"))


@pytest.mark.parametrize(
    ("fields"),
    [{"nice": -5}, {"priority": 7}, {"partitions": ["wheel"]}],
    ids=["negative-nice", "priority", "allow-groups"],
)
def test_operator_may_do_what_users_may_not(fields: dict[str, Any]) -> None:
    job = submit(who=ADMIN, **fields).job
    assert job.uid == 0


def test_admin_priority_is_recorded() -> None:
    job = submit(who=ADMIN, priority=7).job
    assert (job.admin_priority, NO_RANKING.of(job)) == (7, 7)


# ---------------------------------------------------------------- refusals

REFUSALS: list[tuple[str, SlurmConfig, dict[str, Any], dict[str, str], int]] = [
    ("invalid-partition", CONF, {"partitions": ["nope"]}, {}, 2000),
    ("one-of-partitions-invalid", CONF, {"partitions": ["debug", "nope"]}, {}, 2000),
    ("no-default-partition", NO_DEFAULT, {}, {}, 2001),
    ("nice-below-zero", CONF, {"nice": -1}, {}, 2002),
    ("priority-by-user", CONF, {"priority": 5}, {}, 2002),
    ("group-not-allowed", CONF, {"partitions": ["wheel"]}, {}, 2003),
    ("max-nodes-below-min", CONF, {"min_nodes": 3, "max_nodes": 2}, {}, 2006),
    ("zero-nodes", CONF, {"min_nodes": 0}, {}, 2006),
    ("no-script", CONF, {"script": ""}, {}, 2009),
    ("more-nodes-than-partition", CONF, {"min_nodes": 5}, {}, 2014),
    ("more-cpus-than-any-node", CONF, {"cpus_per_task": 8}, {}, 2014),
    ("more-cpus-even-on-big", CONF, {"partitions": ["long"], "cpus_per_task": 17}, {}, 2014),
    ("more-memory-than-any-node", CONF, {"mem_per_node": 4001}, {}, 2014),
    ("mem-per-cpu-too-big", CONF, {"num_tasks": 2, "mem_per_cpu": 2001}, {}, 2014),
    ("exclusive-def-mem-per-cpu", CONF, {"partitions": ["excl"], "mem_per_cpu": 1001}, {}, 2014),
    ("feature-not-in-partition", CONF, {"constraint": "b"}, {}, 2029),
    ("unknown-feature", CONF, {"constraint": "nosuchfeature"}, {}, 2029),
    ("one-of-and-features-missing", CONF, {"constraint": "a&b"}, {}, 2029),
    ("feature-only-on-excluded-nodes", CONF, {"constraint": "a", "exc_nodes": "n[1-4]"}, {}, 2014),
    ("one-node-given-too-many-tasks", CONF, {"min_nodes": 1, "num_tasks": 5}, {}, 2014),
    ("more-tasks-than-partition-cpus", CONF, {"num_tasks": 17}, {}, 2014),
    ("required-nodes-over-max", CONF, {"req_nodes": "n[1-3]", "max_nodes": 2}, {}, 2006),
    ("required-node-outside-partition", CONF, {"req_nodes": "big"}, {}, 2014),
    ("required-node-also-excluded", CONF, {"req_nodes": "n1", "exc_nodes": "n1"}, {}, 2014),
    ("all-nodes-excluded", CONF, {"exc_nodes": "n[1-4]"}, {}, 2014),
    ("partition-inactive", CONF, {}, {"debug": "INACTIVE"}, 2015),
    ("partition-drain", CONF, {}, {"debug": "DRAIN"}, 2015),
    ("unknown-required-node", CONF, {"req_nodes": "n9"}, {}, 2018),
    ("unknown-excluded-node", CONF, {"exc_nodes": "zz1"}, {}, 2018),
    ("bad-hostlist", CONF, {"req_nodes": "n[1-"}, {}, 2018),
    ("bad-dependency", CONF, {"dependency": "bogus:1"}, {}, 2038),
    ("dependency-without-ids", CONF, {"dependency": "afterok"}, {}, 2038),
    ("account-not-allowed", CONF, {"partitions": ["physics"], "account": "chem"}, {}, 2045),
    ("zero-time-limit", CONF, {"time_limit": 0}, {}, 2051),
    ("negative-time-limit", CONF, {"time_limit": -2}, {}, 2051),
    ("array-garbage", CONF, {"array": "abc"}, {}, 2081),
    ("array-reversed", CONF, {"array": "5-1"}, {}, 2081),
    ("array-too-big", CONF, {"array": "0-100"}, {}, 2081),
    ("array-open-range", CONF, {"array": "1-"}, {}, 2081),
    ("array-unbalanced-bracket", CONF, {"array": "[1-3"}, {}, 2081),
    ("mem-and-mem-per-cpu", CONF, {"mem_per_node": 100, "mem_per_cpu": 10}, {}, errors.EINVAL),
    ("zero-of-no-count", CONF, {"node_info_zeros": ["threads_per_core"]}, {}, errors.EINVAL),
    ("zero-of-a-count-given", CONF,
     {"sockets_per_node": 1, "node_info_zeros": ["sockets_per_node"]}, {}, errors.EINVAL),
]  # fmt: skip


@pytest.mark.parametrize(
    ("conf", "fields", "states", "code"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_refusal(
    conf: SlurmConfig, fields: dict[str, Any], states: dict[str, str], code: int
) -> None:
    with pytest.raises(SlurmError) as info:
        submit(conf, states=states, **fields)
    assert info.value.code == code
    assert str(info.value)  # a message clients can print


def test_counts_given_as_0_are_kept_for_scontrol() -> None:
    """sbatch -B 0:0 sends both counts as given 0: the job keeps them (sorted) to show
    Socks/Node=0 and a ReqB:S:C:T C of 0, as Slurm 22.05 did."""
    job = submit(node_info_zeros=["sockets_per_node", "cores_per_socket"]).job
    assert job.node_info_zeros == ("cores_per_socket", "sockets_per_node")


def test_partition_down_only_waits() -> None:
    job = submit(states={"debug": "DOWN"}).job
    assert job.state is JobState.PENDING


def test_many_tasks_spread_over_nodes_like_slurm() -> None:
    """``sbatch -n 8`` on 4-CPU nodes is admitted and runs on two nodes, as in Slurm."""
    job = submit(num_tasks=8).job
    assert (job.num_tasks, job.nodes_given) == (8, False)
    start = place(job, partition_view(CONF, "debug"), static_nodes(CONF))
    assert isinstance(start, Start)
    assert (start.nodes, start.cpus) == (("n1", "n2"), (4, 4))


def test_required_nodes_raise_node_count() -> None:
    """``-N1 -w n[1-2]``: Slurm raises the node count to the nodes named, and it runs."""
    job = submit(min_nodes=1, req_nodes="n[1-2]").job
    assert (job.min_nodes, job.nodes_given) == (2, True)
    start = place(job, partition_view(CONF, "debug"), static_nodes(CONF))
    assert isinstance(start, Start)
    assert start.nodes == ("n1", "n2")


def test_required_node_list_grows_for_more_tasks() -> None:
    """sbatch(1) --nodelist: "If you specify a minimum node or processor count larger
    than can be satisfied by the supplied node list, additional resources will be
    allocated on other nodes as needed." ``-w n1 -n 5`` on 4-CPU nodes: n1 and one more.
    """
    job = submit(req_nodes="n1", num_tasks=5).job
    start = place(job, partition_view(CONF, "debug"), static_nodes(CONF))
    assert isinstance(start, Start)
    assert start.nodes[0] == "n1"
    assert len(start.nodes) == 2
    assert sum(start.cpus) == 5


@pytest.mark.parametrize(
    "constraint", ["nosuchfeature", "b", "a&b"], ids=["unknown", "other-partition", "and"]
)
def test_unknown_feature_is_invalid_feature(constraint: str) -> None:
    with pytest.raises(SlurmError) as info:
        submit(constraint=constraint)
    assert info.value.code == errors.ESLURM_INVALID_FEATURE == 2029


def test_feature_in_one_of_the_partitions_is_enough() -> None:
    job = submit(partitions=["debug", "capped"], constraint="b").job
    assert job.constraint == "b"


def test_errno_values_are_slurms() -> None:
    """The numbers clients print and scripts test, from Slurm's slurm_errno.h."""
    assert (
        errors.ESLURM_INVALID_PARTITION_NAME,
        errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
        errors.ESLURM_INVALID_FEATURE,
        errors.ESLURM_DISABLED,
        errors.ESLURM_JOB_NOT_PENDING,
        errors.ESLURM_INVALID_ARRAY,
        errors.ESLURM_INVALID_GRES,
    ) == (2000, 2014, 2029, 2037, 2073, 2081, 2072)


# ---------------------------------------------------------------- constraints, GRES, OverSubscribe


@pytest.mark.parametrize(
    "constraint",
    ["[a&b]", "a*2&b", "[a|b", "a]", "(a)b", "[a*2|b]", "a*0", "&a"],
    ids=[
        "and-in-brackets-without-counts",
        "count-beside-another-feature",
        "unbalanced-bracket",
        "stray-bracket",
        "text-after-parenthesis",
        "count-in-matching-or",
        "zero-count",
        "operator-first",
    ],
)
def test_malformed_constraint_is_invalid_feature(constraint: str) -> None:
    with pytest.raises(SlurmError) as info:
        submit(constraint=constraint)
    assert info.value.code == errors.ESLURM_INVALID_FEATURE


@pytest.mark.parametrize(
    "fields",
    [{"constraint": "a*5"}, {"constraint": "a*2", "min_nodes": 1}],
    ids=["more-counted-than-nodes", "count-over-node-count"],
)
def test_constraint_count_that_never_fits(fields: dict[str, Any]) -> None:
    with pytest.raises(SlurmError) as info:
        submit(**fields)
    assert info.value.code == errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE


GRES_CONF = slurm_conf(
    "GresTypes=gpu,nic",
    "NodeName=g[1-2] CPUs=4 RealMemory=4000 Gres=gpu:a100:2,nic:1",
    "NodeName=c1 CPUs=4 RealMemory=4000",
    "NodeName=v1 CPUs=4 RealMemory=4000 Gres=gpu:v100:4",
    "PartitionName=gpu Nodes=g[1-2],c1 Default=YES",
    "PartitionName=other Nodes=v1",
    "PartitionName=shared Nodes=c1 OverSubscribe=FORCE:2",
    "PartitionName=ask Nodes=c1 OverSubscribe=YES",
)


@pytest.mark.parametrize(
    "gres",
    ["gpu:1", "gpu:a100:2", "gpu", "gres/gpu:1,nic:1", "gpu:0"],
    ids=["untyped", "typed", "count-one", "several", "zero-count"],
)
def test_gres_accepted(gres: str) -> None:
    assert submit(GRES_CONF, gres=gres).job.gres == gres


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"gres": "gpu:v100:1"}, errors.ESLURM_INVALID_GRES),
        ({"gres": "fpga:1"}, errors.ESLURM_INVALID_GRES),
        ({"gres": "gpu:"}, errors.ESLURM_INVALID_GRES),
        ({"gres": "gpu:a:b"}, errors.ESLURM_INVALID_GRES),
        ({"gres": "gpu:3"}, errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE),
        ({"gres": "gpu:1", "min_nodes": 3}, errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE),
    ],
    ids=[
        "type-only-in-other-partition",
        "unknown-name",
        "missing-count",
        "too-many-fields",
        "more-than-any-node-has",
        "more-nodes-than-have-it",
    ],
)
def test_gres_refused(fields: dict[str, Any], code: int) -> None:
    with pytest.raises(SlurmError) as info:
        submit(GRES_CONF, **fields)
    assert info.value.code == code
    if code == errors.ESLURM_INVALID_GRES:
        assert str(info.value) == "Invalid generic resource (gres) specification"


def test_gres_in_one_of_the_partitions_is_enough() -> None:
    assert submit(GRES_CONF, partitions=["gpu", "other"], gres="gpu:v100:1").job.partitions


def test_empty_cluster_has_every_configured_gres_free() -> None:
    nodes = static_nodes(GRES_CONF)
    assert nodes["g1"].gres == (("gpu", "a100", 2), ("nic", "", 1))
    assert nodes["c1"].gres == ()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("gpu", (False, 1, False)), ("shared", (False, 2, True)), ("ask", (False, 4, False))],
    ids=["no", "force-2", "yes-default-4"],
)
def test_partition_oversubscribe(name: str, expected: tuple[bool, int, bool]) -> None:
    view = partition_view(GRES_CONF, name)
    assert (view.exclusive, view.max_share, view.force) == expected


# ---------------------------------------------------------------- arrays

ARRAYS = [
    ("1-3", [1, 2, 3], 0),
    ("0-6:2%2", [0, 2, 4, 6], 2),
    ("[1,5]", [1, 5], 0),
    ("7", [7], 0),
    ("3,1,2-3", [1, 2, 3], 0),
]


@pytest.mark.parametrize(
    ("array", "tasks", "throttle"),
    ARRAYS,
    ids=["range", "step-and-throttle", "brackets-list", "single", "overlap-sorted"],
)
def test_an_array_is_one_record_for_all_its_tasks(
    array: str, tasks: list[int], throttle: int
) -> None:
    admitted = submit(array=array, name="arr")
    job = admitted.job
    assert admitted.tasks == len(tasks)
    assert (job.job_id, job.array_job_id, job.array_task_id) == (FIRST, FIRST, None)
    assert arrayspec.expand(job.array_pending) == tasks
    assert (job.array_max_tasks, job.array_spec, job.name) == (throttle, array, "arr")
    assert job.display_id == f"{FIRST}_[{arrayspec.compress(tasks)}]"


PARSE_ARRAY_VALID = [
    ("1-10:2%3", [1, 3, 5, 7, 9], 3),
    ("0", [0], 0),
    ("0-2", [0, 1, 2], 0),
    ("1,3,5", [1, 3, 5], 0),
    ("[0-3]%1", [0, 1, 2, 3], 1),
    ("5-5", [5], 0),
    ("0-9:5", [0, 5], 0),
    ("99", [99], 0),
]


@pytest.mark.parametrize(
    ("text", "indices", "throttle"),
    PARSE_ARRAY_VALID,
    ids=[
        "doc-example",
        "zero",
        "range",
        "list",
        "brackets-throttle",
        "one-element-range",
        "step-beyond-end",
        "max-minus-one",
    ],
)
def test_parse_array(text: str, indices: list[int], throttle: int) -> None:
    assert parse_array(text, 100) == (indices, throttle)


PARSE_ARRAY_INVALID = [
    pytest.param("", id="empty"),
    pytest.param("abc", id="letters"),
    pytest.param("1-", id="open-range"),
    pytest.param("-", id="dash-only"),
    pytest.param("-1", id="negative"),
    pytest.param("3-1", id="reversed"),
    pytest.param("1-5:0", id="zero-step"),
    pytest.param("4:2", id="step-without-range"),
    pytest.param("1,,2", id="empty-item"),
    pytest.param("1-3%", id="empty-throttle"),
    pytest.param("%2", id="throttle-only"),
    pytest.param("100", id="at-max-size"),
    pytest.param("0-100", id="range-to-max-size"),
    pytest.param("1-3%a", id="letter-throttle"),
    pytest.param("1.5", id="decimal"),
    pytest.param("[1-3", id="unbalanced-bracket"),
    pytest.param("1-3]", id="unbalanced-close-bracket"),
    pytest.param("1 - 3", id="inner-blanks"),
    pytest.param("\u0661-\u0663", id="non-ascii-digits"),
]


@pytest.mark.parametrize("text", PARSE_ARRAY_INVALID)
def test_parse_array_invalid(text: str) -> None:
    with pytest.raises(SlurmError) as info:
        parse_array(text, 100)
    assert info.value.code == errors.ESLURM_INVALID_ARRAY


@given(
    lo=st.integers(0, 999),
    span=st.integers(0, 999),
    step=st.integers(1, 50),
    throttle=st.integers(0, 64),
)
def test_parse_array_range_matches_python_range(
    lo: int, span: int, step: int, throttle: int
) -> None:
    hi = lo + span
    text = f"{lo}-{hi}:{step}" + (f"%{throttle}" if throttle else "")
    if hi >= 1000:
        with pytest.raises(SlurmError):
            parse_array(text, 1000)
        return
    assert parse_array(text, 1000) == (list(range(lo, hi + 1, step)), throttle)


@given(st.lists(st.integers(0, 99), min_size=1, max_size=10))
def test_parse_array_list_is_sorted_and_unique(items: list[int]) -> None:
    assert parse_array(",".join(map(str, items)), 100) == (sorted(set(items)), 0)


def test_kill_invalid_depend_makes_kill_on_invalid_dep_the_default() -> None:
    kill = slurm_conf(
        "SchedulerParameters=kill_invalid_depend",
        "NodeName=n1 CPUs=4 RealMemory=4000",
        "PartitionName=p Nodes=n1 Default=YES",
    )
    assert submit(kill).job.kill_on_invalid_dep
    assert not submit(NO_REQUEUE).job.kill_on_invalid_dep
    assert submit(NO_REQUEUE, kill_on_invalid_dep=True).job.kill_on_invalid_dep
    assert not submit(kill, kill_on_invalid_dep=False).job.kill_on_invalid_dep  # =no wins
