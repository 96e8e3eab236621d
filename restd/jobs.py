"""Jobs in slurmrestd's shapes: the job records of ``GET /jobs``, and the job
descriptions of ``POST /job/submit`` and ``POST /job/{id}``.

A record is built from the controller's ``JobInfo`` by ``corral.jobinfo.REST``
(which field shows under which key), each value read by attribute access on the
protobuf message and, where slurmrestd's shape differs from the field's, written
as a converter expression (``SHOWN_AS``, ``FROM_JOB``): listing 10,000 jobs
must stay well under half a second, so there is no generic message-to-dict
step, and ``job_info`` is generated from the table once, at import. Descriptions are checked against
their schema first (unknown fields and wrong types are refused), then turned
into the ``JobSpec`` sbatch would send, or the ``scontrol update`` words the
controller already understands.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from cli.options import REFUSED, WARNED
from cli.sacct.jsonrecords import exit_code
from corral import errors, hostlist, jobinfo, mailtype
from corral.errors import SlurmError
from restd import gpufields
from restd.jobfields import BY_NAME, DESCRIPTION
from restd.schema import (
    UNLIMITED,
    UNSET,
    array,
    boolean,
    integer,
    no_val,
    obj,
    ref,
    string,
)

__all__ = [
    "DESCRIPTION",
    "JOB_INFO",
    "descriptions",
    "job_info",
    "spec_from_description",
    "updates_from_description",
]

#: The slurmrestd versions served; each answers with its own data_parser.
VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42")


EXIT_CODE = obj(
    {
        "status": array(string()),
        "return_code": no_val(),
        "signal": obj({"id": no_val(), "name": string()}),
    }
)

#: One job of ``GET /jobs`` and ``GET /job/{id}`` (data_parser's JOB_INFO, the fields Corral has).
JOB_INFO = obj(
    {
        "account": string(),
        "accrue_time": no_val(maximum=2**53),
        "array_job_id": no_val(),
        "array_task_id": no_val(),
        "array_max_tasks": no_val(),
        "array_task_string": string(),
        "batch_flag": boolean(),
        "batch_host": string(),
        "cluster": string(),
        "command": string(),
        "comment": string(),
        "container": string("the OCI bundle its batch script runs in"),
        "container_id": string(),
        "cpus": no_val(),
        "cpus_per_task": no_val(),
        "cpus_per_tres": string("gres/gpu:N, as sbatch --cpus-per-gpu"),
        "current_working_directory": string(),
        "dependency": string(),
        "derived_exit_code": EXIT_CODE,
        "eligible_time": no_val(maximum=2**53),
        "end_time": no_val(maximum=2**53),
        "excluded_nodes": string(),
        "exit_code": EXIT_CODE,
        "features": string(),
        "gres_detail": array(string()),
        "group_id": integer(minimum=0),
        "group_name": string(),
        "het_job_id": no_val("the leader's job id in a heterogeneous job, else 0"),
        "het_job_id_set": string("a heterogeneous job's component ids (123-124), else empty"),
        "het_job_offset": no_val("the component's index in its heterogeneous job, else 0"),
        "hold": boolean(),
        "job_id": integer(minimum=0),
        "job_state": array(string(), "the base state, then its flags"),
        "last_sched_evaluation": no_val(maximum=2**53),
        "mail_type": array(string(), "slurmrestd's flag names"),
        "mail_user": string(),
        "maximum_nodes": no_val(),
        "maximum_switch_wait_time": integer(minimum=0, description="seconds"),
        "memory_per_cpu": no_val(maximum=2**53),
        "memory_per_node": no_val(maximum=2**53),
        "memory_per_tres": string("gres/gpu:MiB, as sbatch --mem-per-gpu"),
        "name": string(),
        "nice": integer(),
        "node_count": no_val(),
        "nodes": string(),
        "partition": string(),
        "priority": no_val(),
        "prefer": string(),
        "licenses": string("name:count[,name:count...], as sbatch --licenses"),
        "qos": string(),
        "requeue": boolean(),
        "required_nodes": string(),
        "required_switches": integer(
            minimum=0, description="v0.0.40 and v0.0.41 name it minimum_switches"
        ),
        "reservation": string(),
        "restart_cnt": integer(minimum=0),
        "scheduled_nodes": string(),
        "standard_error": string(),
        "standard_input": string(),
        "standard_output": string(),
        "start_time": no_val(maximum=2**53),
        "state_description": string(),
        "state_reason": string(),
        "submit_time": no_val(maximum=2**53),
        "tasks": no_val(),
        "tasks_per_node": no_val(),
        "tasks_per_tres": no_val(),
        "time_limit": no_val(),
        "time_minimum": no_val(),
        "tres_alloc_str": string(),
        "tres_bind": string("gpu:..., as sbatch --gpu-bind"),
        "tres_per_job": string("gres/gpu[:type]:N, as sbatch --gpus"),
        "tres_per_socket": string("gres/gpu[:type]:N, as sbatch --gpus-per-socket"),
        "tres_per_task": string("gres/gpu[:type]:N, as sbatch --gpus-per-task"),
        "tres_req_str": string(),
        "user_id": integer(minimum=0),
        "user_name": string(),
    }
)


@functools.lru_cache(maxsize=1024)
def _exit_code(status: int, ended: bool) -> dict[str, Any]:
    """exit_code's record, shared between jobs with the same status: records are
    never changed once built, only written out."""
    return exit_code(status, ended)


#: The states of a job that has not ended (its exit code is not shown yet).
_LIVE = ("PENDING", "RUNNING", "SUSPENDED")


# How a ``no_val`` number is written out (restd.schema's ``given``, ``moment``,
# UNSET and UNLIMITED, as expressions over the field's value ``{v}``; ``_v`` holds
# it once read).
_GIVEN = "{{'set': True, 'infinite': False, 'number': {v}}}"
_IF_NONZERO = "({{'set': True, 'infinite': False, 'number': _v}} if (_v := {v}) else UNSET)"
_MOMENT = "({{'set': True, 'infinite': False, 'number': _v}} if (_v := {v}) > 0 else UNSET)"

#: How a field's value is shown, for the ``corral.jobinfo.REST`` fields not shown
#: as they are: an expression over the value ``{v}``, written into ``job_info``.
SHOWN_AS: dict[str, str] = {
    "accrue_time": _MOMENT,
    "eligible_time": _MOMENT,
    "end_time": _MOMENT,
    "last_sched_eval": _MOMENT,
    "start_time": _MOMENT,
    "submit_time": _MOMENT,
    "array_max_tasks": _GIVEN,
    # A heterogeneous job's fields: set even when 0, as slurmrestd shows a plain job's.
    "het_job_id": _GIVEN,
    "het_job_offset": _GIVEN,
    "num_cpus": _GIVEN,
    "cpus_per_task": _GIVEN,
    "num_nodes": _GIVEN,
    "priority": _GIVEN,
    "num_tasks": _GIVEN,
    # Counts and sizes where 0 means not asked for (an array's id, a memory request).
    "array_job_id": _IF_NONZERO,
    "max_nodes": _IF_NONZERO,
    "min_mem_cpu": _IF_NONZERO,
    "min_mem_node": _IF_NONZERO,
    "ntasks_per_node": _IF_NONZERO,
    "ntasks_per_tres": _IF_NONZERO,
    "time_min": _IF_NONZERO,
    "time_limit": "(UNLIMITED if (_v := {v}) < 0"
    " else {{'set': True, 'infinite': False, 'number': _v}})",
    "gres": "([_v] if (_v := {v}) else [])",
    "mail_type": "_mail_flags({v})",
}

#: JOB_INFO keys that read more of the job than their field's value: whether it
#: is set, the job's state, or two fields. Each is an expression over ``job`` (the
#: ``JobInfo``) and ``ended`` (its state is final), written into ``job_info``.
FROM_JOB: dict[str, str] = {
    "array_task_id": "({'set': True, 'infinite': False, 'number': job.array_task_id}"
    " if job.HasField('array_task_id') else UNSET)",
    "derived_exit_code": "_exit_code(job.derived_exit_status, ended)",
    "exit_code": "_exit_code(job.exit_status, ended)",
    "job_state": "[job.state, *job.state_flags]",
    "scheduled_nodes": "(job.sched_nodes if job.state == 'PENDING' else '')",
}


def _compiled() -> Callable[[Any], dict[str, Any]]:
    """``job_info`` written out from ``corral.jobinfo.REST`` once, at import: one dict
    display with each JOB_INFO key, in the table's order, read as its field is, through
    ``SHOWN_AS`` or through ``FROM_JOB``. Generated rather than looped over, because a
    call per key made a cold listing of 10,000 jobs a third slower than the hand-written
    record it replaced, and the first listing after a burst of submissions is that; so
    the converters are expressions, written in place."""
    names: dict[str, Any] = {
        "UNSET": UNSET,
        "UNLIMITED": UNLIMITED,
        "_exit_code": _exit_code,
        "_mail_flags": mailtype.rest_flags,
    }
    items = []
    for field, key in jobinfo.REST.items():
        if not (field.isidentifier() and key.isidentifier()):
            raise ValueError(f"corral.jobinfo.REST: {field!r} -> {key!r} is not a name")
        if key in FROM_JOB:
            items.append(f"{key!r}: {FROM_JOB[key]}")
        elif field in SHOWN_AS:
            items.append(f"{key!r}: " + SHOWN_AS[field].format(v=f"job.{field}"))
        else:
            items.append(f"{key!r}: job.{field}")
    source = (
        "def job_info(job):\n"
        f"    ended = job.state not in {_LIVE!r}\n"
        "    return {" + ", ".join(items) + "}\n"
    )
    exec(compile(source, "<restd.jobs.job_info>", "exec"), names)
    built: Callable[[Any], dict[str, Any]] = names["job_info"]
    return built


#: One ``JobInfo`` as a JOB_INFO record: each ``corral.jobinfo.REST`` field under
#: its key, as it is or through ``SHOWN_AS`` or ``FROM_JOB``, so a field added to
#: the table reaches restd with no change here.
job_info: Callable[[Any], dict[str, Any]] = _compiled()


SUBMIT_REQUEST = obj(
    {
        "job": ref("job_desc_msg"),
        "jobs": array(
            ref("job_desc_msg"),
            "a heterogeneous job: its components, the first the leader, whose script runs",
        ),
        "script": string("v0.0.40 and v0.0.41: the batch script (v0.0.42: job.script)"),
    },
    closed=True,
)


def descriptions(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The job descriptions a submission gives: ``job`` alone, or ``jobs`` (the
    components of a heterogeneous job; one alone is a plain job). Both, or neither,
    or an empty list, is refused with slurmrestd's error for a missing description
    (9002), rather than one taken and the other dropped. Only the first component
    runs a script: one given to a later component is refused, not ignored."""
    given = body.get("jobs")
    if "job" in body and given is not None:
        raise SlurmError(errors.ESLURM_REST_INVALID_JOBS_DESC, "give job or jobs, not both")
    if given is None:
        if "job" not in body:
            raise SlurmError(errors.ESLURM_REST_INVALID_JOBS_DESC, "no job or jobs given")
        return [body["job"]]
    if not given:
        raise SlurmError(errors.ESLURM_REST_INVALID_JOBS_DESC, "jobs is empty")
    for index, later in enumerate(given[1:], 1):
        for field in ("script", "argv"):
            if later.get(field):
                raise SlurmError(
                    errors.EINVAL,
                    f"jobs[{index}].{field}: only the first component of a heterogeneous "
                    "job runs a script",
                )
    return list(given)


def _number(value: Any) -> tuple[bool, int]:
    """An optional number as given: (set, value); infinite counts as unset."""
    if isinstance(value, dict):
        return bool(value.get("set", True)) and not value.get("infinite"), int(
            value.get("number", 0)
        )
    return True, int(value)


def _hosts(value: str | list[str]) -> str:
    """A node list as a hostlist expression; SlurmError when it is not one."""
    names = value if isinstance(value, list) else [value]
    try:
        expanded = [n for name in names for n in hostlist.expand(name)]
    except ValueError:
        raise SlurmError(errors.ESLURM_INVALID_NODE_NAME) from None
    return hostlist.compress(expanded)


def _node_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    if not low.isdigit() or (high and not high.isdigit()):
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT, f"Invalid node count: {text}")
    first = int(low)
    last = int(high) if high else first
    if first < 1 or last < first:
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT, f"Invalid node count: {text}")
    return first, last


_COPIED = {
    "account": "account",
    "comment": "comment",
    "container": "container",
    "container_id": "container_id",
    "constraints": "constraint",
    "cpus_per_task": "cpus_per_task",
    "dependency": "dependency",
    "hold": "hold",
    "kill_on_invalid_dependency": "kill_on_invalid_dep",
    "licenses": "licenses",
    "mail_user": "mail_user",
    "minimum_cpus": "min_cpus",
    "name": "name",
    "nice": "nice",
    "prefer": "prefer",
    "qos": "qos",
    "requeue": "requeue",
    "reservation": "reservation",
    "standard_error": "std_err",
    "standard_input": "std_in",
    "standard_output": "std_out",
    "tasks": "num_tasks",
    "tasks_per_node": "ntasks_per_node",
}
_NUMBERS = {
    "begin_time": "begin_time",
    "cores_per_socket": "cores_per_socket",
    "memory_per_cpu": "mem_per_cpu",
    "memory_per_node": "mem_per_node",
    "priority": "priority",
    "tasks_per_socket": "ntasks_per_socket",
    "threads_per_core": "threads_per_core",
    "time_limit": "time_limit",
    "time_minimum": "time_min",
}


def _gres(text: str) -> str:
    """``tres_per_node`` as sbatch's --gres: only generic resources are per-node TRES
    Corral schedules; any other (cpu=, mem=, license/...) is refused, not dropped.
    Alternatives (``gres/gpu:h100:8|gres/gpu:a100:8``) are each read so."""
    if "|" in text:
        return "|".join(_gres(option) for option in text.split("|"))
    items = [item for item in text.split(",") if item]
    other = [item for item in items if not item.startswith(("gres/", "gres:"))]
    if other:
        raise SlurmError(
            errors.ESLURM_NOT_SUPPORTED,
            f"job.tres_per_node={other[0][:64]} is not supported: only gres/ TRES are",
        )
    return ",".join(item.removeprefix("gres/").removeprefix("gres:") for item in items)


def check_uses(desc: Mapping[str, Any], warnings: list[str]) -> None:
    """Refuse a field Corral does not implement where that could change the outcome
    (SlurmError, a 400); add a warning for one that cannot (restd.jobfields)."""
    for name in desc:
        row = BY_NAME[name]
        if row.use == REFUSED:
            raise SlurmError(
                errors.ESLURM_NOT_SUPPORTED, f"job.{name} is not supported: {row.note}"
            )
        if row.use == WARNED:
            warnings.append(f"job.{name} has no effect: {row.note}")


def _exclusive(value: bool | list[str]) -> dict[str, bool]:
    """``exclusive``: true asks for whole nodes, false lets the job oversubscribe
    (Slurm's JOB_SHARED_OK). Nodes kept to one user, MCS label or topology block are
    not implemented: refused, as taking them for shared nodes would put other jobs
    beside the job."""
    if isinstance(value, bool):
        return {"exclusive": True} if value else {}
    words = set(value)
    other = sorted(words - {"true", "false"})
    if other:
        raise SlurmError(
            errors.ESLURM_NOT_SUPPORTED,
            f"job.exclusive={other[0]} is not supported: only whole nodes are",
        )
    if words == {"true", "false"}:
        raise SlurmError(errors.EINVAL, "job.exclusive: true and false exclude each other")
    if "true" in words:
        return {"exclusive": True}
    return {"oversubscribe": True} if words else {}


def _open_mode(flags: list[str]) -> str:
    if len(set(flags)) > 1:
        raise SlurmError(errors.EINVAL, "job.open_mode: APPEND and TRUNCATE exclude each other")
    return flags[0].lower() if flags else ""


def spec_from_description(
    desc: Mapping[str, Any], script: str, home: str, submit_line: str, warnings: list[str]
) -> dict[str, Any]:
    """The ``JobSpec`` for a submitted description (already schema-checked).
    ``home``: the working directory when none is given (the user's home);
    ``warnings`` gathers what the reply says about fields with no effect."""
    check_uses(desc, warnings)
    if not script.strip():
        raise SlurmError(errors.ESLURM_JOB_SCRIPT_MISSING)
    if not script.startswith("#!"):
        raise SlurmError(
            errors.EINVAL, "This does not look like a batch script: it must start with #!"
        )
    environment = desc.get("environment") or []
    if not environment:
        raise SlurmError(errors.ESLURM_ENVIRONMENT_MISSING)
    env: dict[str, str] = {}
    for entry in environment:
        name, sep, value = entry.partition("=")
        if not sep or not name:
            raise SlurmError(errors.EINVAL, f"Invalid environment entry: {entry[:80]!r}")
        env[name] = value
    work_dir = desc.get("current_working_directory") or home
    spec: dict[str, Any] = {
        "script": script,
        "argv": list(desc.get("argv", [])),
        "environment": env,
        "work_dir": work_dir,
        "submit_dir": work_dir,
        "submit_line": submit_line,
        "name": desc.get("name") or "",
    }
    for key, field in _COPIED.items():
        if key in desc:
            spec[field] = desc[key]
    for key, field in _NUMBERS.items():
        if key in desc:
            given, number = _number(desc[key])
            if given:
                spec[field] = number
            elif key == "time_limit":
                spec[field] = -1
    if spec.get("threads_per_core", 1) == 0:  # as Slurm's controller refuses -B 1:1:0
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    for key in ("std_out", "std_err", "std_in"):
        if spec.get(key) and not spec[key].startswith("/"):
            spec[key] = f"{work_dir.rstrip('/')}/{spec[key]}"
    if "partition" in desc:
        spec["partitions"] = [p for p in desc["partition"].split(",") if p]
    if "nodes" in desc:
        spec["min_nodes"], spec["max_nodes"] = _node_range(desc["nodes"])
    if "minimum_nodes" in desc:
        spec["min_nodes"] = desc["minimum_nodes"]
    if "maximum_nodes" in desc:
        spec["max_nodes"] = desc["maximum_nodes"]
    if "required_nodes" in desc:
        spec["req_nodes"] = _hosts(desc["required_nodes"])
    if "excluded_nodes" in desc:
        spec["exc_nodes"] = _hosts(desc["excluded_nodes"])
    if "array" in desc:
        spec["array"] = desc["array"]
    if "exclusive" in desc:
        spec.update(_exclusive(desc["exclusive"]))
    if desc.get("open_mode"):
        spec["open_mode"] = _open_mode(desc["open_mode"])
    if "tres_per_node" in desc:
        spec["gres"] = _gres(desc["tres_per_node"])
    if "mail_type" in desc:
        try:
            spec["mail_type"] = mailtype.from_rest(desc["mail_type"])
        except ValueError:
            raise SlurmError(errors.EINVAL, "Invalid --mail-type specification") from None
    spec.update(gpufields.spec_fields(desc, spec))
    return spec


def updates_from_description(desc: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """``scontrol update`` words for a job update, and a hold action ("" none).
    A field without an update word in restd.jobfields is refused."""
    unsupported = sorted(name for name in desc if not BY_NAME[name].update)
    if unsupported:
        raise SlurmError(errors.EINVAL, f"Update of {', '.join(unsupported)} is not supported")
    updates: dict[str, str] = {}
    for key, value in desc.items():
        word = BY_NAME[key].update
        if key == "hold":
            continue
        if key in ("time_limit", "priority"):
            given, number = _number(value)
            updates[word] = str(number) if given else ("UNLIMITED" if key == "time_limit" else "0")
        elif key == "begin_time":
            given, number = _number(value)
            updates[word] = f"uts{number}" if given else "now"
        else:
            updates[word] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    hold = ""
    if "hold" in desc:
        hold = "hold" if desc["hold"] else "release"
    return updates, hold
