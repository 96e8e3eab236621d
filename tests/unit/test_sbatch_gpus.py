"""sbatch's --gpus options as GRES per node, CPUs and memory."""

from __future__ import annotations

from typing import Any

import pytest

from cli.sbatch.settings import Settings
from cli.sbatch.spec import Script, build


def spec(*options: tuple[str, str]) -> dict[str, Any]:
    settings = Settings()
    for key, value in options:
        settings.apply(key, value, "command line")
    return build(
        settings, Script("#!/bin/sh\n", None, [], True), cwd="/tmp", environ={}, command_line=[]
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((("gpus", "2"),), {"gres": "gpu:2"}),
        ((("gpus-per-node", "h100:4"), ("nodes", "2")), {"gres": "gpu:h100:4", "min_nodes": 2}),
        ((("gpus", "gpu:a100:1"),), {"gres": "gpu:a100:1"}),
        (
            (("gpus", "3"), ("nodes", "2"), ("mem-per-gpu", "10G")),
            {"gres": "gpu:2", "mem_per_node": 20480},
        ),
        (
            (("gpus-per-task", "1"), ("ntasks", "4"), ("nodes", "2"), ("cpus-per-gpu", "8")),
            {"gres": "gpu:2", "cpus_per_task": 8},
        ),
        ((("gres", "craynetwork:1"), ("gpus", "1")), {"gres": "craynetwork:1,gpu:1"}),
    ],
)
def test_gpu_options_become_gres_per_node(
    options: tuple[tuple[str, str], ...], expected: dict[str, Any]
) -> None:
    built = spec(*options)
    assert {key: built.get(key) for key in expected} == expected
