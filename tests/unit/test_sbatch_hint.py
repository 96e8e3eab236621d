"""sbatch's ``--hint`` and ``--threads-per-core`` (``cli/sbatch/hintopts.py``), as Slurm
22.05's sbatch took them (measured beside ``tests/unit/test_threads.py``): what the job
is sent, what its environment says, and the refusals in Slurm's words."""

from __future__ import annotations

import pytest

from cli.failure import Failure
from cli.sbatch.hintopts import HELP
from tests.unit.test_sbatch_gpus import spec


@pytest.mark.parametrize(
    ("options", "threads", "env"),
    [
        ((("hint", "nomultithread"),), 1, {"SLURM_HINT": "nomultithread"}),
        ((("hint", "compute_bound"),), 1, {"SLURM_HINT": "compute_bound"}),
        ((("hint", "memory_bound"),), 1, {"SLURM_HINT": "memory_bound"}),
        ((("hint", "NoMultiThread"),), 1, {"SLURM_HINT": "NoMultiThread"}),
        ((("hint", "multithread"),), 0, {"SLURM_HINT": "multithread"}),
        ((("threads-per-core", "1"),), 1, {}),
        ((("threads-per-core", "1"), ("hint", "nomultithread")), 1, {}),  # the hint dropped
        ((("hint", "multithread"), ("threads-per-core", "1")), 1, {}),
    ],
    ids=[
        "nomultithread",
        "compute-bound",
        "memory-bound",
        "any-case",
        "multithread-all-threads",
        "threads-per-core",
        "threads-per-core-drops-the-hint",
        "threads-per-core-over-multithread",
    ],
)
def test_the_job_is_sent_its_threads_per_core_and_told_its_hint(
    options: tuple[tuple[str, str], ...], threads: int, env: dict[str, str]
) -> None:
    sent = spec(*options)
    assert sent.get("threads_per_core", 0) == threads
    if threads:
        env = {**env, "SLURM_THREADS_PER_CORE": str(threads)}
    shown = {k: v for k, v in sent["environment"].items() if k in ("SLURM_HINT", *env)}
    assert shown == env


def test_without_either_nothing_is_sent() -> None:
    sent = spec()
    assert "threads_per_core" not in sent
    assert not {"SLURM_HINT", "SLURM_THREADS_PER_CORE"} & set(sent["environment"])


@pytest.mark.parametrize(
    ("options", "words", "status"),
    [
        (
            (("hint", "bogus"),),
            ('unrecognized --hint argument "bogus", see --hint=help',),
            1,
        ),
        ((("hint", ""),), ('unrecognized --hint argument "", see --hint=help',), 1),
        (
            (("threads-per-core", "0"),),
            ('Invalid numeric value "0" for --threads-per-core.',),
            1,
        ),
    ],
    ids=["unknown-hint", "empty-hint", "zero-threads"],
)
def test_sbatch_refuses_as_slurm_does(
    options: tuple[tuple[str, str], ...], words: tuple[str, ...], status: int
) -> None:
    with pytest.raises(Failure) as caught:
        spec(*options)
    assert caught.value.lines == words
    assert caught.value.status == status


def test_hint_help_lists_the_hints_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Failure) as caught:
        spec(("hint", "help"))
    assert caught.value.status == 1 and caught.value.lines == ()
    assert capsys.readouterr().out == HELP + "\n"
