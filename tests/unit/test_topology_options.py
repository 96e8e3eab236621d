"""--switches, --segment and Corral's --topology-level in sbatch, salloc and srun: the
values Slurm's parsers accept, their errors, the SBATCH_* variables, what a step
says of them, and how scontrol and squeue show them."""

from __future__ import annotations

from typing import Any

import pytest

from cli import salloc
from cli.failure import Failure
from cli.jobs import fields as job_fields
from cli.jobs import record as job_record
from cli.sbatch.settings import CLI, SCRIPT, Settings
from cli.srun import launch
from cli.srun.step_options import check
from corral import topologyconf
from corral.wire import codec
from tests.unit.test_scontrol_format import outputs
from tests.unit.test_scontrol_format import session as scontrol_session


def fields_of(key: str, text: str) -> dict[str, Any]:
    settings = Settings()
    settings.apply(key, text, CLI)
    return settings.fields


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("switches", "2", {"switches": 2}),
        ("switches", "1@5", {"switches": 1, "switch_wait": 300}),
        ("switches", "1@1:30", {"switches": 1, "switch_wait": 90}),
        ("switches", "3@1-0", {"switches": 3, "switch_wait": 86400}),
        ("segment", "4", {"segment": 4}),
        ("segment", "0", {"segment": 0}),
        ("topology-level", "1", {"topology_required": 1}),
        ("topology-level", "2:0", {"topology_required": 2, "topology_preferred": 0}),
        ("topology-level", ":1", {"topology_preferred": 1}),
    ],
    ids=[
        "count",
        "count and minutes",
        "minutes:seconds",
        "days-hours",
        "segment",
        "segment 0: none",
        "required",
        "required and preferred",
        "preferred alone",
    ],
)
def test_values(key: str, text: str, expected: dict[str, Any]) -> None:
    assert fields_of(key, text) == expected


@pytest.mark.parametrize(
    ("key", "text", "message", "status"),
    [
        ("switches", "0", 'Invalid numeric value "0" for --switches.', 1),
        ("switches", "x@5", 'Invalid numeric value "x" for --switches.', 1),
        ("switches", "2@soon", "Invalid --switches specification", 255),
        ("segment", "-1", "Invalid --segment specification", 255),
        ("segment", "65534", "Invalid --segment specification", 255),
        ("topology-level", "", "Invalid --topology-level specification", 255),
        ("topology-level", "1:", "Invalid --topology-level specification", 255),
        ("topology-level", "leaf", "Invalid --topology-level specification", 255),
    ],
    ids=[
        "no switches",
        "not a count",
        "not a time",
        "negative segment",
        "segment past uint16",
        "no level",
        "no preferred level after the colon",
        "a name, not a level",
    ],
)
def test_errors(key: str, text: str, message: str, status: int) -> None:
    with pytest.raises(Failure) as caught:
        fields_of(key, text)
    assert (str(caught.value), caught.value.status) == (message, status)


def test_environment_count_and_wait_come_apart_as_in_slurm() -> None:
    settings = Settings()
    settings.apply("switches", "4@30", SCRIPT)
    settings.apply_environment({"SBATCH_REQ_SWITCH": "2", "SBATCH_WAIT4SWITCH": "2:00"})
    assert (settings.fields["switches"], settings.fields["switch_wait"]) == (2, 120)
    settings.apply("switches", "1", CLI)  # the command line's count; the variable's wait stays
    assert (settings.fields["switches"], settings.fields["switch_wait"]) == (1, 120)
    settings.apply_environment({"SBATCH_TOPOLOGY_LEVEL": "1:0"})
    assert settings.fields["topology_required"] == 1


def test_salloc_and_srun_take_the_options() -> None:
    for table in (salloc.TABLE, launch.TABLE):
        for name in ("switches", "segment", "topology-level"):
            assert table.by_long[name].use == "honoured", (table.prog, name)


def test_a_step_says_the_topology_options_do_nothing_to_it() -> None:
    warnings = check({"switches": "1", "topology-level": "0"}, 7, {})
    assert warnings == [
        "srun: warning: --switches=1 has no effect in a job step: job 7's nodes are placed",
        "srun: warning: --topology-level=0 has no effect in a job step: job 7's nodes are placed",
    ]


def _job(**fields: Any) -> dict[str, Any]:
    record = codec.decode("JobInfo", b"")
    record.update(job_id=5, name="j", state="PENDING", reason="Resources", **fields)
    return record


def test_scontrol_shows_switches_as_slurm_and_the_level_as_corrals() -> None:
    lines = job_record.lines(_job(switches=1, switch_wait=300, topology_level="1:0"), 0)
    assert "Switches=1@00:05:00" in lines
    assert "TopologyLevel=1:0" in lines
    assert not [line for line in job_record.lines(_job(), 0) if "Switches" in line]


def test_squeue_reqswitch_and_wait4switch() -> None:
    job = _job(switches=2, switch_wait=3700)
    assert job_fields.NAMES["reqswitch"].value(job, None) == "2"
    assert job_fields.NAMES["wait4switch"].value(job, None) == "1:01:40"


# ---------------------------------------------------------------- scontrol show topology

NO_SWITCH = "Topology information contains no switch or node named"
SPINE = "SwitchName=l0 Nodes=n[0-1]\nSwitchName=l1 Nodes=n[2-3]\nSwitchName=s Switches=l[0-1]\n"


def _topology_reply(text: str, plugin: str) -> dict[str, Any]:
    conf = topologyconf.parse(text, "t", plugin, [f"n{i}" for i in range(4)])
    records = [
        {"name": name, "nodes": nodes, "line": line, "block": plugin == topologyconf.BLOCK}
        for name, nodes, line in conf.records()
    ]
    return {"Config": {"entries": [], "now": 0, "topology": records}}


def _show(monkeypatch: pytest.MonkeyPatch, reply: dict[str, Any], *words: str) -> tuple[str, str]:
    session, _ = scontrol_session(monkeypatch, reply)
    session.run(["show", "topology", *words])
    return outputs(session)


@pytest.mark.parametrize(
    ("words", "out", "err"),
    [
        (
            (),
            "SwitchName=l0 Level=0 LinkSpeed=1 Nodes=n[0-1]\n"
            "SwitchName=l1 Level=0 LinkSpeed=1 Nodes=n[2-3]\n"
            "SwitchName=s Level=1 LinkSpeed=1 Nodes=n[0-3] Switches=l[0-1]\n",
            "",
        ),
        (("l1",), "SwitchName=l1 Level=0 LinkSpeed=1 Nodes=n[2-3]\n", ""),
        (
            ("n3",),
            "SwitchName=l1 Level=0 LinkSpeed=1 Nodes=n[2-3]\n"
            "SwitchName=s Level=1 LinkSpeed=1 Nodes=n[0-3] Switches=l[0-1]\n",
            "",
        ),
        (
            ("n[1-2]",),
            "SwitchName=s Level=1 LinkSpeed=1 Nodes=n[0-3] Switches=l[0-1]\n",
            "",
        ),
        (
            ("x9",),
            "",
            "scontrol: error: Topology information contains no switch or node named x9\n",
        ),
    ],
    ids=["all", "a switch", "the switches above a node", "above two nodes", "neither"],
)
def test_scontrol_show_topology(
    monkeypatch: pytest.MonkeyPatch, words: tuple[str, ...], out: str, err: str
) -> None:
    assert _show(monkeypatch, _topology_reply(SPINE, topologyconf.TREE), *words) == (out, err)


def test_scontrol_show_topology_blocks_and_none(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _topology_reply(
        "BlockName=b0 Nodes=n[0-1]\nBlockName=b1 Nodes=n[2-3]\n", "topology/block"
    )
    out, _ = _show(monkeypatch, blocks)
    assert out.splitlines() == [
        "BlockName=b0 BlockIndex=0 Nodes=n[0-1] BlockSize=2",
        "BlockName=b1 BlockIndex=1 Nodes=n[2-3] BlockSize=2",
        "AggregatedBlock=b[0-1] BlockIndex=2 Nodes=n[0-3] BlockSize=4",
    ]
    assert _show(monkeypatch, blocks, "zz")[1] == (
        "scontrol: error: Topology information contains no block or node named zz\n"
    )
    flat = {"Config": {"entries": [], "now": 0, "topology": []}}
    assert _show(monkeypatch, flat) == ("", "scontrol: error: No topology information available\n")
