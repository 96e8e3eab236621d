"""What ``salloc -N min-max --elastic[=SIG]``'s command hears of its allocation's resizes.

A batch job's script runs on a node, where the agent writes its resize file and sends
its signal (``nodeagent/resizes.py``). salloc's command runs here, on the submitting
host, where no agent is: so salloc itself does the same for it. While the command
runs, salloc already asks the controller every few seconds whether the allocation
still stands (``salloc.CHECK_EVERY``); the reply also says when it last changed size
(``AllocationReply.resize_time``). When that moves on, salloc writes the same lines the
agents write (a comment naming the change, then ``export SLURM_NODELIST=...``,
``SLURM_JOB_NODELIST``, ``SLURM_NNODES``, ``SLURM_JOB_NUM_NODES``,
``SLURM_JOB_CPUS_PER_NODE``, ``unset SLURM_TASKS_PER_NODE``) to ``$CORRAL_RESIZE_FILE``
and sends the signal to the command, as Slurm's resize reaches salloc's command. So
``trap '. "$CORRAL_RESIZE_FILE"' WINCH`` works in an allocation's shell as in a batch
script. Several resizes between two looks are one change (the file has the newest).

The file lives in a directory of salloc's own (``mkdtemp``: the user's, mode 0700),
is absent until the first change, is replaced by a rename (a reader never sees half
of it) and goes with the directory when salloc ends. Steps that srun starts in the
allocation hear of a resize from their nodes' agents, as a batch job's do.
"""

from __future__ import annotations

import os
import shutil
import tempfile

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping
    from typing import Any

#: The variable that names the file (as the agents name a batch job's).
RESIZE_ENV = "CORRAL_RESIZE_FILE"


class Resizes:
    """One elastic allocation's resize file and signal, for the command salloc runs."""

    def __init__(self, job_id: int, signal: int, resize_time: int) -> None:
        self.job_id = job_id
        self.signal = signal
        self.resize_time = resize_time  # the change the command already has
        self.dir = tempfile.mkdtemp(prefix=f"corral-salloc-{job_id}-")
        self.path = os.path.join(self.dir, "resize")

    def environment(self) -> dict[str, str]:
        """What the command is given to find the file."""
        return {RESIZE_ENV: self.path}

    def heard(self, reply: Mapping[str, Any], child: subprocess.Popen[bytes]) -> bool:
        """Tell the command of a resize ``reply`` (an AllocationReply) shows, if it is
        new; whether it was."""
        when = int(reply.get("resize_time") or 0)
        if not when or when == self.resize_time:
            return False
        env = reply.get("environment") or {}
        nodes = reply.get("nodes") or ""
        count = env.get("SLURM_NNODES", "")
        text = (
            f"# job {self.job_id} resized at {when}\n"
            f'export SLURM_NODELIST="{nodes}"\n'
            f'export SLURM_JOB_NODELIST="{nodes}"\n'
            f"export SLURM_NNODES={count}\n"
            f"export SLURM_JOB_NUM_NODES={count}\n"
            f'export SLURM_JOB_CPUS_PER_NODE="{env.get("SLURM_JOB_CPUS_PER_NODE", "")}"\n'
            "unset SLURM_TASKS_PER_NODE\n"
        )
        fresh = f"{self.path}.{when}"
        with open(fresh, "w", encoding="ascii") as out:
            out.write(text)
        os.replace(fresh, self.path)
        self.resize_time = when
        if child.poll() is None:
            child.send_signal(self.signal)
        return True

    def close(self) -> None:
        """Remove the file and its directory (salloc is done)."""
        shutil.rmtree(self.dir, ignore_errors=True)
