"""controller.depspec: a job's --dependency resolved once, into job references."""

from __future__ import annotations

from dataclasses import replace

from scenario import NOW, UID, facts, job

from controller.core import dependency
from controller.core.dependency import Index, Outcome, check
from controller.depspec import ALL_TASKS, Deps, resolve
from controller.journal import job_from_row, job_to_row


def _refs(deps: Deps) -> list[tuple[str, list[tuple[int, int | None, int]]]]:
    return [(item.kind, list(item.references())) for item in deps.items]


def test_ids_become_references() -> None:
    deps = resolve("after:12+5:13_4:15,afterok:14_*")
    assert deps.text == "after:12+5:13_4:15,afterok:14_*" and not deps.any_of
    assert _refs(deps) == [
        ("after", [(15, None, 0), (12, None, 5), (13, 4, 0)]),
        ("afterok", [(14, ALL_TASKS, 0)]),
    ]
    assert resolve("afterok:1?afternotok:2").any_of


def test_plain_ids_are_packed_not_objects() -> None:
    """15,000 ids (120 KB of text) take 120 KB resolved, not a Python object each."""
    deps = resolve("afterok:" + ":".join(str(1_000_000 + i) for i in range(15_000)))
    (item,) = deps.items
    assert len(item.ids) == 8 * 15_000 and item.refs == ()
    huge = resolve("afterok:" + "9" * 30).items[0]
    assert list(huge.references()) == [(int("9" * 30), None, 0)]
    assert check(resolve("afterok:" + "9" * 30), 1, "x", UID, Index({}), NOW) is Outcome.SATISFIED


def test_a_text_that_does_not_parse_resolves_invalid_and_never_holds() -> None:
    deps = resolve("afterok:abc")
    assert not deps.valid
    assert check(deps, 1, "x", UID, Index({}), NOW) is Outcome.NEVER


def test_a_job_carries_its_resolved_list_and_keeps_it_across_changes() -> None:
    first = job(1, dependency="afterok:9")
    assert first.deps is not None and _refs(first.deps) == [("afterok", [(9, None, 0)])]
    # Changing anything else keeps the very same resolution (no second parse).
    assert replace(first, nice=5).deps is first.deps
    # A new text is resolved anew; clearing it drops the references.
    assert replace(first, dependency="afterany:7").deps == resolve("afterany:7")
    assert replace(first, dependency="").deps is None


def test_a_journal_row_brings_the_references_back_without_storing_them() -> None:
    row = job_to_row(job(1, dependency="afterok:9:10"))
    assert "deps" not in row
    assert job_from_row(row).deps == resolve("afterok:9:10")


def test_an_old_row_without_references_resolves_on_load() -> None:
    """A journal written before jobs carried references: same row shape, same answer."""
    row = job_to_row(job(1, dependency="afterany:9"))
    assert job_from_row(row).deps == resolve("afterany:9")


def test_an_unknown_job_counts_as_ended() -> None:
    """As Slurm: a dependency on a job no longer (or never) known is satisfied."""
    assert dependency.evaluate("afterok:424242", 1, "x", UID, {}, NOW) is Outcome.SATISFIED


def test_job_id_zero_names_no_job() -> None:
    """Ordinary jobs have array id 0: ``afterok:0`` must not wait on every one of them."""
    jobs = {5: facts("RUNNING")}
    assert dependency.evaluate("afterok:0", 1, "x", UID, jobs, NOW) is Outcome.SATISFIED


def test_a_long_list_looks_each_reference_up() -> None:
    """15,000 ids against 10,000 jobs: answers come from the index, one lookup each."""
    jobs = {i: facts("COMPLETED") for i in range(1, 10_001)}
    jobs[5_000] = facts("RUNNING")
    text = "afterok:" + ":".join(str(i) for i in range(1, 15_001))
    index = Index(jobs)
    deps = resolve(text)
    assert check(deps, 20_000, "x", UID, index, NOW) is Outcome.WAITING
    jobs[5_000] = facts("COMPLETED")
    assert check(deps, 20_000, "x", UID, Index(jobs), NOW) is Outcome.SATISFIED


def test_singleton_looks_at_the_same_name_and_user_only() -> None:
    jobs = {
        2: facts("RUNNING", name="train"),
        3: facts("RUNNING", name="other"),
        4: facts("RUNNING", name="train", uid=UID + 1),
    }
    deps = resolve("singleton")
    assert check(deps, 10, "train", UID, Index(jobs), NOW) is Outcome.WAITING
    assert check(deps, 10, "solo", UID, Index(jobs), NOW) is Outcome.SATISFIED
