"""Jobs that name alternatives, from submission to scontrol and corral why: admission of
``--gres=a|b`` and ``--prefer`` with Slurm's refusals, the start recorded with the
alternative it got, a requeue, and what ``scontrol show job`` and ``corral why`` say
(issue 18, point 2)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cli.jobs.record import lines
from cli.why import text
from controller import views, whyviews
from controller.admission import admit
from controller.core import BackfillParams, schedule
from controller.jobspec import from_fields
from controller.jobstate import Finish, JobState, Requeue
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral import errors
from corral.config import parse
from corral.errors import SlurmError
from corral.whydoc import why_document
from corral.wire import codec
from tests.unit.scenario import slurm_conf

SCRIPT = "#!/bin/sh\ntrue\n"
USER = principal_for(4242, 4242)
NOW = 1_000_000
CONF_LINES = (
    "GresTypes=gpu",
    "NodeName=h1 CPUs=2 RealMemory=1000 Gres=gpu:h100:2 Feature=nvlink",
    "NodeName=a1 CPUs=2 RealMemory=1000 Gres=gpu:a100:2",
    "NodeName=c1 CPUs=2 RealMemory=1000",
    "PartitionName=gpu Nodes=h1,a1 Default=YES",
    "PartitionName=cpu Nodes=c1",
)
CONF = slurm_conf(*CONF_LINES)


def spec(**fields: Any) -> Any:
    """A JobSpec as the controller receives it, through the wire codec."""
    return from_fields(
        codec.decode("JobSpec", codec.encode("JobSpec", {"script": SCRIPT, **fields}))
    )


def submit(conf: Any = CONF, **fields: Any) -> Any:
    return admit(spec(**fields), USER, conf, {}, 100, NOW, 0).job


# ------------------------------------------------------------------ admission


def test_alternatives_are_split_the_first_in_effect() -> None:
    job = submit(gres="gpu:h100:2|gpu:a100:1")
    assert job.gres_alternatives == ("gpu:h100:2", "gpu:a100:1")
    assert job.gres == "gpu:h100:2"


def test_a_plain_gres_names_no_alternatives() -> None:
    job = submit(gres="gpu:a100:1")
    assert (job.gres, job.gres_alternatives) == ("gpu:a100:1", ())


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"gres": "gpu:h100:1|"}, errors.ESLURM_INVALID_GRES),
        ({"gres": "gpu:h100:1|gpu:v100:1"}, errors.ESLURM_INVALID_GRES),
        ({"gres": "gpu:h100:1|gpu:a100:3"}, errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE),
        ({"gres": "gpu:h100:1|gpu:a:b"}, errors.ESLURM_INVALID_GRES),
        ({"prefer": "[nvlink"}, errors.ESLURM_INVALID_FEATURE),
        ({"prefer": "infiniband"}, errors.ESLURM_INVALID_FEATURE),
        ({"prefer": "[nvlink&nvlink]"}, errors.ESLURM_INVALID_FEATURE),
        (
            {"prefer": "nvlink", "partitions": ["cpu"]},
            errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
        ),
        (
            {"prefer": "nvlink", "gres": "gpu:a100:1"},
            errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
        ),
    ],
    ids=[
        "empty-alternative",
        "a-type-no-node-has",
        "an-alternative-that-never-fits",
        "a-malformed-alternative",
        "prefer-malformed",
        "prefer-a-feature-no-node-has",
        "prefer-brackets-of-and-without-counts",
        "prefer-no-node-of-the-partition-has",
        "prefer-no-node-with-the-gres-has",
    ],
)
def test_refused_at_submission_in_slurms_words(fields: dict[str, Any], code: int) -> None:
    with pytest.raises(SlurmError) as info:
        submit(**fields)
    assert info.value.code == code
    assert str(info.value) == errors.MESSAGES[code]


def test_prefer_with_one_alternative_that_has_it_is_accepted() -> None:
    job = submit(gres="gpu:a100:1|gpu:h100:1", prefer="nvlink")
    assert job.prefer == "nvlink"


@pytest.mark.parametrize("prefer", ["infiniband", "nvlink"], ids=["unknown", "no-such-node"])
def test_ignore_prefer_validation_waives_the_checks_as_in_slurm(prefer: str) -> None:
    """SchedulerParameters=ignore_prefer_validation: a preference that fits nothing now
    is accepted (nodes with features come and go); a malformed one is still refused."""
    conf = slurm_conf(*CONF_LINES, "SchedulerParameters=ignore_prefer_validation")
    assert submit(conf, prefer=prefer, partitions=["cpu"]).prefer == prefer
    with pytest.raises(SlurmError):
        submit(conf, prefer="[nvlink")


# ------------------------------------------------------------------ the store

STORE_CONF = "ClusterName=test\nSlurmctldHost=ctl\nFirstJobId=100\n" + "\n".join(CONF_LINES)


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    store = JobStore(
        parse(STORE_CONF + "\n", str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s"))
    )
    store.load(0.0)
    for name in ("h1", "a1", "c1"):
        store.node_registered(Registration(name, 2, 1000), monotonic=1.0, now=10)
    return store


def _submit(store: JobStore, **fields: Any) -> int:
    job = store.submit(spec(work_dir="/tmp", time_limit=60, **fields), USER, NOW).job
    return job.job_id


def _pass(store: JobStore, now: int = NOW) -> None:
    """A backfill pass, as the loop makes one."""
    snap, params = store.snapshot(), BackfillParams()
    plan = schedule(snap, now, params)
    store.commit(plan)
    store.backfill_pass = (snap, plan, params)


def _record(store: JobStore, job_id: int) -> list[str]:
    info = codec.decode("JobInfo", views.job_info(store.jobs[job_id], store).SerializeToString())
    return lines(info, NOW)


def test_a_busy_first_choice_starts_on_the_second_and_scontrol_says_so(
    store: JobStore,
) -> None:
    busy = _submit(store, gres="gpu:h100:2")
    _pass(store)
    job_id = _submit(store, gres="gpu:h100:2|gpu:a100:2")
    _pass(store)
    job = store.jobs[job_id]
    assert (job.state, job.nodes, job.gres) == (JobState.RUNNING, ("a1",), "gpu:a100:2")
    assert store.jobs[busy].nodes == ("h1",)
    record = _record(store, job_id)
    assert "TresPerNode=gres/gpu:a100:2" in record
    assert record[-1] == (
        "Flavor=gpu:a100:2 (2 of 2: the ones before it cannot start now; gpu:h100:2 Resources)"
    )


def test_a_waiting_job_shows_all_its_alternatives_and_the_awaited_one(
    store: JobStore,
) -> None:
    for gres in ("gpu:h100:2", "gpu:a100:2"):
        _submit(store, gres=gres)
    job_id = _submit(store, gres="gpu:h100:2|gpu:a100:2")
    _pass(store)
    job = store.jobs[job_id]
    assert job.state is JobState.PENDING
    record = _record(store, job_id)
    assert "TresPerNode=gres/gpu:h100:2|gres/gpu:a100:2" in record
    assert record[-1].startswith("Flavor=gpu:h100:2 (1 of 2: expected to start soonest; ")


def test_prefer_is_shown_as_slurm_shows_it(store: JobStore) -> None:
    job_id = _submit(store, prefer="nvlink")
    _pass(store)
    record = _record(store, job_id)
    assert record[record.index("Features=(null) DelayBoot=00:00:00") + 1] == "Prefer=nvlink"
    assert store.jobs[job_id].nodes == ("h1",)
    assert record[-1] == "Flavor=--prefer=nvlink (1 of 2: the first choice)"


def test_a_requeued_job_asks_for_its_first_alternative_again(store: JobStore) -> None:
    _submit(store, gres="gpu:h100:2")
    _pass(store)
    job_id = _submit(store, gres="gpu:h100:2|gpu:a100:2")
    _pass(store)
    assert store.jobs[job_id].gres == "gpu:a100:2"
    store.post(job_id, Requeue(NOW + 10))
    back = store.post(job_id, Finish(NOW + 11, 0, "cancelled"))
    assert back.state is JobState.PENDING
    assert (back.gres, back.flavor) == ("gpu:h100:2", "")
    assert back.gres_alternatives == ("gpu:h100:2", "gpu:a100:2")


def test_the_journal_keeps_the_alternatives(store: JobStore, tmp_path: Path) -> None:
    job_id = _submit(store, gres="gpu:h100:2|gpu:a100:2", prefer="nvlink")
    asyncio.run(store.flush(inline=True))
    again = JobStore(store.conf, Journal(str(tmp_path / "s")))
    again.load(0.0)
    job = again.jobs[job_id]
    assert (job.gres_alternatives, job.prefer) == (("gpu:h100:2", "gpu:a100:2"), "nvlink")


def test_corral_why_names_the_alternatives_and_the_awaited_one(store: JobStore) -> None:
    for gres in ("gpu:h100:2", "gpu:a100:2"):
        _submit(store, gres=gres)
    job_id = _submit(store, gres="gpu:h100:2|gpu:a100:2")
    _pass(store)
    reply = asyncio.run(whyviews.why(store, job_id, USER, NOW + 5))
    assert [(f.label, f.outcome, f.chosen) for f in reply.flavors] == [
        ("gpu:h100:2", "awaited", True),
        ("gpu:a100:2", "Resources", False),
    ]
    assert reply.need_gres == "gpu:h100:2"
    doc = why_document(codec.decode("WhyReply", reply.SerializeToString()))
    words = text(doc)
    assert "Alternatives, in order of preference: 1. gpu:h100:2: awaited, expected " in words
    assert "2. gpu:a100:2: Resources, expected " in words
    assert "  Flavor: gpu:h100:2 (1 of 2: expected to start soonest; " in words
