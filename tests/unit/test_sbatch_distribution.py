"""sbatch -m/--distribution: sent as given, told to the job as Slurm 22.05's sbatch
tells it (SLURM_DISTRIBUTION, SLURM_DIST_PLANESIZE), its second level taking the
job's CPUs, and refused in Slurm's words.

Each row was run with sbatch 22.05 on this machine (``tests/unit/test_cpupick.py``
says how) and the job's environment printed: ``-m *:block`` showed
``SLURM_DISTRIBUTION=block:block``, and so on.
"""

from __future__ import annotations

import pytest

from cli.failure import Failure
from controller.admission import admit
from controller.jobspec import JobSpec
from corral import config, errors
from corral.distribution import job_text
from corral.errors import SlurmError
from tests.unit import test_gpu_semantics as table
from tests.unit.test_gpu_semantics import USER, place
from tests.unit.test_sbatch_gpus import spec

# The GPU table's cluster (nodes of 2 sockets x 4 cores), a fixture.
table_conf = table.conf


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("block:block", "block:block"),
        ("*:block", "block:block"),
        ("cyclic:*", "cyclic:cyclic"),
        ("*:*:block", "block:cyclic:block"),
        ("block:block:*", "block:block:block"),
        ("block:fcyclic:*", "block:fcyclic:fcyclic"),
        ("CYCLIC", "cyclic"),
        ("block,Pack", "block,pack"),
        ("cyclic,NoPack", "cyclic,nopack"),
        ("plane=2", "plane"),
        ("arbitrary", "arbitrary"),
    ],
)
def test_slurm_distribution_reads_as_slurms_sbatch_sets_it(given: str, shown: str) -> None:
    assert job_text(given) == shown


def test_the_distribution_goes_to_the_job_and_its_environment() -> None:
    sent = spec(("distribution", "*:block"))
    assert sent["distribution"] == "*:block"
    assert sent["environment"]["SLURM_DISTRIBUTION"] == "block:block"
    plane = spec(("distribution", "plane=2"), ("ntasks", "2"))
    assert plane["environment"]["SLURM_DIST_PLANESIZE"] == "2"
    assert "distribution" not in spec() and "SLURM_DISTRIBUTION" not in spec()["environment"]


@pytest.mark.parametrize(
    ("options", "words", "status"),
    [
        ((("distribution", "bogus"),), ("Invalid --distribution specification",), 255),
        ((("distribution", "*"),), ("Invalid --distribution specification",), 255),
        (
            (("distribution", "arbitrary"),),
            (
                "With Arbitrary distribution you need to specify a nodelist or hostfile "
                "with the -w option",
            ),
            None,
        ),
    ],
    ids=["unknown", "bare-star", "arbitrary-without-nodes"],
)
def test_sbatch_refuses_as_slurm_does(
    options: tuple[tuple[str, str], ...], words: tuple[str, ...], status: int | None
) -> None:
    with pytest.raises(Failure) as caught:
        spec(*options)
    assert caught.value.lines == words
    assert caught.value.status == status


def test_arbitrary_with_nodes_is_sent() -> None:
    assert spec(("distribution", "arbitrary"), ("nodelist", "n1"))["distribution"] == "arbitrary"


def test_the_controller_refuses_a_distribution_slurm_would_not_take(
    table_conf: config.SlurmConfig,
) -> None:
    with pytest.raises(SlurmError) as caught:
        admit(JobSpec(script="#!/bin/sh\n", distribution="plane=x"), USER, table_conf, {}, 1, 0, 0)
    assert caught.value.code == errors.ESLURM_BAD_DIST


@pytest.mark.parametrize(
    ("distribution", "ids"),
    [
        ("", (0, 1, 4)),
        ("block", (0, 1, 4)),
        ("block:cyclic", (0, 1, 4)),
        ("block:fcyclic", (0, 1, 4)),
        ("block:block", (0, 1, 2)),
        ("cyclic:block", (0, 1, 2)),
        ("plane=2", (0, 1, 2)),
    ],
)
def test_the_second_level_takes_the_jobs_cpus(
    table_conf: config.SlurmConfig, distribution: str, ids: tuple[int, ...]
) -> None:
    start = place(table_conf, num_tasks=3, distribution=distribution)
    assert start.cpu_ids == (ids,)
