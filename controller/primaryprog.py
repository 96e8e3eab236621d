"""SlurmctldPrimaryOnProg and SlurmctldPrimaryOffProg: the site's programs run when
this controller starts serving and when it stops (docs/ha.md).

Sites use them to move a virtual IP address to whichever controller serves. As
slurmctld 22.05 does, the first runs when a controller starts serving (at start
when it is the one to serve, or when a backup takes over) and the second when
it stops (shut down, control handed over, or fenced out of the lease); each gets
the controller's environment and no arguments, and its result is logged.
"""

from __future__ import annotations

import logging
import os

from corral import hooks
from corral.config import HookConfig

log = logging.getLogger("corral.controller")


async def run(conf: HookConfig, serving: bool) -> None:
    """Run SlurmctldPrimaryOnProg (``serving``) or SlurmctldPrimaryOffProg, if set,
    and wait for it; a failure is logged, never fatal: the controller serves or
    stops all the same, as slurmctld does."""
    key, program = (
        ("SlurmctldPrimaryOnProg", conf.primary_on_prog)
        if serving
        else ("SlurmctldPrimaryOffProg", conf.primary_off_prog)
    )
    if not program:
        return
    result = await hooks.run_async(program, os.environ)
    if result.ok:
        log.info("%s completed successfully", key)
    else:
        log.error("%s %s failed (%s): %s", key, program, result.describe(), result.first_line())
