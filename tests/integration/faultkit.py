"""What the fault scenarios share: the outcome they report, marks, submitters, audits.

A scenario (``tests/integration/faultscenarios.py``) runs a workload on a real
cluster, breaks something while it runs, and then counts against what the
clients were told: a job whose id a client was given (acknowledged) and that
the controller no longer knows is lost; a job whose script ran to its end twice,
or whose run of one restart started twice, is duplicated; a job whose final
state is not the one its configuration calls for is wrong. The counting rests
on what each job writes itself (its marks, below), never on the controller's
view alone. The benchmark (``bench/faults.py``) and the CI tests
(``tests/integration/test_fault_suite.py``) run the same code at two sizes.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec

from corral.client import Client
from corral.errors import ControllerUnreachable, SlurmError
from tests.integration.cluster import DONE, Cluster, listening

#: Builds an unstarted cluster: ``make(nodes=..., settings=(...), tls=..., accounting=...)``.
MakeCluster = Callable[..., Cluster]

#: A job that marks its start and its end, with its restart count, in one shared file;
#: its first run sleeps ``first`` seconds, a requeued run ``again``.
MARK_SCRIPT = """#!/bin/sh
echo "start $SLURM_JOB_ID ${{SLURM_RESTART_COUNT:-0}}" >> {marks}
if [ "${{SLURM_RESTART_COUNT:-0}}" = 0 ]; then sleep {first}; else sleep {again}; fi
echo "end $SLURM_JOB_ID ${{SLURM_RESTART_COUNT:-0}}" >> {marks}
"""

P = ParamSpec("P")

#: How many ids each list in a report shows (the counts are always whole).
SHOWN = 20


@dataclass
class Outcome:
    """What one scenario tried and what it found; ``ok`` only when nothing was lost,
    duplicated or wrong and nothing else failed."""

    scenario: str
    tried: dict[str, Any] = field(default_factory=dict)
    submitted: int = 0
    acknowledged: int = 0
    refused: Counter[int] = field(default_factory=Counter)
    unreachable: int = 0
    lost: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    wrong: dict[int, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.wrong or self.failures)

    def count(self, submitter: Submitter) -> None:
        """Add a submitter's attempts, acknowledgements and refusals."""
        self.submitted += submitter.attempts
        self.acknowledged += len(submitter.acked)
        self.refused.update(submitter.refused)
        self.unreachable += submitter.unreachable
        if submitter.error:
            self.failures.append(f"submitter: {submitter.error}")

    def as_dict(self) -> dict[str, Any]:
        wrong = sorted(self.wrong.items())
        return {
            "scenario": self.scenario,
            "ok": self.ok,
            "tried": self.tried,
            "submitted": self.submitted,
            "acknowledged": self.acknowledged,
            "refused": {str(code): n for code, n in sorted(self.refused.items())},
            "unreachable": self.unreachable,
            "lost": len(self.lost),
            "lost_ids": sorted(self.lost)[:SHOWN],
            "duplicated": len(set(self.duplicated)),
            "duplicated_ids": sorted(set(self.duplicated))[:SHOWN],
            "wrong": len(wrong),
            "wrong_states": {str(job): why for job, why in wrong[:SHOWN]},
            "failures": self.failures,
            "timings": self.timings,
            "notes": self.notes,
        }


def scenario(
    name: str,
) -> Callable[[Callable[Concatenate[Outcome, P], None]], Callable[P, Outcome]]:
    """Make ``body(out, ...)`` a scenario returning its Outcome: one that breaks
    (an exception) is reported with what it had counted so far, never raised."""

    def wrap(body: Callable[Concatenate[Outcome, P], None]) -> Callable[P, Outcome]:
        @functools.wraps(body)
        def run(*args: P.args, **kwargs: P.kwargs) -> Outcome:
            out = Outcome(name)
            try:
                body(out, *args, **kwargs)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # pytest's skip and fail too: the report says why
                out.failures.append(f"error: {exc!r}")
                out.notes.append(traceback.format_exc()[-2000:])
            return out

        return run

    return wrap


def mark_script(marks: Path, first: float = 0, again: float = 0) -> str:
    return MARK_SCRIPT.format(marks=marks, first=first, again=again)


def spec(work: Path, script: str, requeue: bool | None = None, **extra: Any) -> dict[str, Any]:
    """A batch job as the framed client sends it (no sbatch process: fast in bulk)."""
    out: dict[str, Any] = {
        "name": "fault",
        "script": script,
        "work_dir": str(work),
        "std_out": str(work / "%j.out"),
        "environment": {"PATH": "/usr/bin:/bin"},
        **extra,
    }
    if requeue is not None:
        out["requeue"] = requeue
    return out


def marks_of(marks: Path) -> tuple[Counter[tuple[int, int]], Counter[tuple[int, int]]]:
    """The (job, restart) pairs the jobs marked as started and as ended, with counts."""
    starts: Counter[tuple[int, int]] = Counter()
    ends: Counter[tuple[int, int]] = Counter()
    if not marks.exists():
        return starts, ends
    for line in marks.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue  # a line being written as we read
        (starts if parts[0] == "start" else ends)[(int(parts[1]), int(parts[2]))] += 1
    return starts, ends


class Submitter(threading.Thread):
    """Submits ``specs`` one after another over its own connection, retrying each
    until the controller acknowledges it: through a restart (unreachable), and
    through refusals (counted by error code), as sbatch retries EAGAIN."""

    def __init__(
        self,
        socket: str,
        specs: Iterable[dict[str, Any]],
        *,
        pause: float = 0,
        give_up: float = 900,
    ) -> None:
        super().__init__(daemon=True)
        self.client = Client(socket, timeout=30)
        self.specs = specs
        self.pause = pause
        self.give_up = give_up
        self.acked: list[int] = []
        self.attempts = 0
        self.unreachable = 0
        self.refused: Counter[int] = Counter()
        self.error = ""

    def run(self) -> None:
        deadline = time.monotonic() + self.give_up
        for job in self.specs:
            while True:
                if time.monotonic() > deadline:
                    self.error = f"gave up after {self.give_up:.0f} s"
                    return
                self.attempts += 1
                try:
                    self.acked.append(int(self.client.call("Submit", {"spec": job})["job_id"]))
                    break
                except ControllerUnreachable:
                    self.unreachable += 1
                except SlurmError as exc:
                    self.refused[exc.code] += 1
                time.sleep(0.05)
            if self.pause:
                time.sleep(self.pause)


class PassSampler(threading.Thread):
    """The controller's scheduling pass time, read from Diag (sdiag) every ``every``
    seconds while a scenario runs: the last pass of each new cycle, and the maximum."""

    def __init__(self, socket: str, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.client = Client(socket, timeout=10)
        self.every = every
        self.samples_us: list[int] = []
        self.max_us = 0
        self.halt = threading.Event()

    def run(self) -> None:
        cycles = -1
        while not self.halt.wait(self.every):
            try:
                diag = self.client.call("Diag", {})
            except SlurmError:
                continue  # restarting, or busy past the timeout: the next sample tells
            self.max_us = max(self.max_us, int(diag["sched_max_us"]))
            if int(diag["sched_cycles"]) != cycles:
                cycles = int(diag["sched_cycles"])
                self.samples_us.append(int(diag["sched_last_us"]))

    def figures(self) -> dict[str, Any]:
        self.halt.set()
        self.join()
        ms = sorted(us / 1000 for us in self.samples_us)
        if not ms:
            return {"samples": 0}

        def pct(p: float) -> float:
            return round(ms[min(len(ms) - 1, int(p / 100 * len(ms)))], 2)

        return {
            "samples": len(ms),
            "p50_ms": pct(50),
            "p90_ms": pct(90),
            "p99_ms": pct(99),
            "max_ms": round(self.max_us / 1000, 2),
        }


def states(c: Cluster) -> dict[int, str]:
    return {int(j["job_id"]): str(j["state"]) for j in c.jobs()}


def wait_final(c: Cluster, ids: Iterable[int], timeout: float) -> bool:
    """Wait until every job of ``ids`` the controller knows has a final state."""
    wanted = set(ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            now = states(c)
        except SlurmError:
            time.sleep(0.5)
            continue
        if all(now[j] in DONE for j in wanted if j in now):
            return True
        time.sleep(0.5)
    return False


def audit(c: Cluster, out: Outcome, expected: dict[int, str], marks: Path, timeout: float) -> None:
    """Count ``expected`` (job -> the final state it must reach) against the
    controller and the jobs' own marks: lost, duplicated, wrong."""
    if not wait_final(c, expected, timeout):
        out.failures.append(f"not every job reached a final state within {timeout:.0f} s")
    known = states(c)
    starts, ends = marks_of(marks)
    ended = Counter(job for (job, _), n in ends.items() for _ in range(n))
    twice = {job for (job, _), n in starts.items() if n > 1}
    for job, want in expected.items():
        if job not in known:
            out.lost.append(job)
            continue
        if ended[job] > 1 or job in twice:
            out.duplicated.append(job)
        if known[job] != want:
            out.wrong[job] = f"{known[job]}, expected {want}"
        elif want == "COMPLETED" and ended[job] == 0:
            out.wrong[job] = "COMPLETED, but its script never marked its end"


def node_states(c: Cluster) -> list[str]:
    return [str(n["state"]) for n in c.client.call("Nodes", {})["nodes"]]


def timed(action: Callable[[], object]) -> float:
    began = time.monotonic()
    action()
    return round(time.monotonic() - began, 3)


# ---------------------------------------------------------------- root-only plumbing


@dataclass
class Netns:
    """A network namespace joined to the host by a veth pair (a /30 of 10.213.0.0/16)."""

    name: str
    host_addr: str
    ns_addr: str
    inner: str

    def exec(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *args]

    def cut(self) -> None:
        """Take the namespace's end of the link down: nothing passes either way."""
        _must(*self.exec("ip", "link", "set", self.inner, "down"))

    def heal(self) -> None:
        _must(*self.exec("ip", "link", "set", self.inner, "up"))


def _must(*args: str) -> None:
    """Run a plumbing command (ip, mount); RuntimeError with its message if it fails."""
    result = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip()}")


@contextmanager
def namespace() -> Iterator[Netns]:
    """A fresh namespace and veth pair named after this process, removed on every path."""
    tag = os.getpid() % 100000
    name, outer, inner = f"corral-f{tag}", f"cfh{tag}", f"cfn{tag}"
    subnet = f"10.213.{tag % 250}"
    ns = Netns(name, f"{subnet}.1", f"{subnet}.2", inner)
    try:
        _must("ip", "netns", "add", name)
        _must("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        _must("ip", "link", "set", inner, "netns", name)
        _must("ip", "addr", "add", f"{ns.host_addr}/30", "dev", outer)
        _must("ip", "link", "set", outer, "up")
        _must(*ns.exec("ip", "addr", "add", f"{ns.ns_addr}/30", "dev", inner))
        _must(*ns.exec("ip", "link", "set", inner, "up"))
        _must(*ns.exec("ip", "link", "set", "lo", "up"))
        yield ns
    finally:
        subprocess.run(["ip", "link", "del", outer], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@contextmanager
def small_disk(size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "4m") on a fresh directory, unmounted and removed after."""
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="corral-fault-disk-"))
    try:
        _must("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where))
        try:
            yield where
        finally:
            subprocess.run(["umount", str(where)], capture_output=True, check=False)
    finally:
        where.rmdir()


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem has no byte left."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as sink:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    sink.write(b"\0" * size)
            except OSError:
                continue
    return filler


def restart_mariadb(timeout: float = 60) -> float:
    """Stop the MariaDB server at 127.0.0.1:3306 cleanly (SIGTERM) and start it again
    as it was started: the same program and arguments, user, directory and
    environment (no service manager runs here). Seconds until it accepts again."""
    pid = next(
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and _comm(entry) in ("mariadbd", "mysqld")
    )
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    env = dict(v.decode().split("=", 1) for v in raw if b"=" in v)
    uid = os.stat(f"/proc/{pid}").st_uid
    cwd = os.readlink(f"/proc/{pid}/cwd")
    watched = _comm(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    began = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"MariaDB (pid {pid}) did not stop within {timeout:.0f} s")
        time.sleep(0.1)
    if watched != "mysqld_safe":  # its watchdog starts it again by itself
        subprocess.Popen(
            [a.decode() for a in argv],
            user=uid,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    while not listening("127.0.0.1", 3306):
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"MariaDB did not accept connections within {timeout:.0f} s")
        time.sleep(0.1)
    return round(time.monotonic() - began, 3)


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
