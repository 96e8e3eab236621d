"""controller.jobstate: the transition table, Finish outcomes, COMPLETING and requeue."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import NOW, job, running

from controller.core.priority import NO_RANKING
from controller.jobstate import (
    COMPLETING,
    GANG,
    REQUEUED,
    Cancel,
    Event,
    Finish,
    GiveUp,
    Hold,
    InvalidTransition,
    JobState,
    NodeFail,
    Reason,
    Release,
    Requeue,
    Resume,
    Start,
    Suspend,
    apply,
)
from controller.model import Job

LATER = NOW + 500
RUN_START = NOW - 50

# ---------------------------------------------------------------- the jobs of the table

JOBS: dict[str, Job] = {
    "pending": job(1),
    "held": job(1, held="user", reason=Reason.JOB_HELD_USER),
    "running": running(1, time_limit=60, end_time=RUN_START + 3600),
    "cancelling": running(1, state=JobState.CANCELLED, flags=frozenset({COMPLETING}), end_time=NOW),
    "requeueing": running(1, flags=frozenset({COMPLETING, REQUEUED})),
    "completed": running(1, state=JobState.COMPLETED, end_time=NOW),
    "failed": running(1, state=JobState.FAILED, end_time=NOW, exit_status=1 << 8),
    "timeout": running(1, state=JobState.TIMEOUT, end_time=NOW),
    "cancelled": running(1, state=JobState.CANCELLED, end_time=NOW),
    "node_fail": running(1, state=JobState.NODE_FAIL, end_time=NOW),
}

EVENTS: dict[str, Event] = {
    "start": Start(LATER, "batch", ("n2",), (2,), (100,), 1),
    "finish": Finish(LATER, 0, "exited"),
    "cancel": Cancel(LATER),
    "requeue": Requeue(LATER),
    "nodefail": NodeFail(LATER, requeue=False),
    "nodefail_requeue": NodeFail(LATER, requeue=True),
    "hold": Hold(admin=False),
    "release": Release(),
    "deadline": GiveUp(LATER, Reason.DEADLINE),
    "invalid_dep": GiveUp(LATER, Reason.DEPENDENCY_NEVER_SATISFIED),
}

_FINISHED = ("completed", "failed", "timeout", "cancelled", "node_fail")
_C, _R = COMPLETING, REQUEUED
INVALID = None

# (job, event) -> (state, flags) after the event, or INVALID.
# Cells not listed are invalid.
TABLE: dict[tuple[str, str], tuple[JobState, frozenset[str]] | None] = {
    ("pending", "start"): (JobState.RUNNING, frozenset()),
    ("pending", "cancel"): (JobState.CANCELLED, frozenset()),
    ("pending", "hold"): (JobState.PENDING, frozenset()),
    ("held", "cancel"): (JobState.CANCELLED, frozenset()),
    ("held", "hold"): (JobState.PENDING, frozenset()),
    ("held", "release"): (JobState.PENDING, frozenset()),
    ("pending", "deadline"): (JobState.DEADLINE, frozenset()),
    ("pending", "invalid_dep"): (JobState.CANCELLED, frozenset()),
    ("held", "deadline"): (JobState.DEADLINE, frozenset()),
    ("held", "invalid_dep"): (JobState.CANCELLED, frozenset()),
    ("running", "finish"): (JobState.COMPLETED, frozenset()),
    ("running", "cancel"): (JobState.CANCELLED, frozenset({_C})),
    ("running", "requeue"): (JobState.RUNNING, frozenset({_C, _R})),
    ("running", "nodefail"): (JobState.NODE_FAIL, frozenset()),
    ("running", "nodefail_requeue"): (JobState.PENDING, frozenset()),
    ("cancelling", "finish"): (JobState.CANCELLED, frozenset()),
    ("cancelling", "nodefail"): (JobState.CANCELLED, frozenset()),
    ("cancelling", "nodefail_requeue"): (JobState.CANCELLED, frozenset()),
    ("requeueing", "finish"): (JobState.PENDING, frozenset()),
    ("requeueing", "nodefail"): (JobState.PENDING, frozenset()),
    ("requeueing", "nodefail_requeue"): (JobState.PENDING, frozenset()),
    **{(f, "requeue"): (JobState.PENDING, frozenset()) for f in _FINISHED},
}
CELLS = [(j, e, TABLE.get((j, e), INVALID)) for j in JOBS for e in EVENTS]


@pytest.mark.parametrize(
    ("job_name", "event_name", "expected"),
    CELLS,
    ids=[f"{j}-{e}-{'invalid' if x is None else x[0].name}" for j, e, x in CELLS],
)
def test_transition_table(
    job_name: str, event_name: str, expected: tuple[JobState, frozenset[str]] | None
) -> None:
    before, event = JOBS[job_name], EVENTS[event_name]
    if expected is None:
        with pytest.raises(InvalidTransition) as info:
            apply(before, event)
        assert info.value.job_id == before.job_id
        assert info.value.state is before.state
        return
    after = apply(before, event)
    assert (after.state, after.flags) == expected
    assert before == JOBS[job_name]  # apply is pure: the input is untouched


# ---------------------------------------------------------------- Start


@pytest.mark.parametrize(
    ("time_limit", "end_time"),
    [(60, LATER + 3600), (1, LATER + 60), (-1, 0)],
    ids=["one-hour-limit", "one-minute-limit", "unlimited-has-no-end"],
)
def test_start_records_the_allocation(time_limit: int, end_time: int) -> None:
    before = job(7, time_limit=time_limit, reason=Reason.PRIORITY)
    after = apply(before, Start(LATER, "gpu", ("n3", "n4"), (2, 4), (512, 256), 4242))
    assert after.state is JobState.RUNNING
    assert after.calc_priority == 4242  # the ranked priority it started with, kept while it runs
    assert after.reason is Reason.NONE
    assert (after.partition, after.nodes, after.cpus, after.alloc_mem) == (
        "gpu",
        ("n3", "n4"),
        (2, 4),
        (512, 256),
    )
    assert (after.start_time, after.end_time) == (LATER, end_time)


def test_start_records_the_gres_and_requeue_gives_them_back() -> None:
    gres = ((("gpu", "a100", 2),), (("gpu", "a100", 1), ("nic", "", 1)))
    before = job(7, gres="gpu:1")
    after = apply(before, Start(LATER, "gpu", ("n3", "n4"), (2, 4), (0, 0), 1, gres))
    assert after.gres_alloc == gres
    assert after.gres == "gpu:1"  # the request stays as given
    assert apply(after, NodeFail(LATER, requeue=True)).gres_alloc == ()
    assert apply(before, Start(LATER, "gpu", ("n3",), (2,), (0,), 1)).gres_alloc == ()


# ---------------------------------------------------------------- Finish outcomes

FINISHES = [
    (0, "exited", JobState.COMPLETED, Reason.NONE),
    (1 << 8, "exited", JobState.FAILED, Reason.NON_ZERO_EXIT_CODE),
    (2 << 8, "exited", JobState.FAILED, Reason.NON_ZERO_EXIT_CODE),
    (255 << 8, "exited", JobState.FAILED, Reason.NON_ZERO_EXIT_CODE),
    (9, "exited", JobState.FAILED, Reason.RAISED_SIGNAL),
    (15, "exited", JobState.FAILED, Reason.RAISED_SIGNAL),
    (0x80 | 11, "exited", JobState.FAILED, Reason.RAISED_SIGNAL),
    (0, "timeout", JobState.TIMEOUT, Reason.TIME_LIMIT),
    (9, "timeout", JobState.TIMEOUT, Reason.TIME_LIMIT),
    (0, "cancelled", JobState.CANCELLED, Reason.NONE),
    (9, "cancelled", JobState.CANCELLED, Reason.NONE),
    (0, "launch_failed", JobState.FAILED, Reason.JOB_LAUNCH_FAILURE),
    (1 << 8, "launch_failed", JobState.FAILED, Reason.JOB_LAUNCH_FAILURE),
    (0, "out_of_memory", JobState.OUT_OF_MEMORY, Reason.OUT_OF_MEMORY),
    (9, "out_of_memory", JobState.OUT_OF_MEMORY, Reason.OUT_OF_MEMORY),
]


@pytest.mark.parametrize(
    ("status", "outcome", "state", "reason"),
    FINISHES,
    ids=[
        "exit-0-completed",
        "exit-1-failed",
        "exit-2-failed",
        "exit-255-failed",
        "signal-9-failed",
        "signal-15-failed",
        "signal-11-core-failed",
        "timeout",
        "timeout-after-kill",
        "cancelled",
        "cancelled-killed",
        "launch-failed",
        "launch-failed-with-status",
        "out-of-memory",
        "out-of-memory-killed",
    ],
)
@pytest.mark.parametrize(
    "before",
    [running(1), JOBS["running"]],
    ids=["unlimited", "projected-end"],
)
def test_finish_outcome(
    before: Job, status: int, outcome: str, state: JobState, reason: Reason
) -> None:
    after = apply(before, Finish(LATER, status, outcome))
    assert (after.state, after.reason) == (state, reason)
    assert after.exit_status == status
    assert after.flags == frozenset()
    assert after.end_time == LATER  # when it ended, not the projected end
    assert after.nodes == before.nodes  # kept for display


def test_a_launch_failure_keeps_the_nodes_reason() -> None:
    """scontrol show job says why (SystemComment); other endings keep what was there."""
    why = "cannot fence GPUs: cgroup /x: [Errno 11] Resource temporarily unavailable"
    failed = apply(running(1), Finish(LATER, 256, "launch_failed", message=why))
    assert (failed.reason, failed.system_comment) == (Reason.JOB_LAUNCH_FAILURE, why)
    assert apply(running(1), Finish(LATER, 256, "exited", message="x")).system_comment == ""


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(9, "exited"), (0, "exited"), (15, "timeout"), (0, "launch_failed")],
    ids=["killed", "exited-anyway", "timed-out-anyway", "launch-failed-anyway"],
)
def test_finish_after_cancel_stays_cancelled_at_cancel_time(status: int, outcome: str) -> None:
    cancelled = apply(JOBS["running"], Cancel(NOW))
    assert cancelled.state is JobState.CANCELLED
    assert COMPLETING in cancelled.flags
    assert cancelled.end_time == NOW
    done = apply(cancelled, Finish(LATER, status, outcome))
    assert done.state is JobState.CANCELLED
    assert done.flags == frozenset()
    assert done.end_time == NOW
    assert done.exit_status == status


def test_cancel_pending_sets_start_and_end_to_now() -> None:
    after = apply(job(3, reason=Reason.PRIORITY), Cancel(LATER))
    assert (after.state, after.reason) == (JobState.CANCELLED, Reason.NONE)
    assert (after.start_time, after.end_time) == (LATER, LATER)
    assert after.flags == frozenset()


def test_cancel_during_completing_is_invalid() -> None:
    cancelling = apply(JOBS["running"], Cancel(NOW))
    with pytest.raises(InvalidTransition):
        apply(cancelling, Cancel(LATER))
    with pytest.raises(InvalidTransition):
        apply(cancelling, Requeue(LATER))


# ---------------------------------------------------------------- requeue


@pytest.mark.parametrize(
    ("delay", "hold", "reason"),
    [
        (0, "", Reason.BEGIN_TIME),
        (120, "", Reason.BEGIN_TIME),
        (0, "user", Reason.JOB_HELD_USER),
        (0, "admin", Reason.JOB_HELD_ADMIN),
    ],
    ids=["no-delay", "requeue-delay-120s", "user-requeuehold", "admin-requeuehold"],
)
def test_requeue_running_goes_through_completing(delay: int, hold: str, reason: Reason) -> None:
    before = replace(JOBS["running"], requeue_delay=delay, restarts=2, alloc_mem=(100,))
    marked = apply(before, Requeue(NOW, hold=hold))
    assert marked.state is JobState.RUNNING
    assert marked.flags == frozenset({COMPLETING, REQUEUED})
    assert marked.restarts == 2
    assert marked.requeue_hold == hold
    assert marked.held == ""  # not held while it still runs
    back = apply(marked, Finish(LATER, 15, "cancelled"))
    assert (back.state, back.reason, back.held) == (JobState.PENDING, reason, hold)
    assert back.flags == frozenset()
    assert back.requeue_hold == ""
    assert back.restarts == 3
    assert back.exit_status == 15
    assert back.begin_time == LATER + delay
    assert back.eligible_time == LATER + delay
    assert (back.nodes, back.cpus, back.alloc_mem) == ((), (), ())
    assert (back.start_time, back.end_time) == (0, 0)


@pytest.mark.parametrize("finished", _FINISHED, ids=[f"from-{f}" for f in _FINISHED])
@pytest.mark.parametrize("delay", [0, 60], ids=["no-delay", "delay-60s"])
def test_requeue_finished_job(finished: str, delay: int) -> None:
    before = replace(JOBS[finished], requeue_delay=delay, alloc_mem=(100,))
    after = apply(before, Requeue(LATER))
    assert (after.state, after.reason, after.held) == (JobState.PENDING, Reason.BEGIN_TIME, "")
    assert after.restarts == before.restarts + 1
    assert after.begin_time == LATER + delay
    assert (after.nodes, after.cpus, after.alloc_mem) == ((), (), ())
    assert (after.start_time, after.end_time) == (0, 0)


@pytest.mark.parametrize(
    ("hold", "reason"),
    [("user", Reason.JOB_HELD_USER), ("admin", Reason.JOB_HELD_ADMIN)],
    ids=["user", "admin"],
)
def test_requeuehold_finished_job_is_held_by_whoever_asked(hold: str, reason: Reason) -> None:
    after = apply(JOBS["completed"], Requeue(LATER, hold=hold))
    assert (after.state, after.reason, after.held) == (JobState.PENDING, reason, hold)
    assert NO_RANKING.of(after) == 0
    assert after.requeue_hold == ""


def test_requeue_then_start_again_is_a_new_run() -> None:
    again = apply(
        apply(JOBS["completed"], Requeue(LATER)), Start(LATER + 1, "batch", ("n9",), (1,), (0,), 1)
    )
    assert again.state is JobState.RUNNING
    assert (again.nodes, again.restarts, again.start_time) == (("n9",), 1, LATER + 1)
    assert again.alloc_mem == (0,)


def test_nodefail_with_requeue_returns_to_pending() -> None:
    after = apply(JOBS["running"], NodeFail(LATER, requeue=True))
    assert (after.state, after.reason) == (JobState.PENDING, Reason.BEGIN_TIME)
    assert after.restarts == 1
    assert (after.nodes, after.cpus, after.alloc_mem) == ((), (), ())
    assert (after.start_time, after.end_time) == (0, 0)


def test_nodefail_without_requeue_is_node_fail() -> None:
    after = apply(JOBS["running"], NodeFail(LATER, requeue=False))
    assert (after.state, after.reason) == (JobState.NODE_FAIL, Reason.NODE_DOWN)
    assert after.flags == frozenset()


def test_nodefail_end_time_is_when_the_node_failed() -> None:
    assert JOBS["running"].end_time != LATER  # it had a projected end
    after = apply(JOBS["running"], NodeFail(LATER, requeue=False))
    assert after.end_time == LATER


def test_nodefail_while_cancelling_keeps_the_cancel_time() -> None:
    cancelling = apply(JOBS["running"], Cancel(NOW))
    after = apply(cancelling, NodeFail(LATER, requeue=False))
    assert (after.state, after.flags, after.end_time) == (JobState.CANCELLED, frozenset(), NOW)


def test_agent_reported_cancel_end_time_is_now() -> None:
    # agentlink._give_up_on posts Finish(now, 9, "cancelled") for a RUNNING job too.
    assert JOBS["running"].end_time != LATER
    after = apply(JOBS["running"], Finish(LATER, 9, "cancelled"))
    assert (after.state, after.end_time) == (JobState.CANCELLED, LATER)


@pytest.mark.parametrize(
    ("hold", "reason"),
    [("", Reason.BEGIN_TIME), ("user", Reason.JOB_HELD_USER), ("admin", Reason.JOB_HELD_ADMIN)],
    ids=["requeue", "user-requeuehold", "admin-requeuehold"],
)
def test_nodefail_during_requeue_finishes_the_requeue(hold: str, reason: Reason) -> None:
    """Requeue asked, then the node dies: the job goes back to PENDING, nodes released."""
    requeueing = apply(replace(JOBS["running"], restarts=4), Requeue(NOW, hold=hold))
    after = apply(requeueing, NodeFail(LATER, requeue=False))
    assert (after.state, after.reason, after.held) == (JobState.PENDING, reason, hold)
    assert after.flags == frozenset()
    assert after.requeue_hold == ""
    assert after.restarts == 5
    assert (after.nodes, after.cpus, after.alloc_mem) == ((), (), ())


# ---------------------------------------------------------------- hold / release


@pytest.mark.parametrize(
    ("admin", "held", "reason"),
    [(False, "user", Reason.JOB_HELD_USER), (True, "admin", Reason.JOB_HELD_ADMIN)],
    ids=["user-hold", "admin-hold"],
)
def test_hold_and_release(admin: bool, held: str, reason: Reason) -> None:
    after = apply(job(5), Hold(admin=admin))
    assert (after.held, after.reason, NO_RANKING.of(after)) == (held, reason, 0)
    released = apply(after, Release())
    assert (released.held, released.reason, NO_RANKING.of(released)) == ("", Reason.NONE, 1)


def test_admin_hold_upgrades_user_hold() -> None:
    after = apply(JOBS["held"], Hold(admin=True))
    assert (after.held, after.reason) == ("admin", Reason.JOB_HELD_ADMIN)


def test_user_hold_does_not_downgrade_admin_hold() -> None:
    admin_held = apply(job(5), Hold(admin=True))
    after = apply(admin_held, Hold(admin=False))
    assert (after.held, after.reason) == ("admin", Reason.JOB_HELD_ADMIN)


def test_user_requeuehold_does_not_downgrade_admin_hold() -> None:
    """An admin-held job the user cancelled, then requeued with ``requeuehold``."""
    cancelled = apply(apply(job(5), Hold(admin=True)), Cancel(NOW))
    assert (cancelled.state, cancelled.held) == (JobState.CANCELLED, "admin")
    plain = apply(cancelled, Requeue(LATER))
    assert (plain.held, plain.reason) == ("admin", Reason.JOB_HELD_ADMIN)
    after = apply(cancelled, Requeue(LATER, hold="user"))
    assert (after.held, after.reason) == ("admin", Reason.JOB_HELD_ADMIN)


def test_held_job_cannot_start() -> None:
    with pytest.raises(InvalidTransition):
        apply(apply(job(5), Hold(admin=True)), EVENTS["start"])


# ---------------------------------------------------------------- property

_EVENT = st.one_of(
    st.builds(
        Start,
        st.just(0),
        st.sampled_from(["batch", "gpu"]),
        st.just(("n1", "n2")),
        st.just((1, 2)),
        st.tuples(st.integers(0, 4000), st.integers(0, 4000)),
        st.integers(1, 10_000),
    ),
    st.builds(
        Finish,
        st.just(0),
        st.sampled_from([0, 9, 15, 1 << 8, 2 << 8]),
        st.sampled_from(["exited", "timeout", "cancelled", "launch_failed"]),
    ),
    st.builds(Cancel, st.just(0)),
    st.builds(Requeue, st.just(0), st.sampled_from(["", "user", "admin"])),
    st.builds(NodeFail, st.just(0), st.booleans()),
    st.builds(Hold, st.booleans()),
    st.builds(Release),
    # An operator's, a preemptor's (it lends the CPUs) or the gang scheduler's.
    st.sampled_from([Suspend(0), Suspend(0, by=7), Suspend(0, by=GANG, lend=False)]),
    st.builds(Resume, st.just(0)),
)
_HELD_REASON = {"user": Reason.JOB_HELD_USER, "admin": Reason.JOB_HELD_ADMIN}


def _at(event: Event, now: int) -> Event:
    """``event`` happening at ``now`` (Hold and Release carry no time)."""
    match event:
        case Start() | Finish() | Cancel() | Requeue() | NodeFail() | Suspend() | Resume():
            return replace(event, now=now)
    return event


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_EVENT, max_size=25), limit=st.sampled_from([-1, 1, 60]))
def test_random_event_sequences_keep_invariants(events: list[Event], limit: int) -> None:
    current = job(1, time_limit=limit)
    for step, raw in enumerate(events):
        now = NOW + 10 * (step + 1)
        before = current
        try:
            current = apply(before, _at(raw, now))
        except InvalidTransition:
            continue
        assert current.restarts >= before.restarts
        assert current.restarts - before.restarts <= 1
        assert current.held in ("", "user", "admin")
        if before.held == "admin" and not isinstance(raw, Release):
            assert current.held == "admin"  # nothing but Release lifts an admin hold
        if current.state is JobState.PENDING:
            assert (current.nodes, current.cpus, current.alloc_mem) == ((), (), ())
            assert current.flags == frozenset()
            assert current.restarts > before.restarts or before.state is JobState.PENDING
            if current.held:
                assert current.reason is _HELD_REASON[current.held]
        if COMPLETING in current.flags:
            assert current.state in (JobState.RUNNING, JobState.CANCELLED)
        if REQUEUED in current.flags:
            assert current.state is JobState.RUNNING
            assert COMPLETING in current.flags
        else:
            assert current.requeue_hold == ""
        if current.state is JobState.RUNNING:
            assert current.nodes
            assert len(current.nodes) == len(current.cpus) == len(current.alloc_mem)
            assert not current.held
        if current.held:
            assert NO_RANKING.of(current) == 0
        # A suspended job has lent its CPUs, unless the gang scheduler holds it; a
        # running one (not ending) holds them. An operator's suspension is its own.
        if current.state is JobState.SUSPENDED:
            assert current.cpus_released is (current.suspended_by != GANG)
            assert current.nodes and not current.flags
            if before.state is JobState.SUSPENDED and not before.suspended_by:
                assert current == before
        if current.state is JobState.RUNNING and not current.flags:
            assert not current.cpus_released
        if current.state is JobState.PENDING:
            assert not current.cpus_released and current.suspended_secs == 0
        if current.restarts == before.restarts:
            assert current.suspended_secs >= before.suspended_secs
        if current.state.finished and not before.state.finished:
            # Only a cancelled job waits, COMPLETING, for its processes to be gone.
            cancelled_running = isinstance(raw, Cancel) and before.state in (
                JobState.RUNNING,
                JobState.SUSPENDED,
            )
            expected = {COMPLETING} if cancelled_running else set()
            assert current.flags == expected
            assert current.end_time == now  # it ended now, whatever was projected
            assert current.start_time <= current.end_time
        if before.state.finished and current.state.finished:
            assert current.end_time == before.end_time  # COMPLETING done: ended at cancel


def test_give_up_records_why_and_when() -> None:
    after = apply(job(5), GiveUp(LATER, Reason.DEADLINE))
    assert (after.state, after.reason, after.end_time) == (
        JobState.DEADLINE,
        Reason.DEADLINE,
        LATER,
    )


def test_a_cancel_records_who_asked() -> None:
    assert apply(JOBS["running"], Cancel(NOW, by=1000)).cancelled_by == 1000
    assert apply(job(9), Cancel(NOW, by=0)).cancelled_by == 0
    assert apply(job(9), Cancel(NOW)).cancelled_by == -1
