"""--test-only's answer read from a plan: one job's start, or a heterogeneous job's
components together (one start time, processors summed, nodes merged, no partition)."""

from __future__ import annotations

from controller.core.plan import Expected, Plan, Start
from controller.model import Job
from controller.testonly import NO_ESTIMATE, answer
from tests.unit.scenario import NOW, job


def _start(job_id: int, node: str, cpus: int) -> Start:
    return Start(job_id=job_id, partition="debug", nodes=(node,), cpus=(cpus,), memory=(0,))


def _components() -> list[Job]:
    return [job(5, het_job_id=5), job(6, het_job_id=5, het_job_offset=1)]


def test_one_job_starting_now_names_its_partition() -> None:
    plan = Plan(now=NOW, starts=(_start(5, "n1", 2),))
    found = answer(plan, [job(5)], NOW)
    assert (found.start_time, found.num_cpus, found.nodes, found.partition) == (
        NOW,
        2,
        "n1",
        "debug",
    )


def test_components_starting_now_are_one_answer() -> None:
    plan = Plan(now=NOW, starts=(_start(5, "n3", 1), _start(6, "n1", 2)))
    found = answer(plan, _components(), NOW)
    assert (found.start_time, found.num_cpus, found.nodes, found.partition) == (
        NOW,
        3,
        "n[1,3]",
        "",
    )


def test_components_start_when_the_last_can() -> None:
    expected = {
        5: Expected(start_time=NOW + 60, partition="debug", nodes=("n1",)),
        6: Expected(start_time=NOW + 600, partition="debug", nodes=("n2",)),
    }
    found = answer(Plan(now=NOW, expected=expected), _components(), NOW)
    assert (found.start_time, found.nodes) == (NOW + 600, "n[1-2]")


def test_a_component_without_an_estimate_puts_the_group_a_year_on() -> None:
    expected = {5: Expected(start_time=NOW + 60, partition="debug", nodes=("n1",))}
    found = answer(Plan(now=NOW, expected=expected), _components(), NOW)
    assert found.start_time == NOW + NO_ESTIMATE
