"""``scontrol reboot`` on this host: slurm.conf's RebootProgram, run as root.

slurmd's ``_rpc_reboot`` runs the program (its first word must be executable,
the rest are its arguments) and leaves the rest to the reboot: the node is back
when its agent starts again and registers a newer boot time. Emulated nodes
(one agent serving several nodes of a one-machine cluster) cannot reboot the
host for one node: for them the program's success is the reboot, and the
agent says so (``NodeRebooted``). ``SLURMD_NODENAME`` names the node.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time

from corral import hooks
from nodeagent.runs import RunTable

log = logging.getLogger(__name__)

#: Seconds RebootProgram may run before it counts as failed (ResumeTimeout's default).
TIMEOUT = 60

#: Seconds between attempts to report a reboot while no stream is up.
RESEND = 1.0


class Rebooter:
    """Runs RebootProgram for the nodes one agent serves, when the controller asks."""

    def __init__(self, program: str, emulated: bool, table: RunTable, slurm_conf: str) -> None:
        self.program = program
        self.emulated = emulated
        self.table = table
        self.slurm_conf = slurm_conf
        self._running: set[asyncio.Task[None]] = set()

    def reboot(self, node: str) -> None:
        """Start the program for ``node`` off the stream's loop turn."""
        task = asyncio.ensure_future(self._run(node))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, node: str) -> None:
        words = shlex.split(self.program)
        if not words:
            log.error("node %s: reboot asked but RebootProgram is not set here", node)
            return
        env = {"SLURMD_NODENAME": node, "SLURM_CONF": self.slurm_conf}
        log.info("node %s: running RebootProgram %s", node, self.program)
        result = await hooks.run_async(words[0], env, timeout=TIMEOUT, argv=words[1:])
        if not result.ok:
            # The controller marks the node DOWN once ResumeTimeout passes.
            log.error("node %s: RebootProgram failed: %s", node, result.describe())
            return
        if self.emulated:
            booted = int(time.time())
            while not self.table.rebooted(node, booted):
                await asyncio.sleep(RESEND)
