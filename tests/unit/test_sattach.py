"""sattach without daemons: its options in Slurm's words, --layout's text, and the
controller's rule of who may attach (the owner, root and SlurmUser only)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cli import sattach
from cli.halt import Halt
from controller import stepattach
from controller.jobstate import JobState
from controller.model import Step
from controller.principal import Principal
from corral import errors, stepio
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from tests.unit.scenario import UID, job, running, slurm_conf


def test_options() -> None:
    params = sattach.parse(["-l", "--output-filter=1", "--error-filter", "0", "-Q", "7.2"])
    assert (params.job_id, params.step_id, params.label, params.quiet) == (7, 2, True, True)
    assert params.filters == {stepio.OUT: 1, stepio.ERR: 0}
    assert sattach.parse(["--input-filter=0", "--layout", "7.0"]).layout
    assert sattach.parse(["7.0"]).input_task == stepio.ALL_TASKS  # every task, as 22.05
    assert sattach.parse(["--input-filter=1", "7.0"]).input_task == 1
    # A component's step is the leader's, as 22.05's sattach reads it: 7+1.0 is 7.0.
    params = sattach.parse(["7+1.0"])
    assert (params.job_id, params.step_id) == (7, 0)


@pytest.mark.parametrize(
    ("argv", "first"),
    [
        ([], "sattach: error: too many parameters"),
        (["5.0", "6.0"], "sattach: error: too many parameters"),
        (["5"], "sattach: error: Failed to parse stepid from command line options"),
        (["5+.0"], "sattach: error: Failed to parse stepid from command line options"),
        (
            ["--output-filter=x", "5.0"],
            'sattach: error: Invalid numeric value "x" for output-filter.',
        ),
        (["--input-filter=x", "5.0"], 'sattach: error: Invalid numeric value "x" for input-'),
    ],
)
def test_bad_command_lines_in_slurms_words(argv: list[str], first: str) -> None:
    with pytest.raises(Halt) as halt:
        sattach.parse(argv)
    assert halt.value.status == 1 and halt.value.lines[0].startswith(first)


def test_layout_text() -> None:
    reply = {"nodes": ["n1", "n2"], "tasks": [2, 1], "task_ids": [0, 2, 1]}
    assert sattach.layout_text(reply) == (
        "Job step layout:\n"
        "\t3 tasks, 2 nodes (n[1-2])\n\n"
        "\tNode 0 (n1), 2 task(s): 0 2 \n"
        "\tNode 1 (n2), 1 task(s): 1 \n"
    )


OWNER = Principal(UID, UID, "alice", frozenset())
OTHER = Principal(UID + 1, UID + 1, "bob", frozenset())
OPERATOR = Principal(UID + 2, UID + 2, "op", frozenset(), admin_level="Operator")
STEP = Step(step_id=0, name="s", nodes=("n1", "n2"), tasks=(1, 1), cpus=(1, 1), start_time=1)


class Agent:
    def __init__(self) -> None:
        self.sent: list[pb.ControllerMessage] = []

    def send(self, message: pb.ControllerMessage) -> None:
        self.sent.append(message)


def _attach(who: Principal, the_job: Any, **fields: Any) -> tuple[pb.StepAttachReply, Agent]:
    agent = Agent()
    request = pb.StepAttachRequest(
        **{"job_id": 5, "step_id": 0, "io_port": 9, "io_key": b"k" * 32, **fields}
    )
    reply = stepattach.attach({5: the_job}, slurm_conf(), request, who, {"n1": agent, "n2": agent})
    return reply, agent


def test_the_owner_attaches_each_node_of_the_step() -> None:
    reply, agent = _attach(OWNER, running(5, ("n1", "n2"), steps=(STEP,)))
    assert (list(reply.nodes), list(reply.task_ids)) == (["n1", "n2"], [0, 1])
    sent = [m.attach_step for m in agent.sent]
    assert [(m.node, m.io_port, m.io_key) for m in sent] == [
        ("n1", 9, b"k" * 32),
        ("n2", 9, b"k" * 32),
    ]
    _, quiet = _attach(OWNER, running(5, ("n1", "n2"), steps=(STEP,)), layout_only=True)
    assert quiet.sent == []


@pytest.mark.parametrize(
    ("who", "the_job", "code"),
    [
        (OTHER, running(5, ("n1", "n2"), steps=(STEP,)), errors.ESLURM_ACCESS_DENIED),
        (OPERATOR, running(5, ("n1", "n2"), steps=(STEP,)), errors.ESLURM_ACCESS_DENIED),
        (OWNER, running(5, ("n1", "n2")), errors.ESLURM_INVALID_JOB_ID),  # no such step
        (OWNER, job(5, state=JobState.PENDING), errors.ESLURM_JOB_PENDING),
        (OWNER, job(5, state=JobState.COMPLETED), errors.ESLURM_ALREADY_DONE),
    ],
)
def test_refusals(who: Principal, the_job: Any, code: int) -> None:
    with pytest.raises(SlurmError) as refused:
        _attach(who, the_job)
    assert refused.value.code == code


def test_a_later_parts_reply_says_where_it_falls_in_the_whole_step() -> None:
    """Its runners number nodes and tasks in the whole spanning step; sattach counts
    them from the part's first, as Slurm 22.05's sattach labels ``124.0``'s tasks."""
    part = replace(STEP, het_jobs=(4, 5), het_offset=(1, 2))
    reply, _ = _attach(OWNER, running(5, ("n1", "n2"), steps=(part,)), layout_only=True)
    assert (reply.het_node_offset, reply.het_task_offset, list(reply.task_ids)) == (1, 2, [0, 1])


def test_input_goes_to_every_runner_naming_its_tasks() -> None:
    """Each runner gets sattach's input; the frames name every task, or the one
    --input-filter names, counted from a later part's first task as 22.05 counts."""
    reply = {
        "nodes": ["n1", "n2"],
        "tasks": [1, 2],
        "task_ids": [0, 1, 2],
        "het_node_offset": 1,
        "het_task_offset": 3,
    }
    whole = sattach.Attached(sattach.parse(["7.0"]), None, b"k" * 32, reply)  # type: ignore[arg-type]
    assert (whole.input.task, whole.input.nodes, whole.input_valid) == (
        stepio.ALL_TASKS,
        {0, 1},
        True,
    )
    one = sattach.Attached(sattach.parse(["--input-filter=2", "7.0"]), None, b"k" * 32, reply)  # type: ignore[arg-type]
    assert (one.input.task, one.input_valid) == (5, True)
    past = sattach.Attached(sattach.parse(["--input-filter=3", "7.0"]), None, b"k" * 32, reply)  # type: ignore[arg-type]
    assert not past.input_valid  # 22.05: "A valid node id must be specified ..."
