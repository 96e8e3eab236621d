"""The schema of ``GET /corral/v1/queues``: ``corral queues --json``'s document
(``corral/queuedoc.py``), where no parent (the root) and no limit are null."""

from __future__ import annotations

from restd.schema import Schema, array, integer, number, obj, string

__all__ = ["QUEUES"]


def _nullable(schema: Schema) -> Schema:
    return {**schema, "nullable": True}


_AMOUNT = integer(minimum=0)
#: ``corral queues --json``'s document (corral/queuedoc.py).
QUEUES = obj(
    {
        "queues": array(
            obj(
                {
                    "name": string(),
                    "parent": _nullable(string()),
                    "depth": integer(minimum=0),
                    "priority": integer(),
                    "over_quota_weight": number(),
                    "running_jobs": integer(minimum=0),
                    "pending_jobs": integer(minimum=0),
                    "resources": array(
                        obj(
                            {
                                "resource": string(),
                                "guarantee": _AMOUNT,
                                "limit": _nullable(_AMOUNT),
                                "fair_share": _AMOUNT,
                                "allocated": _AMOUNT,
                                "borrowed": _AMOUNT,
                                "lent": _AMOUNT,
                                "pending": _AMOUNT,
                            }
                        )
                    ),
                }
            )
        ),
        "now": integer(),
    }
)
