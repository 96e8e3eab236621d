"""The GPU and network topology fields of a job description, as sbatch's options.

slurmrestd's job description (data_parser v0.0.40 to v0.0.42, JOB_DESC_MSG) carries
a job's GPU request as TRES strings: ``tres_per_job`` (sbatch's --gpus),
``tres_per_socket`` (--gpus-per-socket), ``tres_per_task`` (--gpus-per-task),
``cpus_per_tres`` (--cpus-per-gpu; ``tres_per_job`` may list several types,
``gres/gpu:a100:1,gres/gpu:v100:2``, as --gpus does), ``memory_per_tres`` (--mem-per-gpu),
``tres_bind`` (--gpu-bind) and ``ntasks_per_tres`` (--ntasks-per-gpu), beside
``sockets_per_node``; and its topology request as ``required_switches`` and
``wait_for_switch`` (--switches=N@time) and ``segment_size`` (--segment, v0.0.41
on). ``flags`` carries --gres-flags as Slurm's job flags GRES_BINDING_ENFORCED and
GRES_BINDING_DISABLED (v0.0.40 on; no other job flag is taken from a description), and
Corral's ``topology_level`` its --topology-level (docs/topology.md). Each is read into
the ``JobSpec`` field sbatch fills for the option, and the
whole is put through sbatch's own checks (``cli.sbatch.gpuopts.check``), so a REST
client is refused what sbatch refuses, in the same words; the controller then
checks it again as it does for every client (controller/gpuspec.py, topology).
Only ``gres/gpu`` is a TRES Corral places per job, socket or task: any other is
refused, not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cli.failure import Failure
from cli.sbatch import gpuopts, settings
from corral import errors
from corral.errors import SlurmError

__all__ = ["NAMES", "spec_fields"]

#: tres_per_* field -> the sbatch field its ``gres/gpu[:type]:count`` fills.
_COUNTS = {
    "tres_per_job": "gpus",
    "tres_per_socket": "gpus_per_socket",
    "tres_per_task": "gpus_per_task",
}
#: TRES=# list field -> the sbatch field its ``gres/gpu:N`` fills.
_PER_GPU = {"cpus_per_tres": "cpus_per_gpu", "memory_per_tres": "mem_per_gpu"}

#: Slurm's job flag -> the --gres-flags word it stands for.
_GRES_FLAGS = {
    "GRES_BINDING_ENFORCED": "enforce-binding",
    "GRES_BINDING_DISABLED": "disable-binding",
}

#: Every description field this module reads.
NAMES = frozenset(
    {
        *_COUNTS,
        *_PER_GPU,
        "tres_bind",
        "ntasks_per_tres",
        "sockets_per_node",
        "required_switches",
        "wait_for_switch",
        "segment_size",
        "flags",
        "topology_level",
    }
)

#: The spec fields sbatch's checks read beside the GPU options.
_CONTEXT = ("num_tasks", "min_nodes", "ntasks_per_node", "cpus_per_task", "gres")


def _unsupported(name: str, text: str, what: str) -> SlurmError:
    return SlurmError(
        errors.ESLURM_NOT_SUPPORTED, f"job.{name}={text[:64]} is not supported: {what}"
    )


def _gpu_item(name: str, text: str, what: str = "only one gres/gpu TRES is") -> str:
    """The part after ``gres/gpu`` of a one-item TRES list (``gres/gpu:a100:2`` ->
    ``a100:2``); Slurm's older ``gres:gpu`` is read too."""
    items = [item for item in text.split(",") if item]
    if len(items) != 1 or items[0].split(":")[0] not in ("gres/gpu", "gres"):
        raise _unsupported(name, text, what)
    item = items[0].removeprefix("gres/").removeprefix("gres:")
    if item != "gpu" and not item.startswith("gpu:"):
        raise _unsupported(name, text, what)
    return item.removeprefix("gpu").removeprefix(":")


def _count(name: str, text: str) -> tuple[str, int]:
    """``gres/gpu[:type][:count]`` as sbatch reads ``[type:]count`` (a bare type: 1)."""
    rest = _gpu_item(name, text)
    return gpuopts.gpu_count(f"job.{name}", rest or "1")


def _totals(text: str) -> dict[str, Any]:
    """``tres_per_job``: a comma list of ``gres/gpu[:type][:count]`` read as sbatch reads
    ``--gpus=a100:1,v100:2`` (``gpuopts.job_counts``: a total of each type); a list
    also as given (``gpus_listed``, what the job's TresPerJob shows)."""
    only = "only gres/gpu TRES are"
    items = [item for item in text.split(",") if item] or [text]
    counts = ",".join(_gpu_item("tres_per_job", item, only) or "1" for item in items)
    return {
        **gpuopts.job_counts("job.tres_per_job", counts),
        **gpuopts.list_texts({"gpus": counts}),
    }


def _per_gpu(name: str, text: str) -> int:
    """``gres/gpu:N`` of a semicolon TRES=# list (cpus_per_tres, memory_per_tres)."""
    items = [item for item in text.split(";") if item]
    number = _gpu_item(name, items[0]) if len(items) == 1 else ""
    if not number.isdigit():
        raise _unsupported(name, text, "only gres/gpu:N is")
    return int(number)


def _bind(text: str) -> str:
    """``tres_bind``: ``gres/gpu:closest`` (Slurm 23.02 on) or ``gpu:closest``, checked
    as sbatch checks --gpu-bind."""
    value = text.removeprefix("gres/")
    if not value.startswith("gpu:"):
        raise _unsupported("tres_bind", text, "only gres/gpu binding is")
    bind = value.removeprefix("gpu:")
    if not gpuopts.bind_valid(bind):
        raise SlurmError(errors.EINVAL, f"Invalid --gpu-bind argument: gpu:{bind[:64]}")
    return bind


def _gres_flags(flags: list[str]) -> str:
    """``flags``: Slurm's two GRES binding flags as --gres-flags' word ("" for none). Any
    other job flag is refused, not dropped: the rest are the controller's own marks or
    change placement in ways Corral does not implement."""
    words = set(flags)
    other = sorted(words - set(_GRES_FLAGS))
    if other:
        raise _unsupported(
            "flags", other[0], "only GRES_BINDING_ENFORCED and GRES_BINDING_DISABLED are"
        )
    if len(words) > 1:
        raise SlurmError(
            errors.EINVAL,
            "job.flags: GRES_BINDING_ENFORCED and GRES_BINDING_DISABLED exclude each other",
        )
    return _GRES_FLAGS[words.pop()] if words else ""


def _number(value: Any) -> int | None:
    """An optional number as given (None when unset or infinite)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        return int(value.get("number", 0))
    return int(value)


def _gpu_options(desc: Mapping[str, Any]) -> dict[str, Any]:
    """The description's GPU fields as sbatch's option fields (``cli.sbatch.settings``)."""
    fields: dict[str, Any] = {}
    for name, field in _COUNTS.items():
        if name == "tres_per_job" and name in desc:
            fields.update(_totals(desc[name]))
        elif name in desc:
            fields[field] = _count(name, desc[name])
    for name, field in _PER_GPU.items():
        if name in desc:
            fields[field] = _per_gpu(name, desc[name])
    if "tres_bind" in desc:
        fields["gpu_bind"] = _bind(desc["tres_bind"])
    if "flags" in desc:
        flags = _gres_flags(desc["flags"])
        if flags:
            fields["gres_flags"] = flags
    if desc.get("ntasks_per_tres"):
        fields["ntasks_per_gpu"] = desc["ntasks_per_tres"]
    sockets = _number(desc.get("sockets_per_node", {"set": False}))
    if sockets:
        fields["sockets_per_node"] = sockets
    return fields


def _topology(desc: Mapping[str, Any]) -> dict[str, Any]:
    """``required_switches``, ``wait_for_switch``, ``segment_size`` and
    ``topology_level`` as --switches, --segment and --topology-level fill the spec (an
    unset number asks for nothing; a level is checked by sbatch's own parser)."""
    spec: dict[str, Any] = {}
    switches = _number(desc.get("required_switches", {"set": False}))
    if switches:
        spec["switches"] = switches
    if "wait_for_switch" in desc:
        spec["switch_wait"] = desc["wait_for_switch"]
    segment = _number(desc.get("segment_size", {"set": False}))
    if segment:
        spec["segment"] = segment
    if "topology_level" in desc:
        spec.update(settings.SETTERS["topology-level"](desc["topology_level"]))
    return spec


def spec_fields(desc: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``JobSpec`` fields of ``desc``'s GPU and topology fields, checked with the
    rest of the ``spec`` as sbatch checks its options; SlurmError with sbatch's words
    when they are refused."""
    try:
        options = _gpu_options(desc)
        listed = {key: options.pop(key) for key in ("gpus_listed",) if key in options}
        if options:
            gpuopts.check({**{k: spec[k] for k in _CONTEXT if k in spec}, **options})
    except Failure as failure:
        raise SlurmError(errors.ESLURM_INVALID_GRES, failure.lines[0]) from None
    try:
        topology = _topology(desc)
    except Failure as failure:
        raise SlurmError(errors.EINVAL, failure.lines[0]) from None
    return {**gpuopts.spec_fields(options), **listed, **topology}
