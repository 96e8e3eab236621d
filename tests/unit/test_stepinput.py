"""srun's -i/--input read as Slurm 22.05 reads it, and where srun sends its input.

The forms were measured on a real 22.05 with two slurmd (docs/design.md, "Standard
input of a step"): ``-i 1`` feeds task 1 alone, ``-i 01`` too, ``-i 5`` of two tasks
is a file name, ``-i -1`` is every task, ``in%t``/``in%n`` are opened on the nodes
and ``in%j`` by srun.
"""

from __future__ import annotations

import pytest

from cli.srun.inputroute import InputRoute
from corral import stepinput, stepio


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", (stepinput.ALL, -1)),
        ("all", (stepinput.ALL, -1)),
        ("-1", (stepinput.ALL, -1)),
        ("none", (stepinput.NONE, -1)),
        ("1", (stepinput.TASK, 1)),
        ("01", (stepinput.TASK, 1)),
        ("2", (stepinput.SRUN_FILE, -1)),  # past the last task: a file name
        ("1x", (stepinput.SRUN_FILE, -1)),
        ("-2", (stepinput.SRUN_FILE, -1)),
        ("in%t", (stepinput.NODE_FILE, -1)),
        ("in%2n", (stepinput.NODE_FILE, -1)),
        ("in.%N", (stepinput.NODE_FILE, -1)),
        ("in%j", (stepinput.SRUN_FILE, -1)),
        ("in%%t", (stepinput.SRUN_FILE, -1)),  # %% is a percent sign
        ("in\\%t", (stepinput.SRUN_FILE, -1)),  # a backslash turns patterns off
        ("plain", (stepinput.SRUN_FILE, -1)),
    ],
)
def test_forms(value: str, expected: tuple[str, int]) -> None:
    assert stepinput.mode(value, 2) == expected


def test_which_tasks_get_a_pipe() -> None:
    assert [stepinput.piped("", 3, t) for t in range(3)] == [True, True, True]
    assert [stepinput.piped("1", 3, t) for t in range(3)] == [False, True, False]
    assert [stepinput.piped("none", 3, t) for t in range(3)] == [False, False, False]
    assert [stepinput.piped("in%t", 3, t) for t in range(3)] == [False, False, False]
    assert [stepinput.piped("file", 3, t) for t in range(3)] == [True, True, True]
    assert stepinput.fed_by_srun("file", 3) and not stepinput.fed_by_srun("in%t", 3)


IDS = [[0, 2], [1]]  # node 0 runs tasks 0 and 2, node 1 task 1 (cyclic)


def test_every_runner_gets_all_of_it_whenever_it_connects() -> None:
    route = InputRoute.of_srun("", 3, IDS, pty=False)
    assert route.reads and route.nodes == {0, 1}
    assert route.read(b"early") == ([], stepio.input_frame(b"early"))
    assert route.connect(1) == [stepio.input_frame(b"early")]
    assert route.read(b"more") == ([1], stepio.input_frame(b"more"))
    assert route.connect(1) == []  # once
    assert route.connect(0) == [stepio.input_frame(b"early"), stepio.input_frame(b"more")]
    assert route.history == []  # all have it: nothing more is kept
    assert route.read(b"") == ([0, 1], stepio.input_frame(b""))
    assert route.history == []


def test_one_task_one_runner() -> None:
    route = InputRoute.of_srun("2", 3, IDS, pty=False)
    assert (route.task, route.nodes) == (2, {0})
    assert route.connect(1) == []
    route.read(b"x")
    assert route.connect(0) == [stepio.input_frame(b"x", 2)]


def test_no_input_read() -> None:
    for value in ("none", "in%t"):
        route = InputRoute.of_srun(value, 3, IDS, pty=False)
        assert not route.reads and route.connect(0) == []


def test_pty_is_task_zeros() -> None:
    route = InputRoute.of_srun("", 3, IDS, pty=True)
    assert (route.task, route.nodes) == (0, {0})


def test_in_frame_names_its_task() -> None:
    frames = stepio.Reader().feed(stepio.input_frame(b"abc", 7) + stepio.input_frame(b""))
    assert frames == [(stepio.IN, 7, b"abc"), (stepio.IN, stepio.ALL_TASKS, b"")]
