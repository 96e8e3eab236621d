"""Every operation the gateway serves: its path, parameters, body and reply
schemas, and its handler, in one table (``OPERATIONS``).

``restd.app`` routes requests by this table and checks them against its
schemas; ``restd.openapi`` writes the OpenAPI document from it. A handler
gets a ``Call`` (version, caller, checked parameters and body) and returns
the reply's payload; the envelope (``meta``, ``errors``, ``warnings``) is
added around it.

Why this module is over 500 lines: it is the one table of every operation the
gateway serves, with its schemas and handler, so that routing, checking and
the OpenAPI document cannot disagree.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from controller.principal import uid_for
from corral import errors, timefmt
from corral.errors import SlurmError
from corral.queuedoc import queues_document
from corral.whydoc import why_document
from corral.wire import codec
from restd import accounting, cluster, jobs
from restd.controller import Caller, Controller
from restd.joblist import JobListing, split_reply
from restd.queues import QUEUES
from restd.schema import Schema, array, integer, obj, ref, string
from restd.why import WHY

__all__ = ["OPERATIONS", "SCHEMAS", "Call", "Operation", "Param"]


@dataclass
class Call:
    """One request, checked: what a handler works from."""

    version: str
    caller: Caller
    params: dict[str, Any]
    body: Any
    controller: Controller
    listing: JobListing
    warnings: list[str] = field(default_factory=list)


Handler = Callable[[Call], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Param:
    name: str
    where: str  # "path" or "query"
    schema: Schema
    description: str = ""


@dataclass(frozen=True)
class Operation:
    api: str  # "slurm", "slurmdb" or "corral"
    method: str
    path: str  # below /<api>/<version>/, e.g. "job/{job_id}"
    summary: str
    handler: Handler
    reply: dict[str, Schema]
    params: tuple[Param, ...] = ()
    body: Schema | None = None
    versions: tuple[str, ...] = jobs.VERSIONS


#: Named schemas, served under components/schemas.
SCHEMAS: dict[str, Schema] = {
    "job_info": jobs.JOB_INFO,
    "job_desc_msg": jobs.DESCRIPTION,
    "job_submit_req": jobs.SUBMIT_REQUEST,
    "node": cluster.NODE,
    "update_node_msg": cluster.NODE_UPDATE,
    "partition_info": cluster.PARTITION,
    "reservation_info": cluster.RESERVATION,
    "license": cluster.LICENSE,
    "controller_ping": cluster.PING,
    "stats_msg": cluster.DIAG,
    "job": accounting.HISTORY_JOB,
    "why_pending": WHY,
    "queues": QUEUES,
    **{kind: accounting.entity_schema(kind) for kind in accounting.ENTITY_KINDS.values()},
}

#: A job id as the path names it: ``123``, an array task ``123_4``, a het component ``123+1``.
JOB_ID = Param(
    "job_id",
    "path",
    string("a job id: 123, 123_4 or 123+1", max_length=32),
)
NODE_NAME = Param("node_name", "path", string("a node name", max_length=256))
_MAX_ID = 0xFFFFFFFF


def job_id(text: str) -> str:
    """A path's job id, checked; SlurmError (400) for anything else."""
    head, sep, tail = text.replace("+", "_").partition("_")
    if not head.isdigit() or (sep and not tail.isdigit()) or int(head) > _MAX_ID:
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID, "Invalid job id specified")
    return text  # the controller's filter reads 123_4 (a task) and 123+1 (a component)


def node_name(text: str) -> str:
    if not text or not all(c.isalnum() or c in "-._[],:" for c in text):
        raise SlurmError(errors.ESLURM_INVALID_NODE_NAME, "Invalid node name specified")
    return text


def _results(reply: Any) -> list[dict[str, Any]]:
    """A Signal or JobControl reply's results; the first failure raised."""
    for result in reply.results:
        if result.code:
            raise SlurmError(result.code, result.message or None)
    return [{"job_id": r.job_id, "error_code": 0, "error": ""} for r in reply.results]


# ---------------------------------------------------------------- /slurm/


async def get_jobs(call: Call) -> dict[str, Any]:
    raw = await call.controller.call_raw(
        "Jobs", call.caller, filter={"states": ["ALL"]}, expand_arrays=False
    )
    records, last_update = split_reply(raw)
    since = call.params.get("update_time", 0)
    listed = [] if since and last_update <= since else records
    return {
        "jobs": call.listing.render(listed),
        "last_update": {"set": True, "infinite": False, "number": last_update},
        "last_backfill": {"set": False, "infinite": False, "number": 0},
    }


async def get_job(call: Call) -> dict[str, Any]:
    wanted = job_id(call.params["job_id"])
    reply = await call.controller.call(
        "Jobs", call.caller, filter={"job_ids": [wanted], "states": ["ALL"]}
    )
    if not reply.jobs:
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID, "Invalid job id specified")
    return {"jobs": [jobs.job_info(job) for job in reply.jobs]}


async def submit_job(call: Call) -> dict[str, Any]:
    """One job, or a heterogeneous job's components (``jobs``), as sbatch submits
    them: each component checked as a job of its own; the first's script runs."""
    body = call.body
    descs = jobs.descriptions(body)
    script = descs[0].get("script")
    if "script" in body:
        if call.version == "v0.0.42":
            call.warnings.append("top-level script is deprecated in v0.0.42: use job.script")
        script = script or body["script"]
    host = os.uname().nodename.split(".")[0]
    specs = []
    for index, desc in enumerate(descs):
        spec = jobs.spec_from_description(
            desc, script or "", call.caller.home, "corral-restd job/submit", call.warnings
        )
        if index:  # a later component: an allocation the leader's script reaches
            spec.update(script="", argv=[])
        specs.append({**spec, "submit_host": host})
    reply = await call.controller.call(
        "Submit", call.caller, spec=specs[0], het_components=specs[1:]
    )
    payload: dict[str, Any] = {
        "job_id": reply.job_id,
        "step_id": "batch",
        "job_submit_user_msg": "",
    }
    if call.version in ("v0.0.40", "v0.0.41"):
        payload["result"] = {**payload, "error_code": 0, "error": ""}
    return payload


async def update_job(call: Call) -> dict[str, Any]:
    wanted = job_id(call.params["job_id"])
    updates, hold = jobs.updates_from_description(call.body)
    results: list[dict[str, Any]] = []
    if updates:
        reply = await call.controller.call(
            "JobControl", call.caller, action="update", job_ids=[wanted], updates=updates
        )
        results = _results(reply)
    if hold:
        reply = await call.controller.call("JobControl", call.caller, action=hold, job_ids=[wanted])
        results = _results(reply)
    return {"results": results}


def signal_number(text: str) -> int:
    """``SIGKILL``, ``KILL`` or ``9``; SlurmError for anything else."""
    name = text.upper().removeprefix("SIG")
    if name.isdigit() and 0 < int(name) < 65:
        return int(name)
    try:
        return int(signal.Signals[f"SIG{name}"])
    except KeyError:
        raise SlurmError(errors.EINVAL, f"Invalid signal: {text[:32]}") from None


async def cancel_job(call: Call) -> dict[str, Any]:
    wanted = job_id(call.params["job_id"])
    given = call.params.get("signal", "")
    number = signal_number(given) if given else 0
    flags = {f for f in call.params.get("flags", "").upper().split(",") if f}
    unknown = flags - {"BATCH_JOB", "FULL_JOB", "FULL_STEPS_ONLY"}
    if unknown:
        raise SlurmError(errors.EINVAL, f"Invalid flags: {', '.join(sorted(unknown))}")
    reply = await call.controller.call(
        "Signal",
        call.caller,
        filter={"job_ids": [wanted]},
        signal=0 if number == 9 and not flags else number,
        batch_only="BATCH_JOB" in flags,
        full="FULL_JOB" in flags,
    )
    return {"status": _results(reply)}


async def get_nodes(call: Call) -> dict[str, Any]:
    names = [node_name(call.params["node_name"])] if "node_name" in call.params else []
    reply = await call.controller.call("Nodes", call.caller, names=names)
    return {"nodes": [cluster.node(n) for n in reply.nodes]}


async def update_node(call: Call) -> dict[str, Any]:
    name = node_name(call.params["node_name"])
    states = call.body["state"]
    if len(states) != 1:
        raise SlurmError(errors.EINVAL, "Give exactly one state")
    await call.controller.call(
        "NodeUpdate", call.caller, nodes=name, state=states[0], reason=call.body.get("reason", "")
    )
    return {}


async def get_partitions(call: Call) -> dict[str, Any]:
    names = [call.params["partition_name"]] if "partition_name" in call.params else []
    reply = await call.controller.call("Partitions", call.caller, names=names)
    if names and not reply.partitions:
        raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME, "Invalid partition name specified")
    return {"partitions": [cluster.partition(p) for p in reply.partitions]}


async def get_licenses(call: Call) -> dict[str, Any]:
    reply = await call.controller.call("Licenses", call.caller)
    return {"licenses": [cluster.license(info) for info in reply.licenses]}


async def get_reservations(call: Call) -> dict[str, Any]:
    name = call.params.get("reservation_name", "")
    reply = await call.controller.call("Reservations", call.caller, name=name)
    if name and not reply.reservations:
        raise SlurmError(errors.ESLURM_RESERVATION_INVALID, "Requested reservation is invalid")
    return {"reservations": [cluster.reservation(r) for r in reply.reservations]}


async def ping(call: Call) -> dict[str, Any]:
    started = time.monotonic()
    reply = await call.controller.call("Ping", None)
    latency = int((time.monotonic() - started) * 1e6)
    return {"pings": [cluster.ping(reply.host, latency)]}


async def diag(call: Call) -> dict[str, Any]:
    reply = await call.controller.call("Diag", call.caller)
    return {"statistics": cluster.diag(reply)}


# ---------------------------------------------------------------- /slurmdb/

_HISTORY_LISTS = {
    "users": "uids",
    "account": "accounts",
    "partition": "partitions",
    "state": "states",
    "job_name": "names",
    "cluster": "clusters",
    "node": "nodes",
}


def _uids(names: list[str]) -> list[int]:
    uids = []
    for name in names:
        uid = uid_for(name)
        if uid is None:
            raise SlurmError(errors.ESLURM_USER_ID_MISSING, f"Invalid user: {name}")
        uids.append(uid)
    return uids


def _when(text: str, now: int) -> int:
    if text.isdigit():
        return int(text)
    try:
        return timefmt.parse_timestamp(text, now, past=True)
    except ValueError:
        raise SlurmError(errors.EINVAL, f"Invalid time: {text[:64]}") from None


async def history(call: Call) -> dict[str, Any]:
    now = int(time.time())
    filt: dict[str, Any] = {}
    for param, key in _HISTORY_LISTS.items():
        if param in call.params:
            items = [i for i in call.params[param].split(",") if i]
            filt[key] = _uids(items) if key == "uids" else items
    if "job_id" in call.params:
        filt["job_ids"] = [job_id(call.params["job_id"])]
    else:
        filt["start"] = _when(call.params.get("start_time", "now-1day"), now)
        filt["end"] = _when(call.params.get("end_time", "now"), now)
    if "states" in filt:
        filt["states"] = [s.upper() for s in filt["states"]]
    reply = await call.controller.call("History", call.caller, filter=filt)
    found = accounting.history_jobs(reply, os.environ)
    if "job_id" in call.params and not found:
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID, "Invalid job id specified")
    return {"jobs": found}


def _entities(path: str) -> Handler:
    kind = accounting.ENTITY_KINDS[path]

    async def listing(call: Call) -> dict[str, Any]:
        where = {"name": call.params["name"]} if "name" in call.params else {}
        reply = await call.controller.call(
            "AcctAdmin", call.caller, verb="list", kind=kind, where=where
        )
        return {path: [accounting.entity(kind, row.fields) for row in reply.rows]}

    return listing


async def dbd_diag(call: Call) -> dict[str, Any]:
    reply = await call.controller.call("Diag", call.caller)
    return {
        "statistics": {
            "time_start": reply.since,
            "accounting_backlog": reply.dbd_queue,
        }
    }


# ---------------------------------------------------------------- /corral/


async def why(call: Call) -> dict[str, Any]:
    wanted = job_id(call.params["job_id"])
    if "_" in wanted:
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID, "Invalid job id specified")
    reply = await call.controller.call("Why", call.caller, job_id=int(wanted))
    return {"why": why_document(codec.decode("WhyReply", reply.SerializeToString()))}


async def queues(call: Call) -> dict[str, Any]:
    reply = await call.controller.call("Queues", call.caller)
    return {"queues": queues_document(codec.decode("QueuesReply", reply.SerializeToString()))}


# ---------------------------------------------------------------- the table


def _list_of(name: str) -> Schema:
    return array(ref(name))


_TIME = {"set": {"type": "boolean"}, "number": {"type": "integer"}}

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "slurm", "GET", "ping", "ping the controller", ping, {"pings": _list_of("controller_ping")}
    ),
    Operation(
        "slurm",
        "GET",
        "diag",
        "the controller's statistics (sdiag)",
        diag,
        {"statistics": ref("stats_msg")},
    ),
    Operation(
        "slurm",
        "GET",
        "jobs",
        "every job the controller holds",
        get_jobs,
        {"jobs": _list_of("job_info"), "last_update": obj(_TIME), "last_backfill": obj(_TIME)},
        params=(
            Param(
                "update_time",
                "query",
                integer("only if changed since (epoch)", minimum=0),
            ),
            Param("flags", "query", string("accepted for compatibility", max_length=256)),
        ),
    ),
    Operation(
        "slurm",
        "GET",
        "job/{job_id}",
        "one job",
        get_job,
        {"jobs": _list_of("job_info")},
        params=(JOB_ID,),
    ),
    Operation(
        "slurm",
        "POST",
        "job/{job_id}",
        "update a job (scontrol update job)",
        update_job,
        {"results": array(obj({"job_id": string(), "error_code": integer(), "error": string()}))},
        params=(JOB_ID,),
        body=ref("job_desc_msg"),
    ),
    Operation(
        "slurm",
        "DELETE",
        "job/{job_id}",
        "cancel a job, or send it a signal (scancel)",
        cancel_job,
        {"status": array(obj({"job_id": string(), "error_code": integer(), "error": string()}))},
        params=(
            JOB_ID,
            Param("signal", "query", string("e.g. SIGUSR1; none: cancel", max_length=16)),
            Param("flags", "query", string("BATCH_JOB, FULL_JOB", max_length=64)),
        ),
    ),
    Operation(
        "slurm",
        "POST",
        "job/submit",
        "submit a batch job (sbatch)",
        submit_job,
        {
            "job_id": integer(minimum=0),
            "step_id": string(),
            "job_submit_user_msg": string(),
            "result": obj({}),
        },
        body=ref("job_submit_req"),
    ),
    Operation("slurm", "GET", "nodes", "every node", get_nodes, {"nodes": _list_of("node")}),
    Operation(
        "slurm",
        "GET",
        "node/{node_name}",
        "one node",
        get_nodes,
        {"nodes": _list_of("node")},
        params=(NODE_NAME,),
    ),
    Operation(
        "slurm",
        "POST",
        "node/{node_name}",
        "drain, resume or down a node (operators)",
        update_node,
        {},
        params=(NODE_NAME,),
        body=ref("update_node_msg"),
    ),
    Operation(
        "slurm",
        "GET",
        "partitions",
        "every partition",
        get_partitions,
        {"partitions": _list_of("partition_info")},
    ),
    Operation(
        "slurm",
        "GET",
        "partition/{partition_name}",
        "one partition",
        get_partitions,
        {"partitions": _list_of("partition_info")},
        params=(Param("partition_name", "path", string(max_length=256)),),
    ),
    Operation(
        "slurm",
        "GET",
        "reservations",
        "every reservation",
        get_reservations,
        {"reservations": _list_of("reservation_info")},
    ),
    Operation(
        "slurm",
        "GET",
        "reservation/{reservation_name}",
        "one reservation",
        get_reservations,
        {"reservations": _list_of("reservation_info")},
        params=(Param("reservation_name", "path", string(max_length=256)),),
    ),
    Operation(
        "slurm",
        "GET",
        "licenses",
        "every license with its use and what reservations keep (scontrol show licenses)",
        get_licenses,
        {"licenses": _list_of("license")},
    ),
    Operation(
        "slurmdb",
        "GET",
        "jobs",
        "job records (sacct); by default the last day's",
        history,
        {"jobs": _list_of("job")},
        params=tuple(
            Param(name, "query", string(max_length=4096))
            for name in (*_HISTORY_LISTS, "start_time", "end_time")
        ),
    ),
    Operation(
        "slurmdb",
        "GET",
        "job/{job_id}",
        "one job's record",
        history,
        {"jobs": _list_of("job")},
        params=(JOB_ID,),
    ),
    *(
        Operation(
            "slurmdb",
            "GET",
            path,
            f"{path} (sacctmgr show {kind})",
            _entities(path),
            {path: _list_of(kind)},
            params=(Param("name", "query", string("a comma list", max_length=4096)),),
        )
        for path, kind in accounting.ENTITY_KINDS.items()
    ),
    Operation(
        "slurmdb",
        "GET",
        "diag",
        "accounting statistics",
        dbd_diag,
        {"statistics": obj({"time_start": integer(), "accounting_backlog": integer()})},
    ),
    Operation(
        "corral",
        "GET",
        "job/{job_id}/why",
        "why a job is pending: its place, what it needs and what holds it, when it is "
        "expected to start, and what would start it sooner (corral why)",
        why,
        {"why": ref("why_pending")},
        params=(JOB_ID,),
        versions=("v1",),
    ),
    Operation(
        "corral",
        "GET",
        "queues",
        "each queue's guarantee, limit, fair share, allocated, borrowed, lent and pending "
        "amounts and its jobs now (corral queues)",
        queues,
        {"queues": ref("queues")},
        versions=("v1",),
    ),
)
