"""squeue asks the controller only for the JobInfo fields it uses (``JobsRequest.fields``).

A field left out of the request decodes to its default, so a missing name does
not fail: the job silently prints or sorts wrong. So each column and sort key
declares what it reads, and these tests hold the declarations to the code: a
record that notes every field looked up must find nothing undeclared, and a
report printed from records cut down to the requested fields must be the report
printed from whole records, for every format letter and name and every sort key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli import boundary, squeue
from cli.jobs.fields import LETTERS, NAMES, JobView
from cli.jobs.order import DEFAULT_SORT, sort_jobs, sort_reads
from corral.wire.schema import MESSAGES

NOW = 1796014614

_STATES = ["PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "FAILED", "TIMEOUT", "DEADLINE", ""]
_FLAGS = ["COMPLETING", "STAGE_OUT", "REQUEUED", "SIGNALING"]
_TIMES = [0, NOW - 90061, NOW - 3725, NOW - 100, NOW + 500]

#: Values that take the branches of squeue's fields and sort keys.
_SPECIAL: dict[str, st.SearchStrategy[Any]] = {
    "job_id": st.integers(1, 40),
    "array_job_id": st.sampled_from([0, 7, 8]),
    "array_task_id": st.one_of(st.none(), st.integers(0, 5)),
    "array_task_str": st.sampled_from(["", "1-6%2", "3-5", ",".join(map(str, range(0, 60, 2)))]),
    "state": st.sampled_from(_STATES),
    "state_flags": st.lists(st.sampled_from(_FLAGS), max_size=2, unique=True),
    "state_desc": st.sampled_from(["", "ReqNodeNotAvail, UnavailableNodes:n3"]),
    "reason": st.sampled_from(["None", "JobHeldUser", "Dependency"]),
    "time_limit": st.sampled_from([-1, 0, 10, 90]),
    "start_time": st.sampled_from(_TIMES),
    "end_time": st.sampled_from(_TIMES),
    "suspend_time": st.sampled_from([0, NOW - 100]),
    "submit_time": st.sampled_from(_TIMES),
    "nodes": st.sampled_from(["", "n[1-4]", "n2,n1", "bad["]),
    "priority": st.sampled_from([0, 1, 4294901759]),
    "nice": st.sampled_from([0, -5]),
}
_BY_KIND: dict[str, st.SearchStrategy[Any]] = {
    "string": st.sampled_from(["", "x", "n[1-2]"]),
    "bool": st.booleans(),
    "int32": st.sampled_from([0, 1, -1]),
    "int64": st.sampled_from([0, *_TIMES]),
}


def _strategy(kind: str, repeated: bool) -> st.SearchStrategy[Any]:
    """Any other field (a field added to JobInfo included): a few values of its kind."""
    if repeated:
        return st.lists(_BY_KIND.get(kind, st.sampled_from([0, 1])), max_size=2)
    return _BY_KIND.get(kind, st.sampled_from([0, 1, 2048]))


JOBS = st.fixed_dictionaries(
    {
        name: _SPECIAL.get(name, _strategy(kind, repeated))
        for name, _, kind, repeated, _ in MESSAGES["JobInfo"]
    }
)


class Recording(Mapping[str, Any]):
    """A job record that notes which fields are looked up."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record = record
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self.record[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.record)

    def __len__(self) -> int:
        return len(self.record)


FIELDS = sorted({id(f): (name, f) for name, f in [*LETTERS.items(), *NAMES.items()]}.values())
SORTS = ["P,t,-p", "S", "-S", "i", "cluster,-i", *"BCDegGjlLmMNpQTuUV"]
LAYOUTS = {
    "default": squeue.build_layout(squeue.Settings()),
    "all-letters": squeue.letters_layout("%all"),
    "all-names": squeue.names_layout(",".join(NAMES)),
}


def cut_down(record: Mapping[str, Any], fields: list[str]) -> dict[str, Any]:
    """``record`` as squeue decodes it having asked for ``fields`` only: those alone
    (``codec.decode``'s ``narrow``), so reading any other is a KeyError."""
    return {name: record[name] for name in fields}


@settings(max_examples=200, deadline=None)
@given(record=JOBS, bitstr=st.sampled_from([{}, {"SLURM_BITSTR_LEN": "8"}]))
def test_fields_read_only_what_they_declare(record: dict[str, Any], bitstr: dict[str, str]) -> None:
    view = JobView(NOW, bitstr)
    for name, field in FIELDS:
        job = Recording(record)
        field.value(job, view)
        assert job.read <= set(field.reads), name
        if field.column is not None:  # the whole-column way reads no more
            job = Recording(record)
            field.column([job], view)
            assert job.read <= set(field.reads), name


@settings(max_examples=50, deadline=None)
@given(records=st.lists(JOBS, max_size=6))
def test_sorts_read_only_what_they_declare(records: list[dict[str, Any]]) -> None:
    for spec in SORTS:
        jobs = [Recording(record) for record in records]
        sort_jobs(list(jobs), spec, NOW)
        read = set().union(*(job.read for job in jobs))
        assert read <= sort_reads(spec), spec


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
@settings(max_examples=30, deadline=None)
@given(records=st.lists(JOBS, max_size=8))
def test_report_from_requested_fields_is_the_whole_report(
    layout: str, records: list[dict[str, Any]]
) -> None:
    chosen = LAYOUTS[layout]
    for spec in SORTS:
        fields = squeue.job_fields(chosen, spec)
        whole = squeue.render(records, NOW, chosen, sort=spec)
        cut = [cut_down(record, fields) for record in records]
        assert squeue.render(cut, NOW, chosen, sort=spec) == whole, spec


def test_default_report_asks_for_few_fields() -> None:
    assert squeue.job_fields(LAYOUTS["default"], DEFAULT_SORT) == [
        "array_job_id",
        "array_task_id",
        "array_task_str",
        "end_time",
        "het_job_id",
        "het_job_offset",
        "job_id",
        "name",
        "nodes",
        "num_nodes",
        "partition",
        "pre_suspend_secs",
        "priority",
        "reason",
        "start_time",
        "state",
        "state_desc",
        "state_flags",
        "suspend_time",
        "uid",
        "user",
    ]


def test_command_sends_the_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []
    narrowed: list[Any] = []

    class Client:
        def call(self, method: str, request: dict[str, Any], narrow: Any = ()) -> dict[str, Any]:
            narrowed.append(narrow)
            sent.append(request)
            return {"jobs": [], "now": NOW, "last_update": NOW}

    monkeypatch.setattr(boundary, "connect", Client)
    for name in ("SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SQUEUE_SORT"):
        monkeypatch.delenv(name, raising=False)
    assert squeue.squeue(["-h", "-o", "%i %Y", "-S", "-e"]) == 0
    assert sent[0]["fields"] == squeue.job_fields(squeue.letters_layout("%i %Y"), "-e")
    assert {"sched_nodes", "end_time"} <= set(sent[0]["fields"])
    # the records are decoded with those fields alone
    assert narrowed[0] == (("JobInfo", tuple(sent[0]["fields"])),)
