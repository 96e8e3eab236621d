"""NVIDIA GPUs through NVML (``libnvidia-ml.so.1``), loaded with cffi in ABI mode.

What slurmd's gpu/nvml plugin reads, read the same way: per device its name,
UUID, memory, PCI bus id, minor number (the ``/dev/nvidiaN`` file), ideal CPU
affinity, NVLink lanes (each active lane's remote PCI bus id counted against
the other GPUs: Slurm's ``Links``) and MIG mode; per MIG device its UUID, GPU
and compute instance ids, slice count and memory (the ``1g.10gb`` profile),
and the capability files listed in /proc/driver/nvidia-caps/mig-minors.

No NVML (no library, or a driver that does not load) is not an error: the
probe returns None and the caller may try ``nvidia-smi``. The library is
``CORRAL_NVML_LIBRARY`` when set (tests point it at a fake), else the
driver's ``libnvidia-ml.so.1`` found by the dynamic loader.

The declarations below are this module's own, written from NVIDIA's NVML API
reference (return codes are ints, devices opaque pointers, and the structures
are the documented ``nvmlMemory_t``, ``nvmlPciInfo_t`` (the v3 layout that
``nvmlDeviceGetPciInfo_v3`` fills) and ``nvmlDeviceAttributes_t`` (v2)).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from nodeagent.gpus._sysfs import read_text
from nodeagent.gpus.model import (
    GpuDevice,
    MigInstance,
    mig_profile,
    mig_type,
    normalize_bus_id,
    slurm_type,
)

__all__ = ["DEFAULT_LIBRARY", "LIBRARY_ENV", "MIG_MINORS", "NvmlError", "probe_nvml"]

log = logging.getLogger(__name__)

DEFAULT_LIBRARY = "libnvidia-ml.so.1"
LIBRARY_ENV = "CORRAL_NVML_LIBRARY"
MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors"

_CDEF = """
typedef int nvmlReturn_t;
typedef struct corral_nvml_device *nvmlDevice_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor);
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int size,
                                      unsigned long *cpus);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *active);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current,
                                  unsigned int *pending);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *mig);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                        nvmlDeviceAttributes_t *attributes);
"""

# Return codes (nvmlReturn_t) the probe tells apart.
SUCCESS = 0
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NOT_FOUND = 6
ERROR_FUNCTION_NOT_FOUND = 13

FEATURE_ENABLED = 1  # nvmlEnableState_t
MIG_ENABLED = 1  # NVML_DEVICE_MIG_ENABLE

NVLINK_MAX_LINKS = 18  # lanes queried per GPU (NVLink 4: 18)
_TEXT_BUFFER = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE
_MAX_CPUS = 0x8000  # affinity mask size, as slurmd's
_MIB = 1024 * 1024

_REQUIRED = (
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMinorNumber",
)

_PROFILE_IN_NAME = re.compile(r"(\d+)g\.(\d+)gb")

_ffi: Any = None


class NvmlError(Exception):
    """An NVML call failed (``code`` is its nvmlReturn_t)."""

    def __init__(self, call: str, code: int, message: str) -> None:
        super().__init__(f"{call}: {message} ({code})")
        self.call = call
        self.code = code


def _get_ffi() -> Any:
    global _ffi
    if _ffi is None:
        import cffi  # type: ignore[import-untyped]

        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        _ffi = ffi
    return _ffi


class _Nvml:
    """The loaded library and typed wrappers of the calls the probe makes."""

    def __init__(self, ffi: Any, lib: Any) -> None:
        self.ffi = ffi
        self.lib = lib

    def has(self, name: str) -> bool:
        try:
            getattr(self.lib, name)
        except AttributeError:  # cffi ABI mode: a symbol the library lacks
            return False
        return True

    def message(self, code: int) -> str:
        if not self.has("nvmlErrorString"):
            return "error"
        text = self.lib.nvmlErrorString(code)
        return "error" if text == self.ffi.NULL else str(self.ffi.string(text).decode())

    def call(self, name: str, *args: Any) -> int:
        """Call ``name``; its return code (ERROR_FUNCTION_NOT_FOUND if the library lacks it)."""
        if not self.has(name):
            return ERROR_FUNCTION_NOT_FOUND
        return int(getattr(self.lib, name)(*args))

    def check(self, name: str, *args: Any) -> None:
        code = self.call(name, *args)
        if code != SUCCESS:
            raise NvmlError(name, code, self.message(code))

    def uint(self, name: str, device: Any) -> int:
        value = self.ffi.new("unsigned int *")
        self.check(name, device, value)
        return int(value[0])

    def text(self, name: str, device: Any) -> str:
        buffer = self.ffi.new("char[]", _TEXT_BUFFER)
        self.check(name, device, buffer, _TEXT_BUFFER)
        return str(self.ffi.string(buffer).decode(errors="replace"))

    def handle(self, index: int) -> Any:
        device = self.ffi.new("nvmlDevice_t *")
        self.check("nvmlDeviceGetHandleByIndex_v2", index, device)
        return device[0]

    def bus_id(self, device: Any) -> str:
        pci = self.ffi.new("nvmlPciInfo_t *")
        self.check("nvmlDeviceGetPciInfo_v3", device, pci)
        return normalize_bus_id(self.ffi.string(pci.busId).decode())

    def memory_mib(self, device: Any) -> int:
        memory = self.ffi.new("nvmlMemory_t *")
        self.check("nvmlDeviceGetMemoryInfo", device, memory)
        return int(memory.total) // _MIB

    def cpus(self, device: Any) -> tuple[int, ...]:
        """The device's ideal CPU affinity; () if NVML cannot tell."""
        bits = 8 * int(self.ffi.sizeof("unsigned long"))
        words = _MAX_CPUS // bits
        mask = self.ffi.new("unsigned long[]", words)
        code = self.call("nvmlDeviceGetCpuAffinity", device, words, mask)
        if code != SUCCESS:
            log.warning("NVML: no CPU affinity: %s", self.message(code))
            return ()
        cpus = []
        for word_index in range(words):
            word = int(mask[word_index])
            while word:
                low = word & -word
                cpus.append(word_index * bits + low.bit_length() - 1)
                word ^= low
        return tuple(cpus)

    def links(self, device: Any, index: int, bus_ids: list[str]) -> tuple[int, ...]:
        """Slurm's Links: active lanes counted per peer GPU (by remote PCI bus id)."""
        counts = [0] * len(bus_ids)
        counts[index] = -1
        active = self.ffi.new("int *")
        remote = self.ffi.new("nvmlPciInfo_t *")
        for lane in range(NVLINK_MAX_LINKS):
            code = self.call("nvmlDeviceGetNvLinkState", device, lane, active)
            if code == ERROR_INVALID_ARGUMENT:
                continue  # no such lane on this device
            if code in (ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND):
                break  # no NVLink
            if code != SUCCESS:
                log.warning("NVML: NVLink %d state: %s", lane, self.message(code))
                continue
            if active[0] != FEATURE_ENABLED:
                continue
            code = self.call("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, lane, remote)
            if code != SUCCESS:
                log.warning("NVML: NVLink %d remote: %s", lane, self.message(code))
                continue
            peer = normalize_bus_id(self.ffi.string(remote.busId).decode())
            if peer and peer in bus_ids:
                other = bus_ids.index(peer)
                if other != index:
                    counts[other] += 1
        return tuple(counts)

    def mig_mode(self, device: Any) -> bool:
        current = self.ffi.new("unsigned int *")
        pending = self.ffi.new("unsigned int *")
        code = self.call("nvmlDeviceGetMigMode", device, current, pending)
        if code in (ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND):
            return False
        if code != SUCCESS:
            log.warning("NVML: MIG mode: %s", self.message(code))
            return False
        if current[0] != pending[0]:
            log.info(
                "MIG mode is %s and will be %s after the next GPU reset",
                "enabled" if current[0] == MIG_ENABLED else "disabled",
                "enabled" if pending[0] == MIG_ENABLED else "disabled",
            )
        return int(current[0]) == MIG_ENABLED

    def mig_handles(self, device: Any) -> list[Any]:
        """The MIG devices of a GPU, from index 0 until the first one missing."""
        most = self.ffi.new("unsigned int *")
        code = self.call("nvmlDeviceGetMaxMigDeviceCount", device, most)
        if code != SUCCESS:
            log.warning("NVML: MIG device count: %s", self.message(code))
            return []
        handles = []
        for index in range(int(most[0])):
            mig = self.ffi.new("nvmlDevice_t *")
            code = self.call("nvmlDeviceGetMigDeviceHandleByIndex", device, index, mig)
            if code != SUCCESS:
                if code != ERROR_NOT_FOUND:
                    log.warning("NVML: MIG device %d: %s", index, self.message(code))
                break
            handles.append(mig[0])
        return handles

    def attributes(self, device: Any) -> tuple[int, int] | None:
        """(GPU instance slices, memory MiB) of a MIG device, or None if NVML cannot tell."""
        attributes = self.ffi.new("nvmlDeviceAttributes_t *")
        if self.call("nvmlDeviceGetAttributes_v2", device, attributes) != SUCCESS:
            return None
        return int(attributes.gpuInstanceSliceCount), int(attributes.memorySizeMB)


def parse_mig_minors(text: str) -> dict[str, int]:
    """/proc/driver/nvidia-caps/mig-minors: ``gpu0/gi1/ci0/access 22`` lines → {name: minor}."""
    minors = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].isdigit():
            minors[fields[0]] = int(fields[1])
    return minors


def mig_files(
    parent_file: str, minor: int, gi: int, ci: int, minors: Mapping[str, int]
) -> tuple[str, ...]:
    """The device files of MIG instance (``gi``, ``ci``) of the GPU with ``minor``."""
    gi_minor = minors.get(f"gpu{minor}/gi{gi}/access")
    ci_minor = minors.get(f"gpu{minor}/gi{gi}/ci{ci}/access")
    if gi_minor is None or ci_minor is None:
        log.debug("mig-minors lists no capabilities for GPU %d GI %d CI %d", minor, gi, ci)
        return (parent_file,)
    return (
        parent_file,
        f"/dev/nvidia-caps/nvidia-cap{gi_minor}",
        f"/dev/nvidia-caps/nvidia-cap{ci_minor}",
    )


def _mig_instance(
    nv: _Nvml,
    mig: Any,
    index: int,
    gpu_type: str,
    gpu_uuid: str,
    minor: int,
    parent_file: str,
    minors: Mapping[str, int],
) -> MigInstance:
    uuid = nv.text("nvmlDeviceGetUUID", mig)
    gi = nv.uint("nvmlDeviceGetGpuInstanceId", mig)
    ci = nv.uint("nvmlDeviceGetComputeInstanceId", mig)
    attributes = nv.attributes(mig)
    if attributes is not None:
        slices, memory = attributes
        profile = mig_profile(slices, memory)
    else:  # an old driver: the profile is the last word of the MIG device's name
        memory = nv.memory_mib(mig)
        match = _PROFILE_IN_NAME.search(nv.text("nvmlDeviceGetName", mig))
        profile = match.group(0) if match else ""
    return MigInstance(
        index=index,
        profile=profile,
        type=mig_type(gpu_type, profile),
        uuid=uuid,
        unique_id=f"MIG-{gpu_uuid}/{gi}/{ci}",
        memory_mib=memory,
        gpu_instance=gi,
        compute_instance=ci,
        files=mig_files(parent_file, minor, gi, ci, minors),
    )


def _device(nv: _Nvml, index: int, handle: Any, bus_ids: list[str], mig_minors: str) -> GpuDevice:
    name = nv.text("nvmlDeviceGetName", handle)
    uuid = nv.text("nvmlDeviceGetUUID", handle)
    minor = nv.uint("nvmlDeviceGetMinorNumber", handle)
    device_file = f"/dev/nvidia{minor}"
    kind = slurm_type(name)
    enabled = nv.mig_mode(handle)
    instances: list[MigInstance] = []
    if enabled:
        minors = parse_mig_minors(read_text(mig_minors) or "")
        for mig_index, mig in enumerate(nv.mig_handles(handle)):
            try:
                instances.append(
                    _mig_instance(nv, mig, mig_index, kind, uuid, minor, device_file, minors)
                )
            except NvmlError as err:
                log.warning("NVML: GPU %d MIG device %d skipped: %s", index, mig_index, err)
        if not instances:
            log.error("GPU %d is in MIG mode but has no MIG devices", index)
        elif any(len(mig.files) == 1 for mig in instances):
            log.warning(
                "GPU %d: %s does not list all its MIG capabilities; "
                "its MIG devices have only %s as device file",
                index,
                mig_minors,
                device_file,
            )
    return GpuDevice(
        vendor="nvidia",
        index=index,
        name=name,
        type=kind,
        uuid=uuid,
        memory_mib=nv.memory_mib(handle),
        pci_bus_id=bus_ids[index],
        cpus=nv.cpus(handle),
        device_file=device_file,
        links=nv.links(handle, index, bus_ids),
        mig_enabled=enabled,
        mig=tuple(instances),
    )


def _load(path: str) -> _Nvml | None:
    ffi = _get_ffi()
    try:
        lib = ffi.dlopen(path)
    except OSError as err:
        log.debug("no NVML library %s: %s", path, err)
        return None
    nv = _Nvml(ffi, lib)
    missing = [name for name in _REQUIRED if not nv.has(name)]
    if missing:
        log.warning("NVML library %s lacks %s: not used", path, ", ".join(missing))
        return None
    return nv


def probe_nvml(
    library: str | None = None, *, mig_minors: str = MIG_MINORS
) -> list[GpuDevice] | None:
    """The NVIDIA GPUs NVML sees, or None when NVML is not available.

    ``library`` overrides ``$CORRAL_NVML_LIBRARY`` and the default
    ``libnvidia-ml.so.1``; ``mig_minors`` is where the MIG capability minors are
    read from. A device whose basic facts cannot be read is left out (logged);
    NvmlError if the device count itself cannot be read.
    """
    path = library or os.environ.get(LIBRARY_ENV) or DEFAULT_LIBRARY
    nv = _load(path)
    if nv is None:
        return None
    code = nv.call("nvmlInit_v2")
    if code != SUCCESS:
        log.warning("NVML did not initialize: %s (%d)", nv.message(code), code)
        return None
    try:
        count = _count(nv)
        handles: list[Any] = []
        bus_ids: list[str] = []
        for index in range(count):
            try:
                handle = nv.handle(index)
                bus_ids.append(nv.bus_id(handle))
            except NvmlError as err:
                log.warning("NVML: GPU %d skipped: %s", index, err)
                handle = None
                bus_ids.append("")
            handles.append(handle)
        devices = []
        for index, handle in enumerate(handles):
            if handle is None:
                continue
            try:
                devices.append(_device(nv, index, handle, bus_ids, mig_minors))
            except NvmlError as err:
                log.warning("NVML: GPU %d skipped: %s", index, err)
        return devices
    finally:
        nv.call("nvmlShutdown")


def _count(nv: _Nvml) -> int:
    count = nv.ffi.new("unsigned int *")
    nv.check("nvmlDeviceGetCount_v2", count)
    return int(count[0])
