"""The controller's trigger checks: every ``INTERVAL_S`` pull the triggers whose
event happened (``TriggerBook.check``) and run the programs of those due.

Slurm checks every 15 seconds; a check here is one pass over the nodes and the
triggers, cheap enough to run every few seconds, which makes a trigger's
program follow its event sooner. The book's changes are journaled before any
program runs, so a trigger fires once even if the controller stops right
after: a restart finds it gone (or, PERM, set again), never due twice; while
the journal cannot be written no program runs, and those due wait for the next
check.

A program runs on the controller's host as the trigger's owner (a root
controller drops to the owner's uid, gid and groups through
``controller/asowner.py``, since this gRPC process must not fork), with
the trigger's arguments followed by the nodes concerned or the job id, as
slurmctld gives them, and is killed with its process group after
``PROGRAM_LIMIT_S`` (Slurm's MAX_PROG_TIME).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from controller.journal import JournalWriteError
from controller.store import JobStore
from controller.triggers import Trigger
from corral import hooks

log = logging.getLogger(__name__)

INTERVAL_S = 5.0
PROGRAM_LIMIT_S = 300.0
#: Where a program looks for commands (it gets no other variable of the controller's).
PATH = "/usr/local/bin:/usr/bin:/bin"
#: The helper that becomes a program's owner and execs it (run by path: see its docstring).
ASOWNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "asowner.py")


class TriggerRunner:
    """Checks the store's triggers periodically and runs what fires."""

    def __init__(self, store: JobStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            try:
                await self.check()
            except Exception:
                log.exception("trigger check failed")

    async def check(self) -> None:
        """One check: pull, journal, then start the programs due."""
        book = self.store.triggers
        now = int(self.clock())
        changed = book.check(now, self.store.nodes, self.store.jobs)
        fired = book.take_due(now)
        if not (changed or fired):
            return
        self.store.keep_triggers()
        try:
            await self.store.flush()
        except JournalWriteError:
            # Not kept, so not run: they are due again at the next check.
            book.by_id.update((t.id, t) for t in fired)
            return
        for trigger in fired:
            self._spawn(self._run(trigger))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, trigger: Trigger) -> None:
        words = trigger.program.split()
        program, argv = words[0], [*words[1:], trigger.arg]
        if trigger.uid != os.geteuid():  # a root controller: the owner's ids, by asowner
            owner = [str(trigger.uid), str(trigger.gid), trigger.user]
            program, argv = sys.executable, ["-I", ASOWNER, *owner, program, *argv]
        env = {"PATH": PATH, "SLURM_CONF": self.store.conf.path}
        result = await hooks.run_async(program, env, timeout=PROGRAM_LIMIT_S, argv=argv)
        if result.ok:
            log.info("trigger %d ran %s %s", trigger.id, trigger.program, trigger.arg)
        else:
            log.error(
                "trigger %d: %s %s failed: %s output:%s",
                trigger.id,
                trigger.program,
                trigger.arg,
                result.describe(),
                result.output.strip(),
            )
