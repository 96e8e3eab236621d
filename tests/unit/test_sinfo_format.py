"""sinfo's output, compared byte for byte with what Slurm 22.05 printed.

The golden cluster is four idle 2-CPU nodes n1..n4 in one default partition
``debug``; the other cases add busy, drained and unresponsive nodes and a
second partition to check how rows are grouped, named and ordered.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cli import boundary, sinfo
from cli.halt import Halt
from cli.nodes import statenames
from corral.errors import SlurmError
from corral.wire import codec

STAMP = 1796014614


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def node(name: str, **fields: Any) -> dict[str, Any]:
    record = codec.decode("NodeInfo", b"")
    record.update(
        name=name,
        hostname="vm",
        addr="127.0.0.1",
        state="IDLE",
        cpus=2,
        sockets=1,
        cores_per_socket=2,
        threads_per_core=1,
        real_memory=6000,
        weight=1,
        partitions=["debug"],
    )
    record.update(fields)
    return record


def partition(name: str, names: list[str], **fields: Any) -> dict[str, Any]:
    record = codec.decode("PartitionInfo", b"")
    record.update(
        name=name,
        node_names=names,
        is_default=True,
        max_time=-1,
        state="UP",
        oversubscribe="NO",
        allow_groups="ALL",
    )
    record.update(fields)
    return record


def golden() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = [f"n{i}" for i in range(1, 5)]
    return [node(name) for name in names], [partition("debug", names)]


def mixed() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes, parts = golden()
    nodes[1].update(state="ALLOCATED", alloc_cpus=2)
    nodes[2].update(state_flags=["DRAIN"], reason="bad disk", reason_user="root", reason_time=STAMP)
    nodes[3].update(state="DOWN", state_flags=["NOT_RESPONDING"], reason="Not responding")
    parts.append(partition("gpu", ["n3", "n4"], is_default=False, max_time=60))
    return nodes, parts


def rows(*lines: str) -> str:
    """Expected output lines (some end in spaces, which Slurm prints)."""
    return "".join(line + "\n" for line in lines)


def report(data: tuple[list[dict[str, Any]], list[dict[str, Any]]], *argv: str) -> str:
    chosen = sinfo.parse_settings(list(argv), {})
    layout = sinfo.build_layout(chosen.fmt or "", chosen.names_format)
    assert not layout.errors
    return sinfo.render(data[0], data[1], chosen, layout)


GOLDEN_DEFAULT = """\
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
debug*       up   infinite      4   idle n[1-4]
"""

GOLDEN_NODES_LONG = (
    "NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE "
    "REASON              \n"
    + "".join(
        f"n{i}             1    debug*        idle 2       1:2:1   6000        0      1   (null) "
        "none                \n"
        for i in range(1, 5)
    )
)

GOLDEN_REASONS = "REASON               USER      TIMESTAMP           NODELIST\n"

GOLDEN_LETTERS = """\
PARTITION AVAIL TIMELIMIT NODES STATE NODELIST CPUS MEMORY AVAIL_FEATURES
debug* up infinite 4 idle n[1-4] 2 6000 (null)
"""


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ((), GOLDEN_DEFAULT),
        (("-N", "-l"), GOLDEN_NODES_LONG),
        (("-R",), GOLDEN_REASONS),
        (("-o", "%P %a %l %D %t %N %c %m %f"), GOLDEN_LETTERS),
    ],
)
def test_golden_reports(argv: tuple[str, ...], expected: str) -> None:
    assert report(golden(), *argv) == expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            (),
            """\
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
debug*       up   infinite      1  down* n4
debug*       up   infinite      1  drain n3
debug*       up   infinite      1  alloc n2
debug*       up   infinite      1   idle n1
gpu          up    1:00:00      1  down* n4
gpu          up    1:00:00      1  drain n3
""",
        ),
        (
            ("-N",),
            rows(
                "NODELIST   NODES PARTITION STATE ",
                "n1             1    debug* idle  ",
                "n2             1    debug* alloc ",
                "n3             1    debug* drain ",
                "n3             1       gpu drain ",
                "n4             1    debug* down* ",
                "n4             1       gpu down* ",
            ),
        ),
        (
            ("-R",),
            """\
REASON               USER      TIMESTAMP           NODELIST
Not responding       Unknown   Unknown             n4
bad disk             root      2026-11-30T04:56:54 n3
""",
        ),
        (
            ("-s",),
            """\
PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST
debug*       up   infinite          1/1/2/4 n[1-4]
gpu          up    1:00:00          0/0/2/2 n[3-4]
""",
        ),
        (
            ("-t", "idle,drain", "-p", "debug"),
            """\
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
debug*       up   infinite      1  drain n3
debug*       up   infinite      1   idle n1
""",
        ),
        (
            ("-t", "mix", "-h"),
            rows(
                "debug*       up   infinite      0    n/a ",
                "gpu          up    1:00:00      0    n/a ",
            ),
        ),
        (
            ("-o", "%N %C %A %F"),
            """\
NODELIST CPUS(A/I/O/T) NODES(A/I) NODES(A/I/O/T)
n[1-4] 2/2/4/8 1/1 1/1/2/4
""",
        ),
        (
            ("-r", "-o", "%10N|%T|%E"),
            """\
NODELIST  |STATE|REASON
n3        |drained|bad disk
n2        |allocated|none
n1        |idle|none
""",
        ),
    ],
)
def test_grouping(argv: tuple[str, ...], expected: str) -> None:
    assert report(mixed(), *argv) == expected


def test_long_partition_report() -> None:
    lines = report(mixed(), "-l").splitlines()
    assert lines[0] == (
        "PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST"
    )
    assert lines[2] == (
        "debug*       up   infinite 1-infinite   no       NO        all      1     drained n3"
    )


def test_long_partition_names_widen_the_column() -> None:
    nodes, parts = golden()
    parts[0]["name"] = "verylongname"
    assert report((nodes, parts)).splitlines()[1] == (
        "verylongname*    up   infinite      4   idle n[1-4]"
    )


def test_fixed_width_partition_keeps_the_default_mark() -> None:
    nodes, parts = golden()
    assert report((nodes, parts), "-o", "%4P|%.8P").splitlines()[1] == "deb*|  debug*"


@pytest.mark.parametrize(
    ("base", "flags", "compact", "long", "complete"),
    [
        ("IDLE", [], "idle", "idle", "IDLE"),
        ("IDLE", ["DRAIN"], "drain", "drained", "IDLE+DRAIN"),
        ("ALLOCATED", ["DRAIN"], "drng", "draining", "ALLOCATED+DRAIN"),
        ("MIXED", ["DRAIN", "NOT_RESPONDING"], "drng*", "draining*", "MIXED+DRAIN+NOT_RESPONDING"),
        ("IDLE", ["NOT_RESPONDING"], "idle*", "idle*", "IDLE+NOT_RESPONDING"),
        ("DOWN", ["NOT_RESPONDING"], "down*", "down*", "DOWN+NOT_RESPONDING"),
        ("ALLOCATED", ["COMPLETING"], "alloc+", "allocated+", "ALLOCATED+COMPLETING"),
        ("IDLE", ["COMPLETING"], "comp", "completing", "IDLE+COMPLETING"),
        ("MIXED", [], "mix", "mixed", "MIXED"),
        ("FUTURE", [], "futr", "future", "FUTURE"),
        ("UNKNOWN", [], "unk", "unknown", "UNKNOWN"),
        ("IDLE", ["FAIL"], "fail", "fail", "IDLE+FAIL"),
        ("ALLOCATED", ["FAIL"], "failg", "failing", "ALLOCATED+FAIL"),
        ("IDLE", ["MAINTENANCE"], "maint", "maint", "IDLE+MAINTENANCE"),
        ("IDLE", ["REBOOT_REQUESTED"], "boot", "reboot", "IDLE+REBOOT_REQUESTED"),
        ("IDLE", ["RESERVED"], "resv", "reserved", "IDLE+RESERVED"),
        ("IDLE", ["POWERED_DOWN"], "idle~", "idle~", "IDLE+POWERED_DOWN"),
    ],
)
def test_node_state_names(
    base: str, flags: list[str], compact: str, long: str, complete: str
) -> None:
    state = statenames.value(node("x", state=base, state_flags=flags))
    assert statenames.compact(state) == compact
    assert statenames.long_name(state) == long
    assert statenames.complete(state) == complete


@pytest.mark.parametrize(
    ("word", "selected"),
    [
        ("idle", (statenames.IDLE, "base")),
        ("al", (statenames.ALLOCATED, "allocated")),
        ("drain", (statenames.DRAIN, "drain")),
        ("drng", (statenames.DRAIN | statenames.ALLOCATED, "draining")),
        ("DRAINED", (statenames.DRAIN | statenames.IDLE, "drained")),
        ("no_respond", (statenames.NO_RESPOND, "flag")),
        ("d", (statenames.DOWN, "base")),
        ("bogus", None),
    ],
)
def test_state_filter_words(word: str, selected: tuple[int, str] | None) -> None:
    assert statenames.filter_word(word) == selected


def test_bad_state_word() -> None:
    with pytest.raises(Halt) as stop:
        sinfo.parse_settings(["-t", "idle,bogus"], {})
    assert stop.value.lines[0] == 'sinfo: error: Bad state string: "bogus"'
    assert stop.value.lines[1].startswith("sinfo: error: valid states: unknown,down,idle,")


def test_conflicting_options() -> None:
    with pytest.raises(Halt) as stop:
        sinfo.parse_settings(["-a", "-p", "debug"], {})
    assert stop.value.lines == (
        "sinfo: error: Conflicting options, -a and -p, specified. Please choose one or the other.",
    )


class FakeClient:
    def __init__(self, replies: dict[str, Any]) -> None:
        self.replies = replies
        self.requests: list[tuple[str, Any]] = []

    def call(self, method: str, request: Any) -> Any:
        self.requests.append((method, request))
        reply = self.replies[method]
        if isinstance(reply, Exception):
            raise reply
        return reply


def run(
    monkeypatch: pytest.MonkeyPatch, replies: dict[str, Any], *argv: str
) -> tuple[FakeClient, int]:
    client = FakeClient(replies)
    monkeypatch.setattr(boundary, "connect", lambda: client)
    for name in list(os.environ):
        if name.startswith("SINFO_"):
            monkeypatch.delenv(name)
    return client, sinfo.sinfo(list(argv))


def test_command_prints_golden(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, parts = golden()
    replies = {"Nodes": {"nodes": nodes, "now": STAMP}, "Partitions": {"partitions": parts}}
    client, status = run(monkeypatch, replies)
    assert status == 0
    assert capsys.readouterr().out == GOLDEN_DEFAULT
    assert [method for method, _ in client.requests] == ["Partitions", "Nodes"]


def test_unknown_single_node(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = {"Nodes": SlurmError(2018), "Partitions": {"partitions": []}}
    client, status = run(monkeypatch, replies, "-n", "nosuch")
    assert status == 1
    assert capsys.readouterr().err == "slurm_load_node: Invalid node name specified\n"
    assert client.requests[1] == ("Nodes", {"names": ["nosuch"]})


@pytest.mark.parametrize(
    ("argv", "env", "everything"),
    [([], {}, False), (["-a"], {}, True), ([], {"SINFO_ALL": "1"}, True)],
)
def test_all_asks_for_hidden_partitions(
    argv: list[str], env: dict[str, str], everything: bool
) -> None:
    assert sinfo.parse_settings(argv, env).all is everything


def test_rows_split_by_host_name_and_exact_counts_as_nodes_join() -> None:
    """The values a row keeps as nodes join (``NodeGroup.holds``/``least``) group as
    comparing with every node on the row did: by host name with ``%n``, by CPU count
    with ``-e``; a node named twice in a partition shows once."""
    nodes, parts = golden()
    nodes[1].update(hostname="other")
    nodes[2].update(cpus=4)
    parts[0]["node_names"] = ["n1", "n2", "n3", "n4", "n1"]
    assert report((nodes, parts), "-h", "-o", "%n %D %N") == rows("vm 3 n[1,3-4]", "other 1 n2")
    assert report((nodes, parts), "-h", "-e", "-o", "%c %D %N") == rows("2 3 n[1-2,4]", "4 1 n3")
    assert report((nodes, parts), "-h", "-o", "%c %D %N") == rows("2+ 4 n[1-4]")
