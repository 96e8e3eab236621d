"""corral.jobinfo: every wire JobInfo field is placed, and views and restd follow the tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from controller import views
from controller.jobspec import from_fields
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore
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
