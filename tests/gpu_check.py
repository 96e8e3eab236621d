#!/usr/bin/env python3
"""Check Corral on a machine with NVIDIA GPUs, in under three minutes.

Run it from a checkout with the package installed (``pip install .``)::

    python tests/gpu_check.py [--timeout S] [--type T] [--keep] [--fake-nvml LIB]

1. Probes: NVML (``probe_nvml``) and nvidia-smi (``probe_smi``) must agree on
   the GPUs (count, names, UUIDs, memory within 1%, PCI bus ids, MIG
   instances), and so must ``nvidia-smi --query-gpu=...`` read directly.
2. Cluster: ``corral up --detach --nodes 1`` in a temporary directory (one
   node, this host, not emulated), with ``GresTypes=gpu``, the node's
   ``Gres=gpu:<type>:<N>`` from the probe and a gres.conf ``AutoDetect=nvml``
   beside slurm.conf, so the agent probes and the controller cross-checks: the
   node must come up IDLE, not drained.
3. Jobs: a 1-GPU job completes and sees exactly one index in
   CUDA_VISIBLE_DEVICES; with 2+ GPUs, two 1-GPU jobs running at once get
   different indices; a step (``srun`` without ``--gpus``) in a 1-GPU job sees
   the job's CUDA_VISIBLE_DEVICES. Where the agent confines devices (cgroup v2,
   its log says ``GPU isolation on``), ``nvidia-smi -L`` in the 1-GPU job lists
   one GPU and a job without GPUs cannot open any ``/dev/nvidiaN``.
   Where ``nvidia-cuda-mps-control`` is on PATH (and no GPU is in MIG mode), the
   node also offers fractions by memory (``gpumem``): a ``--gres=gpumem:4G``
   job runs under the MPS server the agent starts for it, and with PyTorch
   beside this Python it can allocate 1 GiB but not 6 GiB; the server is
   stopped after the job.
4. ``corral down`` and the directory removed (``--keep`` keeps it).

Exit status: 0 when every check passes, 1 when one fails, 2 when neither
NVML nor nvidia-smi finds an NVIDIA GPU. Every step has a time limit.

``--fake-nvml LIB`` points CORRAL_NVML_LIBRARY (this probe and the node
agent's) at a fake NVML, to exercise the script without a GPU; build it from
the unit tests' fake::

    cc -shared -fPIC -o /tmp/fake-nvml/libnvidia-ml.so.1 tests/fakes/fake_nvml.c

nvidia-smi is not compared with a fake (it would describe other devices).
"""

from __future__ import annotations

import argparse
import csv
import glob
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

try:
    from controller.jobstate import JobState
    from nodeagent.gpus import (
        GpuDevice,
        format_gres,
        gres_records,
        probe_nvml,
        probe_smi,
        slurm_type,
    )
    from nodeagent.gpus.model import normalize_bus_id
    from nodeagent.gpus.nvml import DEFAULT_LIBRARY, LIBRARY_ENV, NvmlError
except ImportError as exc:  # pragma: no cover - run outside an installed checkout
    sys.exit(f"gpu_check: cannot import Corral ({exc}); install the package first: pip install .")

T = TypeVar("T")

NO_GPU = 2
DEFAULT_TIMEOUT = 130.0  # the checks; stopping the cluster has its own CLEANUP_TIMEOUT
CLEANUP_TIMEOUT = 20.0  # corral down; cancelling jobs first takes 10 s at most
SMI_TIMEOUT = 10.0
JOB_TIMEOUT = 60.0
SMI_QUERY = "index,uuid,name,memory.total,pci.bus_id"
DONE = {state.name for state in JobState if state.finished}
Row = tuple[int, str, str, int, str]  # index, uuid, name, memory MiB, PCI bus id
_SOCKETS = re.compile(r"\(S:[^)]*\)")
_INDEX = re.compile(r"\d+")


class Abort(Exception):
    """A check failed in a way the following ones cannot go on from."""


class Report:
    """Prints each check's result and counts them."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def check(self, name: str, ok: bool, detail: str) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
        return ok

    def skip(self, name: str, why: str) -> None:
        self.skipped += 1
        print(f"  SKIP  {name}: {why}", flush=True)

    def note(self, text: str) -> None:
        print(f"  NOTE  {text}", flush=True)

    def info(self, text: str) -> None:
        print(f"        {text}", flush=True)


class Deadline:
    """The time left for the checks; every wait takes min(its own cap, what is left)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise Abort(f"out of time (--timeout {self.seconds:g} s)")
        return min(cap, remaining)


def bounded(what: str, seconds: float, call: Callable[[], T]) -> T:
    """``call()`` in a daemon thread, given ``seconds``: a hung driver call cannot hang us."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(call())
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=target, name=what, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Abort(f"{what} did not return within {seconds:.0f} s")
    if error:
        raise error[0]
    return result[0]


# ---------------------------------------------------------------------------
# 1. Probes


def short_type(name: str) -> str:
    """A configured-style type for a model: its first word with a digit, cut at ``-``.

    ``NVIDIA H100 80GB HBM3`` -> ``h100``, ``NVIDIA A100-SXM4-40GB`` -> ``a100``,
    ``Tesla T4`` -> ``t4``; a substring of slurmd's type for the model and for its
    MIG instances, so the agent reports them all under it. Else slurmd's type.
    """
    for word in re.split(r"[\s_]+", name.strip().lower()):
        head = word.split("-", 1)[0]
        if any(c.isdigit() for c in head) and re.fullmatch(r"[a-z0-9.]+", head):
            return head
    return slurm_type(name)


def describe(device: GpuDevice) -> str:
    text = (
        f"GPU {device.index}: {device.name}, {device.uuid}, {device.memory_mib} MiB, "
        f"{device.pci_bus_id}"
    )
    if device.mig_enabled:
        profiles: dict[str, int] = {}
        for mig in device.mig:
            profiles[mig.profile] = profiles.get(mig.profile, 0) + 1
        text += ", MIG: " + (
            ", ".join(f"{n} x {p}" for p, n in profiles.items()) or "enabled, no instances"
        )
    return text


def _mig_set(device: GpuDevice) -> set[tuple[str, str]]:
    return {(mig.uuid, mig.profile) for mig in device.mig}


def _close(a: int, b: int) -> bool:
    return abs(a - b) <= 0.01 * max(a, b)


def compare_probes(report: Report, nvml: list[GpuDevice], smi: list[GpuDevice]) -> None:
    """NVML's view and nvidia-smi's, property by property."""
    report.check(
        "NVML vs nvidia-smi: count",
        len(nvml) == len(smi),
        f"{len(nvml)} and {len(smi)}",
    )
    ordered = sorted(nvml, key=lambda d: d.index), sorted(smi, key=lambda d: d.index)
    pairs = list(zip(*ordered, strict=False))  # a count mismatch is reported above
    aspects: list[tuple[str, Callable[[GpuDevice, GpuDevice], bool], Callable[[GpuDevice], str]]]
    aspects = [
        ("names", lambda a, b: a.name == b.name, lambda d: d.name),
        ("UUIDs", lambda a, b: a.uuid == b.uuid, lambda d: d.uuid),
        (
            "memory (1%)",
            lambda a, b: _close(a.memory_mib, b.memory_mib),
            lambda d: f"{d.memory_mib}",
        ),
        ("PCI bus ids", lambda a, b: a.pci_bus_id == b.pci_bus_id, lambda d: d.pci_bus_id),
        (
            "MIG",
            lambda a, b: a.mig_enabled == b.mig_enabled and _mig_set(a) == _mig_set(b),
            lambda d: f"mode {'on' if d.mig_enabled else 'off'}, {sorted(_mig_set(d))}",
        ),
    ]
    for label, same, show in aspects:
        wrong = [(a, b) for a, b in pairs if a.index != b.index or not same(a, b)]
        if not wrong:
            migs = sum(len(a.mig) for a, _ in pairs)
            detail = f"agree on {len(pairs)} GPU(s)"
            if label == "MIG":
                detail += f" ({migs} MIG instance(s))" if migs else " (none in MIG mode)"
            report.check(f"NVML vs nvidia-smi: {label}", True, detail)
        else:
            a, b = wrong[0]
            report.check(
                f"NVML vs nvidia-smi: {label}",
                False,
                f"{len(wrong)} GPU(s) differ, e.g. GPU {a.index}: NVML {show(a)!r}, "
                f"nvidia-smi (GPU {b.index}) {show(b)!r}",
            )


def query_smi(smi: str, timeout: float) -> list[Row]:
    """``nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id`` as rows."""
    done = subprocess.run(
        [smi, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise Abort(f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[:200]}")
    rows = []
    for fields in csv.reader(done.stdout.splitlines(), skipinitialspace=True):
        if len(fields) != 5 or not fields[0].strip().isdigit():
            continue
        index, uuid, name, memory, bus = (f.strip() for f in fields)
        number = memory.split()[0] if memory else ""
        rows.append((int(index), uuid, name, int(number) if number.isdigit() else -1, bus))
    return rows


def compare_query(report: Report, devices: list[GpuDevice], rows: list[Row]) -> None:
    by_index = {d.index: d for d in devices}
    problems = []
    if len(rows) != len(devices):
        problems.append(f"{len(rows)} rows for {len(devices)} GPU(s)")
    for index, uuid, name, memory, bus in rows:
        device = by_index.get(index)
        if device is None:
            problems.append(f"index {index} not probed")
            continue
        if uuid != device.uuid:
            problems.append(f"GPU {index} UUID {uuid} != {device.uuid}")
        if name != device.name:
            problems.append(f"GPU {index} name {name!r} != {device.name!r}")
        if not _close(memory, device.memory_mib):
            problems.append(f"GPU {index} memory {memory} != {device.memory_mib} MiB")
        if normalize_bus_id(bus) != device.pci_bus_id:
            problems.append(f"GPU {index} bus id {bus} != {device.pci_bus_id}")
    report.check(
        "nvidia-smi --query-gpu vs probe",
        not problems,
        "; ".join(problems[:4]) if problems else f"{len(rows)} row(s) agree",
    )


def probe_section(report: Report, fake: str | None, deadline: Deadline) -> list[GpuDevice] | None:
    """The GPUs to configure the node with; None when there is no NVIDIA GPU here."""
    library = os.environ.get(LIBRARY_ENV) or DEFAULT_LIBRARY
    nvml: list[GpuDevice] | None = None
    nvml_failed = False
    try:
        nvml = bounded("NVML probe", deadline.left(30), probe_nvml)
    except NvmlError as err:
        nvml_failed = True
        report.check("NVML probe", False, str(err))
    if nvml is None and not nvml_failed:
        report.info(f"NVML: not available ({library} did not load or initialize)")
    elif nvml is not None:
        report.info(f"NVML ({library}): {len(nvml)} GPU(s)")
        for device in nvml:
            report.info(f"  {describe(device)}")
    if fake:
        if not nvml:
            raise Abort(f"the fake NVML {fake} found no GPU")
        why = "not found" if shutil.which("nvidia-smi") is None else "it describes the real GPUs"
        report.skip("nvidia-smi probe and query", f"fake NVML ({why})")
        return nvml
    smi_path = shutil.which("nvidia-smi")
    smi: list[GpuDevice] | None = None
    if smi_path is None:
        report.info("nvidia-smi: not found on PATH")
    else:
        per_run = deadline.left(SMI_TIMEOUT)
        smi = bounded("nvidia-smi probe", 4 * per_run, lambda: probe_smi(timeout=per_run))
        if smi is None:
            report.info("nvidia-smi: failed or timed out (see the warning above)")
        else:
            report.info(f"nvidia-smi ({smi_path}): {len(smi)} GPU(s)")
            if not nvml:
                for device in smi:
                    report.info(f"  {describe(device)}")
    if not nvml and not smi:
        if nvml_failed:
            raise Abort("NVML failed and nvidia-smi found no GPU")
        return None
    if nvml and smi is not None:
        compare_probes(report, nvml, smi)
    elif nvml:
        report.check(
            "nvidia-smi probe",
            False,
            f"{'not found' if smi_path is None else 'failed'}: NVML's view is not cross-checked "
            "(the agent falls back on nvidia-smi when NVML fails)",
        )
    elif not nvml_failed:
        report.check(
            "NVML probe",
            False,
            f"{library} gives no GPU while nvidia-smi lists {len(smi or [])}: "
            "the agent will fall back on nvidia-smi",
        )
    devices = nvml or smi or []
    if smi_path is not None:
        try:
            rows = query_smi(smi_path, deadline.left(SMI_TIMEOUT))
        except (Abort, subprocess.TimeoutExpired, OSError) as err:
            report.check("nvidia-smi --query-gpu", False, str(err))
        else:
            compare_query(report, devices, rows)
    return devices


# ---------------------------------------------------------------------------
# 2-4. A one-node cluster and its jobs


class Cluster:
    """The cluster ``corral up`` starts in ``directory``, and the clients beside Python."""

    def __init__(self, directory: Path, bindir: str, deadline: Deadline) -> None:
        self.dir = directory
        self.bindir = bindir
        self.deadline = deadline
        self.conf = directory / "slurm.conf"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])  # jobs call srun by name
        self.env = env

    def run(
        self, *argv: str, cap: float = 20.0, limit: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        timeout = limit if limit is not None else self.deadline.left(cap)
        try:
            return subprocess.run(
                [os.path.join(self.bindir, argv[0]), *argv[1:]],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self.env,
                cwd=self.dir,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise Abort(f"{' '.join(argv[:3])} ...: no answer within {timeout:.1f} s") from None

    def ok(self, *argv: str, cap: float = 20.0) -> str:
        done = self.run(*argv, cap=cap)
        if done.returncode != 0:
            raise Abort(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[:300]}")
        return done.stdout

    def show_node(self) -> dict[str, str]:
        return fields(self.ok("scontrol", "-o", "show", "node", "node1"))

    def sbatch(self, *options: str, wrap: str) -> int:
        out = self.ok(
            "sbatch",
            "--parsable",
            "--time=2",
            "-o",
            str(self.dir / "job-%j.out"),
            *options,
            "--wrap",
            wrap,
        )
        return int(out.strip().split(";")[0])

    def state(self, job: int) -> str:
        return fields(self.ok("scontrol", "-o", "show", "job", str(job))).get("JobState", "?")

    def wait(self, job: int, states: set[str], cap: float = JOB_TIMEOUT) -> str:
        end = time.monotonic() + self.deadline.left(cap)
        while True:
            state = self.state(job)
            if state in states:
                return state
            if time.monotonic() > end:
                raise Abort(
                    f"job {job} still {state} after {cap:.0f} s (wanted {'/'.join(states)})"
                )
            time.sleep(0.2)

    def output(self, job: int) -> str:
        try:
            return (self.dir / f"job-{job}.out").read_text()
        except OSError:
            return ""

    def agent_log(self) -> str:
        log = self.dir / "log" / "nodeagent.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def isolation(self) -> str:
        """``on``, ``off (why)`` or ``not set up``, from what the agent logged."""
        text = self.agent_log()
        if "GPU isolation on" in text:
            return "on"
        off = re.search(r"GPU isolation off \((.*?)\)", text)
        if off:
            return f"off ({off.group(1)})"
        return "not set up (no GPU device file known)"

    def first_line(self, job: int, cap: float = 15.0) -> str:
        end = time.monotonic() + self.deadline.left(cap)
        while "\n" not in self.output(job):
            if time.monotonic() > end:
                raise Abort(f"job {job} wrote nothing within {cap:.0f} s")
            time.sleep(0.1)
        return self.output(job).split("\n", 1)[0].strip()


def fields(text: str) -> dict[str, str]:
    """``Key=Value`` words of one ``scontrol -o`` record (a value may hold spaces: Reason)."""
    found: dict[str, str] = {}
    matches = list(re.finditer(r"(?:^|\s)([A-Za-z/:]+)=", text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        found[match.group(1)] = text[match.end() : end].strip()
    return found


def gres_used_total(text: str) -> int:
    """GPUs in use in a ``GresUsed=`` value: ``gpu:h100:2(IDX:0-1),gpu:v100:0(IDX:N/A)`` -> 2."""
    return sum(int(n) for n in re.findall(r"gpu:(?:[^:,(]+:)?(\d+)", text))


def bindir() -> str:
    """Where the Corral commands are: beside this Python, else on PATH."""
    here = os.path.dirname(sys.executable)
    if os.path.exists(os.path.join(here, "sbatch")) and os.path.exists(
        os.path.join(here, "corral")
    ):
        return here
    found = shutil.which("corral")
    if found is None or shutil.which("sbatch") is None:
        raise Abort("no corral/sbatch beside this Python or on PATH: pip install . first")
    return os.path.dirname(found)


def gpu_part(gres: str) -> str:
    """The ``gpu:`` items of a ``Gres=`` value, sockets left out."""
    return ",".join(i for i in _SOCKETS.sub("", gres).split(",") if i.split(":")[0] == "gpu")


def start_cluster(report: Report, cluster: Cluster, gres: str, host: str, shares: str) -> None:
    """``shares``: the node's GPU-sharing GRES beside its GPUs (``gpumem:80G``), or ``""``."""
    (cluster.dir / "gres.conf").write_text(
        "# Written by tests/gpu_check.py: the agent probes, the controller cross-checks.\n"
        "AutoDetect=nvml\n"
    )
    argv = [
        "corral",
        "up",
        "--detach",
        "--nodes",
        "1",
        "--dir",
        str(cluster.dir),
        "--no-accounting",
        "--set",
        "GresTypes=gpu" + (",gpumem" if shares else ""),
        "--set",
        f"NodeName=DEFAULT Gres={gres}" + (f",{shares}" if shares else ""),
    ]
    report.info(f"$ {' '.join(argv[:-1])} {argv[-1]!r}")
    started = time.monotonic()
    done = cluster.run(*argv, cap=45)
    if done.returncode != 0:
        raise Abort(
            f"corral up: exit {done.returncode}: {(done.stdout + done.stderr).strip()[-400:]}"
        )
    report.check("cluster up", True, f"in {time.monotonic() - started:.1f} s, {cluster.dir}")

    # The agent's probe, as it reported it (the agent logs it before it registers).
    log = cluster.dir / "log" / "nodeagent.log"
    end = time.monotonic() + cluster.deadline.left(10)
    found = None
    while found is None:
        match = re.search(r"GPUs found: (\S+)", log.read_text() if log.exists() else "")
        if match:
            found = match.group(1)
        elif time.monotonic() > end:
            break
        else:
            time.sleep(0.1)
    if found is None:
        report.check("agent probe", False, f"no 'GPUs found' in {log}: did the agent probe?")
    else:
        report.check(
            "agent probe",
            _SOCKETS.sub("", found) == gres,
            f"the agent reported {found} (configured {gres})",
        )

    # The controller's cross-check: IDLE, neither drained nor down.
    end = time.monotonic() + cluster.deadline.left(10)
    node = cluster.show_node()
    while (
        node.get("State") != "IDLE"
        and not re.search(r"DRAIN|DOWN|FAIL", node.get("State", ""))
        and time.monotonic() < end
    ):
        time.sleep(0.2)
        node = cluster.show_node()
    state, reason = node.get("State", "?"), node.get("Reason", "")
    report.check(
        "node state",
        state == "IDLE" and not reason,
        f"State={state}" + (f" Reason={reason}" if reason else " (no Reason)"),
    )
    report.check(
        "node is this host",
        node.get("NodeHostName") == host,
        f"NodeHostName={node.get('NodeHostName')} (this host: {host}), not emulated",
    )
    shown = node.get("Gres", "")  # with the sockets near the GPUs, (S:0-1), as Slurm's
    report.check("node Gres", gpu_part(shown) == gres, f"Gres={shown}")
    if state != "IDLE":
        raise Abort(f"node1 is {state}: no job would run")


def single_index(value: str, count: int) -> bool:
    return _INDEX.fullmatch(value) is not None and int(value) < count


def job_section(report: Report, cluster: Cluster, count: int, fake: bool, fractions: bool) -> None:
    smi = "nvidia-smi -L"
    if fake:  # the fake has no nvidia-smi to go with it: its absence is no failure
        smi = (
            "if command -v nvidia-smi >/dev/null; then nvidia-smi -L; "
            "else echo 'nvidia-smi: not found'; fi"
        )
    wrap = f"echo $CUDA_VISIBLE_DEVICES; {smi}"
    report.info(f"$ sbatch --gpus=1 --wrap {wrap!r}")
    job = cluster.sbatch("--gpus=1", wrap=wrap)
    state = cluster.wait(job, DONE)
    lines = cluster.output(job).splitlines()
    report.check(
        "1-GPU job completes",
        state == "COMPLETED",
        f"job {job} {state}"
        + ("" if state == "COMPLETED" else f"; output: {' | '.join(lines)[:300]}"),
    )
    visible = lines[0].strip() if lines else ""
    report.check(
        "1-GPU job: CUDA_VISIBLE_DEVICES",
        single_index(visible, count),
        f"{visible!r} (one index of 0-{count - 1} wanted)",
    )
    listed = [line for line in lines[1:] if re.match(r"GPU \d+:", line)]
    isolation = cluster.isolation()
    if fake and not listed:
        report.skip("nvidia-smi -L in the job", "nvidia-smi not found (fake NVML)")
    elif isolation != "on":
        report.skip(
            "1-GPU job sees one GPU",
            f"GPU isolation {isolation}: nvidia-smi -L lists {len(listed)} GPU(s)",
        )
    else:
        report.check(
            "1-GPU job sees one GPU",
            len(listed) == 1,
            f"nvidia-smi -L in job {job} lists {len(listed)}: {' | '.join(listed)[:200]}",
        )
    if isolation == "on":
        no_gpu_section(report, cluster)
    if fractions:
        fraction_section(report, cluster)

    # A step without --gpus inherits the job's GPUs.
    wrap = "echo job=$CUDA_VISIBLE_DEVICES; srun sh -c 'echo step=$CUDA_VISIBLE_DEVICES'"
    report.info(f"$ sbatch --gpus=1 --wrap {wrap!r}")
    job = cluster.sbatch("--gpus=1", wrap=wrap)
    state = cluster.wait(job, DONE)
    text = cluster.output(job)
    seen = dict(re.findall(r"^(job|step)=(.*)$", text, re.MULTILINE))
    report.check(
        "step sees the job's GPU",
        state == "COMPLETED"
        and single_index(seen.get("job", ""), count)
        and seen.get("step") == seen.get("job"),
        f"job {job} {state}, job CUDA_VISIBLE_DEVICES={seen.get('job')!r}, "
        f"step's={seen.get('step')!r}",
    )

    # Two 1-GPU jobs at once get different GPUs.
    if count < 2:
        report.skip("two jobs, two GPUs", "one GPU here")
        return
    if (os.cpu_count() or 1) < 2:
        report.skip("two jobs, two GPUs", "one CPU here: the jobs cannot run at once")
        return
    wrap = "echo $CUDA_VISIBLE_DEVICES; sleep 30"
    report.info(f"$ sbatch --gpus=1 --wrap {wrap!r}  (twice)")
    jobs = [cluster.sbatch("--gpus=1", wrap=wrap) for _ in range(2)]
    try:
        for job in jobs:
            cluster.wait(job, {"RUNNING"}, cap=30)
        indices = [cluster.first_line(job) for job in jobs]
        states = [cluster.state(job) for job in jobs]
        used = cluster.show_node().get("GresUsed", "")
    finally:
        cluster.run("scancel", *map(str, jobs), cap=15)
    together = states == ["RUNNING", "RUNNING"]
    report.check(
        "two jobs, two GPUs",
        together
        and all(single_index(i, count) for i in indices)
        and indices[0] != indices[1]
        and gres_used_total(used) == 2,
        f"jobs {jobs[0]} and {jobs[1]} ({'/'.join(states)}) got CUDA_VISIBLE_DEVICES "
        f"{indices[0]!r} and {indices[1]!r}; GresUsed={used}",
    )
    for job in jobs:
        cluster.wait(job, DONE, cap=20)


def no_gpu_section(report: Report, cluster: Cluster) -> None:
    """A job given no GPU cannot open any GPU's device file (the device cgroup refuses)."""
    files = sorted(glob.glob("/dev/nvidia[0-9]*"))
    if not files:
        report.skip("job without GPUs cannot open one", "no /dev/nvidiaN here")
        return
    wrap = (
        f"for f in {' '.join(files)}; do "
        'if (exec 3<"$f") 2>/dev/null; then echo opened $f; else echo refused $f; fi; done'
    )
    report.info(f"$ sbatch --wrap {wrap!r}")
    job = cluster.sbatch(wrap=wrap)
    state = cluster.wait(job, DONE)
    lines = cluster.output(job).split()
    opened = [f for verb, f in zip(lines[::2], lines[1::2], strict=False) if verb == "opened"]
    refused = [f for verb, f in zip(lines[::2], lines[1::2], strict=False) if verb == "refused"]
    report.check(
        "job without GPUs cannot open one",
        state == "COMPLETED" and bool(refused) and not opened,
        f"job {job} {state}: refused {', '.join(refused) or 'none'}"
        + (f"; opened {', '.join(opened)}" if opened else ""),
    )


#: Run by the fraction job: PyTorch inside an MPS share with a pinned memory limit.
MPS_ALLOCATION = """\
try:
    import torch
except ImportError:
    print("torch=missing")
    raise SystemExit(0)
small = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
print("small=ok")
try:
    big = torch.empty(6 << 30, dtype=torch.uint8, device="cuda")
    print("big=allowed")
except RuntimeError as exc:
    print("big=refused", str(exc).splitlines()[0][:80])
"""


def fraction_section(report: Report, cluster: Cluster) -> None:
    """A 4 GiB fraction runs under the agent's MPS server, fenced by its memory limit."""
    script = cluster.dir / "mps_allocation.py"
    script.write_text(MPS_ALLOCATION)
    wrap = (
        "echo limit=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT pipe=$CUDA_MPS_PIPE_DIRECTORY; "
        "echo get_server_list | nvidia-cuda-mps-control >/dev/null; echo control=$?; "
        f"{sys.executable} {script}"
    )
    report.info(f"$ sbatch --gres=gpumem:4G --wrap {wrap!r}")
    job = cluster.sbatch("--gres=gpumem:4G", wrap=wrap)
    state = cluster.wait(job, DONE)
    text = cluster.output(job)
    seen = dict(re.findall(r"(\w+)=(\S*)", text))
    report.check(
        "fraction job runs under MPS",
        state == "COMPLETED"
        and seen.get("limit") == "0=4096M"
        and bool(seen.get("pipe"))
        and seen.get("control") == "0",
        f"job {job} {state}: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={seen.get('limit')!r}, "
        f"pipe {seen.get('pipe')!r}, MPS control answered: {seen.get('control') == '0'}",
    )
    if seen.get("torch") == "missing":
        report.skip("fraction memory limit", f"no PyTorch beside {sys.executable}")
    else:
        report.check(
            "fraction memory limit",
            seen.get("small") == "ok" and seen.get("big") == "refused",
            f"1 GiB: {seen.get('small', 'failed')}, 6 GiB: {seen.get('big', 'failed')}"
            + ("" if "small" in seen else f"; output: {text.strip()[-300:]}"),
        )
    end = time.monotonic() + cluster.deadline.left(10)
    while "MPS server stopped" not in cluster.agent_log() and time.monotonic() < end:
        time.sleep(0.2)
    report.check(
        "MPS server stopped after the job",
        "MPS server stopped" in cluster.agent_log(),
        "the agent logged it" if "MPS server stopped" in cluster.agent_log() else "not logged",
    )


def cancel_all(cluster: Cluster) -> None:
    """scancel every job still queued or running, and wait (10 s at most) until they are gone."""
    end = time.monotonic() + 10
    jobs = cluster.run("squeue", "-h", "-o", "%i", limit=5).stdout.split()
    if jobs:
        cluster.run("scancel", *jobs, limit=5)
    while jobs and time.monotonic() < end:
        time.sleep(0.2)
        jobs = cluster.run("squeue", "-h", "-o", "%i", limit=5).stdout.split()


def stop_cluster(report: Report, cluster: Cluster, keep: bool, show_logs: bool) -> None:
    """``corral down``, the daemons killed if it could not, the logs on failure, rm -r."""
    done = None
    left = []
    try:
        try:  # no job left to outlive the agent (its supervisors would keep it running)
            cancel_all(cluster)
        except (Abort, OSError, ValueError) as err:
            report.info(f"cancelling the jobs: {err}")
        try:
            done = cluster.run("corral", "down", "--dir", str(cluster.dir), limit=CLEANUP_TIMEOUT)
        except (Abort, OSError) as err:
            report.info(f"corral down: {err}")
        pids = cluster.dir / "pids"
        if pids.exists():  # corral down failed or timed out: the daemons this script started
            for line in pids.read_text().split():
                try:
                    os.kill(int(line), signal.SIGKILL)
                    left.append(line)
                except (OSError, ValueError):
                    pass
        if show_logs:
            for name in ("controller.log", "nodeagent.log"):
                path = cluster.dir / "log" / name
                if path.exists():
                    report.info(f"--- last lines of {path}")
                    for line in path.read_text(errors="replace").splitlines()[-12:]:
                        report.info(f"  {line}")
    finally:
        if not keep:
            shutil.rmtree(cluster.dir, ignore_errors=True)
    stopped = done is not None and done.returncode == 0 and not left
    if keep:
        where = f"kept {cluster.dir}"
    else:
        where = "directory removed" if not cluster.dir.exists() else f"{cluster.dir} not removed"
    detail = (done.stdout.strip() if done is not None else "corral down failed") + f"; {where}"
    if left:
        detail += f"; killed {len(left)} daemon(s) left running"
    report.check("cluster stopped", stopped and (keep or not cluster.dir.exists()), detail)


# ---------------------------------------------------------------------------


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gpu_check.py",
        description="Check Corral's GPU probes, a one-node GPU cluster and GPU jobs here.",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds for the checks, stopping the cluster aside (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("--type", help="the GPU type in the node's Gres= (default: from the model)")
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    parser.add_argument(
        "--fake-nvml",
        metavar="LIB",
        help="a fake libnvidia-ml.so (tests/fakes/fake_nvml.c) for NVML and the agent",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    logging.basicConfig(
        level=logging.WARNING, format="        (%(name)s) %(message)s", stream=sys.stdout
    )
    signal.signal(signal.SIGTERM, _interrupt)
    report = Report()
    deadline = Deadline(args.timeout)
    host = socket.gethostname().split(".")[0]
    outcome = "OK"
    status = 0
    if args.fake_nvml:
        if not os.path.isfile(args.fake_nvml):
            parser.error(f"--fake-nvml {args.fake_nvml}: no such file")
        os.environ[LIBRARY_ENV] = os.path.abspath(args.fake_nvml)
    print(
        f"Corral GPU check on {host} ({sys.executable}"
        + (f"; fake NVML {os.environ[LIBRARY_ENV]})" if args.fake_nvml else ")"),
        flush=True,
    )
    cluster: Cluster | None = None
    cluster_failed = False
    try:
        print("[1/4] GPU probes", flush=True)
        devices = probe_section(report, args.fake_nvml, deadline)
        if devices is None:
            print("no NVIDIA GPU here (neither NVML nor nvidia-smi finds one)", flush=True)
            outcome, status = "no NVIDIA GPU here", NO_GPU
        else:
            print("[2/4] one-node cluster", flush=True)
            types = [args.type] if args.type else sorted({short_type(d.name) for d in devices})
            gres = _SOCKETS.sub("", format_gres(devices, [], types=types))
            count = len(gres_records(devices))
            report.info(
                f"node Gres={gres} ({count} gres/gpu record(s), type(s) {', '.join(types)})"
            )
            fractions = shutil.which("nvidia-cuda-mps-control") is not None and not any(
                d.mig_enabled for d in devices
            )
            shares = f"gpumem:{sum(d.memory_mib for d in devices)}M" if fractions else ""
            if not fractions:
                report.skip(
                    "fractions by memory",
                    "MIG mode, or no nvidia-cuda-mps-control on PATH",
                )
            commands = bindir()
            directory = Path(tempfile.mkdtemp(prefix="corral-gpu-check-"))
            cluster = Cluster(directory, commands, deadline)
            before = report.failed
            try:
                start_cluster(report, cluster, gres, host, shares)
                print("[3/4] GPU jobs", flush=True)
                job_section(report, cluster, count, bool(args.fake_nvml), fractions)
            except BaseException:
                cluster_failed = True
                raise
            cluster_failed = report.failed > before
    except Abort as err:
        report.check("aborted", False, str(err))
    except KeyboardInterrupt:
        report.check("interrupted", False, "stopping")
    finally:
        if cluster is not None:
            print("[4/4] stopping the cluster", flush=True)
            for number in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C: clean up all the same
                signal.signal(number, signal.SIG_IGN)
            stop_cluster(report, cluster, args.keep, cluster_failed)
    if report.failed:
        outcome, status = "FAILED", 1
    elapsed = time.monotonic() - started
    print(
        f"gpu_check: {outcome}: {report.passed} passed, {report.failed} failed, "
        f"{report.skipped} skipped in {elapsed:.1f} s",
        flush=True,
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
