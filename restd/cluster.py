"""Nodes, partitions, reservations, licenses, ping and diag in slurmrestd's shapes.

Each resource is a schema (served in ``/openapi/v3``) and a function from the
controller's reply message to a record that follows it.
"""

from __future__ import annotations

from typing import Any

from restd.schema import (
    Schema,
    array,
    boolean,
    given,
    integer,
    limited,
    moment,
    no_val,
    obj,
    string,
)

__all__ = [
    "DIAG",
    "LICENSE",
    "NODE",
    "NODE_UPDATE",
    "PARTITION",
    "PING",
    "RESERVATION",
    "diag",
    "license",
    "node",
    "partition",
    "ping",
    "reservation",
]


def _words(text: str) -> list[str]:
    return [w for w in text.split(",") if w]


BIG = 2**53

NODE = obj(
    {
        "name": string(),
        "hostname": string(),
        "address": string(),
        "state": array(string(), "the base state, then its flags"),
        "cpus": integer(minimum=0),
        "alloc_cpus": integer(minimum=0),
        "alloc_idle_cpus": integer(minimum=0),
        "boards": integer(minimum=0),
        "sockets": integer(minimum=0),
        "cores": integer(minimum=0),
        "threads": integer(minimum=0),
        "real_memory": integer(minimum=0),
        "alloc_memory": integer(minimum=0),
        "free_mem": no_val(maximum=BIG),
        "cpu_load": integer(minimum=0, description="load average x 100"),
        "features": array(string()),
        "active_features": array(string()),
        "gres": string(),
        "gres_used": string(),
        "weight": integer(minimum=0),
        "partitions": array(string()),
        "reason": string(),
        "reason_set_by_user": string(),
        "reason_changed_at": no_val(maximum=BIG),
        "boot_time": no_val(maximum=BIG),
        "slurmd_start_time": no_val(maximum=BIG),
        "last_busy": no_val(maximum=BIG),
        "architecture": string(),
        "operating_system": string(),
        "version": string(),
        "tmp_disk": integer(minimum=0),
        "port": integer(minimum=0),
    }
)


def node(info: Any) -> dict[str, Any]:
    active = _words(info.features)  # AvailableFeatures: scontrol update may set them apart
    available = _words(info.available_features) if info.available_features else active
    return {
        "name": info.name,
        "hostname": info.hostname,
        "address": info.addr,
        "state": [info.state, *info.state_flags],
        "cpus": info.cpus,
        "alloc_cpus": info.alloc_cpus,
        "alloc_idle_cpus": max(info.cpus - info.alloc_cpus, 0),
        "boards": info.boards,
        "sockets": info.sockets,
        "cores": info.cores_per_socket,
        "threads": info.threads_per_core,
        "real_memory": info.real_memory,
        "alloc_memory": info.alloc_memory,
        "free_mem": given(info.free_memory),
        "cpu_load": round(info.cpu_load * 100),
        "features": available,
        "active_features": active,
        "gres": info.gres,
        "gres_used": info.gres_used,
        "weight": info.weight,
        "partitions": list(info.partitions),
        "reason": info.reason,
        "reason_set_by_user": info.reason_user,
        "reason_changed_at": moment(info.reason_time),
        "boot_time": moment(info.boot_time),
        "slurmd_start_time": moment(info.agent_start_time),
        "last_busy": moment(info.last_busy),
        "architecture": info.arch,
        "operating_system": info.os,
        "version": info.version,
        "tmp_disk": info.tmp_disk,
        "port": info.port,
    }


#: ``POST /node/{name}``: what ``scontrol update nodename=`` may change.
NODE_UPDATE = obj(
    {
        "state": array(
            string(enum=["DRAIN", "RESUME", "DOWN", "IDLE", "UNDRAIN", "FAIL"]),
            "the state to set (one)",
        ),
        "reason": string(max_length=4096),
    },
    required=("state",),
    closed=True,
)

PARTITION = obj(
    {
        "name": string(),
        "nodes": obj({"configured": string(), "total": integer(minimum=0)}),
        "cpus": obj({"total": integer(minimum=0)}),
        "partition": obj({"state": array(string())}),
        "priority": obj({"tier": integer(minimum=0), "job_factor": integer(minimum=0)}),
        "maximums": obj(
            {
                "time": no_val(),
                "nodes": no_val(),
                "memory_per_cpu": no_val(maximum=BIG),
                "memory_per_node": no_val(maximum=BIG),
                "oversubscribe": obj({"jobs": integer(minimum=0), "flags": array(string())}),
            }
        ),
        "minimums": obj({"nodes": integer(minimum=0)}),
        "defaults": obj(
            {
                "time": no_val(),
                "memory_per_cpu": integer(minimum=0),
                "partition_memory_per_node": no_val(maximum=BIG),
            }
        ),
        "accounts": obj({"allowed": string()}),
        "groups": obj({"allowed": string()}),
        "flags": array(string()),
        "tres": obj({"configured": string()}),
    }
)


def partition(info: Any) -> dict[str, Any]:
    over, _, jobs = info.oversubscribe.partition(":")
    return {
        "name": info.name,
        "nodes": {"configured": info.nodes, "total": info.total_nodes},
        "cpus": {"total": info.total_cpus},
        "partition": {"state": [info.state]},
        "priority": {"tier": info.priority_tier, "job_factor": info.priority_job_factor},
        "maximums": {
            "time": limited(info.max_time, info.max_time < 0),
            "nodes": limited(info.max_nodes, info.max_nodes == 0),
            "memory_per_cpu": limited(info.max_mem_per_cpu, info.max_mem_per_cpu == 0),
            "memory_per_node": limited(info.max_mem_per_node, info.max_mem_per_node == 0),
            "oversubscribe": {
                "jobs": int(jobs) if jobs.isdigit() else 1,
                "flags": [over] if over and over != "NO" else [],
            },
        },
        "minimums": {"nodes": info.min_nodes},
        "defaults": {
            "time": limited(info.default_time, info.default_time < 0),
            "memory_per_cpu": info.def_mem_per_cpu,
            "partition_memory_per_node": limited(info.def_mem_per_node, info.def_mem_per_node == 0),
        },
        "accounts": {"allowed": info.allow_accounts},
        "groups": {"allowed": info.allow_groups},
        "flags": ["DEFAULT"] if info.is_default else [],
        "tres": {"configured": info.tres},
    }


RESERVATION = obj(
    {
        "name": string(),
        "node_list": string(),
        "node_count": integer(minimum=0),
        "core_count": integer(minimum=0),
        "start_time": no_val(maximum=BIG),
        "end_time": no_val(maximum=BIG),
        "flags": array(string()),
        "users": string(),
        "accounts": string(),
        "partition": string(),
        "tres": string(),
    }
)


def reservation(info: Any) -> dict[str, Any]:
    return {
        "name": info.name,
        "node_list": info.nodes,
        "node_count": info.node_count,
        "core_count": info.core_count,
        "start_time": moment(info.start),
        "end_time": moment(info.end),
        "flags": _words(info.flags),
        "users": info.users,
        "accounts": info.accounts,
        "partition": info.partition,
        "tres": info.tres,
    }


LICENSE = obj(
    {
        "LicenseName": string(),
        "Total": integer(minimum=0),
        "Used": integer(minimum=0),
        "Free": integer(minimum=0, description="what jobs do not hold (Reserved not taken off)"),
        "Reserved": integer(minimum=0, description="kept by reservations active now"),
        "Remote": boolean(description="served by accounting (sacctmgr add resource)"),
    }
)


def license(info: Any) -> dict[str, Any]:
    """A license as ``scontrol show licenses`` shows it, in slurmrestd's capitalised keys;
    Free is Total less Used, as Slurm 22.05 computes it."""
    return {
        "LicenseName": info.name,
        "Total": info.total,
        "Used": info.used,
        "Free": max(info.total - info.used, 0),
        "Reserved": info.reserved,
        "Remote": info.remote,
    }


PING = obj(
    {
        "hostname": string(),
        "pinged": string(enum=["UP", "DOWN"]),
        "latency": integer(minimum=0, description="microseconds"),
        "mode": string(),
        "primary": boolean(),
        "responding": boolean(),
    }
)


def ping(host: str, latency_us: int) -> dict[str, Any]:
    return {
        "hostname": host,
        "pinged": "UP",
        "latency": latency_us,
        "mode": "primary",
        "primary": True,
        "responding": True,
    }


def _rpc_schema(**who: Schema) -> Schema:
    """An RPC counter of sdiag's, by message type or by user (``who``)."""
    return obj(
        {
            **who,
            "count": integer(minimum=0),
            "average_time": no_val(maximum=BIG),
            "total_time": integer(minimum=0),
        }
    )


def _rpc(who: dict[str, Any], count: int, total_us: int) -> dict[str, Any]:
    return {
        **who,
        "count": count,
        "average_time": given(total_us // count if count else 0),
        "total_time": total_us,
    }


_COUNTERS = (
    "jobs_submitted",
    "jobs_started",
    "jobs_completed",
    "jobs_canceled",
    "jobs_failed",
    "jobs_pending",
    "jobs_running",
)

DIAG = obj(
    {
        "req_time": no_val(maximum=BIG),
        "req_time_start": no_val(maximum=BIG),
        "agent_queue_size": integer(minimum=0),
        "agent_count": integer(minimum=0),
        "dbd_agent_queue_size": integer(minimum=0),
        **{name: integer(minimum=0) for name in _COUNTERS},
        "schedule_cycle_last": integer(minimum=0),
        "schedule_cycle_max": integer(minimum=0),
        "schedule_cycle_total": integer(minimum=0),
        "schedule_cycle_mean": integer(minimum=0),
        "schedule_cycle_mean_depth": integer(minimum=0),
        "schedule_queue_length": integer(minimum=0),
        "bf_cycle_counter": integer(minimum=0),
        "bf_cycle_last": integer(minimum=0),
        "bf_cycle_max": integer(minimum=0),
        "bf_cycle_mean": integer(minimum=0),
        "bf_last_depth": integer(minimum=0),
        "bf_queue_len": integer(minimum=0),
        "bf_last_backfilled_jobs": integer(minimum=0),
        "bf_when_last_cycle": no_val(maximum=BIG),
        "rpcs_by_message_type": array(
            _rpc_schema(type_id=integer(minimum=0), message_type=string())
        ),
        "rpcs_by_user": array(_rpc_schema(user_id=integer(minimum=0), user=string())),
    }
)


def diag(reply: Any) -> dict[str, Any]:
    cycles = reply.sched_cycles
    bf = reply.bf_cycles
    return {
        "req_time": moment(reply.now),
        "req_time_start": moment(reply.since),
        "agent_queue_size": reply.agent_queue,
        "agent_count": reply.agent_count,
        "dbd_agent_queue_size": reply.dbd_queue,
        **{name: getattr(reply, name) for name in _COUNTERS},
        "schedule_cycle_last": reply.sched_last_us,
        "schedule_cycle_max": reply.sched_max_us,
        "schedule_cycle_total": cycles,
        "schedule_cycle_mean": reply.sched_total_us // cycles if cycles else 0,
        "schedule_cycle_mean_depth": reply.sched_total_depth // cycles if cycles else 0,
        "schedule_queue_length": reply.sched_last_queue,
        "bf_cycle_counter": bf,
        "bf_cycle_last": reply.bf_last_us,
        "bf_cycle_max": reply.bf_max_us,
        "bf_cycle_mean": reply.bf_total_us // bf if bf else 0,
        "bf_last_depth": reply.bf_last_depth,
        "bf_queue_len": reply.bf_last_queue,
        "bf_last_backfilled_jobs": reply.bf_total_jobs,
        "bf_when_last_cycle": moment(reply.bf_last_when),
        "rpcs_by_message_type": [
            _rpc({"type_id": rpc.id, "message_type": rpc.name}, rpc.count, rpc.total_us)
            for rpc in reply.rpcs
        ],
        "rpcs_by_user": [
            _rpc({"user_id": user.uid, "user": user.user}, user.count, user.total_us)
            for user in reply.users
        ],
    }
