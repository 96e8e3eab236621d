"""The life of ``corral ray``'s Ray cluster: its steps started, waited for and ended,
and the driver run in between.

In order:

1. The head's step (srun, in a session of its own so that a Ctrl-C on the
   terminal reaches corral ray and the driver, not srun; its output goes to
   corral ray's stderr, keeping the driver's stdout its own).
2. Wait, within ``--timeout``, for the head to listen and then for every node's
   Ray to join (``plan.CHECK``, run by Ray's own Python). The workers' step
   starts once the head has joined: a worker gives up after 40 s without a head
   node in the GCS, and a loaded head node can take longer than that to start.
   A step that ends meanwhile, or the time running out, is an error naming the
   nodes missing.
3. The driver, with ``RAY_ADDRESS``; its exit status becomes corral ray's.
4. Whatever happened: SIGTERM to each step's srun, which passes it to every
   process of the step on its nodes (Ray's ``--block`` process ends the node's
   Ray, and the step's end ends what is left in its cgroup); an srun still there
   after ``END_WAIT`` seconds is killed, and its step is ended by the node's
   runner.

SIGTERM, SIGINT and SIGHUP (scancel, Ctrl-C, a lost terminal) stop the wait or the
driver and go to step 4; SIGTERM and SIGHUP are passed on to the driver (SIGINT
reaches it from the terminal, or from srun, as it reaches corral ray).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import IO

from cli.boundary import UsageError
from cli.ray.plan import Plan
from corral import hostlist

#: Seconds an srun has to end its step after SIGTERM, and the driver after a signal.
END_WAIT = 30.0
#: How often the waits look again.
POLL_S = 0.2
STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stop(Exception):
    """A signal asked corral ray to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise Stop(signum)


def _ignore(signum: int, frame: object) -> None:
    """During the teardown: it is already under way."""


class Steps:
    """The Ray steps' srun processes, by name (``head``, ``workers``)."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        self.procs[name] = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(),
            env=env,
            start_new_session=True,
        )

    def ended(self) -> tuple[str, int] | None:
        """The first step whose srun has exited, with its status; None while all run."""
        for name, proc in self.procs.items():
            status = proc.poll()
            if status is not None:
                return name, status
        return None

    def end(self) -> None:
        """SIGTERM to every srun (passed on to its step's processes); SIGKILL to any
        still there after ``END_WAIT``."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + END_WAIT
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def host_address() -> str:
    """The address this host's Ray head listens on: the one Ray itself would choose
    (the interface the default route leaves from), else the host name's."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, contextlib.suppress(OSError):
        probe.connect(("8.8.8.8", 53))  # UDP: nothing is sent
        return str(probe.getsockname()[0])
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def free_port() -> int:
    """A TCP port nothing listens on here now, for the head's GCS."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _step_ended(plan: Plan, steps: Steps, missing: Sequence[str]) -> None:
    """UsageError if a step's srun has exited while nodes are still ``missing``."""
    ended = steps.ended()
    if ended is None:
        return
    name, status = ended
    nodes = hostlist.compress(missing, sort=False)
    raise UsageError(
        f"job {plan.allocation.job_id}: the Ray {name} step ended (srun exit status {status}) "
        f"before {nodes} joined; its output is above"
    )


def _wait_listening(plan: Plan, steps: Steps, deadline: float, timeout: int) -> None:
    while True:
        _step_ended(plan, steps, plan.allocation.nodes)
        with contextlib.suppress(OSError):
            socket.create_connection((plan.host, plan.port), timeout=1).close()
            return
        if time.monotonic() > deadline:
            raise UsageError(
                f"the Ray head on {plan.allocation.head} did not listen on {plan.address} "
                f"within {timeout} s"
            )
        time.sleep(POLL_S)


Joined = list[tuple[str, float, float]]  # (node, CPUs, GPUs) of each live Ray node


def _wait_joined(plan: Plan, steps: Steps, deadline: float, timeout: int) -> Joined:
    """Run ``plan.check()`` until every node has joined; what it last saw."""
    with tempfile.TemporaryFile() as errors:
        env = plan.ray_environment(os.environ)
        check = subprocess.Popen(plan.check(), stdout=subprocess.PIPE, stderr=errors, env=env)
        assert check.stdout is not None
        try:
            joined = _read_joined(plan, steps, check, deadline, timeout)
            # It disconnects from Ray (a driver killed meanwhile is a failure to Ray);
            # one that takes longer is killed below, and said to have failed.
            with contextlib.suppress(subprocess.TimeoutExpired):
                check.wait(timeout=END_WAIT)
        finally:
            if check.poll() is None:
                check.kill()
            check.wait()
            check.stdout.close()
        if check.returncode != 0:
            raise UsageError(
                f"watching the Ray cluster at {plan.address} failed (exit status "
                f"{check.returncode}): {_tail(errors)}"
            )
    return joined


def _read_joined(
    plan: Plan, steps: Steps, check: subprocess.Popen[bytes], deadline: float, timeout: int
) -> Joined:
    assert check.stdout is not None
    fd = check.stdout.fileno()
    joined: Joined = []
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], POLL_S)
        data = os.read(fd, 65536) if ready else b""
        if ready and not data:  # the check exited: all joined, or it failed
            return joined
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            joined = [(str(n), float(c), float(g)) for n, c, g in json.loads(line)]
        names = {name for name, _, _ in joined}
        missing = [n for n in plan.allocation.nodes if n not in names]
        workers = plan.worker_step()
        if plan.allocation.head in names and workers and "workers" not in steps.procs:
            steps.start("workers", workers, plan.ray_environment(os.environ))
        if missing:
            _step_ended(plan, steps, missing)
        if missing and time.monotonic() > deadline:
            shown = hostlist.compress(sorted(names)) if names else "none"
            raise UsageError(
                f"Ray nodes did not join within {timeout} s: "
                f"{hostlist.compress(missing, sort=False)} missing (joined: {shown})"
            )


def _tail(stream: IO[bytes]) -> str:
    stream.seek(0)
    lines = stream.read().decode(errors="replace").strip().splitlines()
    return " / ".join(lines[-3:]) or "no message"


def _describe(joined: Joined) -> str:
    def one(name: str, cpus: float, gpus: float) -> str:
        gpu = f", {gpus:g} GPU{'s' if gpus != 1 else ''}" if gpus else ""
        return f"{name} ({cpus:g} CPU{'s' if cpus != 1 else ''}{gpu})"

    return ", ".join(one(*node) for node in joined)


def run_driver(argv: Sequence[str], env: dict[str, str]) -> int:
    """The driver's exit status (128 + N if signal N ended it, as a shell says)."""
    driver = subprocess.Popen(argv, env=env)
    try:
        status = driver.wait()
    except Stop as stop:
        for signum in STOPPING:
            signal.signal(signum, _ignore)
        if stop.signum != signal.SIGINT:
            driver.send_signal(stop.signum)
        try:
            status = driver.wait(timeout=END_WAIT)
        except subprocess.TimeoutExpired:
            driver.kill()
            status = driver.wait()
    return 128 - status if status < 0 else status


def run(plan: Plan, driver: Sequence[str], timeout: int) -> int:
    """Start the cluster, run ``driver`` in it, end the cluster: the driver's status."""
    previous = {signum: signal.signal(signum, _stop) for signum in STOPPING}
    steps = Steps()
    try:
        steps.start("head", plan.head_step(), plan.ray_environment(os.environ))
        deadline = time.monotonic() + timeout
        _wait_listening(plan, steps, deadline, timeout)
        joined = _wait_joined(plan, steps, deadline, timeout)
        print(f"corral ray: Ray is up at {plan.address}: {_describe(joined)}", file=sys.stderr)
        return run_driver(driver, plan.driver_environment(os.environ))
    except Stop as stop:
        return 128 + stop.signum
    finally:
        for signum in STOPPING:
            signal.signal(signum, _ignore)
        steps.end()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
