"""gres.conf: Slurm's syntax and records, per-node devices, checks and the cross-check."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import config, gresconf
from corral.confsyntax import ConfigError
from corral.gresconf import (
    AutoDetectRule,
    CrossCheck,
    GresConf,
    GresDevice,
    GresRecord,
    cross_check,
    format_ranges,
    parse,
)

PATH = "/etc/slurm/gres.conf"
TYPES = ("gpu", "mps", "shard", "bandwidth", "nic")
ENV_ALL = frozenset({"nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env"})


def _links(me: int) -> str:
    return ",".join("-1" if i == me else "18" for i in range(8))


def _gpu_line(i: int) -> str:
    cores = "0-55" if i < 4 else "56-111"
    return (
        f"NodeName=dgx[01-04] Name=gpu Type=h100 File=/dev/nvidia{i} "
        f"Cores={cores} Links={_links(i)}\n"
    )


# An 8-GPU DGX H100 pod (two 56-core sockets, NVSwitch: 18 links between each
# pair), MPS on the first four GPUs, shards over all eight, an A100 node with
# two MIG instances, and a count-only resource on every node.
DGX = (
    "##################################################################\n"
    "# gres.conf for the pod\n"
    "##################################################################\n"
    "AutoDetect=off\n"
    + "".join(_gpu_line(i) for i in range(8))
    + "NodeName=dgx[01-04] Name=mps Count=400 File=/dev/nvidia[0-3]\n"
    "NodeName=dgx[01-04] Name=shard Count=64   # 8 per GPU\n"
    "NodeName=mig01 AutoDetect=nvml\n"
    "NodeName=mig01 Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-31\n"
    "NodeName=mig01 Name=gpu Type=a100_3g.20gb Cores=32-63 \\\n"
    "    MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22\n"
    "nodename=mig01 NAME=gpu type=a100_3g.20gb cores=32-63 \\\n"
    "    multiplefiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap30,/dev/nvidia-caps/nvidia-cap31\n"
    "Name=bandwidth Type=lustre Count=4G Flags=CountOnly\n"
)
# Line numbers in DGX.
GPU0_LINE, MPS_LINE, SHARD_LINE, MIG_AD_LINE, A100_LINE, MIG1_LINE, MIG2_LINE, BW_LINE = (
    5,
    13,
    14,
    15,
    16,
    17,
    19,
    21,
)


def dgx() -> GresConf:
    return parse(DGX, PATH, gres_types=TYPES)


def error_of(text: str, gres_types: tuple[str, ...] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(text, PATH, gres_types=gres_types)
    return str(caught.value)


# ---------------------------------------------------------------- records
def test_dgx_records() -> None:
    conf = dgx()
    assert len(conf.records) == 14
    first = conf.records[0]
    assert first == GresRecord(
        name="gpu",
        type="h100",
        files=("/dev/nvidia0",),
        count=1,
        cores=tuple(range(56)),
        links=(-1, 18, 18, 18, 18, 18, 18, 18),
        nodes=frozenset({"dgx01", "dgx02", "dgx03", "dgx04"}),
        nodes_expr="dgx[01-04]",
        where=(PATH, GPU0_LINE),
    )
    mps = conf.records[8]
    assert (mps.name, mps.files, mps.count, mps.shared, mps.where) == (
        "mps",
        ("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3"),
        400,
        True,
        (PATH, MPS_LINE),
    )
    shard = conf.records[9]
    assert (shard.files, shard.count, shard.where) == ((), 64, (PATH, SHARD_LINE))
    mig = conf.records[11]
    assert mig.multiple_files and mig.devices == 1 and mig.count == 1
    assert mig.files == (
        "/dev/nvidia1",
        "/dev/nvidia-caps/nvidia-cap21",
        "/dev/nvidia-caps/nvidia-cap22",
    )
    assert mig.where == (PATH, MIG1_LINE)
    assert conf.records[12].where == (PATH, MIG2_LINE)  # keys in any case
    bandwidth = conf.records[13]
    assert bandwidth.nodes is None and bandwidth.count == 4 * 1024**3
    assert bandwidth.flags == frozenset({"CountOnly"})
    assert conf.warnings == ()


def test_records_for_scopes_by_nodename() -> None:
    conf = dgx()
    assert len(conf.records_for("dgx03")) == 11
    assert [r.where[1] for r in conf.records_for("mig01")] == [
        A100_LINE,
        MIG1_LINE,
        MIG2_LINE,
        BW_LINE,
    ]
    assert [r.name for r in conf.records_for("login1")] == ["bandwidth"]


# ---------------------------------------------------------------- devices
def test_dgx_devices() -> None:
    devices = dgx().devices_for("dgx02")
    gpus = [d for d in devices if d.name == "gpu"]
    assert [d.files for d in gpus] == [(f"/dev/nvidia{i}",) for i in range(8)]
    assert [d.index for d in gpus] == list(range(8))
    assert {d.count for d in gpus} == {1}
    assert [d.cores for d in gpus] == [tuple(range(56))] * 4 + [tuple(range(56, 112))] * 4
    assert [d.links.index(-1) for d in gpus if d.links] == list(range(8))
    assert gpus[5] == GresDevice(
        name="gpu",
        type="h100",
        files=("/dev/nvidia5",),
        count=1,
        cores=tuple(range(56, 112)),
        links=(18, 18, 18, 18, 18, -1, 18, 18),
        flags=ENV_ALL,  # no Flags and AutoDetect=off: every environment variable
        index=5,
        where=(PATH, GPU0_LINE + 5),
    )
    mps = [d for d in devices if d.name == "mps"]
    # Count=400 over four files: 100 each, typed and placed like the GPU of the file.
    assert [(d.files, d.count, d.type, d.index) for d in mps] == [
        ((f"/dev/nvidia{i}",), 100, "h100", i) for i in range(4)
    ]
    assert mps[0].cores == tuple(range(56))
    assert mps[0].flags == frozenset({"one_sharing"})  # MPS's default
    shards = [d for d in devices if d.name == "shard"]
    # A Count without File is spread over the node's GPUs.
    assert [(d.files, d.count) for d in shards] == [((f"/dev/nvidia{i}",), 8) for i in range(8)]
    assert shards[7].cores == tuple(range(56, 112))
    assert devices[-1] == GresDevice(
        name="bandwidth",
        type="lustre",
        files=(),
        count=4 * 1024**3,
        cores=None,
        links=None,
        flags=frozenset({"CountOnly"}),
        index=0,
        where=(PATH, BW_LINE),
    )
    assert len(devices) == 8 + 4 + 8 + 1


def test_mig_devices() -> None:
    devices = dgx().devices_for("mig01")
    assert [(d.type, d.files, d.count, d.index) for d in devices if d.name == "gpu"] == [
        ("a100", ("/dev/nvidia0",), 1, 0),
        (
            "a100_3g.20gb",
            ("/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22"),
            1,
            1,
        ),
        (
            "a100_3g.20gb",
            ("/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap30", "/dev/nvidia-caps/nvidia-cap31"),
            1,
            2,
        ),
    ]
    # AutoDetect=nvml implies CUDA_VISIBLE_DEVICES only.
    assert devices[0].flags == frozenset({"nvidia_gpu_env"})


def test_shared_count_spread_keeps_the_remainder() -> None:
    conf = parse("Name=gpu File=/dev/nvidia[0-2]\nName=shard Count=10\n", PATH, gres_types=TYPES)
    assert [d.count for d in conf.devices_for("n1") if d.name == "shard"] == [3, 3, 4]


def test_shared_without_gpus_is_count_only() -> None:
    conf = parse("Name=mps Count=100\n", PATH)
    assert [(d.files, d.count) for d in conf.devices_for("n1")] == [((), 100)]


def test_shared_with_file_drops_remainder_like_slurm() -> None:
    conf = parse("Name=gpu File=/dev/nvidia[0-2]\nName=mps Count=100 File=/dev/nvidia[0-2]\n", PATH)
    assert [d.count for d in conf.devices_for("n1") if d.name == "mps"] == [33, 33, 33]


def test_file_ranges_and_count_defaults() -> None:
    conf = parse(
        "NodeName=tux3 Name=gpu File=/dev/nvidia[0,2-3]\n"
        "NodeName=tux4 Name=gpu File=/dev/nvidia0,/dev/nvidia1\n"
        "NodeName=tux5 Name=nic File=/dev/ib[00-01]/port[1-2]\n"
        "NodeName=tux6 Name=nic Count=2\n"
        "NodeName=tux7 Name=nic\n"
        "NodeName=tux8 Name=gpu Files=/dev/nvidia0 Count=1\n",
        PATH,
    )
    by_node = {r.nodes_expr: r for r in conf.records}
    assert by_node["tux3"].files == ("/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia3")
    assert by_node["tux3"].count == 3
    assert by_node["tux4"].count == 2
    assert by_node["tux5"].files == (
        "/dev/ib00/port1",
        "/dev/ib00/port2",
        "/dev/ib01/port1",
        "/dev/ib01/port2",
    )
    assert (by_node["tux6"].count, by_node["tux7"].count, by_node["tux8"].count) == (2, 1, 1)
    assert [d.count for d in conf.devices_for("tux6")] == [2]  # count-only: one entry
    assert [d.files for d in conf.devices_for("tux3")] == [
        ("/dev/nvidia0",),
        ("/dev/nvidia2",),
        ("/dev/nvidia3",),
    ]


@pytest.mark.parametrize(
    ("text", "count"),
    [("10", 10), ("2K", 2048), ("1m", 1024**2), ("4G", 4 * 1024**3), ("3kb", 3000)],
)
def test_count_suffixes(text: str, count: int) -> None:
    assert parse(f"Name=bandwidth Count={text}\n", PATH).records[0].count == count


def test_cores_forms() -> None:
    conf = parse(
        "NodeName=a Name=gpu File=/dev/nvidia0 Cores=0-3,32-35,8\n"
        "NodeName=b Name=gpu File=/dev/nvidia0 Cores=[0-1]\n"
        "NodeName=c Name=gpu File=/dev/nvidia0 CPUs=4,5\n",
        PATH,
    )
    assert [r.cores for r in conf.records] == [
        (0, 1, 2, 3, 8, 32, 33, 34, 35),
        (0, 1),
        (4, 5),
    ]
    assert format_ranges(conf.records[0].cores or ()) == "0-3,8,32-35"


def test_syntax_comments_continuations_and_case() -> None:
    conf = parse(
        "# comment\n"
        "   \n"
        'name=gpu  TYPE="tesla"  file=/dev/nvidia[0-1] \\\n'
        "   COREs=0,1   # the first socket\n"
        "Name=gpu Type=tesla File=/dev/nvidia3 Cores=2,3\n",
        PATH,
    )
    assert [(r.type, r.files, r.cores, r.where[1]) for r in conf.records] == [
        ("tesla", ("/dev/nvidia0", "/dev/nvidia1"), (0, 1), 3),
        ("tesla", ("/dev/nvidia3",), (2, 3), 5),
    ]


def test_include(tmp_path: Path) -> None:
    (tmp_path / "gres.d").mkdir()
    (tmp_path / "gres.d" / "alpha.conf").write_text("Name=gpu File=/dev/nvidia[0-1]\n")
    main = tmp_path / "gres.conf"
    main.write_text("AutoDetect=nvml\nInclude gres.d/%c.conf\n")
    conf = gresconf.load(str(main), cluster_name="alpha")
    assert conf.records[0].where == (str(tmp_path / "gres.d" / "alpha.conf"), 1)


def test_flags_are_case_insensitive_and_kept() -> None:
    conf = parse("Name=gpu File=/dev/nvidia0 Flags=AMD_GPU_ENV,explicit\n", PATH)
    assert conf.records[0].flags == frozenset({"amd_gpu_env", "explicit"})
    assert conf.devices_for("n").__getitem__(0).flags == frozenset({"amd_gpu_env", "explicit"})


def test_env_flags_inherited_by_the_line_below() -> None:
    conf = parse(
        "Name=gpu Type=mi250 File=/dev/dri/renderD128 Flags=amd_gpu_env\n"
        "Name=gpu Type=mi250 File=/dev/dri/renderD129\n",
        PATH,
    )
    assert [d.flags for d in conf.devices_for("n")] == [frozenset({"amd_gpu_env"})] * 2


def test_global_flags_hold_for_the_name_everywhere() -> None:
    conf = parse(
        "NodeName=a Name=gpu File=/dev/nvidia0 Flags=explicit,nvidia_gpu_env\n"
        "NodeName=b Name=gpu File=/dev/nvidia0\n",
        PATH,
    )
    assert conf.devices_for("b")[0].flags == ENV_ALL | {"explicit"}


def test_mps_all_sharing_replaces_the_default() -> None:
    conf = parse("Name=gpu File=/dev/nvidia0\nName=mps Count=100 Flags=all_sharing\n", PATH)
    assert conf.devices_for("n")[1].flags == frozenset({"all_sharing"})


# ---------------------------------------------------------------- AutoDetect
def test_autodetect_defaults() -> None:
    conf = dgx()
    assert conf.autodetect == "off"
    assert conf.node_autodetect == (
        AutoDetectRule("nvml", frozenset({"mig01"}), "mig01", (PATH, MIG_AD_LINE)),
    )
    assert conf.autodetect_for("mig01") == "nvml"
    assert conf.autodetect_for("dgx01") == "off"


def test_autodetect_unset_and_per_node() -> None:
    conf = parse(
        "NodeName=tux[0-7] AutoDetect=nvml\n"
        "NodeName=tux[8-11] AutoDetect=RSMI\n"
        "NodeName=tux[12-15] Name=gpu File=/dev/nvidia[0-3]\n",
        PATH,
    )
    assert conf.autodetect is None
    assert [conf.autodetect_for(f"tux{i}") for i in (0, 8, 12)] == ["nvml", "rsmi", None]
    assert conf.records_for("tux0") == ()


def test_autodetect_off_for_one_node() -> None:
    conf = parse(
        "AutoDetect=nvml\nNodeName=tux3 AutoDetect=off Name=gpu File=/dev/nvidia[0-3]\n", PATH
    )
    assert (conf.autodetect_for("tux3"), conf.autodetect_for("tux4")) == ("off", "nvml")
    assert len(conf.devices_for("tux3")) == 4


def test_autodetect_first_on_a_line_is_the_default() -> None:
    conf = parse("AutoDetect=oneapi Name=gpu File=/dev/dri/card0\n", PATH)
    assert conf.autodetect == "oneapi"
    assert conf.devices_for("n")[0].flags == frozenset({"intel_gpu_env"})


def test_autodetect_warnings() -> None:
    conf = parse(
        "AutoDetect=nvml\nAutoDetect=rsmi\nName=gpu File=/dev/nvidia0 AutoDetect=nvml\n", PATH
    )
    assert conf.autodetect == "rsmi"
    assert conf.warnings == (
        f"{PATH}:2: AutoDetect specified more than once, latest value used",
        f"{PATH}:3: In-line AutoDetect requires NodeName to take effect",
    )


def test_same_node_autodetect_twice_is_fine() -> None:
    conf = parse("NodeName=a AutoDetect=nvml\nNodeName=a[0-1] AutoDetect=nvml\n", PATH)
    assert conf.autodetect_for("a") == "nvml"


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Name=gpu Fiel=/dev/nvidia0\n", "Parsing error at unrecognized key: Fiel"),
        ("Name=gpu File=/dev/nvidia0 junk\n", 'cannot parse "junk"'),
        ("Type=a100 File=/dev/nvidia0\n", "Invalid GRES data, no type name"),
        ("NodeName=tux1\n", "Invalid GRES data, no type name"),
        ("NodeName=tux[1-2 Name=gpu\n", "bad NodeName value 'tux[1-2': invalid hostlist"),
        (
            "Name=gpu File=/dev/nvidia[0-3] Count=8\n",
            "Invalid GRES record for gpu, count does not match File value (8 != 4)",
        ),
        (
            "Name=gpu Type=a100_3g.20gb MultipleFiles=/dev/nvidia1,/dev/cap21 Count=2\n",
            "Invalid GRES record for gpu, count does not match File value (2 != 1)",
        ),
        ("Name=gpu Count=8x\n", "Invalid GRES record for gpu, invalid count 8x"),
        ("Name=gpu Count=-1\n", "Invalid GRES record for gpu, invalid count -1"),
        (
            "Name=bandwidth Count=99999999999999999999\n",
            "GRES bandwidth has invalid count value 99999999999999999999",
        ),
        ("Name=gpu File=/dev/nvidia[0-3\n", "can't parse File=/dev/nvidia[0-3"),
        ("Name=gpu File=/dev/nvidia[3-1]\n", "can't parse File=/dev/nvidia[3-1]"),
        (
            "Name=gpu MultipleFiles=/dev/nvidia[0-1 \n",
            "can't parse MultipleFiles=/dev/nvidia[0-1",
        ),
        (
            "Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/cap1\n",
            "File and MultipleFiles options are mutually exclusive",
        ),
        (
            "Name=gpu MultipleFiles=/dev/nvidia1\n",
            "MultipleFiles does not contain multiple files. Use File instead",
        ),
        ("Name=gpu File=/dev/nvidia0 Cores=0-x\n", "Invalid GRES data for gpu, Cores=0-x"),
        ("Name=gpu File=/dev/nvidia0 Cores=7-3\n", "Invalid GRES data for gpu, Cores=7-3"),
        ("Name=gpu File=/dev/nvidia0 Cores=0,,1\n", "Invalid GRES data for gpu, Cores=0,,1"),
        ("Name=gpu File=/dev/nvidia0 CPUs=0-99999\n", "Invalid GRES data for gpu, CPUs=0-99999"),
        (
            "Name=gpu File=/dev/nvidia0 Links=-1,x\n",
            "Failed to parse token 'x' in links string '-1,x'",
        ),
        (
            "Name=gpu File=/dev/nvidia0 Links=-1,1024\n",
            "Failed to parse token '1024' in links string '-1,1024'",
        ),
        (
            "Name=gpu File=/dev/nvidia0 Links=-1,-2\n",
            "Failed to parse token '-2' in links string '-1,-2'",
        ),
        (
            "Name=gpu File=/dev/nvidia0 Links=-1,-1\n",
            "links string '-1,-1' has more than one -1",
        ),
        ("Name=gpu File=/dev/nvidia0 Links=0,4\n", "-1 wasn't found in links string '0,4'"),
        (
            "Name=gpu File=/dev/nvidia[0-1] Links=-1,4\n",
            "Links=-1,4 needs a line with a single device, not 2",
        ),
        ("AutoDetect=nvlm\n", "unknown autodetect flag 'nvlm'"),
        (
            "NodeName=tux1 AutoDetect=cuda Name=gpu File=/dev/nvidia0\n",
            "unknown autodetect flag 'cuda'",
        ),
        (
            "Name=gpu File=/dev/nvidia0 Flags=CountOnly,cuda_env\n",
            "bad Flags value 'CountOnly,cuda_env': unknown flag 'cuda_env'",
        ),
        (
            "Name=gpu Type=a100 File=/dev/nvidia0 Flags=no_gpu_env,nvidia_gpu_env\n",
            "Invalid GRES record name=gpu type=a100: Flags (no_gpu_env,nvidia_gpu_env) "
            'contains "no_gpu_env", which must be mutually exclusive to all other GRES env '
            "flags of same node and name",
        ),
        (
            "Name=mps Count=100 Flags=one_sharing,all_sharing\n",
            "Invalid GRES record name=mps type=(null): Flags (one_sharing,all_sharing): "
            "one_sharing and all_sharing are mutually exclusive",
        ),
    ],
)
def test_line_errors(text: str, message: str) -> None:
    assert error_of("# gres.conf\n" + text) == f"{PATH}:2: {message}"


def test_name_not_in_gres_types() -> None:
    text = "Name=gpu File=/dev/nvidia0\nName=fpga File=/dev/xdma0\n"
    assert error_of(text, gres_types=("gpu", "mps")) == (
        f"{PATH}:2: invalid GRES name 'fpga': not in GresTypes (gpu,mps)"
    )
    assert error_of(text, gres_types=()) == (
        f"{PATH}:1: invalid GRES name 'gpu': not in GresTypes ((null))"
    )
    # Names match GresTypes in any case, as in Slurm; no GresTypes, no check.
    assert len(parse("Name=GPU File=/dev/nvidia0\n", PATH, gres_types=("gpu",)).records) == 1
    assert len(parse(text, PATH).records) == 2


def test_links_must_cover_the_nodes_gpus() -> None:
    text = DGX.replace("NodeName=dgx[01-04] Name=gpu Type=h100 File=/dev/nvidia7", "#", 1)
    assert error_of(text, gres_types=TYPES) == (
        f"{PATH}:{GPU0_LINE}: Invalid GRES Links value (-1,18,18,18,18,18,18,18) on node "
        "dgx[01-04]: 8 values for 7 gpu devices"
    )


def test_links_checked_only_for_the_nodes_given() -> None:
    text = "NodeName=a Name=gpu File=/dev/nvidia0 Links=-1,0\n"
    assert error_of(text) == (
        f"{PATH}:1: Invalid GRES Links value (-1,0) on node a: 2 values for 1 gpu devices"
    )
    assert len(parse(text, PATH, nodes=["b", "c"]).records) == 1


def test_unscoped_lines_checked_for_other_nodes() -> None:
    text = "Name=gpu File=/dev/nvidia0 Links=-1,0\nNodeName=a Name=gpu File=/dev/nvidia1\n"
    assert error_of(text) == (
        f"{PATH}:1: Invalid GRES Links value (-1,0) on every node: 2 values for 1 gpu devices"
    )
    # Node a has both GPUs, so the list fits there; nodes=["a"] checks only a.
    assert len(parse(text, PATH, nodes=["a"]).devices_for("a")) == 2


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "Name=gpu File=/dev/nvidia0\nNodeName=n1 Name=gpu Count=2\n",
            2,
            'gres.conf for gpu, some records have "File" specification while others do not',
        ),
        (
            "Name=gpu Type=a100 File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/dev/nvidia1\n",
            2,
            'gres.conf for gpu, some records have "Type=" specification while others do not',
        ),
        ("Name=nic Count=2\nName=nic Count=4\n", 2, "gres.conf duplicate records for nic"),
        ("Name=mps Count=200\nName=mps Count=200\n", 2, "gres.conf duplicate records for mps"),
        (
            "Name=gpu Type=a File=/dev/nvidia[0-1]\nName=gpu Type=b File=/dev/nvidia1\n",
            2,
            "gpu duplicate device file name (/dev/nvidia1)",
        ),
        (
            "Name=gpu Type=a File=/dev/nvidia0 Flags=nvidia_gpu_env\n"
            "Name=gpu Type=a File=/dev/nvidia1 Flags=amd_gpu_env\n",
            2,
            "Invalid GRES record name=gpu type=a: Flags (amd_gpu_env) does not match env "
            "flags for previous GRES of same node and name",
        ),
        (
            "NodeName=tux[0-3] AutoDetect=nvml\nNodeName=tux3 AutoDetect=rsmi\n",
            2,
            "duplicate node-local AutoDetect specification does not match the first",
        ),
    ],
)
def test_node_errors(text: str, line: int, message: str) -> None:
    assert error_of(text) == f"{PATH}:{line}: {message}"


def test_earliest_node_problem_is_reported() -> None:
    text = (
        "NodeName=b Name=nic Count=1\n"
        "NodeName=a Name=gpu File=/dev/nvidia0 Links=-1,4\n"
        "NodeName=b Name=nic Count=1\n"
    )
    assert error_of(text) == (
        f"{PATH}:2: Invalid GRES Links value (-1,4) on node a: 2 values for 1 gpu devices"
    )


def test_different_types_may_differ_in_env_flags() -> None:
    conf = parse(
        "Name=gpu Type=a File=/dev/nvidia0 Flags=nvidia_gpu_env\n"
        "Name=gpu Type=b File=/dev/dri/card1 Flags=intel_gpu_env\n",
        PATH,
    )
    assert [d.flags for d in conf.devices_for("n")] == [
        frozenset({"nvidia_gpu_env"}),
        frozenset({"intel_gpu_env"}),
    ]


def test_mig_devices_may_share_their_parent_file() -> None:
    assert len(dgx().devices_for("mig01")) == 4


def test_unreadable_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "gres.conf")
    with pytest.raises(ConfigError, match=r"gres.conf: cannot read"):
        gresconf.load(missing)


# ---------------------------------------------------------------- cross-check
def test_cross_check_agrees() -> None:
    devices = dgx().devices_for("dgx01")
    result = cross_check((("gpu", "h100", 8), ("mps", "", 400), ("shard", "", 64)), devices)
    assert result.reasons == () and result.reason is None
    # bandwidth is in gres.conf but not in this node's Gres=: Slurm ignores it.
    assert result.warnings == (
        "A line in gres.conf for GRES bandwidth:lustre has 4294967296 more configured than "
        "expected in slurm.conf. Ignoring extra GRES.",
    )


def test_cross_check_fewer_than_configured() -> None:
    conf = parse("NodeName=n1 Name=gpu File=/dev/nvidia[0-3]\n", PATH)
    result = cross_check((("gpu", "", 8),), conf.devices_for("n1"))
    assert result == CrossCheck(("gres/gpu count reported lower than configured (4 < 8)",))
    assert result.reason == "gres/gpu count reported lower than configured (4 < 8)"


def test_cross_check_types() -> None:
    devices = dgx().devices_for("mig01")
    configured = (("gpu", "a100", 2), ("gpu", "a100_1g.5gb", 1), ("bandwidth", "", 1))
    result = cross_check(configured, devices)
    assert result.reasons == (
        "gres/gpu:a100 count too low (1 < 2)",
        "gres/gpu:a100_1g.5gb count too low (0 < 1)",
        "gres/gpu type (a100_3g.20gb) reported but not configured",
    )
    assert result.warnings == (
        "A line in gres.conf for GRES gpu:a100_3g.20gb has 2 more configured than expected "
        "in slurm.conf. Ignoring extra GRES.",
        "A line in gres.conf for GRES bandwidth has 4294967295 more configured than expected "
        "in slurm.conf. Ignoring extra GRES.",
    )


def test_cross_check_untyped_gres_accepts_any_type() -> None:
    devices = dgx().devices_for("mig01")
    assert cross_check((("gpu", "", 3), ("bandwidth", "lustre", 4 * 1024**3)), devices) == (
        CrossCheck()
    )


def test_cross_check_total_then_types() -> None:
    conf = parse("Name=gpu Type=a100 File=/dev/nvidia[0-3]\n", PATH)
    result = cross_check((("gpu", "a100", 8),), conf.devices_for("n"))
    assert result.reasons == (
        "gres/gpu count reported lower than configured (4 < 8)",
        "gres/gpu:a100 count too low (4 < 8)",
    )


def test_cross_check_leaves_names_gres_conf_does_not_describe() -> None:
    conf = parse("Name=gpu File=/dev/nvidia[0-1]\n", PATH)
    result = cross_check((("gpu", "", 2), ("nic", "", 4)), conf.devices_for("n"))
    assert result == CrossCheck()


def test_cross_check_shared_counts() -> None:
    devices = dgx().devices_for("dgx04")
    result = cross_check((("gpu", "h100", 8), ("mps", "", 800)), devices)
    assert result.reason == "gres/mps count reported lower than configured (400 < 800)"


def test_cross_check_cores() -> None:
    devices = dgx().devices_for("dgx01")
    result = cross_check((("gpu", "h100", 8),), devices, cores=64)
    assert result.reasons == (
        "Invalid GRES data for gpu, Cores=56-111 (only 64 cores are available)",
        "Invalid GRES data for shard, Cores=56-111 (only 64 cores are available)",
    )
    assert cross_check((("gpu", "h100", 8),), devices, cores=112).reasons == ()


# ---------------------------------------------------------------- slurm.conf hook
SLURM_CONF = """\
ClusterName=pod
SlurmctldHost=ctl
GresTypes=gpu,mps,shard,bandwidth
NodeName=dgx[01-04] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 \\
    Gres=gpu:h100:8,mps:400,shard:64
NodeName=mig01 CPUs=64 Gres=gpu:a100:1,gpu:a100_3g.20gb:2
PartitionName=gpu Nodes=ALL Default=YES
"""


def test_load_reads_gres_conf_beside_slurm_conf(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "gres.conf").write_text(DGX)
    conf = config.load(str(tmp_path / "slurm.conf"))
    assert conf.gres_conf is not None
    assert conf.gres_conf.path == str(tmp_path / "gres.conf")
    assert len(conf.gres_conf.devices_for("dgx03")) == 21
    node = conf.node("mig01")
    from corral import gres

    mismatch = cross_check(gres.parse_node(node.gres), conf.gres_conf.devices_for("mig01"))
    assert mismatch.reasons == ()


def test_load_without_gres_conf(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    assert config.load(str(tmp_path / "slurm.conf")).gres_conf is None
    # Parsing text alone never looks for a gres.conf.
    assert config.parse(SLURM_CONF, str(tmp_path / "slurm.conf")).gres_conf is None


def test_load_ignores_gres_conf_without_gres_types(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(
        SLURM_CONF.replace("GresTypes=gpu,mps,shard,bandwidth\n", "")
    )
    (tmp_path / "gres.conf").write_text("Bad=1\n")
    assert config.load(str(tmp_path / "slurm.conf")).gres_conf is None


def test_bad_gres_conf_stops_load(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "gres.conf").write_text("AutoDetect=off\nName=fpga File=/dev/xdma0\n")
    with pytest.raises(ConfigError) as caught:
        config.load(str(tmp_path / "slurm.conf"))
    assert str(caught.value) == (
        f"{tmp_path / 'gres.conf'}:2: invalid GRES name 'fpga': not in GresTypes "
        "(bandwidth,gpu,mps,shard)"
    )


def test_load_checks_only_slurm_conf_nodes(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    # A line for a node slurm.conf does not define is read but not checked per node.
    (tmp_path / "gres.conf").write_text("NodeName=old1 Name=gpu File=/dev/nvidia0 Links=-1,4\n")
    conf = config.load(str(tmp_path / "slurm.conf"))
    assert conf.gres_conf is not None and len(conf.gres_conf.records) == 1


def test_devices_for_a_node_parse_did_not_check() -> None:
    conf = parse("NodeName=a Name=gpu File=/dev/nvidia0 Links=-1,4\n", PATH, nodes=["b"])
    with pytest.raises(ConfigError) as caught:
        conf.devices_for("a")
    assert type(caught.value) is ConfigError
    assert str(caught.value) == (
        f"{PATH}:1: Invalid GRES Links value (-1,4) on node a: 2 values for 1 gpu devices"
    )
