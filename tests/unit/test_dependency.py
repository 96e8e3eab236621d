"""controller.core.dependency: the --dependency grammar and where a job stands."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import NOW, UID, facts

from controller.core.dependency import Index, Outcome, evaluate, parse, shown
from controller.core.snapshot import JobFacts
from controller.depspec import resolve

SAT, WAIT, NEVER = Outcome.SATISFIED, Outcome.WAITING, Outcome.NEVER
ME = 100  # the job whose dependency is evaluated
MY_NAME = "train"

# ---------------------------------------------------------------- grammar

VALID = [
    ("", ",", []),
    ("0", ",", []),
    ("afterok:12", ",", [("afterok", ["12"])]),
    ("afterok:12:13", ",", [("afterok", ["12", "13"])]),
    ("after:12+5", ",", [("after", ["12+5"])]),
    ("after:12+5:13", ",", [("after", ["12+5", "13"])]),
    ("afterany:12,afternotok:13", ",", [("afterany", ["12"]), ("afternotok", ["13"])]),
    ("afterok:12?afternotok:13", "?", [("afterok", ["12"]), ("afternotok", ["13"])]),
    ("singleton", ",", [("singleton", [])]),
    ("singleton,afterok:1", ",", [("singleton", []), ("afterok", ["1"])]),
    ("12", ",", [("afterany", ["12"])]),
    ("12,13", ",", [("afterany", ["12"]), ("afterany", ["13"])]),
    ("afterok:12_*", ",", [("afterok", ["12_*"])]),
    ("afterok:12_4", ",", [("afterok", ["12_4"])]),
    ("aftercorr:12", ",", [("aftercorr", ["12"])]),
    ("AfterOK:12", ",", [("afterok", ["12"])]),
    ("  afterok:12  ", ",", [("afterok", ["12"])]),
    ("aftern:12", ",", [("afternotok", ["12"])]),
    ("after:12_3+5", ",", [("after", ["12_3+5"])]),
    ("after:12_*+5", ",", [("after", ["12_*+5"])]),
    ("12_4", ",", [("afterany", ["12_4"])]),
]


@pytest.mark.parametrize(
    ("text", "joiner", "items"),
    VALID,
    ids=[
        "empty",
        "zero-clears",
        "afterok",
        "two-ids",
        "after-plus-minutes",
        "after-plus-and-plain",
        "comma-all",
        "question-any",
        "singleton",
        "singleton-and-afterok",
        "bare-id-is-afterany",
        "bare-ids",
        "array-all-tasks",
        "array-one-task",
        "aftercorr",
        "case-insensitive",
        "surrounding-blanks",
        "unique-prefix",
        "after-task-plus-minutes",
        "after-all-tasks-plus-minutes",
        "bare-task-id",
    ],
)
def test_parse_valid(text: str, joiner: str, items: list[tuple[str, list[str]]]) -> None:
    assert parse(text) == (joiner, items)


INVALID = [
    "afterok",
    "afterok:",
    "singleton:12",
    "bogus:12",
    "afterok:abc",
    "afterok:12_x",
    "afterok:_4",
    "afterok:-1",
    "afterok:1,afterany:2?afterok:3",
    ",",
    "a:1",
    "afterok:1,",
    ":12",
    "+5",
    "_1",
    "12+5",
    "afterok:12+5",
    "afterany:12+5",
    "after:12+",
    "after:12+x",
    "after:12+-5",
    "after:+5",
    "afterok:\u00b2",
    "afterok:\u0661\u0662",
    "afterok:10_\u00b2",
    "after:1+\uff15",
    "\u0661",
    "afterok:12_",
    "afterok:12_3_4",
]


@pytest.mark.parametrize(
    "text",
    INVALID,
    ids=[
        "type-without-ids",
        "type-with-empty-ids",
        "singleton-with-ids",
        "unknown-type",
        "non-numeric-id",
        "non-numeric-task",
        "missing-job-id",
        "negative-id",
        "mixed-separators",
        "lone-comma",
        "ambiguous-prefix",
        "trailing-comma",
        "no-type",
        "bare-plus",
        "bare-underscore",
        "bare-id-with-delay",
        "afterok-with-delay",
        "afterany-with-delay",
        "empty-delay",
        "word-delay",
        "negative-delay",
        "delay-without-id",
        "superscript-id",
        "arabic-indic-id",
        "superscript-task",
        "fullwidth-delay",
        "bare-arabic-indic-id",
        "empty-task",
        "two-tasks",
    ],
)
def test_parse_invalid(text: str) -> None:
    with pytest.raises(ValueError):
        parse(text)


# ---------------------------------------------------------------- outcomes

ARRAY = {  # array 10: tasks 0..2 are jobs 10..12
    10: facts("COMPLETED", array_job_id=10, array_task_id=0),
    11: facts("RUNNING", array_job_id=10, array_task_id=1),
    12: facts("FAILED", exit_status=1 << 8, array_job_id=10, array_task_id=2),
}
ARRAY_OK = {j: facts("COMPLETED", array_job_id=10, array_task_id=j - 10) for j in (10, 11, 12)}

OUTCOMES: list[tuple[str, str, dict[int, JobFacts], Outcome]] = [
    ("empty", "", {}, SAT),
    ("afterok-completed", "afterok:1", {1: facts("COMPLETED")}, SAT),
    ("afterok-running", "afterok:1", {1: facts("RUNNING")}, WAIT),
    ("afterok-pending", "afterok:1", {1: facts("PENDING")}, WAIT),
    ("afterok-failed", "afterok:1", {1: facts("FAILED", exit_status=256)}, NEVER),
    ("afterok-cancelled", "afterok:1", {1: facts("CANCELLED")}, NEVER),
    ("afterok-timeout", "afterok:1", {1: facts("TIMEOUT")}, NEVER),
    ("afterok-completed-nonzero", "afterok:1", {1: facts("COMPLETED", exit_status=256)}, NEVER),
    ("afterok-purged", "afterok:1", {}, SAT),
    ("aftercorr-completed", "aftercorr:1", {1: facts("COMPLETED")}, SAT),
    ("afternotok-failed", "afternotok:1", {1: facts("FAILED", exit_status=256)}, SAT),
    ("afternotok-node-fail", "afternotok:1", {1: facts("NODE_FAIL")}, SAT),
    ("afternotok-cancelled", "afternotok:1", {1: facts("CANCELLED")}, SAT),
    ("afternotok-completed", "afternotok:1", {1: facts("COMPLETED")}, NEVER),
    ("afternotok-running", "afternotok:1", {1: facts("RUNNING")}, WAIT),
    ("afterany-failed", "afterany:1", {1: facts("FAILED")}, SAT),
    ("afterany-completed", "afterany:1", {1: facts("COMPLETED")}, SAT),
    ("afterany-running", "afterany:1", {1: facts("RUNNING")}, WAIT),
    ("bare-id-running", "1", {1: facts("RUNNING")}, WAIT),
    ("bare-id-done", "1", {1: facts("CANCELLED")}, SAT),
    ("after-pending", "after:1", {1: facts("PENDING")}, WAIT),
    ("after-running", "after:1", {1: facts("RUNNING", start_time=NOW)}, SAT),
    ("after-finished", "after:1", {1: facts("COMPLETED", start_time=NOW - 9)}, SAT),
    ("after-plus-too-early", "after:1+5", {1: facts("RUNNING", start_time=NOW - 299)}, WAIT),
    ("after-plus-elapsed", "after:1+5", {1: facts("RUNNING", start_time=NOW - 300)}, SAT),
    ("two-ids-one-waiting", "afterok:1:2", {1: facts("COMPLETED"), 2: facts("RUNNING")}, WAIT),
    (
        "two-ids-one-never",
        "afterok:1:2",
        {1: facts("RUNNING"), 2: facts("FAILED", exit_status=256)},
        NEVER,
    ),
    (
        "comma-never-wins",
        "afterok:1,afterany:2",
        {1: facts("FAILED", exit_status=256), 2: facts("RUNNING")},
        NEVER,
    ),
    (
        "comma-waits-for-all",
        "afterok:1,afterany:2",
        {1: facts("COMPLETED"), 2: facts("RUNNING")},
        WAIT,
    ),
    (
        "comma-all-satisfied",
        "afterok:1,afterany:2",
        {1: facts("COMPLETED"), 2: facts("FAILED")},
        SAT,
    ),
    (
        "any-one-satisfied",
        "afterok:1?afterok:2",
        {1: facts("FAILED", exit_status=256), 2: facts("COMPLETED")},
        SAT,
    ),
    (
        "any-one-waiting",
        "afterok:1?afterok:2",
        {1: facts("FAILED", exit_status=256), 2: facts("RUNNING")},
        WAIT,
    ),
    (
        "any-all-never",
        "afterok:1?afterok:2",
        {1: facts("FAILED", exit_status=256), 2: facts("CANCELLED")},
        NEVER,
    ),
    ("array-whole-mixed", "afterok:10", ARRAY, NEVER),
    ("array-whole-ok", "afterok:10", ARRAY_OK, SAT),
    ("array-star-mixed", "afterany:10_*", ARRAY, WAIT),
    ("array-star-ok", "afterok:10_*", ARRAY_OK, SAT),
    ("array-task-completed", "afterok:10_0", ARRAY, SAT),
    ("array-task-running", "afterok:10_1", ARRAY, WAIT),
    ("array-task-failed", "afterok:10_2", ARRAY, NEVER),
    ("array-task-purged", "afterok:10_7", ARRAY, SAT),
    ("singleton-alone", "singleton", {}, SAT),
    ("singleton-same-name-running", "singleton", {1: facts("RUNNING", name=MY_NAME)}, WAIT),
    ("singleton-same-name-done", "singleton", {1: facts("COMPLETED", name=MY_NAME)}, SAT),
    ("singleton-other-user", "singleton", {1: facts("RUNNING", name=MY_NAME, uid=UID + 1)}, SAT),
    ("singleton-other-name", "singleton", {1: facts("RUNNING", name="eval")}, SAT),
    ("singleton-older-pending", "singleton", {ME - 1: facts("PENDING", name=MY_NAME)}, WAIT),
    ("singleton-newer-pending", "singleton", {ME + 1: facts("PENDING", name=MY_NAME)}, SAT),
    ("singleton-ignores-itself", "singleton", {ME: facts("PENDING", name=MY_NAME)}, SAT),
    ("unparseable-is-never", "afterok:x", {}, NEVER),
]


@pytest.mark.parametrize(
    ("text", "jobs", "expected"), [c[1:] for c in OUTCOMES], ids=[c[0] for c in OUTCOMES]
)
def test_evaluate(text: str, jobs: dict[int, JobFacts], expected: Outcome) -> None:
    assert evaluate(text, ME, MY_NAME, UID, jobs, NOW) is expected


# ---------------------------------------------------------------- long lists


def test_a_long_list_of_unknown_ids_is_looked_at_only_where_jobs_are_known() -> None:
    """15,000 ids nobody submitted (satisfied) around the few that hold the job back: the
    known ones decide, wherever they sit in the list, and the check stays cheap."""
    jobs = {
        7: facts("RUNNING"),
        9: facts("COMPLETED", exit_status=1),
        500: facts("COMPLETED", array_job_id=500, array_task_id=1),
    }
    unknown = [str(1_000_000 + i) for i in range(15_000)]
    assert evaluate("afterok:" + ":".join(unknown), ME, MY_NAME, UID, jobs, NOW) is SAT
    waits = ":".join([*unknown[:7000], "7", *unknown[7000:]])
    assert evaluate(f"afterok:{waits}", ME, MY_NAME, UID, jobs, NOW) is WAIT
    assert evaluate(f"afterok:{waits}:9", ME, MY_NAME, UID, jobs, NOW) is NEVER
    assert evaluate(f"afterany:{waits}:9", ME, MY_NAME, UID, jobs, NOW) is WAIT
    assert evaluate(f"afterany:{':'.join(unknown)}:9", ME, MY_NAME, UID, jobs, NOW) is SAT
    assert evaluate(f"afterok:{':'.join(unknown)}:500_1", ME, MY_NAME, UID, jobs, NOW) is SAT
    assert evaluate(f"afterok:{':'.join(unknown)}:500_2", ME, MY_NAME, UID, jobs, NOW) is SAT


# ---------------------------------------------------------------- no crash on accepted text

# Texts that used to pass parse() and then made evaluate() raise (every scheduling
# pass failed): parse() now refuses them, so admission does and evaluate() says NEVER.
CRASHERS = [
    ("+5", {}),
    ("_1", {}),
    ("afterok:\u00b2", {}),
    ("afterok:\u0661", {1: facts("COMPLETED")}),
    ("after:5+x", {5: facts("RUNNING", start_time=NOW - 9)}),
    ("afterok:10_\u00b2", ARRAY),
]


@pytest.mark.parametrize(
    ("text", "jobs"),
    CRASHERS,
    ids=[
        "bare-plus",
        "bare-underscore",
        "superscript-id",
        "arabic-indic-id",
        "after-plus-word",
        "superscript-task",
    ],
)
def test_former_crashers_are_refused_and_never_satisfied(
    text: str, jobs: dict[int, JobFacts]
) -> None:
    with pytest.raises(ValueError):
        parse(text)
    assert evaluate(text, ME, MY_NAME, UID, jobs, NOW) is NEVER


_TEXT = st.text(alphabet="0123456789_+*:,?afterokny\u00b2\u0661\uff15 -", max_size=16)
_STATES = st.sampled_from(["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"])
_JOBS = st.dictionaries(
    st.integers(1, 20),
    st.builds(
        facts,
        _STATES,
        exit_status=st.sampled_from([0, 1 << 8]),
        array_job_id=st.sampled_from([0, 1, 2]),
        array_task_id=st.none() | st.integers(0, 3),
        start_time=st.sampled_from([0, NOW - 600, NOW]),
    ),
)


def _evaluates_iff_parses(text: str, jobs: dict[int, JobFacts]) -> None:
    try:
        parse(text)
    except ValueError:
        assert evaluate(text, ME, MY_NAME, UID, jobs, NOW) is NEVER
        return
    assert isinstance(evaluate(text, ME, MY_NAME, UID, jobs, NOW), Outcome)


@settings(max_examples=500, deadline=None)
@given(text=_TEXT, jobs=_JOBS)
def test_accepted_text_evaluates(text: str, jobs: dict[int, JobFacts]) -> None:
    """Whatever parse() accepts evaluates without raising; whatever it refuses is NEVER."""
    _evaluates_iff_parses(text, jobs)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=16), jobs=_JOBS)
def test_any_text_evaluates(text: str, jobs: dict[int, JobFacts]) -> None:
    """parse() raises nothing but ValueError, and evaluate() nothing at all."""
    _evaluates_iff_parses(text, jobs)


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(st.integers(1, 30), min_size=1, max_size=4),
    kind=st.sampled_from(["after", "afterany", "afterok", "afternotok"]),
    jobs=st.dictionaries(st.integers(1, 30), st.builds(facts, _STATES)),
)
def test_any_joiner_is_never_stricter_than_all(
    ids: list[int], kind: str, jobs: dict[int, JobFacts]
) -> None:
    """``a?b`` is satisfied whenever ``a,b`` is, and never NEVER when ``a,b`` waits."""
    all_of = evaluate(",".join(f"{kind}:{i}" for i in ids), ME, MY_NAME, UID, jobs, NOW)
    any_of = evaluate("?".join(f"{kind}:{i}" for i in ids), ME, MY_NAME, UID, jobs, NOW)
    one_item = evaluate(f"{kind}:" + ":".join(map(str, ids)), ME, MY_NAME, UID, jobs, NOW)
    assert one_item is all_of
    if all_of is SAT:
        assert any_of is SAT
    if any_of is NEVER:
        assert all_of is NEVER


# ---------------------------------------------------------------- as Slurm shows it


@pytest.mark.parametrize(
    ("text", "jobs", "expected"),
    [
        # Slurm 22.05: each reference not yet met, one per id, with its status...
        ("afterok:16", {16: facts("RUNNING")}, "afterok:16(unfulfilled)"),
        (
            "afterok:16:17",
            {16: facts("PENDING"), 17: facts("PENDING")},
            "afterok:16(unfulfilled),afterok:17(unfulfilled)",
        ),
        # ...a met one dropped, one that can never be met marked failed...
        (
            "afterok:16:17",
            {16: facts("COMPLETED"), 17: facts("PENDING")},
            "afterok:17(unfulfilled)",
        ),
        (
            "afterok:16,afterany:17",
            {16: facts("FAILED", exit_status=1), 17: facts("RUNNING")},
            "afterok:16(failed),afterany:17(unfulfilled)",
        ),
        # ...and nothing, Slurm's (null), once everything is met.
        ("afterok:16", {16: facts("COMPLETED")}, ""),
        ("afterok:16", {}, ""),  # purged after MinJobAge: it ended
        ("after:5+10", {5: facts("PENDING")}, "after:5+10(unfulfilled)"),
        ("afterok:12_*", {12: facts("PENDING", array_job_id=12)}, "afterok:12_*(unfulfilled)"),
        # A whole array named by its id, as Slurm 22.05 prints it.
        (
            "afternotok:12",
            {13: facts("RUNNING", array_job_id=12, array_task_id=1)},
            "afternotok:12_*(unfulfilled)",
        ),
        (
            "afterok:12_4",
            {13: facts("RUNNING", array_job_id=12, array_task_id=4)},
            "afterok:12_4(unfulfilled)",
        ),
        ("singleton", {1: facts("RUNNING", name=MY_NAME)}, "singleton(unfulfilled)"),
        ("singleton", {}, ""),
        # With ? one met reference satisfies the whole list.
        (
            "afterok:16?afterok:17",
            {16: facts("RUNNING"), 17: facts("RUNNING")},
            "afterok:16(unfulfilled)?afterok:17(unfulfilled)",
        ),
        ("afterok:16?afterok:17", {16: facts("RUNNING"), 17: facts("COMPLETED")}, ""),
    ],
)
def test_shown_as_slurm_shows_it(text: str, jobs: dict[int, JobFacts], expected: str) -> None:
    assert shown(resolve(text), ME, MY_NAME, UID, Index(jobs), NOW) == expected
