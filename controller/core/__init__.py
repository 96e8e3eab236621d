"""The pure scheduling core: ``schedule(snapshot) -> Plan``.

Nothing in here does I/O, reads the clock or touches asyncio, grpc or SQL:
the snapshot carries ``now`` and everything else the decisions depend on, so
the same code runs live in the controller and on a simulated clock.
"""

from controller.core.backfill import BackfillParams
from controller.core.plan import Expected, Plan, Start
from controller.core.schedule import schedule
from controller.core.snapshot import NodeView, PartitionView, Running, Snapshot

__all__ = [
    "BackfillParams",
    "Expected",
    "NodeView",
    "PartitionView",
    "Plan",
    "Running",
    "Snapshot",
    "Start",
    "schedule",
]
