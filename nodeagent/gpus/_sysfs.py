"""Reading the small sysfs and procfs files the GPU probes need.

Every function takes the path it reads, so tests point them at fake trees.
"""

from __future__ import annotations

import logging
import os
import re

from nodeagent.gpus.model import normalize_bus_id, parse_cpulist

log = logging.getLogger(__name__)

MIB = 1024 * 1024

_CARD = re.compile(r"card(\d+)")
_RENDER = re.compile(r"renderD(\d+)")


def read_text(path: str) -> str | None:
    """The stripped content of ``path``, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as src:
            return src.read().strip()
    except OSError:
        return None


def read_int(path: str, base: int = 10) -> int | None:
    """An integer file (``base`` 0 takes ``0x`` prefixes); None if absent or not a number."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def read_cpulist(path: str) -> tuple[int, ...] | None:
    """A CPU list file (``local_cpulist``, ``node0/cpulist``); None if absent or malformed."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return parse_cpulist(text)
    except ValueError:
        log.warning("cannot parse the CPU list in %s: %r", path, text)
        return None


def device_cpus(device_dir: str, sysfs: str) -> tuple[int, ...]:
    """The CPUs local to a PCI device: its ``local_cpulist``, else its NUMA node's CPUs."""
    cpus = read_cpulist(os.path.join(device_dir, "local_cpulist"))
    if cpus:
        return cpus
    node = read_int(os.path.join(device_dir, "numa_node"))
    if node is not None and node >= 0:
        path = os.path.join(sysfs, "devices", "system", "node", f"node{node}", "cpulist")
        return read_cpulist(path) or ()
    return ()


def pci_slot(device_dir: str) -> str:
    """The PCI address of a device directory (``0000:c1:00.0``); "" if unknown."""
    uevent = read_text(os.path.join(device_dir, "uevent")) or ""
    for line in uevent.splitlines():
        key, _, value = line.partition("=")
        if key == "PCI_SLOT_NAME" and value:
            return normalize_bus_id(value)
    name = os.path.basename(os.path.realpath(device_dir))
    return normalize_bus_id(name) if name.count(":") == 2 else ""


def drm_cards(sysfs: str) -> list[tuple[int, str]]:
    """(card number, ``class/drm/cardN`` path) of each DRM card, connectors left out."""
    base = os.path.join(sysfs, "class", "drm")
    try:
        names = os.listdir(base)
    except OSError:
        return []
    cards = []
    for name in names:
        match = _CARD.fullmatch(name)
        if match:
            cards.append((int(match.group(1)), os.path.join(base, name)))
    return sorted(cards)


def render_node(device_dir: str) -> str | None:
    """The ``renderDN`` name of a DRM device's render node, or None."""
    try:
        names = os.listdir(os.path.join(device_dir, "drm"))
    except OSError:
        return None
    renders = sorted((int(m.group(1)), name) for name in names if (m := _RENDER.fullmatch(name)))
    return renders[0][1] if renders else None


def pci_class_is_display(device_dir: str) -> bool:
    """PCI class 0x03xxxx (VGA, 3D or other display controller)."""
    klass = read_int(os.path.join(device_dir, "class"), 0)
    return klass is not None and klass >> 16 == 0x03


def drm_devices(sysfs: str, vendor: int) -> list[tuple[str, str, str]]:
    """(card path, PCI device path, bus id) of each display-class DRM card of ``vendor``,
    in PCI bus order (the order the vendor libraries index devices in)."""
    found = []
    for _, card in drm_cards(sysfs):
        device = os.path.join(card, "device")
        if read_int(os.path.join(device, "vendor"), 0) != vendor:
            continue
        if not pci_class_is_display(device):
            continue
        found.append((card, device, pci_slot(device)))
    return sorted(found, key=lambda item: item[2])


def with_render_nodes(
    found: list[tuple[str, str, str]], dev: str, vendor: str
) -> list[tuple[str, str, str, str]]:
    """``drm_devices``' (card, device, bus id) with their render node: (card, device,
    bus id, render). A GPU without one in ``dev``/dri cannot run compute: left out, said."""
    usable = []
    for card, device, bus_id in found:
        render = render_node(device)
        if render is None or not os.path.exists(os.path.join(dev, "dri", render)):
            log.warning("%s GPU %s (%s) has no render node: left out", vendor, bus_id, card)
            continue
        usable.append((card, device, bus_id, render))
    return usable


def product_name(device_dir: str, vendor: str) -> str:
    """The model the driver names, else ``<vendor> GPU 0x<device id>``."""
    name = read_text(os.path.join(device_dir, "product_name")) or ""
    if name:
        return name
    device_id = read_int(os.path.join(device_dir, "device"), 0) or 0
    return f"{vendor} GPU 0x{device_id:04x}"


def empty_links(index: int, count: int) -> tuple[int, ...]:
    """Slurm's ``gres_links_create_empty``: -1 at ``index``, 0 elsewhere."""
    return tuple(-1 if i == index else 0 for i in range(count))
