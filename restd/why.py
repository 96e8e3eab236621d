"""The schema of ``GET /corral/v1/job/{id}/why``: ``corral why --json``'s document
(``corral/whydoc.py``), where unknown or unlimited is null."""

from __future__ import annotations

from restd.schema import Schema, array, boolean, integer, obj, string

__all__ = ["WHY"]


def _nullable(schema: Schema) -> Schema:
    return {**schema, "nullable": True}


_WHY_JOB = {"job_id": _nullable(integer(minimum=0)), "user": _nullable(string())}
#: ``corral why --json``'s document (corral/whydoc.py): unknown or unlimited is null.
WHY = obj(
    {
        "job_id": integer(minimum=0),
        "user": string(),
        "state": string(),
        "reason": string(),
        "flavor": _nullable(string()),
        # a job that moved to another cluster: "cluster:job_id" there (docs/federation.md)
        "moved_to": _nullable(string()),
        "nodes": _nullable(string()),
        "partition": string(),
        "position": integer(minimum=0),
        "queued": integer(minimum=0),
        "needs": obj(
            {
                "nodes": integer(minimum=0),
                "cpus_per_node": integer(minimum=0),
                "memory_per_node": _nullable(integer(minimum=0)),
                "gres": _nullable(string()),
                "time_limit": _nullable(integer(minimum=0)),
                "exclusive": boolean(),
            }
        ),
        "partition_limits": obj(
            {"max_time": _nullable(integer(minimum=0)), "max_nodes": _nullable(integer())}
        ),
        "free": obj({"count": integer(minimum=0), "nodes": _nullable(string())}),
        "blockers": array(
            obj(
                {
                    **_WHY_JOB,
                    "priority": integer(minimum=0),
                    "state": string(enum=["RUNNING", "PENDING"]),
                    "nodes": string(),
                    "start": integer(),
                    "end": _nullable(integer()),
                }
            )
        ),
        "reservations": array(
            obj({"name": string(), "nodes": string(), "start": integer(), "end": integer()})
        ),
        "expected_start": _nullable(integer()),
        "expected_nodes": _nullable(string()),
        "suggestions": array(
            obj({"option": string(), "start": integer(), "nodes": _nullable(string())})
        ),
        "now": integer(),
        "preempting": array(
            obj(
                {
                    **_WHY_JOB,
                    "nodes": _nullable(string()),
                    "state": string(),
                    "grace_end": _nullable(integer()),
                    "why": string(),
                }
            )
        ),
        "flavors": array(
            obj(
                {
                    "label": string(),
                    "gres": _nullable(string()),
                    "outcome": string(),
                    "start": _nullable(integer()),
                    "chosen": boolean(),
                }
            )
        ),
        "queue": _nullable(
            obj(
                {
                    "name": string(),
                    "resources": array(
                        obj(
                            {
                                "resource": string(),
                                **{
                                    key: integer(minimum=0)
                                    for key in (
                                        "guarantee",
                                        "fair_share",
                                        "allocated",
                                        "request",
                                        "would_borrow",
                                    )
                                },
                            }
                        )
                    ),
                    "head": _nullable(obj({**_WHY_JOB, "reason": string()})),
                }
            )
        ),
        "licenses": array(
            obj(
                {
                    "name": string(),
                    "asked": integer(minimum=1),
                    "total": integer(minimum=0),
                    "free": integer(minimum=0),
                }
            )
        ),
        "topology": _nullable(
            obj(
                {
                    "switches": _nullable(integer(minimum=1)),
                    "switch_wait_end": _nullable(integer()),
                    "required_level": _nullable(integer(minimum=0)),
                    "preferred_level": _nullable(integer(minimum=0)),
                    "segment": _nullable(integer(minimum=1)),
                    "held": boolean(),
                }
            )
        ),
    }
)
