"""srun --multi-prog's file (corral/multiprog.py) and srun's placement checks
(cli/srun/placement.py), with the errors in Slurm's srun's words (taken from Slurm
22.05's srun run on such files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.halt import Halt
from cli.srun import placement
from corral import multiprog

CONF = """\
# a comment
0-1,4  prog-a --rank=%t --offset=%o
  # an indented comment

2 "prog b" 'two words' %%t
* rest %t %o
"""


def test_each_task_gets_its_lines_command_with_t_and_o_expanded() -> None:
    got = multiprog.commands(CONF, 6, [0, 1, 2, 3, 4, 5])
    assert got == [
        ["prog-a", "--rank=0", "--offset=0"],
        ["prog-a", "--rank=1", "--offset=1"],
        ["prog b", "two words", "%t"],
        ["rest", "3", "3"],
        ["prog-a", "--rank=4", "--offset=2"],
        ["rest", "5", "5"],
    ]
    assert multiprog.commands(CONF, 6, [4]) == [["prog-a", "--rank=4", "--offset=2"]]


@pytest.mark.parametrize(
    ("text", "ntasks", "lines"),
    [
        ("0 echo a\n", 3, ("Configuration file f.conf invalid, no record for task id 1",)),
        (
            "x echo a\n",
            3,
            ("Invalid task range specification (x)", "Line 1 of configuration file f.conf invalid"),
        ),
        ("0\n", 1, ("Line 1 of configuration file f.conf invalid",)),
        (
            "0-1 echo a\n1 echo b\n",
            3,
            ("Duplicate record for task 1", "Line 2 of configuration file f.conf invalid"),
        ),
        (
            "0-5 echo a\n",
            3,
            ("Invalid task id, 5 >= ntasks", "Line 1 of configuration file f.conf invalid"),
        ),
        (
            "* echo a\n0 echo b\n",
            3,
            (
                "Task range specification with asterisk must be last",
                "Line 2 of configuration file f.conf invalid",
            ),
        ),
        (
            "3-1 echo a\n",
            4,
            ("Invalid task range, 3-1", "Line 1 of configuration file f.conf invalid"),
        ),
    ],
)
def test_files_slurm_refuses(text: str, ntasks: int, lines: tuple[str, ...]) -> None:
    with pytest.raises(multiprog.MultiProgError) as caught:
        multiprog.verify(text, "f.conf", ntasks)
    assert caught.value.lines == lines


def test_srun_reads_the_file_and_counts_tasks_from_n_or_the_allocation(tmp_path: Path) -> None:
    conf = tmp_path / "mp.conf"
    conf.write_text("0 a\n1 b\n")
    fields = placement.multi_prog([str(conf)], {"SLURM_NTASKS": "2"}, 0)
    assert fields == {"multi_prog": "0 a\n1 b\n", "ntasks": 2}
    with pytest.raises(Halt) as caught:
        placement.multi_prog([str(conf)], {}, 3)
    assert (
        caught.value.lines[0]
        == f"srun: error: Configuration file {conf} invalid, no record for task id 2"
    )
    with pytest.raises(Halt) as caught:
        placement.multi_prog([str(tmp_path / "none")], {}, 1)
    assert caught.value.lines == (
        f"srun: error: Could not open multi_prog config file {tmp_path / 'none'}",
    )


def test_relative_is_for_steps_without_w_or_x_within_the_allocation() -> None:
    env = {"SLURM_JOB_NUM_NODES": "3"}
    assert placement.relative({"relative": "2"}, env, True) == 2
    assert placement.relative({}, env, True) == 0

    def refused(options: dict[str, str | None], in_job: bool = True) -> tuple[str, ...]:
        with pytest.raises(Halt) as caught:
            placement.relative(options, env, in_job)
        assert caught.value.status == 1
        return caught.value.lines

    assert refused({"relative": "1"}, in_job=False) == (
        "srun: fatal: --relative option invalid for job allocation request",
    )
    assert refused({"relative": "1", "nodelist": "n1"}) == (
        "srun: error: -r,--relative not allowed with -w,--nodelist or -x,--exclude.",
    )
    assert refused({"relative": "2", "nodes": "2"}) == (
        "srun: error: --relative and --nodes option incompatible with count of allocated "
        "nodes (2+2>3)",
    )


def test_arbitrary_takes_the_hostfile_in_order(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("n2\nn1,n2\nn[3-4]\n")
    env = {"SLURM_HOSTFILE": str(hosts)}
    fields = placement.distribution_fields({"distribution": "arbitrary"}, env, 0)
    assert fields["task_nodes"] == ["n2", "n1", "n2", "n3", "n4"]
    assert fields["ntasks"] == 5
    assert placement.distribution_fields({"distribution": "arbitrary"}, env, 2)["ntasks"] == 2
    with pytest.raises(Halt) as caught:
        placement.distribution_fields({"distribution": "arbitrary"}, env, 9)
    assert caught.value.lines[0] == "srun: error: Too few NodeNames in Slurm Hostfile"
    with pytest.raises(Halt) as caught:
        placement.distribution_fields({"distribution": "plane"}, {}, 2)
    assert caught.value.status == 255
    assert caught.value.lines == (
        "srun: error: Invalid plane size or size not specified",
        "srun: error: Invalid --distribution specification",
    )


def test_fewer_tasks_than_nodes_sets_the_node_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert placement.node_count(2, 1) == 1
    assert capsys.readouterr().err == (
        "srun: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n"
    )
    assert (placement.node_count(2, 0), placement.node_count(2, 4)) == (2, 2)


def test_a_1000_line_file_one_task_a_line(tmp_path: Path) -> None:
    """bench/mpi.py's step: a line per task for 1,000 tasks is a file srun takes, and
    each node's agent picks its own tasks' lines from it."""
    conf = tmp_path / "multi.conf"
    conf.write_text("".join(f"{i} echo %t line{i}\n" for i in range(1000)))
    assert placement.multi_prog([str(conf)], {}, 1000)["ntasks"] == 1000
    text = conf.read_text()
    node = list(range(250, 500))
    assert multiprog.commands(text, 1000, node) == [["echo", str(t), f"line{t}"] for t in node]
