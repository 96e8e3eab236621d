"""The job description fields the gateway accepts, each with what Corral does with it.

A REST client sends a job as JSON (data_parser's JOB_DESC_MSG); any field the
gateway accepted and then dropped could change what happens to the job (a
binding, a licence, a memory placement quietly lost). So every field is a row
here, with the same classification the clients' option tables use
(``cli.options``): honoured (mapped into the ``JobSpec`` sbatch would send),
warned about (it cannot change an outcome; the reply's ``warnings`` says so), or
refused (a 400 in Slurm's envelope). A field that is not a row is refused by the
schema as unknown. ``update`` names the ``scontrol update`` word a job update
(``POST /job/{id}``) maps the field to; a field without one is refused there.
The request schema and docs/compatibility.md are both written from these rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from cli.options import HONOURED, REFUSED, WARNED
from restd.schema import (
    Schema,
    array,
    boolean,
    integer,
    no_val_input,
    obj,
    string,
)

__all__ = ["BY_NAME", "DESCRIPTION", "FIELDS", "Field"]


@dataclass(frozen=True)
class Field:
    """One field of a job description: its schema, its use, and why (or its limits)."""

    name: str
    schema: Schema
    use: str = HONOURED
    note: str = ""
    update: str = ""


def _nodes_value() -> Schema:
    return {
        "oneOf": [string(max_length=4096), array(string(max_length=256))],
        "description": "a hostlist expression, or a list of host names",
    }


def _text() -> Schema:
    return string(max_length=4096)


def _flags() -> Schema:
    return array(string(max_length=64))


def _count() -> Schema:
    return no_val_input()


_PLACEMENT = "this placement constraint is not implemented"
_LAYOUT = "this task layout request is not implemented"

#: Every field, in Slurm's alphabetical order.
FIELDS = (
    Field("account", string(max_length=256)),
    Field("argv", array(string()), note="the script's arguments"),
    Field("array", string("an array spec, e.g. 0-9%2", max_length=4096)),
    Field(
        "begin_time",
        no_val_input("epoch seconds", maximum=2**53),
        update="StartTime",
    ),
    Field("burst_buffer", _text(), REFUSED, "burst buffers are not implemented"),
    Field("cluster_constraint", _text(), REFUSED, "federation is not implemented"),
    Field("comment", _text(), update="Comment"),
    Field("constraints", _text(), note="as sbatch --constraint"),
    Field("container", _text(), note="an OCI bundle's absolute path, as sbatch --container"),
    Field("container_id", _text(), note="as sbatch --container-id (Slurm 24.11)"),
    Field("contiguous", boolean(), REFUSED, _PLACEMENT),
    Field("core_specification", _count(), REFUSED, "core specialization is not implemented"),
    Field("cores_per_socket", _count(), note="as sbatch --cores-per-socket (sets no task count)"),
    Field("cpu_binding", _text(), REFUSED, "CPU binding other than the default is not implemented"),
    Field(
        "cpu_binding_flags",
        _flags(),
        REFUSED,
        "CPU binding other than the default is not implemented",
    ),
    Field("cpu_frequency", _text(), WARNED, "CPU frequencies are left as they are"),
    Field(
        "cpus_per_tres",
        string("gres/gpu:N", max_length=1024),
        note="as sbatch --cpus-per-gpu (gres/gpu alone)",
    ),
    Field("cpus_per_task", integer(minimum=1, maximum=0xFFFF)),
    Field("current_working_directory", _text(), note="the user's home when not given"),
    Field("dependency", _text(), note="as sbatch --dependency", update="Dependency"),
    Field("distribution", _text(), REFUSED, _LAYOUT),
    Field(
        "environment",
        array(string(max_length=1 << 20), "NAME=value entries"),
        note="required, as in Slurm",
    ),
    Field("excluded_nodes", _nodes_value()),
    Field(
        "exclusive",
        {
            "oneOf": [
                boolean(),
                array(string(enum=["true", "false", "user", "mcs", "topo"])),
            ]
        },
        note="true: whole nodes; false: oversubscribe; user, mcs and topo are refused",
    ),
    Field(
        "flags",
        _flags(),
        note="as sbatch --gres-flags: GRES_BINDING_ENFORCED or GRES_BINDING_DISABLED"
        " (data_parser v0.0.40 on); no other job flag is taken",
    ),
    Field("hold", boolean(), note="on update: hold or release", update="Hold"),
    Field("immediate", boolean(), REFUSED, "immediate allocation is not implemented"),
    Field("kill_on_invalid_dependency", boolean()),
    Field(
        "kill_warning_delay",
        _count(),
        REFUSED,
        "warning signals are not taken from the REST API; use #SBATCH --signal in the script",
    ),
    Field(
        "kill_warning_flags",
        _flags(),
        REFUSED,
        "warning signals are not taken from the REST API; use #SBATCH --signal in the script",
    ),
    Field(
        "kill_warning_signal",
        _text(),
        REFUSED,
        "warning signals are not taken from the REST API; use #SBATCH --signal in the script",
    ),
    Field("licenses", _text(), note="as sbatch --licenses", update="Licenses"),
    Field("mail_type", _flags(), note="as sbatch --mail-type (slurmrestd's flag names)"),
    Field("mail_user", _text()),
    Field("maximum_nodes", integer(minimum=1, maximum=0xFFFFFF)),
    Field("mcs_label", _text(), REFUSED, "MCS labels are not implemented"),
    Field("memory_binding", _text(), WARNED, "memory is not bound to NUMA nodes"),
    Field("memory_binding_type", _flags(), WARNED, "memory is not bound to NUMA nodes"),
    Field("memory_per_cpu", no_val_input("MiB", maximum=2**53)),
    Field("memory_per_node", no_val_input("MiB", maximum=2**53)),
    Field(
        "memory_per_tres",
        string("gres/gpu:MiB", max_length=1024),
        note="as sbatch --mem-per-gpu (gres/gpu alone)",
    ),
    Field("minimum_cpus", integer(minimum=1, maximum=0xFFFFFF)),
    Field("minimum_nodes", integer(minimum=1, maximum=0xFFFFFF)),
    Field("name", string(max_length=1024), update="JobName"),
    Field("network", _text(), REFUSED, "network requests are not implemented"),
    Field("nice", integer(minimum=-2147483645, maximum=2147483645), update="Nice"),
    Field("nodes", string("a node count or range, e.g. 2 or 1-4", max_length=64)),
    Field(
        "ntasks_per_tres",
        integer(minimum=1, maximum=0xFFFE),
        note="as sbatch --ntasks-per-gpu",
    ),
    Field(
        "open_mode",
        array(string(enum=["APPEND", "TRUNCATE"])),
        note="APPEND or TRUNCATE, as sbatch --open-mode",
    ),
    Field(
        "partition", string("one partition, or a comma list", max_length=4096), update="Partition"
    ),
    Field("prefer", _text(), note="as sbatch --prefer"),
    Field(
        "priority",
        no_val_input("administrators only"),
        note="operators and administrators only",
        update="Priority",
    ),
    Field("profile", _flags(), WARNED, "no profiling data is gathered"),
    Field("qos", string(max_length=256)),
    Field("reboot", boolean(), WARNED, "nodes are never rebooted for a job"),
    Field("required_nodes", _nodes_value()),
    Field(
        "required_switches",
        no_val_input("at most this many leaf switches"),
        note="as sbatch --switches (topology/tree)",
    ),
    Field("requeue", boolean(), update="Requeue"),
    Field("reservation", string(max_length=256)),
    Field("script", string("the batch script, starting with #!", max_length=4 << 20)),
    Field(
        "segment_size",
        no_val_input("nodes per base block", maximum=0xFFFD),
        note="as sbatch --segment (topology/block; data_parser v0.0.41 on)",
    ),
    Field("sockets_per_node", _count(), note="as sbatch --sockets-per-node"),
    Field("standard_error", _text(), note="relative to the working directory"),
    Field("standard_input", _text(), note="relative to the working directory"),
    Field("standard_output", _text(), note="relative to the working directory"),
    Field("tasks", integer(minimum=1, maximum=0xFFFFFF)),
    Field("tasks_per_core", _count(), REFUSED, _LAYOUT),
    Field("tasks_per_node", integer(minimum=1, maximum=0xFFFF)),
    Field("tasks_per_socket", _count(), note="as sbatch --ntasks-per-socket"),
    Field(
        "temporary_disk_per_node", _count(), REFUSED, "temporary disk requests are not implemented"
    ),
    Field("thread_specification", _count(), REFUSED, "thread specialization is not implemented"),
    Field("threads_per_core", _count(), note="as sbatch --threads-per-core (sets no task count)"),
    Field("time_limit", no_val_input("minutes"), update="TimeLimit"),
    Field("time_minimum", no_val_input("minutes")),
    Field(
        "topology_level",
        string("REQUIRED[:PREFERRED] switch levels, e.g. 1 or 2:0", max_length=16),
        note="Corral's own, as sbatch --topology-level (docs/topology.md)",
    ),
    Field(
        "tres_bind",
        string("e.g. gres/gpu:closest", max_length=1024),
        note="as sbatch --gpu-bind",
    ),
    Field(
        "tres_per_job",
        string("e.g. gres/gpu:4 or gres/gpu:a100:4", max_length=1024),
        note="as sbatch --gpus (gres/gpu TRES, a list of types too)",
    ),
    Field(
        "tres_per_node",
        string("e.g. gres/gpu:2, or alternatives gres/gpu:h100:8|gres/gpu:a100:8", max_length=1024),
        note="generic resources (gres/...) only; alternatives as sbatch --gres=a|b",
    ),
    Field(
        "tres_per_socket",
        string("e.g. gres/gpu:2", max_length=1024),
        note="as sbatch --gpus-per-socket (gres/gpu alone; with sockets_per_node)",
    ),
    Field(
        "tres_per_task",
        string("e.g. gres/gpu:1", max_length=1024),
        note="as sbatch --gpus-per-task (gres/gpu alone)",
    ),
    Field(
        "wait_for_switch",
        integer(minimum=0, maximum=0xFFFFFFFE, description="seconds"),
        note="--switches' wait, in seconds",
    ),
    Field("wckey", _text(), WARNED, "WCKeys are not tracked"),
)

BY_NAME = {row.name: row for row in FIELDS}

#: The request schema of a job description: exactly the rows, unknown fields refused.
DESCRIPTION = obj({row.name: row.schema for row in FIELDS}, closed=True)
