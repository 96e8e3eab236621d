"""A pending job moving to another cluster (controller/movespec.py, controller/moves.py):
which jobs may move, what is sent, the REVOKED end, and how the clients show it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from scenario import NOW, job, running

from cli.jobs.record import lines
from cli.jobs.statenames import long_name
from cli.why import text
from controller import movespec
from controller.jobspec import JobSpec, from_wire
from controller.jobstate import (
    REVOKED,
    InvalidTransition,
    JobState,
    Requeue,
    Revoke,
    Start,
    apply,
)
from controller.journal import payload_from_row, payload_to_row
from controller.model import Payload
from corral.whydoc import why_document
from corral.wire import codec
from corral.wire import corral_pb2 as pb

MOVABLE = job(7, clusters="alpha,beta")


def test_a_pending_job_never_started_is_revoked_with_where_it_went() -> None:
    gone = apply(MOVABLE, Revoke(NOW, "beta:12"))
    assert gone.state is JobState.CANCELLED and gone.flags == {REVOKED}
    assert (gone.moved_to, gone.end_time) == ("beta:12", NOW)
    assert long_name({"state": "CANCELLED", "state_flags": sorted(gone.flags)}) == "REVOKED"
    with pytest.raises(InvalidTransition):  # its run is the other cluster's
        apply(gone, Requeue(NOW + 1))
    with pytest.raises(InvalidTransition):
        apply(running(8, clusters="alpha,beta"), Revoke(NOW, "beta:12"))


def test_a_job_being_sent_elsewhere_never_starts_here() -> None:
    sending = replace(MOVABLE, moved_to="beta")
    with pytest.raises(InvalidTransition):
        apply(sending, Start(NOW, "batch", ("n1",), (1,), (0,), 1))


def test_only_jobs_whose_m_list_named_several_clusters_may_move() -> None:
    assert movespec.movable(JobSpec(script="#!/bin/sh\n", clusters="alpha, beta"))
    assert not movespec.movable(JobSpec(script="#!/bin/sh\n", clusters="alpha"))
    assert not movespec.movable(JobSpec(script="#!/bin/sh\n", clusters="alpha,ALPHA"))
    assert not movespec.movable(JobSpec(script="x", clusters="alpha,beta", array="1-3"))
    assert movespec.may_move(MOVABLE)
    for kept_here in (
        job(7),  # one cluster named
        replace(MOVABLE, moved_from="gamma:3"),  # moved here once: never again
        replace(MOVABLE, moved_to="beta"),  # being sent
        replace(MOVABLE, held="user"),
        replace(MOVABLE, restarts=1),  # it ran here once
        running(7, clusters="alpha,beta"),
    ):
        assert not movespec.may_move(kept_here), kept_here


def test_the_other_cluster_gets_the_users_own_request_and_the_key() -> None:
    spec = JobSpec(
        name="sim",
        script="#!/bin/sh\necho hi\n",
        argv=("a",),
        environment={"HOME": "/home/u"},
        min_nodes=2,
        time_limit=5,
        clusters="alpha,beta",
        run_as_uid=1000,
        run_as_gid=1000,
        hold=True,
    )
    payload = Payload(spec.script, spec.argv, (("HOME", "/home/u"),), movespec.kept(spec))
    payload = payload_from_row(payload_to_row(payload))  # as the journal keeps it
    sent = movespec.request(replace(MOVABLE, job_id=41), payload, "alpha", "beta:h:7:10752")
    assert sent.moved_from == "alpha:41" and movespec.valid_key(sent.moved_from)
    again = from_wire(sent.spec)
    assert again == replace(
        spec,
        environment={"HOME": "/home/u", "SLURM_WORKING_CLUSTER": "beta:h:7:10752"},
        run_as_uid=None,
        run_as_gid=None,
        hold=False,
    )


@pytest.mark.parametrize("key", ["", "alpha", ":4", "alpha:", "alpha:4x", "a" * 80 + ":1"])
def test_a_malformed_key_is_not_a_key(key: str) -> None:
    assert not movespec.valid_key(key)


def _why(reply: pb.WhyReply) -> str:
    return text(why_document(codec.decode("WhyReply", reply.SerializeToString())))


def test_corral_why_and_scontrol_say_where_the_job_went() -> None:
    moved = pb.WhyReply(job_id=7, user="u", state="CANCELLED", moved_to="beta:123")
    assert _why(moved) == "Job 7 (u) moved to cluster beta as job 123.\n"
    sending = pb.WhyReply(job_id=7, user="u", state="PENDING", moved_to="beta")
    assert _why(sending) == "Job 7 (u) is being moved to cluster beta.\n"
    info = codec.decode(
        "JobInfo",
        pb.JobInfo(
            job_id=7, state="CANCELLED", state_flags=[REVOKED], moved_to="beta:123"
        ).SerializeToString(),
    )
    shown = lines(info, NOW)
    assert "MovedTo=beta:123" in shown and "MovedFrom" not in " ".join(shown)
    assert any(line.startswith("JobState=REVOKED ") for line in shown)
