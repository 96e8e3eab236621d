"""corral.jobinfo: every wire JobInfo field is placed, and views and restd follow the tables."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest

from cli import squeue
from cli.jobs.order import DEFAULT_SORT
from controller import views
from controller.core import schedule
from controller.jobspec import from_fields
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral import jobinfo
from corral.config import parse
from corral.wire import corral_pb2 as pb
from corral.wire.schema import MESSAGES
from restd import jobs

WIRE = [name for name, *_ in MESSAGES["JobInfo"]]
CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-2] CPUs=2 RealMemory=1000
PartitionName=p Nodes=ALL Default=YES
"""


def test_every_wire_field_is_copied_derived_or_left_unset_and_only_one() -> None:
    copied, derived, unset = set(jobinfo.COPIED), jobinfo.DERIVED, set(jobinfo.NOT_SET)
    assert not copied & derived and not copied & unset and not derived & unset
    assert sorted(copied | derived | unset) == sorted(WIRE)


def test_every_wire_field_is_shown_by_restd_or_listed_as_not_shown() -> None:
    assert not set(jobinfo.REST) & jobinfo.NOT_IN_REST
    assert sorted(set(jobinfo.REST) | jobinfo.NOT_IN_REST) == sorted(WIRE)


def test_restd_records_have_exactly_the_tables_keys() -> None:
    keys = set(jobinfo.REST.values())
    assert set(jobs.JOB_INFO["properties"]) == keys
    assert set(jobs.job_info(pb.JobInfo())) == keys


def test_restd_converters_name_only_fields_and_keys_of_the_table() -> None:
    """Each converter serves a field (``SHOWN_AS``) or a key (``FROM_JOB``) the
    table shows, and a key read from the whole job takes none of its fields' own
    converters, so none lies unused."""
    assert set(jobs.SHOWN_AS) <= set(jobinfo.REST)
    assert set(jobs.FROM_JOB) <= set(jobinfo.REST.values())
    assert not {jobinfo.REST[field] for field in jobs.SHOWN_AS} & set(jobs.FROM_JOB)


def _sample(kind: str, repeated: bool, seed: int) -> Any:
    """A value of a JobInfo field's kind that differs for each ``seed``."""
    if kind.startswith("message:"):
        return []
    value: Any = {"string": f"v{seed}", "bool": seed % 2 == 1}.get(kind, seed)
    return [value] if repeated else value


def _info(state: str, **changed: int) -> pb.JobInfo:
    """A JobInfo with every field set; ``changed`` picks other values."""
    fields = {
        name: _sample(kind, repeated, changed.get(name, 1))
        for name, _, kind, repeated, _ in MESSAGES["JobInfo"]
    }
    return pb.JobInfo(**{**fields, "state": state})


#: Exit codes show once a job has ended; other fields are read whatever the state
#: (scheduled nodes only while pending).
STATE = {"exit_status": "COMPLETED", "derived_exit_status": "COMPLETED"}


@pytest.mark.parametrize("field", [f for f in jobinfo.REST if f != "state"])
def test_restd_reads_each_field_into_its_key(field: str) -> None:
    """Changing the wire field changes what restd shows under the table's key."""
    key, state = jobinfo.REST[field], STATE.get(field, "PENDING")
    assert jobs.job_info(_info(state))[key] != jobs.job_info(_info(state, **{field: 2}))[key]


def test_views_copy_the_copied_fields_from_the_job(tmp_path: Path) -> None:
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))
    store.load(0.0)
    spec = {"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp", "comment": "c"}
    job = store.submit(from_fields(spec), principal_for(0, 0), now=100).job
    job = dataclasses.replace(job, constraint="f", submit_host="h", open_mode="append")
    info = views.job_info(job, store)
    for field, attribute in jobinfo.COPIED.items():
        assert getattr(info, field) == getattr(job, attribute), field


def _varied_store(path: Path) -> JobStore:
    """Jobs of many kinds: running, pending, an array, held, with a dependency,
    cancelled, with a hold and a signal; two nodes, so some wait."""
    conf = CONF + "Licenses=lic:4\nAccountingStorageTRES=license/lic\n"
    store = JobStore(parse(conf, str(path / "slurm.conf")), Journal(str(path / "state")))
    store.load(0.0)
    for name in ("n1", "n2"):
        store.node_registered(Registration(name, 2, 1000), monotonic=1.0, now=10)
    root = principal_for(0, 0)
    base = {"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"}
    for extra in (
        {"licenses": "lic:1", "signal_num": 10, "signal_time": 60},
        {"array": "1-5%2"},
        {"exclusive": True, "time_limit": 10},
        {"hold": True, "dependency": "afterok:1"},
        {"array": "7", "std_out": "/tmp/o"},
        {"req_nodes": "n1", "mem_per_cpu": 10},
    ):
        store.submit(from_fields({**base, **extra}), root, now=100)
    store.commit(schedule(store.snapshot(), 110))
    return store


def test_a_listing_naming_fields_gets_exactly_those_of_the_full_record(tmp_path: Path) -> None:
    """``listed_info`` works out only the fields asked for; the bytes are the full
    record's with the others dropped, for each field alone, squeue's default list and
    random lists, whatever the job's kind or state."""
    store = _varied_store(tmp_path)
    assert {j.state.name for j in store.jobs.values()} >= {"RUNNING", "PENDING"}
    settings = squeue.parse_settings([], {})
    squeue_default = squeue.job_fields(squeue.build_layout(settings), DEFAULT_SORT)
    rng = random.Random(7)
    lists = [(f,) for f in WIRE] + [tuple(squeue_default)]
    lists += [tuple(sorted(rng.sample(WIRE, rng.randint(2, 30)))) for _ in range(40)]
    for job in store.jobs.values():
        for shown in (None, "afterok:1(unfulfilled)"):
            full = views.job_info(job, store, dependency=shown)
            for fields in lists:
                want = views._only(full, fields).SerializeToString()
                got = views.listed_info(job, store, fields, shown).SerializeToString()
                assert got == want, (job.job_id, fields)
