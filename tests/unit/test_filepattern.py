"""corral.filepattern: Slurm's %-patterns in batch output file names."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.filepattern import NO_ARRAY_TASK, expand

JOB: dict[str, Any] = {"job_id": 128, "user": "alice", "job_name": "train", "node": "n1"}
ARRAY: dict[str, Any] = {**JOB, "job_id": 131, "array_job_id": 120, "array_task_id": 7}


@pytest.mark.parametrize(
    ("pattern", "job", "expected"),
    [
        pytest.param("slurm-%j.out", JOB, "slurm-128.out", id="j"),
        pytest.param("%J.log", JOB, "128.log", id="J-batch-is-job-id"),
        pytest.param("%%j", JOB, "%j", id="percent-percent"),
        pytest.param("100%%", JOB, "100%", id="percent-at-end"),
        pytest.param("a%", JOB, "a%", id="lone-percent-at-end"),
        pytest.param("%4j", JOB, "0128", id="pad"),
        pytest.param("%2j", JOB, "128", id="pad-narrower-than-value"),
        pytest.param("%10j", JOB, "0000000128", id="pad-10"),
        pytest.param("%15j", JOB, "0000000128", id="pad-capped-at-10"),
        pytest.param("%0004j", JOB, "0128", id="pad-leading-zeros"),
        pytest.param("%A_%a", JOB, f"128_{NO_ARRAY_TASK}", id="not-an-array"),
        pytest.param("%b", JOB, "4", id="not-an-array-mod-10"),
        pytest.param("slurm-%A_%a.out", ARRAY, "slurm-120_7.out", id="array"),
        pytest.param("%j", ARRAY, "131", id="array-raw-job-id"),
        pytest.param("%3a-%b", {**ARRAY, "array_task_id": 13}, "013-3", id="array-pad-and-mod"),
        pytest.param("%N/%n/%t", JOB, "n1/0/0", id="node-and-ranks"),
        pytest.param("%5N", JOB, "n1", id="names-are-not-padded"),
        pytest.param("%u-%x", JOB, "alice-train", id="user-and-name"),
        pytest.param("%s", JOB, "batch", id="step"),
        pytest.param("%r", {**JOB, "restarts": 2}, "2", id="restarts"),
        pytest.param("%X%y", JOB, "%X%y", id="unknown-kept"),
        pytest.param("%4X", JOB, "%4X", id="unknown-with-width-kept"),
        pytest.param("%4", JOB, "%4", id="width-at-end"),
        pytest.param("dir\\ name\\%j", JOB, "dir name%j", id="backslash-disables"),
        pytest.param("a\\\\b%j", JOB, "a\\b%j", id="double-backslash"),
        pytest.param("/abs/%x_%j.err", JOB, "/abs/train_128.err", id="absolute"),
    ],
)
def test_expand(pattern: str, job: dict[str, Any], expected: str) -> None:
    assert expand(pattern, **job) == expected


def test_numbered_step() -> None:
    assert expand("%J|%3s", **JOB, step="2") == "128.2|002"


@given(st.text(max_size=40))
def test_never_raises(pattern: str) -> None:
    assert isinstance(expand(pattern, **ARRAY), str)


@given(st.text(alphabet=st.characters(blacklist_characters="%\\"), max_size=30))
def test_plain_text_unchanged(text: str) -> None:
    assert expand(text, **JOB) == text


@given(st.text(alphabet=st.characters(blacklist_characters="\\"), max_size=30))
def test_backslash_turns_expansion_off(text: str) -> None:
    assert expand("\\" + text, **JOB) == text
