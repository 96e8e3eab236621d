"""The host's GPUs and other accelerators, as slurmd's AutoDetect finds them.

``probe_gpus`` asks, in order, NVML (else ``nvidia-smi``), AMD's and Intel's
sysfs entries and the Neuron devices, and returns the first non-empty answer;
``autodetect`` (gres.conf's ``AutoDetect``) limits it to one source:

========  =====================================================
nvml      NVIDIA: NVML, else nvidia-smi (``nvml.py``, ``smi.py``)
rsmi      AMD (``amd.py``)
oneapi    Intel (``intel.py``)
nrt       AWS Neuron (``neuron.py``)
off       nothing
full      all of them, as when it is not set (None)
========  =====================================================

Every path is a parameter, so tests run the probes on fake trees; the model
(``model.py``) is pure data plus Slurm's notations (types, Links, ``Gres=``).
"""

from __future__ import annotations

import logging

from nodeagent.gpus.amd import probe_amd
from nodeagent.gpus.intel import probe_intel
from nodeagent.gpus.model import (
    GpuDevice,
    GresRecord,
    MigInstance,
    Vendor,
    affinity_cores,
    format_gres,
    gres_records,
    links_text,
    normalize_type,
    slurm_type,
)
from nodeagent.gpus.neuron import probe_neuron
from nodeagent.gpus.nvml import MIG_MINORS, NvmlError, probe_nvml
from nodeagent.gpus.smi import probe_smi

__all__ = [
    "AUTODETECT",
    "GpuDevice",
    "GresRecord",
    "MigInstance",
    "Vendor",
    "affinity_cores",
    "format_gres",
    "gres_records",
    "links_text",
    "normalize_type",
    "probe_amd",
    "probe_gpus",
    "probe_intel",
    "probe_neuron",
    "probe_nvidia",
    "probe_nvml",
    "probe_smi",
    "slurm_type",
]

log = logging.getLogger(__name__)

#: The AutoDetect values probe_gpus takes (case-insensitive).
AUTODETECT = ("nvml", "rsmi", "oneapi", "nrt", "off", "full")


def probe_nvidia(
    *,
    nvml_library: str | None = None,
    smi: str = "nvidia-smi",
    smi_timeout: float = 10.0,
    sysfs: str = "/sys",
    proc: str = "/proc",
    mig_minors: str = MIG_MINORS,
) -> list[GpuDevice]:
    """NVIDIA GPUs: NVML's, or nvidia-smi's when NVML is missing or fails; [] if neither."""
    try:
        devices = probe_nvml(nvml_library, mig_minors=mig_minors)
    except NvmlError as err:
        log.warning("NVML failed (%s); trying %s", err, smi)
        devices = None
    if devices is None:
        devices = probe_smi(smi, timeout=smi_timeout, sysfs=sysfs, proc=proc, mig_minors=mig_minors)
    return devices or []


def probe_gpus(
    autodetect: str | None = None,
    *,
    nvml_library: str | None = None,
    smi: str = "nvidia-smi",
    smi_timeout: float = 10.0,
    sysfs: str = "/sys",
    dev: str = "/dev",
    proc: str = "/proc",
) -> list[GpuDevice]:
    """The host's accelerators, by ``autodetect`` (see the module's table).

    ``nvml_library`` overrides ``$CORRAL_NVML_LIBRARY``/``libnvidia-ml.so.1``;
    ``smi`` is the nvidia-smi command (on PATH unless a path), ``smi_timeout``
    its limit per run; ``sysfs``, ``dev`` and ``proc`` are the roots read.
    ValueError for an unknown ``autodetect``.
    """
    mode = (autodetect or "full").strip().lower()
    if mode not in AUTODETECT:
        raise ValueError(f"unknown AutoDetect '{autodetect}' (use {', '.join(AUTODETECT)})")
    if mode == "off":
        return []
    mig_minors = f"{proc.rstrip('/')}/driver/nvidia-caps/mig-minors"
    if mode in ("nvml", "full"):
        found = probe_nvidia(
            nvml_library=nvml_library,
            smi=smi,
            smi_timeout=smi_timeout,
            sysfs=sysfs,
            proc=proc,
            mig_minors=mig_minors,
        )
        if found or mode == "nvml":
            return found
    if mode in ("rsmi", "full"):
        found = probe_amd(sysfs, dev)
        if found or mode == "rsmi":
            return found
    if mode in ("oneapi", "full"):
        found = probe_intel(sysfs, dev)
        if found or mode == "oneapi":
            return found
    return probe_neuron(dev, sysfs)
