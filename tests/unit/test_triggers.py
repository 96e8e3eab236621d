"""strigger's triggers in the controller: when each fires, once or (PERM) again,
who may set and clear them, and that the journal keeps them."""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from controller.jobstate import COMPLETING, JobState, Reason
from controller.journal import Journal
from controller.model import Job, NodeRuntime
from controller.principal import Principal
from controller.store import JobStore
from controller.triggerops import executable_by, may_set
from controller.triggerrun import ASOWNER, TriggerRunner
from controller.triggers import (
    DBD_FAIL,
    DBD_RESUMED,
    ESLURM_TRIGGER_DUP,
    ESRCH,
    Trigger,
    TriggerBook,
)
from corral import errors
from corral.config import parse
from corral.errors import SlurmError

NOW = 1_800_000_000
NODES = ("n1", "n2", "n3")
UP = {name: NodeRuntime(name, responding=True, state="UP") for name in NODES}


def trigger(res_id: str = "*", *types: str, res_type: str = "node", **kw: object) -> Trigger:
    fields: dict[str, object] = {
        "id": 0,
        "res_type": res_type,
        "res_id": res_id,
        "types": types or ("down",),
        "offset": 0,
        "uid": 1000,
        "gid": 1000,
        "user": "alice",
        "program": "/bin/true",
    }
    return Trigger(**(fields | kw))  # type: ignore[arg-type]


def job(job_id: int = 7, state: JobState = JobState.RUNNING, **kw: object) -> Job:
    return replace(
        Job(job_id, "j", 1000, 1000, "alice", "alice", state, Reason.NONE, NOW, ("p",)),
        **kw,  # type: ignore[arg-type]
    )


def book_with(*triggers: Trigger, jobs: dict[int, Job] | None = None) -> TriggerBook:
    book = TriggerBook()
    for t in triggers:
        book.add(t, NODES, (jobs or {}).get(t.job_id))
    return book


def down(book: TriggerBook, name: str) -> None:
    book.note_node(UP[name], replace(UP[name], state="DOWN"))


def test_a_down_trigger_fires_once_with_the_nodes_that_went_down() -> None:
    book = book_with(trigger("*"), trigger("n[2-3]"))
    down(book, "n1")
    down(book, "n2")
    assert book.check(NOW, UP, {})
    fired = book.take_due(NOW)
    assert [(t.id, t.arg) for t in fired] == [(1, "n[1-2]"), (2, "n2")]
    assert book.by_id == {}  # fired once: gone
    down(book, "n3")
    assert not book.check(NOW + 5, UP, {}) and book.take_due(NOW + 5) == []


def test_a_node_that_went_down_and_up_between_checks_fires_both() -> None:
    book = book_with(trigger("n1", "down"), trigger("n1", "up"))
    down(book, "n1")
    book.note_node(replace(UP["n1"], state="DOWN"), UP["n1"])
    book.check(NOW, UP, {})
    assert sorted(t.types[0] for t in book.take_due(NOW)) == ["down", "up"]


def test_events_are_forgotten_at_each_check() -> None:
    book = TriggerBook()
    down(book, "n1")
    book.check(NOW, UP, {})
    book.add(trigger("*"), NODES, None)
    book.check(NOW + 5, UP, {})
    assert book.take_due(NOW + 5) == []


def test_a_perm_trigger_is_set_again_after_it_fires() -> None:
    book = book_with(trigger("*", perm=True))
    down(book, "n1")
    book.check(NOW, UP, {})
    assert [t.arg for t in book.take_due(NOW)] == ["n1"]
    assert book.by_id[1].due == 0 and book.listed() == [book.by_id[1]]
    down(book, "n3")
    book.check(NOW + 5, UP, {})
    assert [t.arg for t in book.take_due(NOW + 5)] == ["n3"]


def test_a_positive_offset_delays_the_program() -> None:
    book = book_with(trigger("*", offset=60))
    down(book, "n1")
    book.check(NOW, UP, {})
    assert book.take_due(NOW + 59) == [] and book.listed() == []  # pulled: not listed
    assert [t.arg for t in book.take_due(NOW + 60)] == ["n1"]


def test_drained_fires_when_a_drained_node_runs_nothing() -> None:
    book = book_with(trigger("*", "drained"))
    book.check(NOW, UP, {})  # the first check: what is drained already is not news
    running = {4: job(4, nodes=("n1",))}
    drained = dict(UP, n1=replace(UP["n1"], drain=True))
    book.check(NOW + 5, drained, running)  # DRAINING
    assert book.take_due(NOW + 5) == []
    book.check(NOW + 10, drained, {4: job(4, state=JobState.COMPLETED, nodes=("n1",))})
    assert [t.arg for t in book.take_due(NOW + 10)] == ["n1"]


def test_idle_fires_for_nodes_idle_at_least_the_offset() -> None:
    book = book_with(trigger("*", "idle", offset=600))
    running = {3: job(3, nodes=("n2",))}
    book.check(NOW, UP, running)
    assert book.take_due(NOW) == []
    book.check(NOW + 600, UP, running)
    assert [t.arg for t in book.take_due(NOW + 600)] == ["n[1,3]"]


def test_fail_and_reconfig_events() -> None:
    book = book_with(trigger("n2", "fail"), trigger("*", "reconfig"))
    book.note_fail("n2")
    book.note_reconfig()
    book.check(NOW, UP, {})
    assert sorted(t.arg for t in book.take_due(NOW)) == ["n2", "reconfig"]


def test_fini_fires_when_the_job_has_completed() -> None:
    jobs = {7: job()}
    book = book_with(trigger("7", "fini", res_type="job"), jobs=jobs)
    book.check(NOW, UP, jobs)
    assert book.take_due(NOW) == []
    ending = {7: job(state=JobState.COMPLETED, flags=frozenset({COMPLETING}))}
    book.check(NOW + 5, UP, ending)
    assert book.take_due(NOW + 5) == []  # still completing
    book.check(NOW + 10, UP, {7: job(state=JobState.COMPLETED)})
    assert [t.arg for t in book.take_due(NOW + 10)] == ["7"]


def test_fini_fires_for_a_job_already_purged() -> None:
    book = book_with(trigger("7", "fini", res_type="job"), jobs={7: job()})
    book.check(NOW, UP, {})
    assert [t.arg for t in book.take_due(NOW)] == ["7"]


def test_time_fires_offset_seconds_before_the_time_limit() -> None:
    jobs = {7: job(end_time=NOW + 1000)}
    book = book_with(trigger("7", "time", res_type="job", offset=-600), jobs=jobs)
    book.check(NOW, UP, jobs)
    assert book.take_due(NOW) == []
    book.check(NOW + 400, UP, jobs)
    assert [t.arg for t in book.take_due(NOW + 400)] == ["7"]


def test_a_job_trigger_watches_its_nodes() -> None:
    jobs = {7: job(nodes=("n2",))}
    book = book_with(trigger("7", "down", res_type="job"), jobs=jobs)
    down(book, "n1")
    book.check(NOW, UP, jobs)
    assert book.take_due(NOW) == []
    down(book, "n2")
    book.check(NOW + 5, UP, jobs)
    assert [t.arg for t in book.take_due(NOW + 5)] == ["7"]


@pytest.mark.parametrize("ended", [{}, {7: job(state=JobState.COMPLETED)}], ids=["gone", "ended"])
def test_a_time_trigger_of_a_job_that_ended_goes_unfired(ended: dict[int, Job]) -> None:
    book = book_with(trigger("7", "time", res_type="job"), jobs={7: job()})
    assert book.check(NOW, UP, ended) and book.by_id == {}


@pytest.mark.parametrize(
    ("asked", "job_state", "code"),
    [
        (trigger("n9"), None, errors.ESLURM_INVALID_NODE_NAME),
        (trigger("n[1-"), None, errors.ESLURM_INVALID_NODE_NAME),
        (trigger("8", "fini", res_type="job"), None, errors.ESLURM_INVALID_JOB_ID),
        (trigger("7", "fini", res_type="job"), JobState.COMPLETED, errors.ESLURM_ALREADY_DONE),
        (trigger("n1"), None, ESLURM_TRIGGER_DUP),
    ],
    ids=["unknown node", "bad hostlist", "unknown job", "finished job", "duplicate"],
)
def test_set_refuses_what_slurmctld_refuses(
    asked: Trigger, job_state: JobState | None, code: int
) -> None:
    book = book_with(trigger("n1"))
    found = job(state=job_state) if job_state else None
    with pytest.raises(SlurmError) as refused:
        book.add(asked, NODES, found)
    assert refused.value.code == code


def test_only_root_and_the_owner_clear_a_trigger() -> None:
    book = book_with(trigger("n1"), trigger("n2", uid=1001, user="bob"))
    with pytest.raises(SlurmError) as denied:
        book.clear(1001, 1, 0, None)
    assert denied.value.code == errors.ESLURM_ACCESS_DENIED and 1 in book.by_id
    with pytest.raises(SlurmError) as none:
        book.clear(1000, 9, 0, None)
    assert none.value.code == ESRCH
    assert [t.id for t in book.clear(1001, 0, 0, 1001)] == [2]  # --user: their own
    assert [t.id for t in book.clear(0, 1, 0, None)] == [1]  # root: anyone's


def test_clear_by_job_takes_that_jobs_triggers() -> None:
    jobs = {7: job(), 8: job(8)}
    book = book_with(
        trigger("7", "fini", res_type="job"), trigger("8", "fini", res_type="job"), jobs=jobs
    )
    assert [t.id for t in book.clear(1000, 0, 8, None)] == [2]


def test_who_may_set_triggers() -> None:
    alice = Principal(1000, 1000, "alice", frozenset({1000}))
    assert may_set(alice, 0)  # a root controller runs programs as their owners
    assert may_set(alice, 1000) and not may_set(alice, 64030)
    root = Principal(0, 0, "root", frozenset({0}))
    assert not may_set(root, 64030)  # Slurm's rule: only SlurmUser, when not root


def test_the_program_must_be_executable_by_its_owner(tmp_path: Path) -> None:
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o744)
    st = os.stat(program)
    assert executable_by(f"{program} arg", st.st_uid, st.st_gid)
    assert not executable_by(str(program), st.st_uid + 1, st.st_gid + 1)
    assert not executable_by(str(tmp_path), st.st_uid, st.st_gid)
    assert not executable_by(str(tmp_path / "none"), st.st_uid, st.st_gid)


def test_the_journal_keeps_triggers_across_a_restart(tmp_path: Path) -> None:
    conf = parse(
        "ClusterName=t\nSlurmctldHost=ctl\nNodeName=n[1-3] CPUs=1\nPartitionName=p Nodes=ALL\n",
        str(tmp_path / "slurm.conf"),
    )
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    store.triggers.add(trigger("n1", perm=True), store.nodes, None)
    store.keep_triggers()
    asyncio.run(store.flush())
    store.journal.close()
    again = JobStore(conf, Journal(str(tmp_path / "state")))
    again.load(0.0)
    assert list(again.triggers.by_id.values()) == [replace(trigger("n1", perm=True), id=1)]
    assert again.triggers.next_id == 2


def _store(tmp_path: Path) -> JobStore:
    conf = parse(
        "ClusterName=t\nSlurmctldHost=ctl\nNodeName=n[1-3] CPUs=1\nPartitionName=p Nodes=ALL\n",
        str(tmp_path / "slurm.conf"),
    )
    return JobStore(conf, Journal(str(tmp_path / "state")))


def test_the_store_records_node_events_and_the_runner_runs_the_program(tmp_path: Path) -> None:
    store = _store(tmp_path)
    program = tmp_path / "record"
    program.write_text('#!/bin/sh\necho "$*" >> "$(dirname "$0")/ran"\n')
    program.chmod(0o755)
    me = os.getuid(), os.getgid()
    store.triggers.add(
        trigger("*", uid=me[0], gid=me[1], user="me", program=f"{program} down"), store.nodes, None
    )
    store.triggers.add(
        trigger("n3", "fail", uid=me[0], gid=me[1], program=str(program)), store.nodes, None
    )
    root = Principal(0, 0, "root", frozenset({0}))
    store.set_node_down("n1", "gone", "root", 0, NOW)
    store.set_node_admin_state(["n3"], "FAIL", "broken", root, NOW)
    assert store.triggers.events.down == {"n1", "n3"} and store.triggers.events.fail == {"n3"}
    runner = TriggerRunner(store, clock=lambda: NOW)

    async def check() -> None:
        await runner.check()
        await asyncio.gather(*runner._tasks)

    asyncio.run(check())
    assert sorted((tmp_path / "ran").read_text().splitlines()) == ["down n[1,3]", "n3"]
    assert store.triggers.by_id == {}


def test_a_perm_job_trigger_fires_once_for_the_jobs_end() -> None:
    jobs = {7: job(nodes=("n1",))}
    book = book_with(
        trigger("7", "fini", res_type="job", perm=True),
        trigger("7", "down", res_type="job", perm=True),
        jobs=jobs,
    )
    down(book, "n1")
    book.check(NOW, UP, jobs)
    assert [t.id for t in book.take_due(NOW)] == [2] and 2 in book.by_id  # down: again
    book.check(NOW + 5, UP, {})
    assert [t.id for t in book.take_due(NOW + 5)] == [1]
    book.check(NOW + 10, UP, {})
    assert book.take_due(NOW + 10) == [] and book.by_id == {}


def test_dbd_triggers_fire_when_the_delivery_loses_and_regains_dbd() -> None:
    lost = trigger("", DBD_FAIL, res_type="slurmdbd")
    back = trigger("", DBD_RESUMED, res_type="slurmdbd")
    book = book_with(lost, back)
    book.note_dbd(reachable=False)
    book.check(NOW, UP, {})
    assert [t.arg for t in book.take_due(NOW)] == [DBD_FAIL]
    book.note_dbd(reachable=True)
    book.check(NOW + 5, UP, {})
    assert [t.arg for t in book.take_due(NOW + 5)] == [DBD_RESUMED]


def test_asowner_execs_the_program_as_the_owner_with_their_groups() -> None:
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    nobody = pwd.getpwnam("nobody")
    done = subprocess.run(
        [sys.executable, "-I", ASOWNER, str(nobody.pw_uid), str(nobody.pw_gid), "nobody",
         "/bin/sh", "-c", 'echo "$(id -u) $(id -g) $(id -G) $0"', "node1"],
        capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    groups = " ".join(str(g) for g in os.getgrouplist("nobody", nobody.pw_gid))
    assert done.stdout == f"{nobody.pw_uid} {nobody.pw_gid} {groups} node1\n", done.stderr


def test_asowner_refuses_a_malformed_call() -> None:
    done = subprocess.run(
        [sys.executable, "-I", ASOWNER, "x", "1", "u", "/bin/true"], capture_output=True
    )
    assert done.returncode == 2
