"""``sacct --json``: the records shaped like slurmrestd's v0.0.42 slurmdb job records.

Only what Corral records is filled in: identity, user, account, partition,
state, exit codes, times, nodes, array ids, TRES and the batch step. Numbers
Slurm may leave unset are ``{"set", "infinite", "number"}`` objects, as in
data_parser v0.0.42. Fields Corral does not track (associations, wckeys,
usage statistics, het jobs) are left out rather than filled with made-up
values. Imported only for ``--json``: ``json`` pulls in ``re``.
"""

from __future__ import annotations

import json

from cli.sacct.fields import (
    Step,
    View,
    elapsed,
    end_time,
    job_state,
    req_cpus,
    start_time,
    suspended,
    tres_count,
)
from corral import SLURM_VERSION

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    Job = Mapping[str, Any]

#: Ids of Slurm's built-in TRES (the others get theirs from the database).
_TRES_IDS = {
    "cpu": 1,
    "mem": 2,
    "energy": 3,
    "node": 4,
    "billing": 5,
    "fs/disk": 6,
    "vmem": 7,
    "pages": 8,
}


def _number(value: int | None, *, infinite: bool = False) -> dict[str, Any]:
    """data_parser's ``*_NO_VAL`` object."""
    return {"set": value is not None, "infinite": infinite, "number": value or 0}


def exit_code(status: int, ended: bool) -> dict[str, Any]:
    """PROCESS_EXIT_CODE: status words, return code and signal of a wait(2) status."""
    signal_id = status & 0x7F
    if not ended:
        return {
            "status": ["PENDING"],
            "return_code": _number(None),
            "signal": {"id": _number(None), "name": ""},
        }
    if signal_id == 0:
        code = (status >> 8) & 0xFF
        return {
            "status": ["ERROR" if code else "SUCCESS"],
            "return_code": _number(code),
            "signal": {"id": _number(None), "name": ""},
        }
    import signal

    try:
        name = signal.Signals(signal_id).name
    except ValueError:
        name = ""
    return {
        "status": ["CORE_DUMPED" if status & 0x80 else "SIGNALED"],
        "return_code": _number(None),
        "signal": {"id": _number(signal_id), "name": name},
    }


def _tres(text: str) -> list[dict[str, Any]]:
    """A TRES string as data_parser's TRES list; memory counts are MiB."""
    out = []
    for item in text.split(",") if text else []:
        key = item.partition("=")[0]
        kind, slash, name = key.partition("/")
        out.append(
            {
                "type": kind,
                "name": name if slash else "",
                "id": _TRES_IDS.get(key, 0),
                "count": tres_count(text, key),
            }
        )
    return out


def _step(step: Step, view: View) -> dict[str, Any]:
    job = step.job
    ended = bool(step.end)
    return {
        "step": {"id": f"{job['job_id']}.{step.id}", "name": step.name},
        "state": [step.state],
        "exit_code": exit_code(step.exit_status, ended),
        "nodes": {"count": 1, "range": step.node, "list": [step.node]},
        "tasks": {"count": 1},
        "time": {
            "elapsed": elapsed(job, view),
            "start": _number(step.start),
            "end": _number(step.end or None),
        },
        "tres": {"allocated": _tres(step.tres()), "requested": []},
    }


def job_record(job: Job, steps: Sequence[Step], view: View) -> dict[str, Any]:
    """One job as a v0.0.42 slurmdb job record (the fields Corral has)."""
    ended = bool(end_time(job))
    task = job["array_task_id"]
    limit = int(job["time_limit"])
    return {
        "account": job["account"],
        "allocation_nodes": tres_count(str(job["alloc_tres"]), "node"),
        "array": {
            "job_id": job["array_job_id"],
            "limits": {"max": {"running": {"tasks": job["array_max_tasks"]}}},
            "task": job["array_task_str"],
            "task_id": _number(task),
        },
        "cluster": job["cluster"],
        "comment": {"administrator": "", "job": job["comment"], "system": ""},
        "derived_exit_code": exit_code(int(job["derived_exit_status"]), ended),
        "exit_code": exit_code(int(job["exit_status"]), ended),
        "group": job["group"],
        "job_id": job["job_id"],
        "name": job["name"],
        "nodes": job["nodes"] or "None assigned",
        "partition": job["partition"],
        "priority": _number(job["priority"]),
        "qos": job["qos"],
        "required": {"CPUs": req_cpus(job)},
        "restart_cnt": job["restarts"],
        "state": {"current": [job_state(job)], "reason": job["reason"] or "None"},
        "steps": [_step(step, view) for step in steps],
        "submit_line": job["submit_line"],
        "time": {
            "elapsed": elapsed(job, view),
            "eligible": job["eligible_time"],
            "end": end_time(job),
            "limit": _number(None if limit == -1 else limit, infinite=limit == -1),
            "start": start_time(job),
            "submission": job["submit_time"],
            "suspended": suspended(job, view),
        },
        "tres": {
            "allocated": _tres(str(job["alloc_tres"])),
            "requested": _tres(str(job["req_tres"])),
        },
        "user": job["user"],
        "working_directory": job["work_dir"],
    }


def document(
    records: Sequence[tuple[Job, Sequence[Step]]],
    view: View,
    argv: Sequence[str],
    user: str,
) -> str:
    """The whole ``--json`` output: jobs, meta, errors and warnings."""
    major, minor, micro = SLURM_VERSION.split(".")
    meta = {
        "plugin": {
            "type": "",
            "name": "",
            "data_parser": "data_parser/v0.0.42",
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": "", "user": user, "group": ""},
        "command": list(argv),
        "slurm": {
            "version": {"major": major, "micro": micro, "minor": minor},
            "release": SLURM_VERSION,
            "cluster": "",
        },
    }
    jobs = [job_record(job, steps, view) for job, steps in records]
    body = {"jobs": jobs, "meta": meta, "errors": [], "warnings": []}
    return json.dumps(body, indent=2) + "\n"
