"""A REST job description's GPU and topology fields (``flags``' GRES_BINDING_* as
--gres-flags, Corral's ``topology_level``) become the JobSpec fields sbatch's
options fill (restd/gpufields.py), refused where sbatch refuses them (issue 18)."""

from __future__ import annotations

from typing import Any

import pytest

from corral import errors
from corral.errors import SlurmError
from restd.jobs import spec_from_description

SCRIPT = "#!/bin/sh\ntrue\n"
#: The spec fields the GPU and topology fields fill.
GPU_FIELDS = (
    "gpus",
    "gpus_per_socket",
    "gpus_per_task",
    "gpu_type",
    "gpus_also",
    "gpus_listed",
    "cpus_per_gpu",
    "mem_per_gpu",
    "ntasks_per_gpu",
    "gpu_bind",
    "sockets_per_node",
    "switches",
    "switch_wait",
    "segment",
    "gres_flags",
    "topology_required",
    "topology_preferred",
)


def _spec(**fields: Any) -> dict[str, Any]:
    spec = spec_from_description({"environment": ["A=1"], **fields}, SCRIPT, "/h", "restd", [])
    return {key: spec[key] for key in GPU_FIELDS if key in spec}


@pytest.mark.parametrize(
    ("desc", "expected"),
    [
        ({"tres_per_job": "gres/gpu:a100:4"}, {"gpus": 4, "gpu_type": "a100"}),
        ({"tres_per_job": "gres:gpu:2"}, {"gpus": 2}),
        ({"tres_per_job": "gres/gpu"}, {"gpus": 1}),
        ({"tres_per_task": "gres/gpu:1", "tasks": 4}, {"gpus_per_task": 1}),
        ({"tres_per_socket": "gres/gpu:2", "sockets_per_node": 2},
         {"gpus_per_socket": 2, "sockets_per_node": 2}),
        ({"tres_per_job": "gres/gpu:2", "cpus_per_tres": "gres/gpu:6",
          "memory_per_tres": "gres/gpu:8192"},
         {"gpus": 2, "cpus_per_gpu": 6, "mem_per_gpu": 8192}),
        ({"tres_per_job": "gres/gpu:2", "tres_bind": "gres/gpu:closest"},
         {"gpus": 2, "gpu_bind": "closest"}),
        ({"tres_per_job": "gres/gpu:2", "tres_bind": "gpu:map_gpu:0,1"},
         {"gpus": 2, "gpu_bind": "map_gpu:0,1"}),
        ({"tres_per_job": "gres/gpu:2", "ntasks_per_tres": 2}, {"gpus": 2, "ntasks_per_gpu": 2}),
        ({"required_switches": 2, "wait_for_switch": 600}, {"switches": 2, "switch_wait": 600}),
        ({"required_switches": {"set": False, "infinite": False, "number": 0}}, {}),
        ({"segment_size": {"set": True, "infinite": False, "number": 4}}, {"segment": 4}),
        ({"flags": ["GRES_BINDING_ENFORCED"], "tres_per_job": "gres/gpu:2"},
         {"gres_flags": "enforce-binding", "gpus": 2}),
        ({"flags": ["GRES_BINDING_DISABLED", "GRES_BINDING_DISABLED"]},
         {"gres_flags": "disable-binding"}),
        ({"flags": []}, {}),
        ({"topology_level": "1"}, {"topology_required": 1}),
        ({"topology_level": "2:0"}, {"topology_required": 2, "topology_preferred": 0}),
        ({"topology_level": ":1"}, {"topology_preferred": 1}),
        # a total of another type beside GPUs per task, as Slurm takes it
        ({"tres_per_job": "gres/gpu:a100:2", "tres_per_task": "gres/gpu:v100:1", "tasks": 2},
         {"gpus_per_task": 1, "gpu_type": "v100", "gpus_also": "a100:2"}),
        # a list of totals, as sbatch's --gpus=a100:1,v100:2 (a type named again: the
        # last count, as Slurm 22.05 keeps it)
        ({"tres_per_job": "gres/gpu:a100:1,gres/gpu:v100:2"},
         {"gpus": 1, "gpu_type": "a100", "gpus_also": "v100:2",
          "gpus_listed": "a100:1,v100:2"}),
        ({"tres_per_job": "gres/gpu:a100:1,gres/gpu:v100:2,gres/gpu:a100:3"},
         {"gpus": 3, "gpu_type": "a100", "gpus_also": "v100:2",
          "gpus_listed": "a100:1,v100:2,a100:3"}),
        ({"tres_per_job": "gres/gpu:1,gres/gpu:2"}, {"gpus": 2, "gpus_listed": "1,2"}),
        ({"tres_per_job": "gres/gpu:a100:1,gres/gpu:v100:2", "ntasks_per_tres": 2},
         {"gpus": 1, "gpu_type": "a100", "gpus_also": "v100:2", "ntasks_per_gpu": 2,
          "gpus_listed": "a100:1,v100:2"}),
    ],
    ids=["gpus typed", "old gres: spelling", "bare gpu is one", "per task", "per socket",
         "cpus and memory per gpu", "bind", "bind without gres/", "tasks per gpu", "switches",
         "unset switches ask none", "segment", "binding enforced", "binding disabled",
         "no flags", "required level", "both levels", "preferred level", "total of another type",
         "list of totals", "type named twice", "untyped list", "list with tasks per gpu"],
)  # fmt: skip
def test_gpu_and_topology_fields_fill_sbatchs_spec_fields(
    desc: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert _spec(**desc) == expected


@pytest.mark.parametrize(
    ("desc", "code", "words"),
    [
        ({"tres_per_job": "cpu=4"}, errors.ESLURM_NOT_SUPPORTED,
         "job.tres_per_job=cpu=4 is not supported: only gres/gpu TRES are"),
        ({"tres_per_task": "gres/gpu:1,gres/nic:1"}, errors.ESLURM_NOT_SUPPORTED,
         "job.tres_per_task=gres/gpu:1,gres/nic:1 is not supported: only one gres/gpu TRES is"),
        ({"cpus_per_tres": "gres/gpu:2;license/x:1"}, errors.ESLURM_NOT_SUPPORTED,
         "job.cpus_per_tres=gres/gpu:2;license/x:1 is not supported: only gres/gpu:N is"),
        ({"tres_bind": "gres/gpu:bogus"}, errors.EINVAL, "Invalid --gpu-bind argument: gpu:bogus"),
        ({"tres_per_socket": "gres/gpu:2"}, errors.ESLURM_INVALID_GRES,
         "--gpus-per-socket option requires --sockets-per-node specification"),
        ({"tres_per_task": "gres/gpu:1", "tasks": 2, "ntasks_per_tres": 1},
         errors.ESLURM_INVALID_GRES,
         "--gpus-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU"),
        ({"tres_per_job": "gres/gpu:1", "cpus_per_tres": "gres/gpu:2", "cpus_per_task": 2},
         errors.ESLURM_INVALID_GRES, "--cpus-per-gpu is mutually exclusive with --cpus-per-task"),
        ({"memory_per_tres": "gres/gpu:100"}, errors.ESLURM_INVALID_GRES,
         "Requested mem_per_tres=gres:gpu:100 but did not request any GPU."),
        ({"tres_per_socket": "gres/gpu:a100:1", "sockets_per_node": 2,
          "tres_per_task": "gres/gpu:v100:1", "tasks": 2},
         errors.ESLURM_INVALID_GRES, "GPUs of several types (a100, v100) are not supported"),
        ({"tres_per_job": "gres/gpu:a100:1,gres/gpu:2"}, errors.ESLURM_INVALID_GRES,
         "Invalid GRES specification (with and without type identification)"),
        ({"tres_per_job": "gres/gpu:a100:2,gres/gpu:v100:1", "minimum_nodes": 2},
         errors.ESLURM_INVALID_GRES, "Failed to validate job spec, --gpus < -N"),
        ({"tres_per_job": "gres/gpu:a100:1,gres/nic:1"}, errors.ESLURM_NOT_SUPPORTED,
         "job.tres_per_job=gres/nic:1 is not supported: only gres/gpu TRES are"),
        ({"flags": ["SPREAD_JOB"]}, errors.ESLURM_NOT_SUPPORTED,
         "job.flags=SPREAD_JOB is not supported: "
         "only GRES_BINDING_ENFORCED and GRES_BINDING_DISABLED are"),
        ({"flags": ["GRES_BINDING_ENFORCED", "GRES_BINDING_DISABLED"]}, errors.EINVAL,
         "job.flags: GRES_BINDING_ENFORCED and GRES_BINDING_DISABLED exclude each other"),
        ({"topology_level": "x"}, errors.EINVAL, "Invalid --topology-level specification"),
        ({"topology_level": "1:"}, errors.EINVAL, "Invalid --topology-level specification"),
    ],
    ids=["not a gpu", "two tres", "other tres per gpu", "bad bind", "socket without sockets",
         "per task and tasks per gpu", "cpus per gpu and per task", "memory without gpus",
         "two types", "list typed and untyped", "list below -N", "list with another tres",
         "other job flag", "both bindings", "not a level", "empty preferred"],
)  # fmt: skip
def test_what_sbatch_refuses_is_refused_in_its_words(
    desc: dict[str, Any], code: int, words: str
) -> None:
    with pytest.raises(SlurmError) as refused:
        _spec(**desc)
    assert (refused.value.code, str(refused.value)) == (code, words)
