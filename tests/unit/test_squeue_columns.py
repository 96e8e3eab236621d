"""squeue's faster paths against the plain ones they replace, on random records.

A long listing is laid out a column at a time (``Field.column``), sorted with
whole-list keys, and decoded with only the fields squeue reads (``codec.decode``'s
``narrow``). Each must give exactly what the per-record way gives: the column the
values of ``Field.value``, the order that of the record-by-record sort below (the
sort as it was written before), the narrowed records the whole records cut down.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cli.jobs import order
from cli.jobs.fields import LETTERS, NAMES, JobView, _compressed
from corral.hostlist import compress, expand
from corral.wire import codec
from corral.wire.schema import MESSAGES
from tests.unit.test_codec import message
from tests.unit.test_squeue_fields import _SPECIAL, _strategy

NOW = 1796014614

_NODES = st.sampled_from(["", "n3", "node05", "x00", "n[1-4]", "n2,n1", "bad[", "a.b"])
JOBS = st.fixed_dictionaries(
    {
        name: (_NODES if name == "nodes" else _SPECIAL.get(name, _strategy(kind, repeated)))
        for name, _, kind, repeated, _ in MESSAGES["JobInfo"]
    }
)
COLUMNS = sorted(
    {id(f): (name, f) for name, f in [*LETTERS.items(), *NAMES.items()] if f.column}.values()
)
SORTS = ["P,t,-p", "S", "-S", "i", "t,-T,u", "-u,j", *"BCDegGjlLmMNpQTuUV"]


def test_the_default_columns_are_whole_columns() -> None:
    names = {"jobarrayid", "partition", "name", "username", "statecompact", "timeused"}
    assert all(NAMES[name].column for name in names | {"numnodes", "reasonlist"})


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(JOBS, max_size=8),
    env=st.sampled_from([{}, {"SLURM_BITSTR_LEN": "8"}]),
)
def test_columns_are_each_records_value(records: list[dict[str, Any]], env: dict[str, str]) -> None:
    view = JobView(NOW, env)
    for name, field in COLUMNS:
        assert field.column is not None
        assert field.column(records, view) == [field.value(r, view) for r in records], name


@settings(max_examples=200, deadline=None)
@given(name=st.text(string.ascii_letters + string.digits, min_size=1, max_size=12))
def test_one_host_prints_as_it_is(name: str) -> None:
    assert _compressed(name) == compress(expand(name))


def _reference_units(jobs: list[Any]) -> tuple[list[Any], dict[int, list[Any]]]:
    """The grouping of array tasks and het components, record by record."""
    heads: list[Any] = []
    arrays: dict[tuple[str, int], tuple[int, list[Any]]] = {}
    for job in sorted(jobs, key=order._record_order):
        if job["state"] != "PENDING":
            heads.append(job)
            continue
        if job.get("het_job_id"):
            key = ("het", int(job["het_job_id"]))
        elif job["array_task_id"] is not None and job["array_job_id"]:
            key = ("array", int(job["array_job_id"]))
        else:
            heads.append(job)
            continue
        found = arrays.get(key)
        if found is None:
            arrays[key] = (len(heads), [job])
            heads.append(job)
        else:
            found[1].append(job)
    tasks: dict[int, list[Any]] = {}
    for index, unit in arrays.values():
        unit.sort(key=order._unit_order)
        heads[index] = unit[0]
        tasks[id(unit[0])] = unit
    return heads, tasks


def _reference_by_start(heads: list[Any], now: int | None, descending: bool) -> list[Any]:
    known, starts, unknown = [], [], []
    for job in heads:
        start = int(job["start_time"])
        if start == 0:
            unknown.append(job)
            continue
        if now is not None and start < now and job["state"] == "PENDING":
            start = now
        known.append(job)
        starts.append(start)
    ranked = sorted(range(len(known)), key=starts.__getitem__, reverse=descending)
    unknown.reverse()
    return [known[index] for index in ranked] + unknown


def reference_sort(jobs: list[Any], spec: str, now: int) -> list[Any]:
    """Slurm's order worked out one record at a time (each key a function of a job)."""
    heads, tasks = _reference_units(jobs)
    heads = _reference_by_start(heads, None, True)
    for letter, descending in reversed(order.parse_sort(spec)):
        if letter == "S":
            heads = _reference_by_start(heads, now, descending)
            continue
        function, _, clocked = order._KEYS[letter]
        key = (lambda job, f=function: f(job, now)) if clocked else function
        heads.sort(key=key, reverse=descending)
    return [job for head in heads for job in tasks.get(id(head), (head,))]


@settings(max_examples=150, deadline=None)
@given(records=st.lists(JOBS, max_size=10))
def test_sort_is_the_record_by_record_sort(records: list[dict[str, Any]]) -> None:
    for spec in SORTS:
        got = order.sort_jobs(list(records), spec, NOW)
        assert [id(job) for job in got] == [
            id(job) for job in reference_sort(list(records), spec, NOW)
        ], spec


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(message("JobInfo"), max_size=4),
    fields=st.lists(st.sampled_from([f[0] for f in MESSAGES["JobInfo"]]), unique=True),
)
def test_narrowed_records_are_the_whole_records_cut_down(
    records: list[dict[str, Any]], fields: list[str]
) -> None:
    data = codec.encode("JobsReply", {"jobs": records, "now": NOW})
    whole = codec.decode("JobsReply", data)
    narrow = codec.decode("JobsReply", data, (("JobInfo", tuple(fields)),))
    assert narrow["now"] == whole["now"] == NOW
    assert narrow["jobs"] == [{name: job[name] for name in fields} for job in whole["jobs"]]
    # the other messages are whole, and a narrowed table does not leak into plain decodes
    assert codec.decode("JobsReply", data) == whole
