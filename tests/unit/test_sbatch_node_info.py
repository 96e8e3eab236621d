"""sbatch's ``--cores-per-socket`` and ``-B``/``--extra-node-info`` (cli/sbatch/nodeinfo.py,
hintopts.py, sockettasks.py): the counts sent and the task count implied, as Slurm
22.05 gave them on nodes of two 4-core sockets (Sockets=2 CoresPerSocket=4
ThreadsPerCore=1; ``sbatch -w n1 OPTIONS --wrap ...`` then ``scontrol show job -d``'s
NumTasks, ReqB:S:C:T and Socks/Node, and the job's SLURM_NTASKS)."""

from __future__ import annotations

import pytest

from cli import allocation
from cli.failure import Failure
from cli.halt import Halt
from cli.sbatch import hintopts
from cli.sbatch.settings import Settings
from tests.unit.test_sbatch_gpus import spec

W1 = ("nodelist", "n1")

# (id, options after -w n1, NumTasks sent (None: none), Socks/Node, ReqB:S:C:T's C, T)
# with 0 for Slurm's "*".
SLURM: list[tuple[str, tuple[tuple[str, str], ...], int | None, int, int, int]] = [
    ("cores-per-socket-2", (("cores-per-socket", "2"),), 2, 0, 2, 0),
    ("B-1:3", (("extra-node-info", "1:3"),), 3, 1, 3, 0),
    ("B-2", (("extra-node-info", "2"),), 2, 2, 0, 0),
    ("B-2:2", (("extra-node-info", "2:2"),), 4, 2, 2, 0),
    ("B-2:4", (("extra-node-info", "2:4"),), 8, 2, 4, 0),
    ("B-1:2:1", (("extra-node-info", "1:2:1"),), 2, 1, 2, 1),
    ("B-range-1-2:2", (("extra-node-info", "1-2:2"),), 2, 1, 2, 0),
    ("B-range-max-above-node", (("extra-node-info", "1-3"),), 1, 1, 0, 0),
    ("B-star:2", (("extra-node-info", "*:2"),), 2, 0, 2, 0),
    ("B-2:star", (("extra-node-info", "2:*"),), 2, 2, 0, 0),
    ("B-2:star:1", (("extra-node-info", "2:*:1"),), 2, 2, 0, 1),
    ("B-empty-sockets", (("extra-node-info", ":2"),), 2, 0, 2, 0),
    ("B-empty-cores", (("extra-node-info", "1:"),), 1, 1, 0, 0),
    ("B-drops-hint", (("extra-node-info", "1:2"), ("hint", "nomultithread")), 2, 1, 2, 0),
    ("hint-drops-cores", (("cores-per-socket", "2"), ("hint", "nomultithread")), 1, 0, 0, 1),
    ("hint-first-drops-cores", (("hint", "nomultithread"), ("cores-per-socket", "2")), 1, 0, 0, 1),
    ("compute-bound-drops-cores", (("cores-per-socket", "2"), ("hint", "compute_bound")),
     1, 0, 0, 1),
    ("memory-bound-one-core", (("cores-per-socket", "2"), ("hint", "memory_bound")), 1, 0, 1, 1),
    ("multithread-drops-cores", (("hint", "multithread"), ("cores-per-socket", "2")),
     None, 0, 0, 0),
    ("hint-drops-sockets", (("sockets-per-node", "2"), ("hint", "nomultithread")), 1, 0, 0, 1),
    ("threads-keep-cores", (("cores-per-socket", "2"), ("threads-per-core", "1")), 2, 0, 2, 1),
    ("B-then-cores", (("extra-node-info", "2:2"), ("cores-per-socket", "3")), 6, 2, 3, 0),
    ("cores-then-B", (("cores-per-socket", "3"), ("extra-node-info", "2:2")), 4, 2, 2, 0),
    ("B-clears-cores", (("cores-per-socket", "3"), ("extra-node-info", "2")), 2, 2, 0, 0),
    ("sockets-then-B", (("sockets-per-node", "1"), ("extra-node-info", "2")), 2, 2, 0, 0),
    ("B-then-sockets", (("extra-node-info", "2"), ("sockets-per-node", "1")), 1, 1, 0, 0),
    ("B-with-n", (("extra-node-info", "2:2"), ("ntasks", "1")), 1, 2, 2, 0),
    # A 0 is taken and sets no task count: -B 0 Socks/Node=0 NumTasks=1; -B 0:0 and -B
    # 0:2 NumTasks=1 (C shown 0 and 2); -B 1:0 NumTasks=1 (C shown 0). A fourth field
    # and more are not read: -B 1:1:1:1 ReqB:S:C:T=0:0:1:1, -B 1:2:1:9 and -B 1:2:1:x
    # NumTasks=2 0:0:2:1, -B 2:1:1:1:1 NumTasks=2.
    ("B-0", (("extra-node-info", "0"),), None, 0, 0, 0),
    ("B-0:0", (("extra-node-info", "0:0"),), None, 0, 0, 0),
    ("B-0:2", (("extra-node-info", "0:2"),), None, 0, 2, 0),
    ("B-1:0", (("extra-node-info", "1:0"),), None, 1, 0, 0),
    ("B-fourth-field", (("extra-node-info", "1:1:1:1"),), 1, 1, 1, 1),
    ("B-fourth-field-9", (("extra-node-info", "1:2:1:9"),), 2, 1, 2, 1),
    ("B-fourth-field-x", (("extra-node-info", "1:2:1:x"),), 2, 1, 2, 1),
    ("B-five-fields", (("extra-node-info", "2:1:1:1:1"),), 2, 2, 1, 1),
    ("B-0-then-B-2", (("extra-node-info", "0"), ("extra-node-info", "2")), 2, 2, 0, 0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "tasks", "sockets", "cores", "threads"),
    [row[1:] for row in SLURM],
    ids=[row[0] for row in SLURM],
)
def test_counts_sent_are_slurms(
    options: tuple[tuple[str, str], ...],
    tasks: int | None,
    sockets: int,
    cores: int,
    threads: int,
) -> None:
    sent = spec(W1, *options)
    got = (
        sent.get("num_tasks"),
        sent.get("sockets_per_node", 0),
        sent.get("cores_per_socket", 0),
        sent.get("threads_per_core", 0),
    )
    assert got == (tasks, sockets, cores, threads)


# Which counts are sent as given 0 (JobSpec node_info_zeros), as Slurm 22.05 showed
# them (-w n1): -B 0 Socks/Node=0; -B 1:0 and -B 2:0:1 a C of 0; -B 0:0 and -B 0:0:1
# both; -B 0:2 Socks/Node=0; a later count or -B sets it again (-B 0:0
# --sockets-per-node=1: Socks/Node=1 and C 0; -B 1:0 --cores-per-socket=2: C 2); -B
# drops a hint before or after it (-B 0 --hint=nomultithread: Socks/Node=0).
ZERO_ROWS: list[tuple[str, tuple[tuple[str, str], ...], list[str] | None]] = [
    ("B-0", (("extra-node-info", "0"),), ["sockets_per_node"]),
    ("B-1:0", (("extra-node-info", "1:0"),), ["cores_per_socket"]),
    ("B-2:0:1", (("extra-node-info", "2:0:1"),), ["cores_per_socket"]),
    ("B-0:0", (("extra-node-info", "0:0"),), ["sockets_per_node", "cores_per_socket"]),
    ("B-0:0:1", (("extra-node-info", "0:0:1"),), ["sockets_per_node", "cores_per_socket"]),
    ("B-0:2", (("extra-node-info", "0:2"),), ["sockets_per_node"]),
    ("B-0:0-then-sockets", (("extra-node-info", "0:0"), ("sockets-per-node", "1")),
     ["cores_per_socket"]),
    ("B-1:0-then-cores", (("extra-node-info", "1:0"), ("cores-per-socket", "2")), None),
    ("B-0-then-B-2", (("extra-node-info", "0"), ("extra-node-info", "2")), None),
    ("B-0-then-hint", (("extra-node-info", "0"), ("hint", "nomultithread")),
     ["sockets_per_node"]),
    ("hint-then-B-0", (("hint", "nomultithread"), ("extra-node-info", "0")),
     ["sockets_per_node"]),
    ("B-1", (("extra-node-info", "1"),), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "zeros"), [row[1:] for row in ZERO_ROWS], ids=[row[0] for row in ZERO_ROWS]
)
def test_counts_given_as_0_are_sent_apart(
    options: tuple[tuple[str, str], ...], zeros: list[str] | None
) -> None:
    assert spec(W1, *options).get("node_info_zeros") == zeros


def test_salloc_and_srun_send_a_0_apart() -> None:
    """``salloc -w n1 -B 1:0`` showed ReqB:S:C:T=0:0:0:* Socks/Node=1 on Slurm 22.05,
    and ``srun -w n1 -B 0`` Socks/Node=0."""
    from cli import salloc
    from cli.options import parse, put_last
    from cli.srun import launch

    given: dict[str, str | None] = {}
    for option, value in parse(salloc.TABLE, ["-w", "n1", "-B", "1:0"])[0]:
        put_last(given, option.key, value)
    srun = launch.parse(["-w", "n1", "-B", "0", "true"]).options
    sent = [allocation._spec(prog, options, "true", [])
            for prog, options in (("salloc", given), ("srun", srun))]  # fmt: skip
    assert [s.get("node_info_zeros") for s in sent] == [["cores_per_socket"], ["sockets_per_node"]]


def test_two_nodes_take_four_tasks() -> None:
    """``-N2 -w n1 -B 1:2``: NumTasks=4 (3 on n1, 1 on n2)."""
    assert spec(W1, ("nodes", "2"), ("extra-node-info", "1:2"))["num_tasks"] == 4


def test_a_dropped_hint_leaves_no_environment() -> None:
    """``-B 1:2 --hint=nomultithread``: neither SLURM_HINT nor SLURM_THREADS_PER_CORE;
    ``-B 1:2:1`` sets SLURM_THREADS_PER_CORE=1."""
    settings = Settings()
    settings.apply("extra-node-info", "1:2", "command line")
    settings.apply("hint", "nomultithread", "command line")
    assert hintopts.dropped(settings.fields)
    assert hintopts.environment(settings.fields) == {}
    settings.apply("extra-node-info", "1:2:1", "command line")
    assert hintopts.environment(settings.fields) == {"SLURM_THREADS_PER_CORE": "1"}


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("extra-node-info", "x", 'Invalid numeric value "x" for first arg of -B.'),
        ("extra-node-info", "1,2", 'Invalid numeric value "1,2" for first arg of -B.'),
        ("extra-node-info", "-1", 'Invalid numeric value "-1" for first arg of -B.'),
        ("extra-node-info", "1-", 'Invalid numeric value "1-" for first arg of -B.'),
        ("extra-node-info", "1:x", 'Invalid numeric value "x" for second arg of -B.'),
        ("extra-node-info", "2:1-", 'Invalid numeric value "1-" for second arg of -B.'),
        ("extra-node-info", "1:2:x", 'Invalid numeric value "x" for third arg of -B.'),
        ("cores-per-socket", "0", 'Invalid numeric value "0" for --cores-per-socket.'),
        ("cores-per-socket", "abc", 'Invalid numeric value "abc" for --cores-per-socket.'),
        ("cores-per-socket", "2-3", 'Invalid numeric value "2-3" for --cores-per-socket.'),
    ],
)
def test_bad_values_are_refused_in_slurms_words(option: str, value: str, message: str) -> None:
    with pytest.raises(Failure) as caught:
        Settings().apply(option, value, "command line")
    assert (str(caught.value), caught.value.status) == (message, 1)


def test_salloc_implies_tasks_and_srun_does_not() -> None:
    """``srun -w n1 -B 1:2`` ran one task on Slurm 22.05 (SLURM_NTASKS unset); salloc
    ``-w n1 -B 1:2`` set SLURM_NTASKS=2."""
    options: dict[str, str | None] = {"extra-node-info": "1:2", "nodelist": "n1"}
    salloc = allocation._spec("salloc", options, "bash", [])
    srun = allocation._spec("srun", options, "hostname", [])
    assert (salloc.get("num_tasks"), srun.get("num_tasks")) == (2, None)
    assert (srun["sockets_per_node"], srun["cores_per_socket"]) == (1, 2)


@pytest.mark.parametrize("value", ["0:0:0", "1:1:0", "1:2:0:4"])
def test_no_threads_is_refused_as_slurms_controller_does(value: str) -> None:
    """``sbatch -w n1 -B 1:1:0`` (or ``0:0:0``): "sbatch: error: Batch job submission
    failed: Requested node configuration is not available", exit 1; ``salloc``: "salloc:
    error: Job submit/allocate failed: ..."; ``srun``: "srun: error: Unable to allocate
    resources: ..." (Slurm 22.05)."""
    with pytest.raises(Failure) as caught:
        spec(W1, ("extra-node-info", value))
    assert (caught.value.lines, caught.value.status) == (
        ("Batch job submission failed: Requested node configuration is not available",),
        1,
    )
    options: dict[str, str | None] = {"extra-node-info": value, "nodelist": "n1"}
    for prog, failed in (
        ("salloc", "Job submit/allocate failed"),
        ("srun", "Unable to allocate resources"),
    ):
        with pytest.raises(Halt) as halted:
            allocation._spec(prog, options, "true", [])
        assert halted.value.lines == (
            f"{prog}: error: {failed}: Requested node configuration is not available",
        )


def test_threads_per_core_after_no_threads_is_taken() -> None:
    """A later ``--threads-per-core`` sets T again: nothing left to refuse."""
    sent = spec(W1, ("extra-node-info", "1:1:0"), ("threads-per-core", "1"))
    assert sent["threads_per_core"] == 1


# salloc and srun -w n1, Slurm 22.05: the last given of -B and the socket options wins,
# as in sbatch: (options, Socks/Node, ReqB:S:C:T's C, salloc's NumTasks; srun's is 1).
# ``-B 1:2:1 --threads-per-core=1 -B 2``: ReqB:S:C:T=0:0:*:* (T cleared again).
ORDER_ROWS: list[tuple[str, list[str], int, int, int, int]] = [
    ("B-then-sockets", ["-B", "2", "--sockets-per-node=1"], 1, 0, 0, 1),
    ("sockets-then-B", ["--sockets-per-node=1", "-B", "2"], 2, 0, 0, 2),
    ("B-then-cores", ["-B", "2:2", "--cores-per-socket=3"], 2, 3, 0, 6),
    ("cores-then-B", ["--cores-per-socket=3", "-B", "2:2"], 2, 2, 0, 4),
    ("B-threads-B", ["-B", "1:2:1", "--threads-per-core=1", "-B", "2"], 2, 0, 0, 2),
    ("B-sockets-B-again", ["-B", "2", "--sockets-per-node=1", "-B", "2"], 2, 0, 0, 2),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "sockets", "cores", "threads", "tasks"),
    [row[1:] for row in ORDER_ROWS],
    ids=[row[0] for row in ORDER_ROWS],
)
def test_salloc_and_srun_follow_the_command_line(
    argv: list[str], sockets: int, cores: int, threads: int, tasks: int
) -> None:
    from cli import salloc
    from cli.options import parse, put_last
    from cli.srun import launch

    given: dict[str, str | None] = {}
    for option, value in parse(salloc.TABLE, ["-w", "n1", *argv])[0]:
        put_last(given, option.key, value)
    srun = launch.parse(["-w", "n1", *argv, "true"]).options
    for prog, options, want_tasks in (("salloc", given, tasks), ("srun", srun, None)):
        sent = allocation._spec(prog, options, "true", [])
        got = (
            sent.get("sockets_per_node", 0),
            sent.get("cores_per_socket", 0),
            sent.get("threads_per_core", 0),
            sent.get("num_tasks"),
        )
        assert got == (sockets, cores, threads, want_tasks), prog
