"""GPU options given as a comma list: counted as Slurm counts them (a type once, its
last count), shown as given. Measured on Slurm 22.05 (Debian's slurm-wlm 22.05.8,
``slurmd -N`` nodes n1, n3 ``gpu:a100:2,gpu:v100:2`` and n2 ``gpu:a100:4`` of
tests/unit/test_gpu_semantics.py's typed cluster): ``sbatch --gpus=1,2`` runs with
``gpu:a100:2(IDX:0-1)`` and ``scontrol show job`` prints
``TresPerJob=gres:gpu:1,gres:gpu:2``; ``--gpus=a100:1,v100:1,a100:2``
``TresPerJob=gres:gpu:a100:1,gres:gpu:v100:1,gres:gpu:a100:2``; ``--gpus-per-node=1,2``
``TresPerNode=gres:gpu:1,gres:gpu:2`` (Corral writes 24.11's ``gres/gpu``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli.sbatch import gpuopts
from controller import views
from controller.admission import admit
from controller.jobspec import JobSpec
from controller.model import Job
from corral import config, errors
from corral.errors import SlurmError
from tests.unit.scenario import NOW
from tests.unit.test_gpu_semantics import TYPED_CONF, TYPED_GRES_CONF, USER


@pytest.fixture(scope="module")
def typed_conf(tmp_path_factory: pytest.TempPathFactory) -> config.SlurmConfig:
    where: Path = tmp_path_factory.mktemp("gl")
    (where / "slurm.conf").write_text(TYPED_CONF)
    (where / "gres.conf").write_text(TYPED_GRES_CONF)
    return config.load(str(where / "slurm.conf"))


def admitted(conf: config.SlurmConfig, **fields: Any) -> Job:
    return admit(JobSpec(script="#!/bin/sh\n", **fields), USER, conf, {}, 1, NOW, 0).job


def test_sbatch_sends_a_list_as_given() -> None:
    texts = {"gpus": "1,2", "gpus-per-node": "a100:1,v100:2"}
    assert gpuopts.list_texts(texts) == {
        "gpus_listed": "1,2",
        "gpus_per_node_listed": "a100:1,v100:2",
    }
    assert gpuopts.list_texts({"gpus": "2", "gpus-per-node": "a100:1"}) == {}


def test_gpus_list_shows_as_given(typed_conf: config.SlurmConfig) -> None:
    job = admitted(typed_conf, gpus=2, gpus_listed="1,2")
    assert job.gpus_per_job == 2
    assert views.gpu_request(job, typed_conf).tres_per_job == "gres/gpu:1,gres/gpu:2"


def test_typed_list_shows_every_item(typed_conf: config.SlurmConfig) -> None:
    job = admitted(
        typed_conf, gpus=2, gpu_type="a100", gpus_also="v100:1", gpus_listed="a100:1,v100:1,a100:2"
    )
    assert views.gpu_request(job, typed_conf).tres_per_job == (
        "gres/gpu:a100:1,gres/gpu:v100:1,gres/gpu:a100:2"
    )


def test_without_a_list_the_counts_show(typed_conf: config.SlurmConfig) -> None:
    job = admitted(typed_conf, gpus=2, gpu_type="a100", gpus_also="v100:1")
    assert views.gpu_request(job, typed_conf).tres_per_job == "gres/gpu:a100:2,gres/gpu:v100:1"


def test_gpus_per_node_list_shows_as_given(typed_conf: config.SlurmConfig) -> None:
    job = admitted(typed_conf, gres="gpu:2", gpus_per_node_listed="1,2")
    assert views.tres_per_node(job) == "gres/gpu:1,gres/gpu:2"
    plain = admitted(typed_conf, gres="gpu:2")
    assert views.tres_per_node(plain) == "gres/gpu:2"
    both = admitted(typed_conf, gres="gpu:a100:1,gpu:v100:2", gpus_per_node_listed="v100:1,v100:2")
    assert views.tres_per_node(both) == "gres/gpu:a100:1,gres/gpu:v100:1,gres/gpu:v100:2"


@pytest.mark.parametrize(
    "fields",
    [
        {"gpus": 3, "gpus_listed": "1,2"},  # counts 2, not 3
        {"gpus": 2, "gpus_listed": "2"},  # no list
        {"gpus": 2, "gpus_listed": "1,x"},
        {"gpus": 2, "gpus_listed": "gres/gpu:1,gres/gpu:2"},
        {"gpus": 2, "gpu_type": "a100", "gpus_listed": "a100:1,v100:1,a100:2"},  # no v100
        {"gres": "gpu:1", "gpus_per_node_listed": "1,2"},
        {"gpus_listed": "1,2"},  # a list, but no GPUs asked
    ],
)
def test_a_list_that_counts_otherwise_is_refused(
    typed_conf: config.SlurmConfig, fields: dict[str, Any]
) -> None:
    with pytest.raises(SlurmError) as caught:
        admitted(typed_conf, **fields)
    assert caught.value.code == errors.ESLURM_INVALID_GRES
