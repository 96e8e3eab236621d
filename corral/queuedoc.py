"""``corral queues``' answer as a JSON document: one shape for ``--json`` and the
REST gateway's ``GET /corral/v1/queues``.

``queues_document`` takes the Queues reply as the import-light codec decodes it
(a dict with every field; an unset limit is None) and returns plain JSON
values: per queue its name, parent (null for the root), depth, priority,
over-quota weight, running and pending jobs, and per governed resource the
guarantee, limit (null: none), fair share, allocated, borrowed, lent and
pending amounts (``controller/core/queuestatus.py`` says what each means).
Amounts are in GrpTRES's units: CPUs, MiB, nodes, GPUs.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Each resource's numbers, in the order the table shows them.
AMOUNTS = ("guarantee", "limit", "fair_share", "allocated", "borrowed", "lent", "pending")


def queues_document(reply: Mapping[str, Any]) -> dict[str, Any]:
    """The Queues reply ``reply`` as the document ``corral queues --json`` prints."""
    return {
        "queues": [
            {
                "name": q["name"],
                "parent": q["parent"] or None,
                "depth": q["depth"],
                "priority": q["priority"],
                "over_quota_weight": q["over_quota_weight"],
                "running_jobs": q["running_jobs"],
                "pending_jobs": q["pending_jobs"],
                "resources": [
                    {"resource": r["resource"], **{k: r[k] for k in AMOUNTS}}
                    for r in q["resources"]
                ],
            }
            for q in reply["queues"]
        ],
        "now": reply["now"],
    }
