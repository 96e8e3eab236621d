"""The ``/slurmdb/`` resources: job records as ``sacct --json`` gives them, and
the accounting entities as ``sacctmgr show`` lists them.

Job records come from the controller's ``History`` call (which forwards to
corral-dbd as the caller), decoded with the CLI's own codec so that the
record builder ``cli.sacct.jsonrecords.job_record`` is shared with ``sacct --json``.
Entities (accounts, users, QOS, associations, clusters, TRES) carry every
column sacctmgr has, named in snake case, with slurmrestd's names for the
fields clients key on (``name``, ``description``, ``organization``,
``default.account``, ``administrator_level``, ``parent_account``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cli.sacct.fields import View, job_steps
from cli.sacct.jsonrecords import job_record
from corral.wire import codec
from restd.schema import Schema, array, integer, obj, string

__all__ = ["ENTITY_KINDS", "HISTORY_JOB", "entity", "entity_schema", "history_jobs"]

#: The ``/slurmdb/vX/<path>`` listings, and the sacctmgr kind each lists.
ENTITY_KINDS = {
    "accounts": "account",
    "users": "user",
    "qos": "qos",
    "associations": "association",
    "clusters": "cluster",
    "tres": "tres",
}

#: sacctmgr's headers that slurmrestd names otherwise, per kind.
_NAMES: dict[str, dict[str, str]] = {
    "account": {"Account": "name", "Descr": "description", "Org": "organization"},
    "user": {"User": "name", "Admin": "administrator_level"},
    "qos": {"Name": "name", "Descr": "description"},
    "association": {"Account": "account", "Par Name": "parent_account", "Share": "shares_raw"},
    "cluster": {"Cluster": "name", "RPC": "rpc_version"},
    "tres": {"Type": "type", "Name": "name", "ID": "id"},
}


def _snake(header: str) -> str:
    return "_".join(header.lower().replace("%", " ").split())


def entity(kind: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """One sacctmgr row as a slurmdb record."""
    names = _NAMES.get(kind, {})
    record: dict[str, Any] = {names.get(h, _snake(h)): v for h, v in fields.items()}
    if kind == "user":
        record["default"] = {"account": fields.get("Def Acct", "")}
        record["administrator_level"] = [fields.get("Admin", "None")]
    elif kind == "cluster":
        record["controller"] = {
            "host": fields.get("ControlHost", ""),
            "port": int(fields["ControlPort"]) if fields.get("ControlPort", "").isdigit() else 0,
        }
    elif kind == "tres":
        record["id"] = int(fields["ID"]) if fields.get("ID", "").isdigit() else 0
    return record


def entity_schema(kind: str) -> Schema:
    """A slurmdb entity: its renamed fields typed, sacctmgr's other columns strings."""
    properties: dict[str, Schema] = {name: string() for name in _NAMES.get(kind, {}).values()}
    if kind == "user":
        properties["default"] = obj({"account": string()})
        properties["administrator_level"] = array(string())
    elif kind == "cluster":
        properties["controller"] = obj({"host": string(), "port": integer(minimum=0)})
    elif kind == "tres":
        properties["id"] = integer(minimum=0)
    schema = obj(properties)
    schema["additionalProperties"] = string()
    return schema


#: One job of ``GET /slurmdb/vX/jobs`` (the fields ``sacct --json`` fills in).
HISTORY_JOB = obj(
    {
        "account": string(),
        "cluster": string(),
        "job_id": integer(minimum=0),
        "name": string(),
        "nodes": string(),
        "partition": string(),
        "qos": string(),
        "user": string(),
        "group": string(),
        "working_directory": string(),
        "submit_line": string(),
        "state": obj({"current": array(string()), "reason": string()}),
        "steps": array(obj({})),
        "time": obj({}),
        "tres": obj({}),
        "exit_code": obj({}),
        "derived_exit_code": obj({}),
        "array": obj({}),
    }
)


def history_jobs(reply: Any, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The jobs of a ``HistoryReply`` as slurmdb job records, with their steps."""
    decoded = codec.decode("HistoryReply", reply.SerializeToString())
    view = View(int(decoded.get("now", 0)), env)
    return [job_record(job, job_steps(job), view) for job in decoded.get("jobs", [])]
