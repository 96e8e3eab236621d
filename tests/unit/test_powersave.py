"""Power saving's rules (``controller/powersave.py``): settings, transitions, rates."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from controller import drain, powersave
from controller.journal import Journal
from controller.model import NodeRuntime
from controller.powersave import PowerSaver, PowerSettings, RateWindow
from controller.principal import principal_for
from controller.store import JobStore
from corral.config import parse
from corral.confsyntax import ConfigError

UP = NodeRuntime("n1", responding=True, state="UP", reason="")
ROOT = principal_for(0, 0)
BASE = "ClusterName=t\nSlurmctldHost=c\n"
PROGRAMS = "SuspendProgram=/bin/true\nResumeProgram=/bin/true\n"


def _conf(text: str, tmp_path: Path) -> JobStore:
    return JobStore(parse(BASE + text, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))


def test_settings_default_to_slurms_and_take_a_partitions_largest_times(tmp_path: Path) -> None:
    store = _conf(
        PROGRAMS + "SuspendTime=60\nSuspendExcParts=gpu\nSuspendExcNodes=n[1-2]\n"
        "NodeName=n[1-6] CPUs=1\nPartitionName=a Nodes=n[3-4] SuspendTime=300\n"
        "PartitionName=b Nodes=n4 SuspendTime=600 ResumeTimeout=900\n"
        "PartitionName=gpu Nodes=n6\nPartitionName=all Nodes=ALL Default=YES\n",
        tmp_path,
    )
    settings = PowerSettings.of(store.conf)
    assert (settings.suspend_timeout, settings.resume_timeout) == (30, 60)
    assert (settings.suspend_rate, settings.resume_rate) == (60, 300)
    assert settings.exc_nodes == {"n1", "n2", "n6"}
    assert settings.times("n3") == (300, 30, 60)
    assert settings.times("n4") == (600, 30, 900)
    assert settings.times("n5") == (60, 30, 60)
    assert PowerSettings.of(_conf("NodeName=n1\n", tmp_path / "x").conf).suspend_time == -1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SuspendExcStates=CLOUD\n", "bad SuspendExcStates value 'CLOUD'"),
        ("SuspendExcNodes=n[1-4]:2\n", "SuspendExcNodes counts are not read"),
        ("SuspendTime=60\nResumeProgram=/bin/true\n", "SuspendTime needs a SuspendProgram"),
        ("SuspendTime=60\nSuspendProgram=/bin/true\n", "SuspendTime needs a ResumeProgram"),
        ("PartitionName=p Nodes=ALL SuspendTimeout=soon\n", "SuspendTimeout"),
        ("NodeName=n2 SuspendTime=60\n", "SuspendTime"),
        ("PartitionName=q Nodes=ALL PowerDownOnIdle=yes\n", "PowerDownOnIdle"),
    ],
)
def test_settings_the_controller_cannot_carry_out_are_refused(
    text: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(BASE + "NodeName=n1\n" + text, str(tmp_path / "slurm.conf"))


def test_only_an_idle_node_past_its_suspend_time_and_not_excluded_is_suspended() -> None:
    settings = PowerSettings(suspend_program="/bin/true", suspend_time=60)
    assert powersave.suspendable(UP, busy=False, idle_for=60, settings=settings)
    assert not powersave.suspendable(UP, busy=False, idle_for=59, settings=settings)
    assert not powersave.suspendable(UP, busy=True, idle_for=600, settings=settings)
    excluded = replace(settings, exc_nodes=frozenset({"n1"}))
    assert not powersave.suspendable(UP, busy=False, idle_for=600, settings=excluded)
    drained = replace(UP, drain=True, reason="fan")
    assert powersave.suspendable(drained, busy=False, idle_for=600, settings=settings)
    no_drain = replace(settings, exc_states=frozenset({"DRAIN"}))
    assert not powersave.suspendable(drained, busy=False, idle_for=600, settings=no_drain)
    never = replace(settings, suspend_time=-1)
    assert not powersave.suspendable(UP, busy=False, idle_for=10**6, settings=never)
    # POWER_DOWN_ASAP: as soon as it is idle, excluded or not.
    asked = replace(UP, power=powersave.POWER_DOWN, drain=True, reason="POWER_DOWN_ASAP")
    assert powersave.suspendable(asked, busy=False, idle_for=0, settings=excluded)
    assert not powersave.suspendable(asked, busy=True, idle_for=0, settings=excluded)


def test_a_node_goes_down_and_up_through_slurms_states() -> None:
    asked = replace(UP, power=powersave.POWER_DOWN, drain=True, reason="POWER_DOWN_ASAP")
    going = powersave.suspending(asked, 100)
    assert (going.power, going.power_time, going.drain, going.reason) == (
        powersave.POWERING_DOWN,
        100,
        False,
        "",
    )
    assert not drain.usable(going)  # nothing starts on a node on its way down
    asleep = replace(going, power=powersave.POWERED_DOWN, responding=False)
    assert drain.usable(asleep) and powersave.asleep(asleep)  # a job may have it
    coming = powersave.resuming(asleep, 200)
    assert (coming.power, coming.power_time) == (powersave.POWERING_UP, 200)
    assert drain.usable(coming)
    assert powersave.registered(coming).power == powersave.ON
    assert powersave.registered(going).power == powersave.POWERING_DOWN
    failed = powersave.resume_failed(coming, 261, "slurm")
    assert (failed.state, failed.power, failed.reason) == (
        "DOWN",
        powersave.POWERED_DOWN,
        "ResumeTimeout reached",
    )
    assert not drain.usable(failed)


@pytest.mark.parametrize(
    ("power", "state", "busy", "then", "after"),
    [
        (powersave.POWERED_DOWN, "POWER_UP", False, "resume", powersave.POWERED_DOWN),
        (powersave.ON, "POWER_UP", False, "", powersave.ON),
        (powersave.ON, "POWER_DOWN", False, "suspend", powersave.ON),
        (powersave.ON, "POWER_DOWN", True, "", powersave.POWER_DOWN),
        (powersave.ON, "POWER_DOWN_ASAP", True, "", powersave.POWER_DOWN),
        (powersave.ON, "POWER_DOWN_FORCE", True, "suspend", powersave.ON),
        (powersave.POWERING_UP, "POWER_DOWN", True, "suspend", powersave.POWERING_UP),
        (powersave.POWERED_DOWN, "POWER_DOWN", False, "", powersave.POWERED_DOWN),
    ],
)
def test_scontrol_power_states(power: str, state: str, busy: bool, then: str, after: str) -> None:
    node, action = powersave.requested(replace(UP, power=power), state, busy)
    assert (node.power, action) == (after, then)
    assert node.drain == (state == "POWER_DOWN_ASAP" and busy)


def test_a_rate_window_lets_so_many_nodes_a_minute() -> None:
    window = RateWindow(2)
    assert window.room(0) == 2
    window.take(0, 2)
    assert window.room(59) == 0
    assert window.room(60) == 2
    assert RateWindow(0).room(0) is None  # 0: no limit


def test_the_store_suspends_at_suspend_rate_and_powers_down_after_suspend_timeout(
    tmp_path: Path,
) -> None:
    store = _conf(
        PROGRAMS + "SuspendTime=10\nSuspendRate=2\nSuspendTimeout=5\n"
        "NodeName=n[1-3] CPUs=1\nPartitionName=p Nodes=ALL\n",
        tmp_path,
    )
    for name in ("n1", "n2", "n3"):
        store.nodes[name] = NodeRuntime(name, responding=True, state="UP", reason="")

    async def cycles() -> list[list[str]]:
        saver = PowerSaver(store)
        seen = []
        for now in (0, 9, 10, 15, 70):
            saver.advance(now)
            seen.append([store.nodes[n].power for n in ("n1", "n2", "n3")])
        while saver._tasks:  # the SuspendProgram runs
            await asyncio.sleep(0.01)
        return seen

    idle, down, gone = powersave.ON, powersave.POWERING_DOWN, powersave.POWERED_DOWN
    assert asyncio.run(cycles()) == [
        [idle, idle, idle],
        [idle, idle, idle],  # idle for 9 s of SuspendTime=10
        [down, down, idle],  # SuspendRate=2: the third waits for the next minute
        [gone, gone, idle],  # SuspendTimeout=5
        [gone, gone, down],
    ]


def test_cloud_nodes_start_powered_down_and_idle(tmp_path: Path) -> None:
    store = _conf("NodeName=n1 State=CLOUD\nPartitionName=p Nodes=ALL\n", tmp_path)
    node = store.nodes["n1"]
    assert (node.state, node.power, node.reason) == ("UP", powersave.POWERED_DOWN, "")
    assert drain.usable(node)


def test_resume_makes_a_node_down_after_its_resume_timeout_idle_powered_down_again() -> None:
    failed = powersave.resume_failed(replace(UP, power=powersave.POWERING_UP), 100, "slurm")
    resumed = drain.admin_state(failed, "RESUME", "", ROOT, 200)
    assert (resumed.state, resumed.power, resumed.reason) == ("UP", powersave.POWERED_DOWN, "")
    assert drain.usable(resumed)
    going = powersave.suspending(replace(UP, ever_registered=True), 100)
    back = drain.admin_state(going, "RESUME", "", ROOT, 200)
    assert (back.state, back.power) == ("UP", powersave.ON)  # POWERING_DOWN cleared
    assert drain.admin_state(going, "UNDRAIN", "", ROOT, 200).power == powersave.POWERING_DOWN


def test_a_node_is_idle_from_when_it_was_last_seen_busy_and_on_again() -> None:
    noted = powersave.idle_noted(UP, busy=False, now=100)
    assert noted.idle_since == 100
    assert powersave.idle_noted(noted, busy=False, now=200) is noted  # nothing to write
    assert powersave.idle_for(noted, 160) == 60
    busy = powersave.idle_noted(noted, busy=True, now=300)
    assert (busy.idle_since, powersave.idle_for(busy, 900)) == (None, 0)
    back = powersave.registered(replace(noted, power=powersave.POWERING_UP))
    assert back.idle_since is None  # counted again from its return


def test_the_idle_time_survives_a_controller_restart(tmp_path: Path) -> None:
    text = BASE + PROGRAMS + "SuspendTime=60\nNodeName=n[1-2] CPUs=1\nPartitionName=p Nodes=ALL\n"

    def store() -> JobStore:
        made = JobStore(parse(text, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
        made.load(0.0)
        return made

    first = store()
    first.nodes["n1"] = NodeRuntime("n1", responding=True, state="UP", reason="")
    first.nodes["n2"] = NodeRuntime("n2", responding=True, state="UP", reason="")

    async def before() -> None:
        PowerSaver(first).advance(1000)
        await first.flush()

    asyncio.run(before())
    first.durable.journal.close()
    again = store()
    assert again.nodes["n1"].idle_since == 1000

    async def after() -> list[str]:
        saver = PowerSaver(again)
        saver.advance(1059)
        seen = [again.nodes["n1"].power]
        saver.advance(1060)  # 60 s since it went idle, 1 s since the restart
        seen.append(again.nodes["n1"].power)
        while saver._tasks:
            await asyncio.sleep(0.01)
        return seen

    assert asyncio.run(after()) == [powersave.ON, powersave.POWERING_DOWN]
