"""A step of parts (``srun a : b`` in an ordinary job) in the clients: its ids as Slurm
22.05 prints and reads them (measured on one: slurmctld, slurmdbd, two ``slurmd -N``)."""

from __future__ import annotations

from typing import Any

from cli.jobs import steps
from cli.jobs.ids import InvalidJobId, cancel_ids, leader_step
from cli.sacct.fields import job_steps
from controller.model import Step
from controller.views import step_info

JOB: dict[str, Any] = {
    "job_id": 7, "array_job_id": 0, "array_task_id": None, "name": "j", "partition": "p",
    "user": "u", "uid": 1, "state": "RUNNING", "start_time": 100, "nodes": "n[1-2]",
    "batch_host": "", "batch_flag": False, "time_limit": 10, "num_cpus": 3,
    "cpus_per_node": [2, 1], "num_nodes": 2, "alloc_tres": "", "end_time": 0,
    "exit_status": 0,
}  # fmt: skip


def _step(step_id: int, node: str, ntasks: int, comp: int) -> dict[str, Any]:
    """A step as the wire gives it, from the controller's record (``views.step_info``)."""
    record = Step(step_id, "s", (node,), (ntasks,), (ntasks,), 100, het_comp=comp)
    info = step_info(record)
    return {field.name: getattr(info, field.name) for field in info.DESCRIPTOR.fields}


def _job() -> dict[str, Any]:
    return JOB | {"steps": [_step(0, "n1", 1, 0), _step(0, "n2", 2, 1), _step(1, "n1", 1, -1)]}


def test_the_wire_marks_only_the_parts() -> None:
    assert (_step(0, "n1", 1, 0)["het_step"], _step(0, "n2", 1, 1)["het_comp"]) == (True, 1)
    assert _step(1, "n1", 1, -1)["het_step"] is False


def test_squeue_and_scontrol_show_each_part_and_read_a_part_as_its_step() -> None:
    rows = steps.rows([_job()], 200)
    assert [r.step_id for r in rows] == ["7.0+0", "7.0+1", "7.1"]
    assert steps.render(rows[:2], "%i %N %A", header=False) == "7.0+0 n1 1\n7.0+1 n2 2\n"
    for named in ("7.0", "7.0+1"):  # every part, as 22.05's squeue --steps lists them
        assert [r.step_id for r in steps.rows([_job()], 200, [named])] == ["7.0+0", "7.0+1"]
    # scontrol show step 7.0 (or 7.0+1) shows the first part alone.
    shown = steps.first_parts(steps.rows([_job()], 200, ["7.0+1"]))
    assert steps.show(shown[0], oneliner=True).startswith("StepId=7.0+0 UserId=1 ")
    assert len(shown) == 1
    assert (steps.without_part("7.0+1"), steps.without_part("7+1")) == ("7.0", "7+1")


def test_sacct_has_a_record_per_part() -> None:
    assert [(s.id, s.node, s.ntasks) for s in job_steps(_job())] == [
        ("0+0", "n1", 1), ("0+1", "n2", 2), ("1", "n1", 1)
    ]  # fmt: skip


def test_typed_ids_of_parts() -> None:
    assert leader_step("7.0+1") == "7.0+1"  # not a component's: left to the caller
    assert leader_step("7+1.0") == "7.0"
    for text in ("7.0+1", "7.0+0"):  # 22.05's scancel: "Invalid job id 7.0+1"
        try:
            cancel_ids([text])
        except InvalidJobId as refused:
            assert str(refused) == text
        else:
            raise AssertionError(f"{text} accepted")
