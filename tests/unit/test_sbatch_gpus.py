"""sbatch's GPU options: sent as given (not flattened into --gres), told to the job in
SLURM_GPUS and its kin, and refused with Slurm's words where its client refuses them.

The refusals' wording and exit statuses are those of sbatch 22.05 on this
machine (tests/unit/test_gpu_semantics.py's docstring says how it was run).
"""

from __future__ import annotations

from typing import Any

import pytest

from cli.failure import Failure
from cli.sbatch.settings import Settings
from cli.sbatch.spec import Script, build

GRES = "Invalid generic resource (gres) specification"


def spec(*options: tuple[str, str]) -> dict[str, Any]:
    settings = Settings()
    for key, value in options:
        settings.apply(key, value, "command line")
    settings.verify()
    return build(
        settings, Script("#!/bin/sh\n", None, [], True), cwd="/tmp", environ={}, command_line=[]
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((("gpus", "2"),), {"gpus": 2, "gres": None, "gpu_type": None}),
        ((("gpus", "a100:3"), ("nodes", "2")), {"gpus": 3, "gpu_type": "a100", "min_nodes": 2}),
        ((("gpus", "gpu:a100:1"),), {"gpus": 1, "gpu_type": "a100"}),
        ((("gpus", "x"),), {"gpus": 1, "gpu_type": "x"}),  # a word is a type, as in Slurm
        ((("gpus", "0"),), {"gpus": None}),
        ((("gpus-per-node", "h100:4"), ("nodes", "2")), {"gres": "gpu:h100:4", "gpus": None}),
        ((("gres", "craynetwork:1"), ("gpus-per-node", "1")), {"gres": "craynetwork:1,gpu:1"}),
        (
            (("gpus", "3"), ("nodes", "2"), ("mem-per-gpu", "10G")),
            {"gpus": 3, "mem_per_gpu": 10240, "mem_per_node": None},
        ),
        (
            (("gpus-per-task", "1"), ("ntasks", "4"), ("cpus-per-gpu", "8")),
            {"gpus_per_task": 1, "cpus_per_gpu": 8, "cpus_per_task": None, "num_tasks": 4},
        ),
        (
            (("gpus-per-socket", "1"), ("sockets-per-node", "2")),
            {"gpus_per_socket": 1, "sockets_per_node": 2},
        ),
        ((("gres", "gpu:2"), ("cpus-per-gpu", "3")), {"gres": "gpu:2", "cpus_per_gpu": 3}),
        ((("gpus", "2"), ("ntasks-per-gpu", "2")), {"ntasks_per_gpu": 2, "num_tasks": None}),
        ((("gpus", "2"), ("gpu-bind", "map_gpu:1,0")), {"gpu_bind": "map_gpu:1,0"}),
        ((("gpus", "1"), ("gres-flags", "Enforce-Binding")), {"gres_flags": "enforce-binding"}),
    ],
    ids=[
        "total",
        "typed-total-over-two-nodes",
        "gres-spelling",
        "word-is-a-type",
        "zero-asks-none",
        "per-node-is-gres",
        "per-node-joins-gres",
        "mem-per-gpu-not-flattened",
        "per-task-cpus-per-gpu-not-flattened",
        "per-socket",
        "cpus-per-gpu-with-gres",
        "ntasks-per-gpu",
        "gpu-bind",
        "gres-flags-any-case",
    ],
)
def test_gpu_options_are_sent_as_given(
    options: tuple[tuple[str, str], ...], expected: dict[str, Any]
) -> None:
    built = spec(*options)
    assert {key: built.get(key) for key in expected} == expected


def test_the_job_is_told_its_gpu_options() -> None:
    env = spec(
        ("gpus", "a100:3"),
        ("gpus-per-task", "a100:1"),
        ("cpus-per-gpu", "2"),
        ("mem-per-gpu", "1G"),
        ("gpu-bind", "closest"),
    )["environment"]
    got = {k: v for k, v in env.items() if "GPU" in k}
    assert got == {
        "SLURM_GPUS": "a100:3",
        "SLURM_GPUS_PER_TASK": "a100:1",
        "SLURM_CPUS_PER_GPU": "2",
        "SLURM_MEM_PER_GPU": "1024",
        "SLURM_GPU_BIND": "closest",
    }
    assert spec(("gpus-per-node", "2"))["environment"]["SLURM_GPUS_PER_NODE"] == "2"
    assert "SLURM_GPUS_PER_NODE" not in spec(("gres", "gpu:2"))["environment"]


@pytest.mark.parametrize(
    ("options", "lines", "level", "status"),
    [
        (
            (("gpus", "1"), ("cpus-per-gpu", "2"), ("cpus-per-task", "2")),
            (
                "--cpus-per-gpu is mutually exclusive with --cpus-per-task",
                "Invalid generic resource (gres) specification",
            ),
            "error",
            None,
        ),
        (
            (("gpus-per-task", "1"),),
            (
                "Failed to validate job spec. --gpus-per-task used without either --gpus or "
                "-n/--ntasks is not allowed.",
                "Invalid generic resource (gres) specification",
            ),
            "error",
            None,
        ),
        (
            (("gpus-per-socket", "1"),),
            (
                "--gpus-per-socket option requires --sockets-per-node specification",
                "Invalid generic resource (gres) specification",
            ),
            "error",
            None,
        ),
        (
            (("mem-per-gpu", "100"),),
            (
                "Requested mem_per_tres=gres:gpu:100 but did not request any GPU.",
                "Invalid generic resource (gres) specification",
            ),
            "error",
            None,
        ),
        (
            (("gpus", "2"), ("gpus-per-task", "1"), ("ntasks", "3")),
            (
                "Failed to validate job spec. Based on --gpus and --gpus-per-task number of "
                "requested tasks differ from -n/--ntasks.",
                "Invalid generic resource (gres) specification",
            ),
            "error",
            None,
        ),
        (
            (("ntasks-per-gpu", "2"), ("gpus-per-task", "1"), ("ntasks", "2")),
            (
                "--gpus-per-task is mutually exclusive with --ntasks-per-gpu and "
                "SLURM_NTASKS_PER_GPU",
            ),
            "fatal",
            None,
        ),
        (
            (("gpus", "2"), ("nodes", "3")),
            ("Failed to validate job spec, --gpus < -N", GRES),
            "error",
            None,
        ),
        (
            (("gpus", "3"), ("gpus-per-node", "2")),
            (
                "Failed to validate job spec, --gpus is not multiple of --gres=gpu/--gpus-per-node",
                GRES,
            ),
            "error",
            None,
        ),
        (
            (("ntasks-per-gpu", "2"), ("ntasks", "3")),
            ("Failed to validate job spec, -n/--ntasks has to be a multiple of --ntasks-per-gpu.",),
            "error",
            None,
        ),
        (
            (("gpus", "2,a100:1"),),
            ("Invalid GRES specification (with and without type identification)",),
            "error",
            None,
        ),
        (
            (("gpus-per-node", "h100:8|a100:8"),),
            (
                "--gpus-per-node=h100:8|a100:8: alternatives (A|B) are taken by --gres only, "
                "as in --gres=gpu:a100:8|gpu:h100:8",
            ),
            "error",
            None,
        ),
        ((("gres-flags", "foo"),), ("Invalid --gres-flags specification",), "error", 255),
        ((("gpu-bind", "foo"),), ("Invalid --gpu-bind argument: gpu:foo",), "error", 255),
        (
            (("gpu-bind", "map_gpu:1,x"),),
            ("Invalid --gpu-bind argument: gpu:map_gpu:1,x",),
            "error",
            255,
        ),
        # --gpus of several types: sbatch 22.05's words (every type's total at least -N)
        (
            (("gpus", "a100:1,v100:2"), ("nodes", "2")),
            ("Failed to validate job spec, --gpus < -N", GRES),
            "error",
            None,
        ),
        (
            (("gpus", "a100:1"), ("gpus-per-task", "v100:1")),
            (
                "Failed to validate job spec. --gpus-per-task used without either --gpus or "
                "-n/--ntasks is not allowed.",
                GRES,
            ),
            "error",
            None,
        ),
        (
            (("gpus", "a100:1,v100:1"), ("gpus-per-task", "v100:1"), ("ntasks", "2")),
            (
                "Failed to validate job spec. Based on --gpus and --gpus-per-task number of "
                "requested tasks differ from -n/--ntasks.",
                GRES,
            ),
            "error",
            None,
        ),
        # a list's first total and GPUs per node of its type make the node count, the
        # other totals checked against it (sbatch 22.05)
        (
            (("gpus", "a100:2,v100:1"), ("gpus-per-node", "a100:1")),
            ("Failed to validate job spec, --gpus < -N", GRES),
            "error",
            None,
        ),
        (
            (("gpus", "a100:1,v100:2"), ("gpus-per-node", "1")),
            ("Invalid GRES specification (with and without type identification)",),
            "error",
            None,
        ),
        (
            (("gpus", "a100:2,v100:3"), ("gpus-per-node", "a100:1,v100:1"), ("nodes", "1-3")),
            (
                "Failed to validate job spec. Based on --gpu and --gres=gpu/--gpus-per-node "
                "required nodes (3) doesn't fall between min_nodes (2) and max_nodes (2) "
                "boundaries.",
                GRES,
            ),
            "error",
            None,
        ),
        (
            (("gpus", "a100:2,v100:2"), ("gpus-per-node", "a100:1"), ("nodes", "1")),
            (
                "Failed to validate job spec. Based on --gpu and --gres=gpu/--gpus-per-node "
                "required nodes (2) doesn't fall between min_nodes (1) and max_nodes (1) "
                "boundaries.",
                GRES,
            ),
            "error",
            None,
        ),
        (
            (("gpus", "a100:2,v100:2"), ("gpus-per-node", "v100:1"), ("nodes", "1")),
            (
                "Failed to validate job spec. Based on --gpu and --gres=gpu/--gpus-per-node "
                "required nodes (2) doesn't fall between min_nodes (1) and max_nodes (1) "
                "boundaries.",
                GRES,
            ),
            "error",
            None,
        ),
        (
            (("gpus", "2,1"), ("nodes", "2")),
            ("Failed to validate job spec, --gpus < -N", GRES),
            "error",
            None,
        ),
        (
            (("gpus", "1"), ("ntasks", "10"), ("nodelist", "n[3-4]")),
            ("Failed to validate job spec, --gpus < -N", GRES),
            "error",
            None,
        ),
    ],
    ids=[
        "cpus-per-gpu-and-cpus-per-task",
        "per-task-without-tasks",
        "per-socket-without-sockets",
        "mem-per-gpu-without-gpus",
        "per-task-and-total-disagree-with-n",
        "per-task-and-ntasks-per-gpu",
        "fewer-gpus-than-nodes",
        "total-not-a-multiple-of-per-node",
        "tasks-not-a-multiple-of-ntasks-per-gpu",
        "typed-and-untyped-list",
        "alternatives-outside-gres",
        "bad-gres-flags",
        "bad-gpu-bind",
        "bad-map-gpu",
        "types-fewer-than-nodes",
        "total-beside-per-task-without-tasks",
        "total-beside-per-task-tasks-differ",
        "list-below-its-node-count",
        "list-with-untyped-per-node",
        "list-of-two-node-counts",
        "list-node-count-beyond-N",
        "list-second-type-beyond-N",
        "untyped-list-last-below-nodes",
        "fewer-gpus-than-listed-nodes",
    ],
)
def test_bad_gpu_options_are_refused_in_slurms_words(
    options: tuple[tuple[str, str], ...], lines: tuple[str, ...], level: str, status: int | None
) -> None:
    with pytest.raises(Failure) as caught:
        spec(*options)
    assert (caught.value.lines, caught.value.level, caught.value.status) == (lines, level, status)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((("gres", "gpu:a100:1"), ("gpus", "v100:2")),
         {"gres": "gpu:a100:1", "gpus": 2, "gpu_type": "v100"}),
        ((("gpus-per-node", "a100:1,v100:2"),), {"gres": "gpu:a100:1,gpu:v100:2", "gpus": None}),
        ((("gres", "gpu:a100:1"), ("gpus-per-node", "v100:2")),
         {"gres": "gpu:a100:1,gpu:v100:2", "gpu_type": None}),
        ((("gpus-per-node", "a100:1,v100:1"), ("gpus", "v100:4")),
         {"gres": "gpu:a100:1,gpu:v100:1", "gpus": 4, "gpu_type": "v100"}),
        ((("gres", "gpu:a100:1"), ("gpus-per-task", "v100:1"), ("ntasks", "2")),
         {"gres": "gpu:a100:1", "gpus_per_task": 1, "gpu_type": "v100"}),
        # --gpus of several types, a total of each (TresPerJob=gres:gpu:a100:1,
        # gres:gpu:v100:2; beside TresPerTask=gres:gpu:v100:1)
        ((("gpus", "a100:1,v100:2"),), {"gpus": 1, "gpu_type": "a100", "gpus_also": "v100:2"}),
        ((("gpus", "a100:1"), ("gpus-per-task", "v100:1"), ("ntasks", "2")),
         {"gpus": None, "gpus_per_task": 1, "gpu_type": "v100", "gpus_also": "a100:1"}),
        ((("gpus", "v100:2,a100:2"), ("gpus-per-task", "v100:1")),
         {"gpus": 2, "gpus_per_task": 1, "gpu_type": "v100", "gpus_also": "a100:2",
          "num_tasks": None}),
        ((("gpus", "a100:2,v100:2"), ("nodes", "2")),
         {"gpus": 2, "gpu_type": "a100", "gpus_also": "v100:2", "min_nodes": 2}),
        # a type named again counts once, its last count (TresPerJob keeps the text,
        # the allocation the last: --gpus=1,2 is 2 GPUs, a100:1,v100:1,a100:2 is 2 + 1)
        ((("gpus", "1,2"),), {"gpus": 2, "gpu_type": None, "gpus_also": None}),
        ((("gpus", "a100:2,a100:1"),), {"gpus": 1, "gpu_type": "a100", "gpus_also": None}),
        ((("gpus", "a100:1,v100:1,a100:2"),),
         {"gpus": 2, "gpu_type": "a100", "gpus_also": "v100:1"}),
        ((("gpus", "1,2"), ("nodes", "2")), {"gpus": 2, "min_nodes": 2}),
        ((("gpus-per-node", "a100:1,a100:1"),), {"gres": "gpu:a100:1"}),
        # beside GPUs per node, per socket or --ntasks-per-gpu
        ((("gpus", "a100:2,v100:2"), ("gpus-per-node", "a100:1")),
         {"gres": "gpu:a100:1", "gpus": 2, "gpu_type": "a100", "gpus_also": "v100:2"}),
        ((("gpus", "a100:1,v100:2"), ("gpus-per-node", "v100:1")),
         {"gres": "gpu:v100:1", "gpus": 1, "gpu_type": "a100", "gpus_also": "v100:2"}),
        ((("gpus", "a100:1,v100:2"), ("gpus-per-socket", "v100:1"), ("sockets-per-node", "2")),
         {"gpus": 2, "gpus_per_socket": 1, "gpu_type": "v100", "gpus_also": "a100:1"}),
        ((("gpus", "a100:2,v100:2"), ("gpus-per-node", "v100:1"), ("nodes", "1-3")),
         {"gres": "gpu:v100:1", "gpus": 2, "gpus_also": "v100:2", "min_nodes": 1}),
        ((("gpus", "a100:1,v100:2"), ("ntasks-per-gpu", "2")),
         {"gpus": 1, "gpu_type": "a100", "gpus_also": "v100:2", "ntasks_per_gpu": 2}),
    ],
    ids=["per-node-and-total", "per-node-list", "gres-and-per-node", "total-of-one-type",
         "per-node-and-per-task", "total-list", "total-beside-per-task", "list-with-per-task",
         "list-over-two-nodes", "untyped-list-last-wins", "type-twice-last-wins",
         "type-again-after-another", "untyped-list-over-two-nodes", "per-node-type-twice",
         "list-with-per-node", "list-with-per-node-of-another", "list-with-per-socket",
         "list-in-a-node-range", "list-with-ntasks-per-gpu"],
)  # fmt: skip
def test_gpus_of_two_types_are_sent_per_type(
    options: tuple[tuple[str, str], ...], expected: dict[str, Any]
) -> None:
    """Measured on sbatch 22.05 with a100 and v100 nodes (test_gpu_semantics.py)."""
    built = spec(*options)
    assert {key: built.get(key) for key in expected} == expected
    for key, variable in (("gpus-per-node", "SLURM_GPUS_PER_NODE"), ("gpus", "SLURM_GPUS")):
        if key in dict(options):  # as given
            assert built["environment"][variable] == dict(options)[key]


@pytest.mark.parametrize(
    ("options", "lines"),
    [
        ((("gres", "gpu:1"), ("gpus", "v100:2")),
         ("Invalid GRES specification (with and without type identification)",)),
        ((("gres", "gpu:a100:1"), ("gpus", "2")),
         ("Invalid GRES specification (with and without type identification)",)),
        ((("gres", "gpu:a100:1"), ("gpus-per-node", "2")),
         ("Invalid GRES specification (with and without type identification)",)),
        ((("gpus-per-node", "a100:1,2"),),
         ("Invalid GRES specification (with and without type identification)",)),
        ((("gres", "gpu:a100:1"), ("gpus-per-socket", "1"), ("sockets-per-node", "2")),
         ("Invalid GRES specification (with and without type identification)",)),
        ((("gpus", "v100:3"), ("gpus-per-node", "a100:1,v100:2")),
         ("Failed to validate job spec, --gpus is not multiple of --gres=gpu/--gpus-per-node",
          GRES)),
    ],
    ids=["untyped-per-node-typed-total", "typed-per-node-untyped-total",
         "typed-gres-untyped-per-node", "typed-and-untyped-per-node", "untyped-per-socket",
         "total-not-a-multiple-of-its-type"],
)  # fmt: skip
def test_gpus_with_and_without_a_type_are_refused(
    options: tuple[tuple[str, str], ...], lines: tuple[str, ...]
) -> None:
    with pytest.raises(Failure) as caught:
        spec(*options)
    assert (caught.value.lines, caught.value.status) == (lines, None)
