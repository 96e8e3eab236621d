"""NVIDIA MPS servers: one per shared GPU, running while jobs hold shares of it.

A job the controller gives an MPS share or a fraction by memory
(``controller.gpushare``) arrives with the shared GPU and its MPS thread
percentage in its launch's typed grant (``GpuGrant``; never read from the
environment, which the submitter fills first). Before it starts, the agent makes
sure an MPS control daemon serves that GPU (``nvidia-cuda-mps-control -d``
with the GPU as its only visible device and a pipe directory of its own) and
points the job at it with ``CUDA_MPS_PIPE_DIRECTORY``; when the last job
holding a share of the GPU ends, it tells the daemon ``quit``. This is what
Slurm leaves to a prolog script; here the agent owns it, so a share is
fenced without any site scripting.

The limits themselves (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``,
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``) come from the controller, which knows
the size of each share.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["CONTROL", "MpsServers"]

#: The MPS control program, looked up on the agent's PATH.
CONTROL = "nvidia-cuda-mps-control"


class MpsServers:
    """The MPS daemons of this agent's nodes, keyed by (node, GPU index)."""

    def __init__(self, spool: Path) -> None:
        """``spool``: where the servers' pipe and log directories go."""
        self.spool = spool
        self._holders: dict[tuple[str, int], set[int]] = {}

    @staticmethod
    def available() -> bool:
        """Whether this host can fence GPU shares (the MPS control program is here)."""
        return shutil.which(CONTROL) is not None

    def _dirs(self, node: str, gpu: int) -> dict[str, str]:
        base = self.spool / "mps" / node / f"gpu{gpu}"
        return {
            "CUDA_MPS_PIPE_DIRECTORY": str(base / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(base / "log"),
        }

    def _control(self, node: str, gpu: int, args: list[str], stdin: str = "") -> bool:
        env = {**os.environ, **self._dirs(node, gpu), "CUDA_VISIBLE_DEVICES": str(gpu)}
        try:
            done = subprocess.run(
                [CONTROL, *args],
                input=stdin.encode(),
                env=env,
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as problem:
            log.error("node %s GPU %d: %s %s failed: %s", node, gpu, CONTROL, args, problem)
            return False
        if done.returncode:
            err = done.stderr.decode(errors="replace").strip()
            log.error(
                "node %s GPU %d: %s %s exited %d: %s",
                node,
                gpu,
                CONTROL,
                args,
                done.returncode,
                err,
            )
        return done.returncode == 0

    def acquire(self, node: str, job_id: int, gpu: int | None) -> dict[str, str]:
        """What a job's environment (its batch script's, or a step's on any of its
        nodes) gains to run under the MPS server of ``gpu``, the GPU its launch's
        grant shares under MPS, starting the server for the first holder; {} for
        a job with no MPS share (``gpu`` None)."""
        if gpu is None:
            return {}
        holders = self._holders.setdefault((node, gpu), set())
        if not holders:
            for path in self._dirs(node, gpu).values():
                Path(path).mkdir(parents=True, exist_ok=True)
            if self._control(node, gpu, ["-d"]):
                log.info("node %s GPU %d: MPS server started", node, gpu)
        holders.add(job_id)
        return self._dirs(node, gpu)

    def adopt(self, node: str, job_id: int, gpu: int | None) -> None:
        """Count a job a previous agent process started under ``gpu``'s server as a
        holder (the server runs)."""
        if gpu is not None:
            self._holders.setdefault((node, gpu), set()).add(job_id)

    def release(self, job_id: int) -> None:
        """A job ended: stop the servers it was the last holder of."""
        for key in [k for k, jobs in self._holders.items() if job_id in jobs]:
            holders = self._holders[key]
            holders.discard(job_id)
            if not holders:
                del self._holders[key]
                node, gpu = key
                if self._control(node, gpu, [], stdin="quit\n"):
                    log.info("node %s GPU %d: MPS server stopped", node, gpu)
