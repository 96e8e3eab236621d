"""NVIDIA GPUs through ``nvidia-smi``, for hosts where NVML cannot be loaded.

Runs, each with a timeout:

* ``nvidia-smi --query-gpu=index,name,uuid,memory.total,pci.bus_id
  --format=csv,noheader,nounits``: the GPUs (memory in MiB);
* ``nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader``:
  MIG mode (drivers without MIG fail this; then a GPU is in MIG mode when
  it lists MIG devices);
* ``nvidia-smi -L``: the MIG devices (profile, UUID) under each GPU.

and reads the device minor (``/dev/nvidiaN``) from
``/proc/driver/nvidia/gpus/<bus id>/information`` (else N is the index) and
the CPUs from ``/sys/bus/pci/devices/<bus id>/local_cpulist``. NVLinks are
not known here (``links`` is ``()``), nor is a MIG device's memory (0). A MIG
device's GPU and compute instance ids, and so its Slurm UniqueId and
capability files, are known only from drivers whose ``-L`` prints UUIDs of
the ``MIG-GPU-<uuid>/<gi>/<ci>`` form.

A missing binary, a failure or a timeout gives None (logged), as no NVML does.
"""

from __future__ import annotations

import csv
import logging
import os
import re
import shutil
import subprocess

from nodeagent.gpus._sysfs import read_cpulist, read_text
from nodeagent.gpus.model import GpuDevice, MigInstance, mig_type, normalize_bus_id, slurm_type
from nodeagent.gpus.nvml import MIG_MINORS, mig_files, parse_mig_minors

__all__ = ["QUERY", "parse_list", "parse_query", "probe_smi"]

log = logging.getLogger(__name__)

QUERY = "index,name,uuid,memory.total,pci.bus_id"

_GPU_LINE = re.compile(r"GPU (\d+): .*\(UUID: ([^)]+)\)")
_MIG_LINE = re.compile(r"\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)")
_OLD_MIG_UUID = re.compile(r"MIG-(GPU-[^/]+)/(\d+)/(\d+)")


def parse_query(text: str) -> list[tuple[int, str, str, int, str]]:
    """``--query-gpu=index,name,uuid,memory.total,pci.bus_id`` CSV rows:
    (index, name, uuid, memory MiB (0 if not a number), bus id)."""
    rows = []
    for fields in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(fields) != 5:
            continue
        index, name, uuid, memory, bus = (f.strip() for f in fields)
        if not index.isdigit():
            continue
        rows.append((int(index), name, uuid, int(memory) if memory.isdigit() else 0, bus))
    return rows


def parse_list(text: str) -> dict[int, list[tuple[str, int, str]]]:
    """``nvidia-smi -L``: GPU index → its MIG devices as (profile, MIG index, UUID)."""
    migs: dict[int, list[tuple[str, int, str]]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        if match := _GPU_LINE.match(line):
            gpu = int(match.group(1))
            migs[gpu] = []
        elif (match := _MIG_LINE.match(line)) and gpu is not None:
            migs[gpu].append((match.group(1), int(match.group(2)), match.group(3).strip()))
    return migs


def _mig_modes(text: str) -> dict[int, bool]:
    modes = {}
    for fields in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(fields) == 2 and fields[0].strip().isdigit():
            modes[int(fields[0])] = fields[1].strip().lower() == "enabled"
    return modes


def _run(binary: str, args: list[str], timeout: float) -> str | None:
    try:
        done = subprocess.run(
            [binary, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        log.warning("%s %s: no answer in %g s", binary, " ".join(args), timeout)
        return None
    except OSError as err:
        log.warning("%s: %s", binary, err)
        return None
    if done.returncode != 0:
        log.warning(
            "%s %s failed (%d): %s",
            binary,
            " ".join(args),
            done.returncode,
            (done.stdout + done.stderr).strip()[:200],
        )
        return None
    return done.stdout


def _minor(proc: str, bus_id: str, index: int) -> int:
    text = read_text(os.path.join(proc, "driver", "nvidia", "gpus", bus_id, "information"))
    for line in (text or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Device Minor" and value.strip().isdigit():
            return int(value)
    return index


def probe_smi(
    binary: str = "nvidia-smi",
    *,
    timeout: float = 10.0,
    sysfs: str = "/sys",
    proc: str = "/proc",
    mig_minors: str = MIG_MINORS,
) -> list[GpuDevice] | None:
    """The NVIDIA GPUs ``nvidia-smi`` lists, or None when it is missing or fails.

    ``binary`` is looked up on PATH unless it is a path; ``timeout`` is per run.
    """
    path = shutil.which(binary)
    if path is None:
        log.debug("no %s on PATH", binary)
        return None
    text = _run(path, [f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"], timeout)
    if text is None:
        return None
    rows = parse_query(text)
    modes_text = None
    listing: dict[int, list[tuple[str, int, str]]] = {}
    if rows:
        modes_text = _run(
            path, ["--query-gpu=index,mig.mode.current", "--format=csv,noheader"], timeout
        )
        listing = parse_list(_run(path, ["-L"], timeout) or "")
    modes = _mig_modes(modes_text or "")
    minors_table: dict[str, int] | None = None
    devices = []
    for index, name, uuid, memory, raw_bus in rows:
        bus_id = normalize_bus_id(raw_bus)
        minor = _minor(proc, bus_id, index)
        device_file = f"/dev/nvidia{minor}"
        kind = slurm_type(name)
        instances = []
        for profile, mig_index, mig_uuid in listing.get(index, []):
            gi: int | None = None
            ci: int | None = None
            unique_id = ""
            files: tuple[str, ...] = (device_file,)
            if old := _OLD_MIG_UUID.fullmatch(mig_uuid):
                gi, ci = int(old.group(2)), int(old.group(3))
                unique_id = f"MIG-{uuid}/{gi}/{ci}"
                if minors_table is None:
                    minors_table = parse_mig_minors(read_text(mig_minors) or "")
                files = mig_files(device_file, minor, gi, ci, minors_table)
            instances.append(
                MigInstance(
                    index=mig_index,
                    profile=profile,
                    type=mig_type(kind, profile),
                    uuid=mig_uuid,
                    unique_id=unique_id,
                    memory_mib=0,
                    gpu_instance=gi,
                    compute_instance=ci,
                    files=files,
                )
            )
        devices.append(
            GpuDevice(
                vendor="nvidia",
                index=index,
                name=name,
                type=kind,
                uuid=uuid,
                memory_mib=memory,
                pci_bus_id=bus_id,
                cpus=read_cpulist(
                    os.path.join(sysfs, "bus", "pci", "devices", bus_id, "local_cpulist")
                )
                or (),
                device_file=device_file,
                links=(),
                mig_enabled=modes.get(index, bool(instances)),
                mig=tuple(instances),
            )
        )
    return devices
