"""slurm.conf parsing: Slurm's syntax, defaults, node and partition rules, errors."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.config import (
    DEFAULT_PATH,
    ConfigError,
    HookConfig,
    NodeConfig,
    PartitionConfig,
    PriorityConfig,
    SlurmConfig,
    default_path,
    load,
    parse,
    show_config,
)

PATH = "/etc/corral/slurm.conf"
HEAD = "ClusterName=test\nSlurmctldHost=ctl\n"

# The example from slurm-interfaces.md section 6.1.
EXAMPLE = """\
ClusterName=test
SlurmctldHost=ctl
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
NodeName=DEFAULT CPUs=8 Sockets=1 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=16000 State=UNKNOWN
NodeName=node[1-4] Gres=gpu:a100:2 Features=intel,ib
PartitionName=debug Nodes=node[1-4] Default=YES MaxTime=30 State=UP
PartitionName=batch Nodes=ALL MaxTime=UNLIMITED PriorityTier=10
"""


def conf(body: str, path: str = PATH) -> SlurmConfig:
    return parse(HEAD + body, path)


def error_of(text: str, path: str = PATH) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(text, path)
    return str(caught.value)


# ---------------------------------------------------------------- the example
def test_example_nodes() -> None:
    config = parse(EXAMPLE, PATH)
    assert [n.name for n in config.nodes] == ["node1", "node2", "node3", "node4"]
    assert config.node("node3") == NodeConfig(
        name="node3",
        node_addr="node3",
        node_hostname="node3",
        port=6818,
        cpus=8,
        boards=1,
        sockets=1,
        cores_per_socket=4,
        threads_per_core=2,
        real_memory=16000,
        tmp_disk=0,
        gres="gpu:a100:2",
        features=("intel", "ib"),
        weight=1,
        state="UNKNOWN",
        reason="",
    )
    assert config.warnings == ()


def test_example_partitions() -> None:
    config = parse(EXAMPLE, PATH)
    debug = config.partition("debug")
    assert debug == PartitionConfig(
        name="debug",
        nodes=("node1", "node2", "node3", "node4"),
        nodes_expr="node[1-4]",
        default=True,
        max_time=30,
        default_time=None,
        max_nodes=None,
        min_nodes=0,
        state="UP",
        priority_tier=1,
        priority_job_factor=1,
        oversubscribe="NO",
        allow_accounts=None,
        allow_groups=None,
        def_mem_per_cpu=0,
        def_mem_per_node=0,
        max_mem_per_node=0,
        max_mem_per_cpu=0,
        max_cpus_per_node=None,
        hidden=False,
        root_only=False,
    )
    batch = config.partition("batch")
    assert batch is not None
    assert (batch.nodes, batch.max_time, batch.priority_tier) == (debug.nodes, -1, 10)
    assert config.default_partition == debug
    assert config.partition("nosuch") is None


def test_top_level_defaults() -> None:
    config = parse(HEAD, PATH)
    assert (config.path, config.cluster_name, config.slurmctld_hosts) == (
        PATH,
        "test",
        (("ctl", "ctl"),),
    )
    assert config.controller_host == ("ctl", "ctl")
    assert (config.slurmctld_port, config.slurmd_port) == (6817, 6818)
    assert config.state_save_location == "/var/spool/corral/ctld"
    assert config.slurmd_spool_dir == "/var/spool/corral/slurmd"
    assert (config.slurmd_timeout, config.kill_wait, config.min_job_age) == (300, 30, 300)
    assert (config.max_job_count, config.first_job_id, config.max_array_size) == (10000, 1, 1001)
    assert (config.job_requeue, config.job_file_append) == (True, False)
    assert config.unkillable_step_timeout == 60
    assert config.scheduler_parameters == ()
    assert (config.nodes, config.partitions, config.default_partition) == ((), (), None)
    assert config.settings == (("ClusterName", "test"),)
    with pytest.raises(KeyError):
        config.node("n1")


@pytest.mark.parametrize(
    ("line", "attribute", "value"),
    [
        pytest.param("SlurmctldPort=7000", "slurmctld_port", 7000, id="ctld-port"),
        pytest.param("SlurmctldPort=6817-6818", "slurmctld_port", 6817, id="ctld-port-range"),
        pytest.param("SlurmdPort=7001", "slurmd_port", 7001, id="slurmd-port"),
        pytest.param("StateSaveLocation=/s", "state_save_location", "/s", id="state-save"),
        pytest.param("SlurmdSpoolDir=/d", "slurmd_spool_dir", "/d", id="spool"),
        pytest.param("SlurmdTimeout=60", "slurmd_timeout", 60, id="slurmd-timeout"),
        pytest.param("KillWait=5", "kill_wait", 5, id="kill-wait"),
        pytest.param("KillOnBadExit=1", "kill_on_bad_exit", True, id="kill-on-bad-exit"),
        pytest.param(
            "UnkillableStepTimeout=9", "unkillable_step_timeout", 9, id="unkillable-step-timeout"
        ),
        pytest.param("MinJobAge=2", "min_job_age", 2, id="min-job-age"),
        pytest.param("MaxJobCount=1k", "max_job_count", 1024, id="k-suffix"),
        pytest.param("FirstJobId=100", "first_job_id", 100, id="first-job-id"),
        pytest.param("JobRequeue=0", "job_requeue", False, id="job-requeue"),
        pytest.param("MaxArraySize=5000", "max_array_size", 5000, id="max-array-size"),
        pytest.param("JobFileAppend=1", "job_file_append", True, id="job-file-append"),
        pytest.param("ClusterName=MixedCase", "cluster_name", "mixedcase", id="cluster-lowered"),
        pytest.param(
            "SchedulerParameters=bf_interval=30,defer,max_array_tasks=5",
            "scheduler_parameters",
            (("bf_interval", "30"), ("defer", ""), ("max_array_tasks", "5")),
            id="scheduler-parameters",
        ),
    ],
)
def test_top_level_values(line: str, attribute: str, value: object) -> None:
    assert getattr(conf(line + "\n"), attribute) == value


def test_scheduler_param_lookup() -> None:
    config = conf("SchedulerParameters=bf_interval=30,Defer\n")
    assert config.scheduler_param("bf_interval") == "30"
    assert config.scheduler_param("defer") == ""
    assert config.scheduler_param("max_rpc_cnt") is None


# ---------------------------------------------------------------- syntax
@pytest.mark.parametrize(
    ("body", "key", "value"),
    [
        pytest.param("killwait=7\n", "KillWait", "7", id="key-case-insensitive"),
        pytest.param("KILLWAIT = 7\n", "KillWait", "7", id="spaces-around-equals"),
        pytest.param("KillWait=7 MinJobAge=9\n", "MinJobAge", "9", id="several-per-line"),
        pytest.param('JobCompLoc="/a b/c"\n', "JobCompLoc", "/a b/c", id="quoted"),
        pytest.param("KillWait=7 # comment\n", "KillWait", "7", id="comment"),
        pytest.param("# KillWait=1\nKillWait=7\n", "KillWait", "7", id="comment-line"),
        pytest.param("JobCompLoc=/x\\#y\n", "JobCompLoc", "/x#y", id="escaped-hash"),
        pytest.param("JobCompLoc=/x\\\\#y\n", "JobCompLoc", "/x\\", id="escaped-backslash-hash"),
        pytest.param("KillWait=1 \\\n  MinJobAge=9\n", "MinJobAge", "9", id="continuation"),
        pytest.param("JobCompLoc=/a\\\nb\n", "JobCompLoc", "/ab", id="continuation-joins"),
        pytest.param("KillWait=1\nKillWait=7\n", "KillWait", "7", id="last-wins"),
        pytest.param("KillWait=7\r\n", "KillWait", "7", id="crlf"),
        pytest.param("\n\n   \n", "ClusterName", "test", id="blank-lines"),
    ],
)
def test_syntax(body: str, key: str, value: str) -> None:
    assert dict(conf(body).settings)[key] == value


def test_settings_keep_every_slurm_key_in_canonical_spelling() -> None:
    config = conf("grestypes=gpu\nPRIORITYTYPE=priority/basic\nsuspendtime=NONE\n")
    assert config.settings == (
        ("ClusterName", "test"),
        ("GresTypes", "gpu"),
        ("PriorityType", "priority/basic"),
        ("SuspendTime", "NONE"),
    )
    assert config.warnings == ()  # SuspendTime=NONE: no power saving, nothing to say


@pytest.mark.parametrize(
    ("body", "warnings"),
    [
        pytest.param("Foo=1\n", ["/etc/corral/slurm.conf:3: unknown key 'Foo' ignored"], id="top"),
        pytest.param(
            "KillWait=3 Bogus=2 Other=1\n",
            [
                "/etc/corral/slurm.conf:3: unknown key 'Bogus' ignored",
                "/etc/corral/slurm.conf:3: unknown key 'Other' ignored",
            ],
            id="several",
        ),
        pytest.param(
            "NodeName=n1 CPUs=2 Colour=red\n",
            ["/etc/corral/slurm.conf:3: unknown key 'Colour' ignored"],
            id="node-line",
        ),
        pytest.param(
            "NodeName=n1\nPartitionName=p Nodes=n1 MaxWidth=3\n",
            ["/etc/corral/slurm.conf:4: unknown key 'MaxWidth' ignored"],
            id="partition-line",
        ),
        pytest.param(
            "NodeName=n1 CoreSpecCount=0 CpuBind=cores\n"
            "PartitionName=p Nodes=n1 AllowQos=ALL GraceTime=0 TRESBillingWeights=CPU=1\n",
            ["/etc/corral/slurm.conf:3: CpuBind has no effect: tasks keep the default binding"],
            id="slurm-keys-not-modelled",
        ),
    ],
)
def test_unknown_keys_warn(body: str, warnings: list[str]) -> None:
    config = conf(body)
    assert list(config.warnings) == warnings
    assert "Foo" not in dict(config.settings)


def test_warning_line_of_continued_line_is_its_first() -> None:
    config = conf("KillWait=1 \\\n Foo=2\n")
    assert config.warnings == ("/etc/corral/slurm.conf:3: unknown key 'Foo' ignored",)


# ---------------------------------------------------------------- include
def test_include_relative_to_including_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "nodes.conf").write_text("Include more.conf\nNodeName=n[1-2] CPUs=4\n")
    (tmp_path / "sub" / "more.conf").write_text("KillWait=9\n")
    (tmp_path / "slurm.conf").write_text(HEAD + "Include sub/nodes.conf\nMinJobAge=1\n")
    config = load(str(tmp_path / "slurm.conf"))
    assert [n.name for n in config.nodes] == ["n1", "n2"]
    assert (config.kill_wait, config.min_job_age) == (9, 1)


def test_include_cluster_name_modifier(tmp_path: Path) -> None:
    (tmp_path / "bench.conf").write_text("NodeName=b1\n")
    (tmp_path / "slurm.conf").write_text("ClusterName=Bench\nSlurmctldHost=ctl\ninclude %c.conf\n")
    assert [n.name for n in load(str(tmp_path / "slurm.conf")).nodes] == ["b1"]


def test_include_absolute_and_error_location(tmp_path: Path) -> None:
    other = tmp_path / "other.conf"
    other.write_text("\n\nKillWait=x\n")
    message = error_of(HEAD + f"INCLUDE {other}\n", str(tmp_path / "slurm.conf"))
    assert message == f"{other}:3: bad KillWait value 'x': not a number"


def test_include_warnings_name_the_included_file(tmp_path: Path) -> None:
    (tmp_path / "extra.conf").write_text("Nope=1\n")
    config = parse(HEAD + "Include extra.conf\n", str(tmp_path / "slurm.conf"))
    assert config.warnings == (f"{tmp_path / 'extra.conf'}:1: unknown key 'Nope' ignored",)


def test_include_missing(tmp_path: Path) -> None:
    message = error_of(HEAD + "Include gone.conf\n", str(tmp_path / "slurm.conf"))
    assert message == (
        f"{tmp_path / 'slurm.conf'}:3: Include gone.conf: cannot read: No such file or directory"
    )


def test_include_loop(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("Include b.conf\n")
    (tmp_path / "b.conf").write_text("Include a.conf\n")
    message = error_of(HEAD + "Include a.conf\n", str(tmp_path / "slurm.conf"))
    assert message == f"{tmp_path / 'b.conf'}:1: Include a.conf: include loop"


def test_include_cluster_name_needed_first() -> None:
    message = error_of("Include %c.conf\nClusterName=x\n")
    assert message == "/etc/corral/slurm.conf:1: Include %c.conf: %c used before ClusterName is set"


# ---------------------------------------------------------------- controllers
@pytest.mark.parametrize(
    ("body", "hosts"),
    [
        pytest.param("SlurmctldHost=ctl\n", (("ctl", "ctl"),), id="name"),
        pytest.param("SlurmctldHost=ctl(10.0.0.1)\n", (("ctl", "10.0.0.1"),), id="with-address"),
        pytest.param(
            "SlurmctldHost=a(10.0.0.1)\nslurmctldhost=b\n",
            (("a", "10.0.0.1"), ("b", "b")),
            id="backup",
        ),
        pytest.param("ControlMachine=old\n", (("old", "old"),), id="legacy"),
        pytest.param(
            "ControlMachine=old\nControlAddr=10.1.1.1\nBackupController=bak\n",
            (("old", "10.1.1.1"), ("bak", "bak")),
            id="legacy-with-address-and-backup",
        ),
    ],
)
def test_controllers(body: str, hosts: tuple[tuple[str, str], ...]) -> None:
    config = parse("ClusterName=c\n" + body, PATH)
    assert config.slurmctld_hosts == hosts
    assert config.controller_host == hosts[0]


@pytest.mark.parametrize(
    ("extra", "active"),
    [
        pytest.param("", ["10.0.0.1:6817", "b:6817"], id="every-line-in-order"),
        pytest.param("SlurmctldAddr=10.0.0.9\n", ["10.0.0.9:6817"], id="the-address-alone"),
        pytest.param("SlurmctldAddr=fd00::9\n", ["[fd00::9]:6817"], id="ipv6"),
    ],
)
def test_daemons_reach_the_serving_controller_at_slurmctldaddr(
    extra: str, active: list[str]
) -> None:
    config = parse("ClusterName=c\nSlurmctldHost=a(10.0.0.1)\nSlurmctldHost=b\n" + extra, PATH)
    assert config.active_targets == active
    assert config.controller_targets == ["10.0.0.1:6817", "b:6817"]  # each line's, for ping


# ---------------------------------------------------------------- nodes
@pytest.mark.parametrize(
    ("line", "topology"),
    [
        pytest.param("", (1, 1, 1, 1, 1), id="nothing"),
        pytest.param("CPUs=8", (8, 1, 8, 1, 1), id="cpus-only-are-sockets"),
        pytest.param("Procs=4", (4, 1, 4, 1, 1), id="legacy-procs"),
        pytest.param("Sockets=2 CoresPerSocket=4 ThreadsPerCore=2", (16, 1, 2, 4, 2), id="product"),
        pytest.param("CPUs=8 CoresPerSocket=4", (8, 1, 2, 4, 1), id="sockets-inferred"),
        pytest.param("CPUs=2 CoresPerSocket=2", (2, 1, 1, 2, 1), id="golden-n1"),
        pytest.param("Boards=2 SocketsPerBoard=2 CoresPerSocket=4", (16, 2, 4, 4, 1), id="boards"),
        pytest.param(
            "Boards=2 Sockets=2 CoresPerSocket=4", (16, 2, 4, 4, 1), id="sockets-per-board"
        ),
        pytest.param(
            "CPUs=8 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2",
            (8, 1, 2, 4, 2),
            id="cpus-count-cores",
        ),
        pytest.param("CPUs=2 Sockets=2 CoresPerSocket=4", (2, 1, 2, 4, 1), id="cpus-count-sockets"),
    ],
)
def test_node_topology(line: str, topology: tuple[int, int, int, int, int]) -> None:
    node = conf(f"NodeName=n1 {line}\n").node("n1")
    assert (
        node.cpus,
        node.boards,
        node.sockets,
        node.cores_per_socket,
        node.threads_per_core,
    ) == topology


def test_node_cpus_matching_nothing_are_reset_with_warning() -> None:
    config = conf("NodeName=n1 CPUs=5 Sockets=2 CoresPerSocket=2\n")
    assert config.node("n1").cpus == 4
    assert config.warnings == (
        "/etc/corral/slurm.conf:3: CPUs=5 matches no Sockets, Sockets*CoresPerSocket "
        "or Sockets*CoresPerSocket*ThreadsPerCore; using CPUs=4",
    )


@pytest.mark.parametrize(
    ("line", "attribute", "values"),
    [
        pytest.param("", "node_hostname", ["n1", "n2", "n3"], id="hostname-default"),
        pytest.param("", "node_addr", ["n1", "n2", "n3"], id="addr-default"),
        pytest.param("NodeHostname=h[1-3]", "node_addr", ["h1", "h2", "h3"], id="addr-from-host"),
        pytest.param("NodeAddr=10.0.0.[1-3]", "node_addr", ["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
        pytest.param("NodeAddr=127.0.0.1", "node_addr", ["127.0.0.1"] * 3, id="one-addr-shared"),
        pytest.param("NodeHostname=vm", "node_hostname", ["vm"] * 3, id="one-host-shared"),
        pytest.param("", "port", [6818] * 3, id="port-default"),
        pytest.param("Port=7000", "port", [7000] * 3, id="one-port"),
        pytest.param("Port=17001-17003", "port", [17001, 17002, 17003], id="port-range"),
        pytest.param("Port=[17001-17003]", "port", [17001, 17002, 17003], id="port-brackets"),
        pytest.param("RealMemory=6000", "real_memory", [6000] * 3, id="memory"),
        pytest.param("", "real_memory", [1] * 3, id="memory-default"),
        pytest.param("TmpDisk=100", "tmp_disk", [100] * 3, id="tmp-disk"),
        pytest.param("Gres=gpu:4", "gres", ["gpu:4"] * 3, id="gres"),
        pytest.param("Features=a,b", "features", [("a", "b")] * 3, id="features"),
        pytest.param("Feature=a", "features", [("a",)] * 3, id="feature-alias"),
        pytest.param("Weight=10", "weight", [10] * 3, id="weight"),
        pytest.param("State=drain", "state", ["DRAIN"] * 3, id="state-upper"),
        pytest.param("State=FUTURE", "state", ["FUTURE"] * 3, id="state-future"),
        pytest.param('Reason="fan broken"', "reason", ["fan broken"] * 3, id="reason"),
    ],
)
def test_node_fields(line: str, attribute: str, values: list[object]) -> None:
    config = conf(f"NodeName=n[1-3] {line}\n")
    assert [getattr(node, attribute) for node in config.nodes] == values


def test_node_slurmd_port_set_after_nodes() -> None:
    assert conf("NodeName=n1\nSlurmdPort=7777\n").node("n1").port == 7777


def test_node_defaults_are_cumulative() -> None:
    config = conf(
        "NodeName=DEFAULT CPUs=4 RealMemory=100\n"
        "NodeName=a1\n"
        "NodeName=DEFAULT RealMemory=200\n"
        "NodeName=b1 Weight=5\n"
        "NodeName=c1 CPUs=2\n"
    )
    assert [(n.name, n.cpus, n.real_memory, n.weight) for n in config.nodes] == [
        ("a1", 4, 100, 1),
        ("b1", 4, 200, 5),
        ("c1", 2, 200, 1),
    ]


def test_node_names_are_case_sensitive() -> None:
    config = conf("NodeName=N1\nNodeName=n1\n")
    assert [n.name for n in config.nodes] == ["N1", "n1"]


def test_down_nodes() -> None:
    config = conf(
        "NodeName=n[1-4]\n"
        "DownNodes=n[1-2] Reason=broken\n"
        'DownNodes=n3 State=DRAIN Reason="new disk"\n'
        "DownNodes=n4 State=FUTURE\n"
    )
    assert [(n.state, n.reason) for n in config.nodes] == [
        ("DOWN", "broken"),
        ("DOWN", "broken"),
        ("DRAIN", "new disk"),
        ("FUTURE", "Set in slurm.conf"),
    ]


def test_node_set_in_partition() -> None:
    config = conf(
        "NodeName=n[1-2] Features=cpu\n"
        "NodeName=g[1-2] Features=gpu\n"
        "NodeSet=gpus Feature=gpu\n"
        "NodeSet=first Nodes=n1\n"
        "PartitionName=p Nodes=gpus,first\n"
    )
    partition = config.partition("p")
    assert partition is not None
    assert partition.nodes == ("n1", "g1", "g2")


# ---------------------------------------------------------------- partitions
NODES = "NodeName=n[1-4]\n"


@pytest.mark.parametrize(
    ("line", "attribute", "value"),
    [
        pytest.param("Nodes=n[3-4],n1", "nodes", ("n1", "n3", "n4"), id="node-order"),
        pytest.param("Nodes=n[3-4],n1", "nodes_expr", "n[3-4],n1", id="nodes-expr"),
        pytest.param('Nodes="n1 n2"', "nodes", ("n1", "n2"), id="nodes-whitespace"),
        pytest.param("Nodes=n1,n1", "nodes", ("n1",), id="nodes-deduplicated"),
        pytest.param("Nodes=all", "nodes", ("n1", "n2", "n3", "n4"), id="nodes-all"),
        pytest.param("", "nodes", (), id="no-nodes"),
        pytest.param("Default=yes", "default", True, id="default-yes"),
        pytest.param("Default=NO", "default", False, id="default-no"),
        pytest.param("MaxTime=1-00:00:00", "max_time", 1440, id="max-time"),
        pytest.param("MaxTime=INFINITE", "max_time", -1, id="max-time-infinite"),
        pytest.param("", "max_time", -1, id="max-time-default"),
        pytest.param("DefaultTime=30", "default_time", 30, id="default-time"),
        pytest.param("DefaultTime=UNLIMITED", "default_time", -1, id="default-time-unlimited"),
        pytest.param("", "default_time", None, id="default-time-none"),
        pytest.param("MaxNodes=2", "max_nodes", 2, id="max-nodes"),
        pytest.param("MaxNodes=UNLIMITED", "max_nodes", None, id="max-nodes-unlimited"),
        pytest.param("MinNodes=1", "min_nodes", 1, id="min-nodes"),
        pytest.param("State=drain", "state", "DRAIN", id="state"),
        pytest.param("State=INACTIVE", "state", "INACTIVE", id="state-inactive"),
        pytest.param("PriorityTier=10", "priority_tier", 10, id="tier"),
        pytest.param("PriorityJobFactor=3", "priority_job_factor", 3, id="factor"),
        pytest.param("Priority=7", "priority_tier", 7, id="legacy-priority-tier"),
        pytest.param("Priority=7", "priority_job_factor", 7, id="legacy-priority-factor"),
        pytest.param("OverSubscribe=no", "oversubscribe", "NO", id="os-no"),
        pytest.param("OverSubscribe=YES", "oversubscribe", "YES:4", id="os-yes"),
        pytest.param("OverSubscribe=YES:8", "oversubscribe", "YES:8", id="os-yes-n"),
        pytest.param("OverSubscribe=force", "oversubscribe", "FORCE:4", id="os-force"),
        pytest.param("OverSubscribe=FORCE:1", "oversubscribe", "FORCE:1", id="os-force-n"),
        pytest.param("OverSubscribe=EXCLUSIVE", "oversubscribe", "EXCLUSIVE", id="os-exclusive"),
        pytest.param("Shared=YES", "oversubscribe", "YES:4", id="legacy-shared"),
        pytest.param("Exclusive=NODE", "oversubscribe", "EXCLUSIVE", id="exclusive-node"),
        pytest.param(
            "OverSubscribe=EXCLUSIVE Exclusive=NO", "oversubscribe", "NO", id="exclusive-no"
        ),
        pytest.param("AllowAccounts=ALL", "allow_accounts", None, id="accounts-all"),
        pytest.param("AllowAccounts=Phys,chem", "allow_accounts", ("phys", "chem"), id="accounts"),
        pytest.param("", "allow_groups", None, id="groups-default"),
        pytest.param("AllowGroups=ALL", "allow_groups", None, id="groups-all"),
        pytest.param("AllowGroups=wheel,Staff", "allow_groups", ("wheel", "Staff"), id="groups"),
        pytest.param("DefMemPerCPU=1000", "def_mem_per_cpu", 1000, id="def-mem-cpu"),
        pytest.param("DefMemPerNode=4000", "def_mem_per_node", 4000, id="def-mem-node"),
        pytest.param("MaxMemPerNode=8000", "max_mem_per_node", 8000, id="max-mem-node"),
        pytest.param("MaxMemPerCPU=2000", "max_mem_per_cpu", 2000, id="max-mem-cpu"),
        pytest.param("MaxMemPerCPU=UNLIMITED", "max_mem_per_cpu", 0, id="max-mem-unlimited"),
        pytest.param("DefMemPerNode=1 DefMemPerCPU=2", "def_mem_per_cpu", 0, id="per-node-wins"),
        pytest.param("MaxCPUsPerNode=16", "max_cpus_per_node", 16, id="max-cpus"),
        pytest.param("", "max_cpus_per_node", None, id="max-cpus-default"),
        pytest.param("Hidden=YES", "hidden", True, id="hidden"),
        pytest.param("RootOnly=true", "root_only", True, id="root-only"),
    ],
)
def test_partition_fields(line: str, attribute: str, value: object) -> None:
    partition = conf(f"{NODES}PartitionName=p {line}\n").partition("p")
    assert partition is not None
    assert getattr(partition, attribute) == value


def test_partition_memory_defaults_come_from_cluster() -> None:
    config = conf(
        f"DefMemPerCPU=500\nMaxMemPerNode=9000\n{NODES}"
        "PartitionName=a Nodes=n1\nPartitionName=b Nodes=n1 DefMemPerNode=100\n"
    )
    a, b = config.partitions
    assert (a.def_mem_per_cpu, a.def_mem_per_node, a.max_mem_per_node) == (500, 0, 9000)
    assert (b.def_mem_per_cpu, b.def_mem_per_node, b.max_mem_per_node) == (0, 100, 9000)


def test_partition_defaults_are_cumulative() -> None:
    config = conf(
        f"{NODES}PartitionName=DEFAULT MaxTime=10 State=DOWN\n"
        "PartitionName=a Nodes=n1\n"
        "PartitionName=DEFAULT MaxTime=20\n"
        "PartitionName=b Nodes=n2 State=UP\n"
    )
    assert [(p.name, p.max_time, p.state) for p in config.partitions] == [
        ("a", 10, "DOWN"),
        ("b", 20, "UP"),
    ]


def test_default_partition_is_the_first_marked() -> None:
    config = conf(
        f"{NODES}PartitionName=a\nPartitionName=b Default=YES\nPartitionName=c Default=YES\n"
    )
    assert config.default_partition is not None
    assert config.default_partition.name == "b"


def test_partition_may_come_before_its_nodes() -> None:
    config = conf("PartitionName=p Nodes=late[1-2]\nNodeName=late[1-2]\n")
    partition = config.partition("p")
    assert partition is not None
    assert partition.nodes == ("late1", "late2")


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "SlurmctldHost=c\n", f"{PATH}: ClusterName needs to be specified", id="no-cluster"
        ),
        pytest.param(
            "ClusterName=c\n", f"{PATH}: SlurmctldHost needs to be specified", id="no-host"
        ),
        pytest.param(
            HEAD + "KillWait=soon\n", f"{PATH}:3: bad KillWait value 'soon': not a number"
        ),
        pytest.param(HEAD + "KillWait=-1\n", f"{PATH}:3: bad KillWait value '-1': not a number"),
        pytest.param(
            HEAD + "MaxJobCount=0\n", f"{PATH}:3: bad MaxJobCount value '0': not in 1..4294967295"
        ),
        pytest.param(
            HEAD + "JobRequeue=yes\n", f"{PATH}:3: bad JobRequeue value 'yes': not a number"
        ),
        pytest.param(
            HEAD + "ReturnToService=3\n", f"{PATH}:3: bad ReturnToService value '3': not in 0..2"
        ),
        pytest.param(
            HEAD + "SlurmctldPort=http\n",
            f"{PATH}:3: bad SlurmctldPort value 'http': not a port or port range",
        ),
        pytest.param(
            HEAD + "SlurmctldPort=6818-6817\n",
            f"{PATH}:3: bad SlurmctldPort value '6818-6817': not in 1..65535",
        ),
        pytest.param(
            HEAD + "SlurmdPort=70000\n", f"{PATH}:3: bad SlurmdPort value '70000': not in 1..65535"
        ),
        pytest.param(
            "ClusterName=c\nSlurmctldHost=a(b\n", f"{PATH}:2: bad SlurmctldHost value 'a(b'"
        ),
        pytest.param(
            "ClusterName=c\nSlurmctldHost=a\nControlMachine=b\n",
            f"{PATH}:3: ControlMachine cannot be used with SlurmctldHost",
        ),
        pytest.param(HEAD + "KillWait=1 junk\n", f'{PATH}:3: cannot parse "junk"', id="junk"),
        pytest.param(HEAD + "KillWait=\n", f'{PATH}:3: cannot parse "KillWait="', id="no-value"),
        pytest.param(HEAD + 'Epilog="a b\n', f'{PATH}:3: cannot parse "b"', id="unclosed-quote"),
        pytest.param(
            HEAD + "NodeName=n[1-\n", f"{PATH}:3: bad NodeName value 'n[1-': invalid hostlist"
        ),
        pytest.param(
            HEAD + "NodeName=n1 CPUs=two\n", f"{PATH}:3: bad CPUs value 'two': not a number"
        ),
        pytest.param(
            HEAD + "NodeName=n1 CPUs=0\n", f"{PATH}:3: bad CPUs value '0': not in 1..65535"
        ),
        pytest.param(
            HEAD + "NodeName=DEFAULT CPUs=x\nNodeName=n1\n",
            f"{PATH}:3: bad CPUs value 'x': not a number",
            id="bad-default-blamed-on-its-line",
        ),
        pytest.param(
            HEAD + "NodeName=n1 RealMemory=lots\n",
            f"{PATH}:3: bad RealMemory value 'lots': not a number",
        ),
        pytest.param(
            HEAD + "NodeName=n1 State=BROKEN\n",
            f"{PATH}:3: bad State value 'BROKEN': "
            "use UNKNOWN, DOWN, DRAIN, FAIL, FAILING, FUTURE, CLOUD, IDLE",
        ),
        pytest.param(
            HEAD + "NodeName=n1\nNodeName=n[0-2]\n", f"{PATH}:4: duplicate node name 'n1'"
        ),
        pytest.param(
            HEAD + "NodeName=ALL\n", f"{PATH}:3: 'ALL' is reserved and cannot be a NodeName"
        ),
        pytest.param(
            HEAD + "NodeName=DEFAULT NodeAddr=x\n",
            f"{PATH}:3: NodeAddr not allowed with NodeName=DEFAULT",
        ),
        pytest.param(
            HEAD + "NodeName=n[1-3] NodeAddr=a[1-2]\n",
            f"{PATH}:3: NodeAddr must name one host per node, or a single one",
        ),
        pytest.param(
            HEAD + "NodeName=n[1-3] Port=1-2\n", f"{PATH}:3: bad Port value '1-2': 2 ports, 3 nodes"
        ),
        pytest.param(
            HEAD + "NodeName=n1\nDownNodes=n2\n", f"{PATH}:4: DownNodes: node n2 not defined"
        ),
        pytest.param(
            HEAD + "NodeName=n1\nDownNodes=n1 State=IDLE\n",
            f"{PATH}:4: bad State value 'IDLE': use DOWN, DRAIN, FAIL, FAILING, FUTURE",
        ),
        pytest.param(
            HEAD + "NodeName=n1\nPartitionName=p Nodes=n[1-3],x\n",
            f"{PATH}:4: PartitionName=p: node n[2-3],x not defined",
        ),
        pytest.param(
            HEAD + "PartitionName=p MaxTime=soon\n",
            f"{PATH}:3: bad MaxTime value 'soon': not a time",
        ),
        pytest.param(
            HEAD + "PartitionName=p DefaultTime=1:2:3:4\n",
            f"{PATH}:3: bad DefaultTime value '1:2:3:4': not a time",
        ),
        pytest.param(
            HEAD + "PartitionName=p MaxNodes=many\n",
            f"{PATH}:3: bad MaxNodes value 'many': not a number",
        ),
        pytest.param(
            HEAD + "PartitionName=p Default=maybe\n",
            f"{PATH}:3: bad Default value 'maybe': expected YES or NO",
        ),
        pytest.param(
            HEAD + "PartitionName=p State=OPEN\n",
            f"{PATH}:3: bad State value 'OPEN': use UP, DOWN, DRAIN, INACTIVE",
        ),
        pytest.param(
            HEAD + "PartitionName=p OverSubscribe=SOMETIMES\n",
            f"{PATH}:3: bad OverSubscribe value 'SOMETIMES': use NO, YES, FORCE, EXCLUSIVE",
        ),
        pytest.param(
            HEAD + "PartitionName=p OverSubscribe=YES:1\n",
            f"{PATH}:3: bad OverSubscribe value 'YES:1': job count too small",
        ),
        pytest.param(
            HEAD + "PartitionName=p\nPartitionName=p\n", f"{PATH}:4: duplicate PartitionName 'p'"
        ),
    ],
)
def test_errors(text: str, message: str) -> None:
    assert error_of(text) == message


def test_error_carries_path_and_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse(HEAD + "KillWait=x\n", PATH)
    assert (caught.value.path, caught.value.line) == (PATH, 3)
    assert caught.value.message == "bad KillWait value 'x': not a number"


# ---------------------------------------------------------------- files
def test_load_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "none.conf")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value) == f"{path}: cannot read: No such file or directory"


def test_load_uses_slurm_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "slurm.conf"
    path.write_text(HEAD)
    monkeypatch.setenv("SLURM_CONF", str(path))
    assert default_path() == str(path)
    assert load().path == str(path)


def test_default_path_without_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_path() == DEFAULT_PATH == "/etc/corral/slurm.conf"
    personal = tmp_path / ".corral" / "cluster" / "slurm.conf"
    personal.parent.mkdir(parents=True)
    personal.write_text(HEAD)
    expected = DEFAULT_PATH if Path(DEFAULT_PATH).exists() else str(personal)
    assert default_path() == expected  # corral up's cluster, when there is no system one


# ---------------------------------------------------------------- show config
def test_show_config_defaults() -> None:
    shown = show_config(parse(HEAD, PATH))
    keys = [key for key, _ in shown]
    assert keys == sorted(keys, key=str.lower)
    values = dict(shown)
    for key, value in {
        "AuthType": "auth/munge",
        "ClusterName": "test",
        "FirstJobId": "1",
        "JobFileAppend": "0",
        "JobRequeue": "1",
        "KillOnBadExit": "0",
        "KillWait": "30 sec",
        "MaxArraySize": "1001",
        "MaxJobCount": "10000",
        "MinJobAge": "300 sec",
        "MpiDefault": "(null)",
        "PriorityType": "priority/multifactor",
        "ProctrackType": "proctrack/cgroup",
        "ReturnToService": "0",
        "SchedulerParameters": "(null)",
        "SchedulerType": "sched/backfill",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "SlurmctldHost[0]": "ctl",
        "SlurmctldLogFile": "(null)",
        "SlurmctldPort": "6817",
        "SlurmdLogFile": "(null)",
        "SlurmdPort": "6818",
        "SlurmdSpoolDir": "/var/spool/corral/slurmd",
        "SlurmdTimeout": "300 sec",
        "SlurmUser": "root(0)",
        "StateSaveLocation": "/var/spool/corral/ctld",
        "TaskPlugin": "(null)",
    }.items():
        assert values[key] == value, key


def test_show_config_settings() -> None:
    config = conf(
        "SlurmctldHost=backup(10.0.0.2)\n"
        "MinJobAge=60\nKillWait=5\nSlurmdTimeout=20\nSlurmctldPort=7000-7001\n"
        "SchedulerParameters=bf_interval=30,defer\nAuthType=auth/slurm\nMpiDefault=none\n"
        "GresTypes=gpu\nSlurmctldTimeout=120\nOverTimeLimit=0\nEpilogMsgTime=2000\n"
        "SuspendTime=NONE\nJobRequeue=0\nJobFileAppend=1\nReturnToService=2\n"
    )
    values = dict(show_config(config))
    assert values["SlurmctldHost[0]"] == "ctl"
    assert values["SlurmctldHost[1]"] == "backup(10.0.0.2)"
    assert (values["MinJobAge"], values["KillWait"], values["SlurmdTimeout"]) == (
        "60 sec",
        "5 sec",
        "20 sec",
    )
    assert values["SlurmctldPort"] == "7000"
    assert values["SchedulerParameters"] == "bf_interval=30,defer"
    assert (values["AuthType"], values["MpiDefault"]) == ("auth/slurm", "none")
    assert values["GresTypes"] == "gpu"
    assert values["SlurmctldTimeout"] == "120 sec"
    assert values["OverTimeLimit"] == "0 min"
    assert values["EpilogMsgTime"] == "2000 usec"
    assert values["SuspendTime"] == "NONE"
    assert (values["JobRequeue"], values["JobFileAppend"], values["ReturnToService"]) == (
        "0",
        "1",
        "2",
    )


def test_show_config_leaves_out_legacy_controller_keys() -> None:
    config = parse("ClusterName=c\nControlMachine=m\nControlAddr=10.0.0.9\n", PATH)
    values = dict(show_config(config))
    assert values["SlurmctldHost[0]"] == "m(10.0.0.9)"
    assert "ControlMachine" not in values and "ControlAddr" not in values


# ---------------------------------------------------------------- priority
def test_priority_defaults() -> None:
    prio = parse(HEAD, PATH).priority
    assert prio == PriorityConfig()
    assert (prio.type, prio.multifactor, prio.fair_tree) == ("priority/multifactor", True, True)
    assert (prio.max_age, prio.decay_half_life, prio.calc_period) == (604800, 604800, 300)
    assert (prio.usage_reset_period, prio.favor_small, prio.flags) == ("NONE", False, frozenset())
    assert (prio.weight_age, prio.weight_fairshare, prio.weight_tres) == (0, 0, ())
    assert prio.fs_dampening_factor == 1


@pytest.mark.parametrize(
    ("line", "attribute", "value"),
    [
        pytest.param("PriorityType=priority/basic", "type", "priority/basic", id="basic"),
        pytest.param(
            "PriorityType=Priority/MultiFactor", "type", "priority/multifactor", id="case"
        ),
        pytest.param("PriorityWeightAge=1000", "weight_age", 1000, id="age"),
        pytest.param("PriorityWeightAssoc=5", "weight_assoc", 5, id="assoc"),
        pytest.param("PriorityWeightFairshare=10000", "weight_fairshare", 10000, id="fairshare"),
        pytest.param("priorityweightjobsize=1k", "weight_job_size", 1024, id="job size, k"),
        pytest.param("PriorityWeightPartition=2", "weight_partition", 2, id="partition"),
        pytest.param("PriorityWeightQOS=3", "weight_qos", 3, id="qos"),
        pytest.param(
            "PriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000",
            "weight_tres",
            (("cpu", 1000.0), ("mem", 2000.0), ("gres/gpu", 3000.0)),
            id="tres",
        ),
        pytest.param(
            "PriorityWeightTRES=CPU=1000,Mem=2000",
            "weight_tres_text",
            "CPU=1000,Mem=2000",
            id="tres as written",
        ),
        # A weight with a unit is per that unit: Mem=1024G is 1 per MiB, CPU=2K 2/1024 per CPU.
        pytest.param(
            "PriorityWeightTRES=Mem=1024G,cpu=2K,node=0.5",
            "weight_tres",
            (("mem", 1.0), ("cpu", 2 / 1024), ("node", 0.5)),
            id="tres units",
        ),
        pytest.param("PriorityMaxAge=14-0", "max_age", 14 * 86400, id="max age days"),
        pytest.param("PriorityMaxAge=90", "max_age", 90 * 60, id="max age minutes"),
        pytest.param("PriorityMaxAge=0", "max_age", 0, id="max age 0"),
        pytest.param("PriorityFavorSmall=YES", "favor_small", True, id="favor small"),
        pytest.param("PriorityFavorSmall=no", "favor_small", False, id="favor large"),
        pytest.param("PriorityDecayHalfLife=1-0", "decay_half_life", 86400, id="half-life"),
        pytest.param("PriorityDecayHalfLife=0:30", "decay_half_life", 60, id="seconds round up"),
        pytest.param(
            "PriorityUsageResetPeriod=weekly", "usage_reset_period", "WEEKLY", id="reset period"
        ),
        pytest.param("PriorityCalcPeriod=1", "calc_period", 60, id="calc period"),
        pytest.param("PriorityCalcPeriod=00:10:00", "calc_period", 600, id="calc period clock"),
        pytest.param(
            "PriorityFlags=NO_FAIR_TREE,accrue_always",
            "flags",
            frozenset({"NO_FAIR_TREE", "ACCRUE_ALWAYS"}),
            id="flags",
        ),
        pytest.param(
            "PriorityFlags=NO_NORMAL_ALL",
            "flags",
            frozenset({"NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES"}),
            id="no normal all",
        ),
        pytest.param(
            "PriorityFlags=DEPTH_OBLIVIOUS",
            "flags",
            frozenset({"DEPTH_OBLIVIOUS", "NO_FAIR_TREE"}),
            id="depth oblivious is classic",
        ),
        pytest.param("PriorityFlags=FAIR_TREE", "flags", frozenset(), id="legacy fair tree"),
        pytest.param("PriorityFlags=NO_FAIR_TREE", "fair_tree", False, id="classic"),
        pytest.param("FairShareDampeningFactor=3", "fs_dampening_factor", 3, id="damping"),
    ],
)
def test_priority_values(line: str, attribute: str, value: object) -> None:
    assert getattr(conf(line + "\n").priority, attribute) == value


def test_half_life_zero_with_a_reset_period() -> None:
    prio = conf("PriorityDecayHalfLife=0\nPriorityUsageResetPeriod=NONE\n").priority
    assert (prio.decay_half_life, prio.usage_reset_period) == (0, "NONE")


def test_unknown_priority_flag_warns() -> None:
    config = conf("PriorityFlags=ACCRUE_ALWAYS,TICKET_BASED\n")
    assert config.priority.flags == frozenset({"ACCRUE_ALWAYS"})
    assert config.warnings == (f"{PATH}:3: PriorityFlags: unknown flag 'TICKET_BASED' ignored",)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            "PriorityType=priority/fifo",
            "bad PriorityType value 'priority/fifo': use priority/multifactor, priority/basic",
            id="type",
        ),
        pytest.param(
            "PriorityWeightAge=-5", "bad PriorityWeightAge value '-5': not a number", id="weight"
        ),
        pytest.param(
            "PriorityWeightQOS=4294967296",
            "bad PriorityWeightQOS value '4294967296': not in 0..4294967295",
            id="weight too big",
        ),
        pytest.param(
            "PriorityWeightTRES=CPU=1,foo=2",
            "bad PriorityWeightTRES value 'CPU=1,foo=2': 'foo' is not a configured TRES type",
            id="tres type",
        ),
        pytest.param(
            "PriorityWeightTRES=gres=2",
            "bad PriorityWeightTRES value 'gres=2': 'gres' is not a configured TRES type",
            id="gres without a name",
        ),
        pytest.param(
            "PriorityWeightTRES=CPU", "bad PriorityWeightTRES value 'CPU': 'CPU'", id="no weight"
        ),
        pytest.param(
            "PriorityWeightTRES=CPU=lots",
            "bad PriorityWeightTRES value 'CPU=lots': 'CPU=lots'",
            id="tres weight",
        ),
        pytest.param(
            "PriorityWeightTRES=CPU=1X",
            "bad PriorityWeightTRES value 'CPU=1X': 'CPU=1X'",
            id="tres unit",
        ),
        pytest.param(
            "PriorityMaxAge=soon", "bad PriorityMaxAge value 'soon': not a time", id="max age"
        ),
        pytest.param(
            "PriorityMaxAge=UNLIMITED",
            "bad PriorityMaxAge value 'UNLIMITED': not a time",
            id="unlimited",
        ),
        pytest.param(
            "PriorityDecayHalfLife=0",
            "You have to either have PriorityDecayHalfLife != 0 or PriorityUsageResetPeriod "
            "set to something or the priority plugin will result in rolling over.",
            id="no decay, no reset",
        ),
        pytest.param(
            "PriorityCalcPeriod=0",
            "bad PriorityCalcPeriod value '0': at least 1 minute",
            id="calc period",
        ),
        pytest.param(
            "PriorityUsageResetPeriod=hourly",
            "bad PriorityUsageResetPeriod value 'hourly': "
            "use NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY, YEARLY",
            id="reset period",
        ),
        pytest.param(
            "PriorityFavorSmall=maybe",
            "bad PriorityFavorSmall value 'maybe': expected YES or NO",
            id="favor small",
        ),
        pytest.param(
            "FairShareDampeningFactor=0",
            "bad FairShareDampeningFactor value '0': not in 1..65535",
            id="damping",
        ),
    ],
)
def test_priority_errors(body: str, message: str) -> None:
    assert error_of(HEAD + body + "\n") == f"{PATH}:3: {message}"


def test_show_config_priority_defaults() -> None:
    values = dict(show_config(parse(HEAD, PATH)))
    assert {
        key: value for key, value in values.items() if "Priority" in key or "FairShare" in key
    } == {
        "FairShareDampeningFactor": "1",
        "PriorityCalcPeriod": "00:05:00",
        "PriorityDecayHalfLife": "7-00:00:00",
        "PriorityFavorSmall": "no",
        "PriorityFlags": "",
        "PriorityMaxAge": "7-00:00:00",
        "PriorityType": "priority/multifactor",
        "PriorityUsageResetPeriod": "NONE",
        "PriorityWeightAge": "0",
        "PriorityWeightAssoc": "0",
        "PriorityWeightFairShare": "0",
        "PriorityWeightJobSize": "0",
        "PriorityWeightPartition": "0",
        "PriorityWeightQOS": "0",
        "PriorityWeightTRES": "(null)",
    }


def test_show_config_priority_settings() -> None:
    config = conf(
        "PriorityWeightFairshare=10000\nPriorityWeightTRES=CPU=1000,Mem=2000\n"
        "PriorityFlags=no_normal_part,SMALL_RELATIVE_TO_TIME,NO_FAIR_TREE,ACCRUE_ALWAYS\n"
        "PriorityMaxAge=1-12\nPriorityCalcPeriod=2\nPriorityFavorSmall=YES\n"
        "PriorityUsageResetPeriod=monthly\nPriorityParameters=x\n"
    )
    values = dict(show_config(config))
    assert "PriorityWeightFairshare" not in values  # shown as PriorityWeightFairShare
    assert values["PriorityWeightFairShare"] == "10000"
    assert values["PriorityWeightTRES"] == "CPU=1000,Mem=2000"
    # Slurm's order, and NO_NORMAL_ALL for any one NO_NORMAL_* flag (as Slurm prints it).
    assert (
        values["PriorityFlags"] == "ACCRUE_ALWAYS,SMALL_RELATIVE_TO_TIME,NO_FAIR_TREE,NO_NORMAL_ALL"
    )
    assert (values["PriorityMaxAge"], values["PriorityCalcPeriod"]) == ("1-12:00:00", "00:02:00")
    assert (values["PriorityFavorSmall"], values["PriorityUsageResetPeriod"]) == ("yes", "MONTHLY")
    assert values["PriorityParameters"] == "x"


def test_show_config_priority_basic_lists_only_the_type() -> None:
    config = conf("PriorityType=priority/basic\nPriorityWeightAge=10\nPriorityMaxAge=1\n")
    keys = [key for key, _ in show_config(config)]
    assert [key for key in keys if "Priority" in key or "FairShare" in key] == ["PriorityType"]
    assert dict(show_config(config))["PriorityType"] == "priority/basic"


# ---------------------------------------------------------------- robustness
_KEYS = [
    "ClusterName",
    "SlurmctldHost",
    "NodeName",
    "PartitionName",
    "DownNodes",
    "NodeSet",
    "Nodes",
    "CPUs",
    "Sockets",
    "Boards",
    "State",
    "Port",
    "NodeAddr",
    "MaxTime",
    "OverSubscribe",
    "Default",
    "KillWait",
    "SlurmctldPort",
    "Include",
    "Feature",
    "PriorityType",
    "PriorityWeightTRES",
    "PriorityMaxAge",
    "PriorityDecayHalfLife",
    "PriorityCalcPeriod",
    "PriorityFlags",
    "PriorityUsageResetPeriod",
]
_VALUES = st.one_of(
    st.sampled_from(["n[1-4]", "n1", "DEFAULT", "ALL", "UNLIMITED", "YES:2", "1-2", "0", "%c"]),
    st.text(max_size=12),
)
_LINES = st.lists(
    st.one_of(
        st.builds("{}={}".format, st.sampled_from(_KEYS), _VALUES),
        st.text(max_size=20),
    ),
    max_size=8,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
def test_random_text_raises_only_config_error(tmp_path: Path, text: str) -> None:
    with contextlib.suppress(ConfigError):
        parse(text, str(tmp_path / "slurm.conf"))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_LINES, st.booleans())
def test_random_settings_raise_only_config_error(
    tmp_path: Path, lines: list[str], valid_head: bool
) -> None:
    text = (HEAD if valid_head else "") + " ".join(lines[:2]) + "\n" + "\n".join(lines[2:])
    with contextlib.suppress(ConfigError):
        parse(text, str(tmp_path / "slurm.conf"))


def test_parse_is_fast() -> None:
    """Every client command parses slurm.conf; a small one must take about a millisecond."""
    started = time.perf_counter()
    for _ in range(20):
        parse(EXAMPLE, PATH)
    assert (time.perf_counter() - started) / 20 < 0.005


def test_site_programs_and_their_settings_are_read() -> None:
    hooks = conf(
        "Prolog=/etc/slurm/prolog.d/*\nEpilog=/e\nPrologSlurmctld=/pc\nEpilogSlurmctld=/ec\n"
        "TaskProlog=/tp\nTaskEpilog=/te\nSrunProlog=/sp\nSrunEpilog=/se\n"
        "PrologEpilogTimeout=30\nHealthCheckProgram=/hc\nHealthCheckInterval=300\n"
        "HealthCheckNodeState=idle,CYCLE\n"
    ).hooks
    assert hooks == HookConfig(
        "/etc/slurm/prolog.d/*", "/e", "/pc", "/ec", "/tp", "/te", "/sp", "/se", 30,
        "/hc", 300, 60, ("IDLE", "CYCLE"),
    )  # fmt: skip
    assert conf("PrologEpilogTimeout=65534\n").hooks.timeout == 0  # Slurm's "for ever"
    assert conf("").hooks == HookConfig()


def test_a_health_check_state_slurm_does_not_know_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"bad HealthCheckNodeState value 'BUSY': use ANY"):
        conf("HealthCheckNodeState=ANY,busy\n")


def test_a_malformed_node_gres_stops_the_daemon_with_its_line() -> None:
    with pytest.raises(ConfigError, match=r"slurm.conf:3: bad Gres value"):
        parse(HEAD + "NodeName=n1 Gres=gpu:x:y:z\n", PATH)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param("ResvProlog=/etc/p\n", "ResvProlog=/etc/p is not supported", id="resvprolog"),
        pytest.param("UsePAM=1\n", "UsePAM=1 is not supported", id="pam"),
        pytest.param(
            "PrologFlags=Alloc,DeferBatch\n",
            "PrologFlags=Alloc,DeferBatch: deferbatch is not supported",
            id="prologflags-deferbatch",
        ),
        pytest.param("PrologFlags=Aloc\n", "aloc is not supported", id="prologflags-misspelt"),
        pytest.param("NodeName=n1 CoreSpecCount=1\n", "CoreSpecCount=1 is not", id="node"),
        pytest.param("NodeName=n1\nPartitionName=p Nodes=n1 LLN=yes\n", "LLN", id="p"),
    ],
)
def test_keys_that_would_change_an_outcome_are_refused(body: str, message: str) -> None:
    """Not implemented, and ignoring them could change what happens: no start."""
    with pytest.raises(ConfigError, match=message):
        conf(body)


def test_mpidefault_is_a_type_corral_serves() -> None:
    assert conf("").mpi_default == "none"
    assert conf("MpiDefault=pmi2\n").mpi_default == "pmi2"
    # Steps that name no type would start without the wire-up the site asked for.
    with pytest.raises(
        ConfigError,
        match=r"slurm.conf:3: MpiDefault=pmix is not supported: Corral serves "
        r"mpi/none and mpi/pmi2",
    ):
        conf("MpiDefault=pmix\n")
