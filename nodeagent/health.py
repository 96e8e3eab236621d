"""HealthCheckProgram: run at the agent's start and every HealthCheckInterval.

The program runs as root once per served node (``SLURMD_NODENAME`` names it),
in a worker thread so that the agent's stream goes on, killed after
HealthCheckTimeout (60 s by default, Slurm's fixed limit). It runs only
while the node is in a state HealthCheckNodeState lists: ``ANY``; ``IDLE``
(and ``NONDRAINED_IDLE``, the agent not knowing of drains) when no run is
alive on this host; ``ALLOC`` and ``MIXED`` when one is. ``CYCLE`` changes
nothing here, each host's agent keeping its own clock.

A program that exits non-zero (or overruns) has its node drained, with the
first line of its output as the reason (else ``HealthCheckProgram failed:
rc:N``). Slurm only logs such an exit and leaves draining to the program
(``scontrol update nodename=... state=drain reason=...``), which works here
as well; see docs/design.md, "Site hooks".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from corral import hooks
from corral.config import HookConfig
from nodeagent.runs import RunTable

log = logging.getLogger(__name__)

#: Seconds between attempts to send a drain while no stream is up.
RESEND = 1.0


def due(states: Sequence[str], busy: bool) -> bool:
    """Whether HealthCheckNodeState ``states`` asks for a run now (``busy``: a job runs)."""
    wanted = set(states) - {"CYCLE"}
    if not wanted or "ANY" in wanted:
        return True
    if busy:
        return bool(wanted & {"ALLOC", "MIXED"})
    return bool(wanted & {"IDLE", "NONDRAINED_IDLE"})


def reason(result: hooks.HookResult) -> str:
    """The drain reason of a failed check: its first output line, else slurmd's words."""
    return result.first_line()[:256] or f"HealthCheckProgram failed: {result.describe()}"


class HealthCheck:
    """The health check of the nodes one agent serves."""

    def __init__(
        self, conf: HookConfig, nodes: Sequence[str], table: RunTable, slurm_conf: str
    ) -> None:
        self.conf = conf
        self.nodes = list(nodes)
        self.table = table
        self.slurm_conf = slurm_conf

    @property
    def enabled(self) -> bool:
        return bool(self.conf.health_program)

    async def run_forever(self) -> None:
        """Check at start, then every HealthCheckInterval (0: only at start)."""
        while True:
            if due(self.conf.health_states, self.table.busy()):
                await self.check()
            if not self.conf.health_interval:
                return
            await asyncio.sleep(self.conf.health_interval)

    async def check(self) -> None:
        for node in self.nodes:
            env = {"SLURMD_NODENAME": node, "SLURM_CONF": self.slurm_conf}
            result = await hooks.run_async(
                self.conf.health_program, env, timeout=self.conf.health_timeout
            )
            if result.ok:
                continue
            why = reason(result)
            log.error(
                "node %s health_check failed: %s output:%s",
                node,
                result.describe(),
                result.output.strip(),
            )
            while not self.table.drain(node, why):
                await asyncio.sleep(RESEND)
