"""GPU probing (nodeagent/gpus): NVML through a fake libnvidia-ml, nvidia-smi
through a fake script, AMD, Intel and Neuron through fake sysfs and /dev trees.

The fake NVML is tests/fakes/fake_nvml.c, compiled here with the C compiler
into a temporary directory; the probe loads it through ``CORRAL_NVML_LIBRARY``
exactly as it loads the driver's library. Without a C compiler these tests
are skipped, except under CI (``$CI`` set), where that fails them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from nodeagent.gpus import (
    GpuDevice,
    GresRecord,
    MigInstance,
    affinity_cores,
    format_gres,
    gres_records,
    links_text,
    normalize_type,
    probe_amd,
    probe_gpus,
    probe_intel,
    probe_neuron,
    probe_nvml,
    probe_smi,
    slurm_type,
)
from nodeagent.gpus.model import (
    format_ranges,
    mig_profile,
    mig_type,
    normalize_bus_id,
    parse_cpulist,
)
from nodeagent.gpus.smi import parse_list, parse_query
from nodeagent.probe import CpuPlace

FAKE_SOURCE = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.c"

# ---------------------------------------------------------------------------
# The host the fakes describe: 2 sockets x 28 cores x 2 threads, Linux numbering.

SOCKET0 = (*range(0, 28), *range(56, 84))
SOCKET1 = (*range(28, 56), *range(84, 112))
PLACES = [CpuPlace(cpu=c, package=(c % 56) // 28, die=0, core=(c % 56) % 28) for c in range(112)]

H100 = "NVIDIA H100 80GB HBM3"
H100_TYPE = "nvidia_h100_80gb_hbm3"
BUSES = (
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
)
MINORS = (0, 1, 2, 3, 4, 5, 7, 6)
NVLINKS = (
    (-1, 6, 2, 0, 0, 0, 0, 0),
    (6, -1, 0, 2, 0, 0, 0, 0),
    (2, 0, -1, 6, 0, 0, 0, 0),
    (0, 2, 6, -1, 0, 0, 0, 0),
    (0, 0, 0, 0, -1, 6, 2, 0),
    (0, 0, 0, 0, 6, -1, 0, 2),
    (0, 0, 0, 0, 2, 0, -1, 6),
    (0, 0, 0, 0, 0, 2, 6, -1),
)


def gpu_uuid(index: int) -> str:
    return f"GPU-6b7e0c3a-91f2-4d5e-8a60-00000000000{index}"


def mig_uuid(gpu: int, mig: int) -> str:
    return f"MIG-0f1e2d3c-4b5a-5968-8776-0000000{gpu}{mig:04d}"


def cap_minor(gpu_minor: int, gi: int, ci: int | None = None) -> int:
    """The minors the fake mig-minors file gives (the driver's layout: 15 GPU
    instances of 8 compute instances per GPU, after ``config`` and ``monitor``)."""
    base = 3 + gpu_minor * 135 + gi * 9
    return base if ci is None else base + 1 + ci


def mig_minors_text() -> str:
    lines = ["config 1", "monitor 2"]
    for gpu in range(8):
        for gi in range(15):
            lines.append(f"gpu{gpu}/gi{gi}/access {cap_minor(gpu, gi)}")
            for ci in range(8):
                lines.append(f"gpu{gpu}/gi{gi}/ci{ci}/access {cap_minor(gpu, gi, ci)}")
    return "\n".join(lines) + "\n"


def mig(gpu: int, index: int, gi: int, profile: str, memory: int, caps: bool = True) -> MigInstance:
    minor = MINORS[gpu]
    files: tuple[str, ...] = (f"/dev/nvidia{minor}",)
    if caps:
        files += (
            f"/dev/nvidia-caps/nvidia-cap{cap_minor(minor, gi)}",
            f"/dev/nvidia-caps/nvidia-cap{cap_minor(minor, gi, 0)}",
        )
    return MigInstance(
        index=index,
        profile=profile,
        type=f"{H100_TYPE}_{profile}",
        uuid=mig_uuid(gpu, index),
        unique_id=f"MIG-{gpu_uuid(gpu)}/{gi}/0",
        memory_mib=memory,
        gpu_instance=gi,
        compute_instance=0,
        files=files,
    )


GPU6_MIGS = tuple(mig(6, j, 7 + j, "1g.10gb", 9984) for j in range(7))
GPU7_MIGS = tuple(mig(7, j, 1 + j, "3g.40gb", 40448) for j in range(2))


def expected_h100s() -> list[GpuDevice]:
    devices = []
    for i in range(8):
        devices.append(
            GpuDevice(
                vendor="nvidia",
                index=i,
                name=H100,
                type=H100_TYPE,
                uuid=gpu_uuid(i),
                memory_mib=81559,
                pci_bus_id=BUSES[i],
                cpus=tuple(sorted(SOCKET0 if i < 4 else SOCKET1)),
                device_file=f"/dev/nvidia{MINORS[i]}",
                links=NVLINKS[i],
                mig_enabled=i >= 6,
                mig={6: GPU6_MIGS, 7: GPU7_MIGS}.get(i, ()),
            )
        )
    return devices


# ---------------------------------------------------------------------------
# Fixtures


def _compiler() -> str:
    found = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler to build the fake NVML (required under CI)")
        pytest.skip("no C compiler to build the fake NVML")
    return found


def _build(directory: Path, *defines: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "libnvidia-ml.so.1"
    command = [_compiler(), "-shared", "-fPIC", "-O1", *defines, "-o", str(target)]
    subprocess.run([*command, str(FAKE_SOURCE)], check=True)
    return str(target)


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _build(tmp_path_factory.mktemp("nvml"))


@pytest.fixture(scope="session")
def old_nvml(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _build(tmp_path_factory.mktemp("nvml-old"), "-DOLD_DRIVER")


@pytest.fixture
def mig_minors(tmp_path: Path) -> str:
    path = tmp_path / "mig-minors"
    path.write_text(mig_minors_text())
    return str(path)


# ---------------------------------------------------------------------------
# NVML


def test_nvml_probe_reads_eight_h100s_with_mig_and_nvlink(
    fake_nvml: str, mig_minors: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRAL_NVML_LIBRARY", fake_nvml)
    assert probe_nvml(mig_minors=mig_minors) == expected_h100s()


def test_nvml_library_argument_wins_over_the_environment(
    fake_nvml: str, mig_minors: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CORRAL_NVML_LIBRARY", str(tmp_path / "absent.so"))
    assert probe_nvml(fake_nvml, mig_minors=mig_minors) == expected_h100s()


def test_no_nvml_library_means_no_nvidia_gpus(tmp_path: Path) -> None:
    assert probe_nvml(str(tmp_path / "libnvidia-ml.so.1")) is None


def test_a_library_that_is_not_nvml_is_not_used() -> None:
    assert probe_nvml("libc.so.6") is None


def test_nvml_that_does_not_initialize_means_no_nvidia_gpus(
    fake_nvml: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML_INIT_RC", "9")  # NVML_ERROR_DRIVER_NOT_LOADED
    assert probe_nvml(fake_nvml) is None


def test_mig_devices_without_mig_minors_keep_only_the_gpu_file(
    fake_nvml: str, tmp_path: Path
) -> None:
    devices = probe_nvml(fake_nvml, mig_minors=str(tmp_path / "absent"))
    assert devices is not None
    assert devices[6].mig == tuple(mig(6, j, 7 + j, "1g.10gb", 9984, caps=False) for j in range(7))


def test_old_driver_mig_profile_comes_from_the_mig_device_name(
    old_nvml: str, mig_minors: str
) -> None:
    """Without nvmlDeviceGetAttributes_v2: the profile from the name, memory from MemoryInfo."""
    assert probe_nvml(old_nvml, mig_minors=mig_minors) == expected_h100s()


# ---------------------------------------------------------------------------
# The model: Slurm's names and notations


def test_slurm_types_are_underscored_lower_case_names() -> None:
    assert slurm_type("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3"
    assert slurm_type("Tesla V100-SXM2-16GB") == "tesla_v100-sxm2-16gb"
    assert slurm_type("AMD Instinct MI250X") == "amd_instinct_mi250x"


def test_mig_types_cut_the_gpu_type_at_its_first_dash() -> None:
    assert mig_type("nvidia_a100-sxm4-40gb", "1g.5gb") == "nvidia_a100_1g.5gb"
    assert mig_type(H100_TYPE, "3g.40gb") == "nvidia_h100_80gb_hbm3_3g.40gb"


def test_mig_profile_rounds_gib_half_up() -> None:
    assert mig_profile(1, 4864) == "1g.5gb"  # 4.75
    assert mig_profile(1, 9984) == "1g.10gb"  # 9.75
    assert mig_profile(3, 40448) == "3g.40gb"  # 39.5
    assert mig_profile(7, 80384) == "7g.79gb"  # 78.5 -> 79 (Python's round gives 78)


def test_configured_types_replace_detected_ones_longest_first() -> None:
    assert normalize_type(H100_TYPE, ["h100"]) == "h100"
    assert normalize_type("tesla_k20m1", ["k20m", "k20m1"]) == "k20m1"
    assert normalize_type("tesla_k20m", ["k20m", "k20m1"]) == "k20m"
    assert normalize_type(H100_TYPE, ["a100"]) == H100_TYPE
    assert normalize_type("NVIDIA_H100", ["h100"]) == "h100"


def test_bus_ids_take_the_sysfs_form() -> None:
    assert normalize_bus_id("00000000:1A:00.0") == "0000:1a:00.0"
    assert normalize_bus_id("0000:c1:00.0") == "0000:c1:00.0"
    assert normalize_bus_id("00010000:01:00.0") == "10000:01:00.0"


def test_cpu_lists() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpulist("") == ()
    with pytest.raises(ValueError):
        parse_cpulist("3-1")
    assert format_ranges([8, 0, 1, 2, 3, 10, 11]) == "0-3,8,10-11"
    assert format_ranges([0, 1]) == "0-1"


def test_affinity_cores_are_slurm_core_ids() -> None:
    assert affinity_cores(SOCKET0, PLACES) == tuple(range(28))
    assert affinity_cores(SOCKET1, PLACES) == tuple(range(28, 56))
    assert affinity_cores([0, 56, 200], PLACES) == (0,)


def test_links_text() -> None:
    assert links_text(NVLINKS[0]) == "-1,6,2,0,0,0,0,0"


def test_gres_records_stand_mig_gpus_for_their_instances() -> None:
    records = gres_records(expected_h100s())
    assert len(records) == 6 + 7 + 2
    assert records[0] == GresRecord(
        type=H100_TYPE,
        files=("/dev/nvidia0",),
        cpus=tuple(sorted(SOCKET0)),
        links=NVLINKS[0],
        unique_id=gpu_uuid(0),
    )
    assert records[6] == GresRecord(
        type=f"{H100_TYPE}_1g.10gb",
        files=(
            "/dev/nvidia7",
            f"/dev/nvidia-caps/nvidia-cap{cap_minor(7, 7)}",
            f"/dev/nvidia-caps/nvidia-cap{cap_minor(7, 7, 0)}",
        ),
        cpus=tuple(sorted(SOCKET1)),
        links=(),
        unique_id=f"MIG-{gpu_uuid(6)}/7/0",
    )
    assert records[-1].files[0] == "/dev/nvidia6"


def test_gres_text_as_scontrol_shows_it() -> None:
    whole = [dataclasses.replace(d, mig_enabled=False, mig=()) for d in expected_h100s()]
    assert format_gres(whole, PLACES, types=["h100"]) == "gpu:h100:8(S:0-1)"
    assert format_gres(whole, PLACES) == f"gpu:{H100_TYPE}:8(S:0-1)"
    assert format_gres(whole[:4], PLACES, types=["h100"]) == "gpu:h100:4(S:0)"
    assert format_gres(whole, PLACES, types=()) == "gpu:8(S:0-1)"
    no_affinity = [dataclasses.replace(d, cpus=()) for d in whole]
    assert format_gres(no_affinity, PLACES, types=["h100"]) == "gpu:h100:8"
    assert format_gres(whole * 128, PLACES, types=["h100"]) == "gpu:h100:1K(S:0-1)"
    assert format_gres([], PLACES) == ""


def test_gres_text_with_mig() -> None:
    devices = expected_h100s()
    assert format_gres(devices, PLACES) == (
        f"gpu:{H100_TYPE}:6(S:0-1),gpu:{H100_TYPE}_1g.10gb:7(S:1),gpu:{H100_TYPE}_3g.40gb:2(S:1)"
    )
    assert format_gres(devices, PLACES, types=["h100", "1g.10gb", "3g.40gb"]) == (
        "gpu:h100:6(S:0-1),gpu:1g.10gb:7(S:1),gpu:3g.40gb:2(S:1)"
    )
    # As in slurmd, a configured type matches any detected type containing it.
    assert format_gres(devices, PLACES, types=["h100"]) == "gpu:h100:15(S:0-1)"


# ---------------------------------------------------------------------------
# nvidia-smi

QUERY_OUT = "".join(
    f"{i}, {H100}, {gpu_uuid(i)}, 81559, 0000{bus.upper()}\n" for i, bus in enumerate(BUSES)
)
MODES_OUT = "".join(f"{i}, {'Enabled' if i >= 6 else 'Disabled'}\n" for i in range(8))


def list_out(old_uuids: bool = False) -> str:
    lines = []
    for i in range(8):
        lines.append(f"GPU {i}: {H100} (UUID: {gpu_uuid(i)})")
        instances = {6: GPU6_MIGS, 7: GPU7_MIGS}.get(i, ())
        for instance in instances:
            uuid = instance.unique_id if old_uuids else instance.uuid
            lines.append(f"  MIG {instance.profile:<11} Device {instance.index:>2}: (UUID: {uuid})")
    return "\n".join(lines) + "\n"


def write_smi(directory: Path, *, listing: str, modes: str | None = MODES_OUT) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "query.txt").write_text(QUERY_OUT)
    (directory / "list.txt").write_text(listing)
    mode_case = (
        f'"--query-gpu=index,mig.mode.current --format=csv,noheader") cat "{directory}/modes.txt";;'
        if modes is not None
        else ""
    )
    if modes is not None:
        (directory / "modes.txt").write_text(modes)
    script = directory / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '"--query-gpu=index,name,uuid,memory.total,pci.bus_id --format=csv,noheader,nounits")'
        f' cat "{directory}/query.txt";;\n'
        f"{mode_case}\n"
        f'"-L") cat "{directory}/list.txt";;\n'
        '*) echo "Field is not a valid field to query." >&2; exit 2;;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def smi_host(root: Path) -> tuple[str, str]:
    """A /proc with the driver's per-GPU information and a sysfs with local_cpulist."""
    proc, sysfs = root / "proc", root / "sys"
    for i, bus in enumerate(BUSES):
        info = proc / "driver" / "nvidia" / "gpus" / bus
        info.mkdir(parents=True)
        (info / "information").write_text(
            f"Model: \t\t {H100}\nIRQ:   \t\t 42\nGPU UUID: \t {gpu_uuid(i)}\n"
            f"Device Minor: \t {MINORS[i]}\nBus Location: \t {bus}\n"
        )
        pci = sysfs / "bus" / "pci" / "devices" / bus
        pci.mkdir(parents=True)
        (pci / "local_cpulist").write_text("0-27,56-83\n" if i < 4 else "28-55,84-111\n")
    return str(proc), str(sysfs)


def expected_from_smi(*, old_uuids: bool, mig_minors: bool) -> list[GpuDevice]:
    devices = []
    for device in expected_h100s():
        migs = []
        for instance in device.mig:
            if old_uuids:
                caps = mig(device.index, instance.index, instance.gpu_instance or 0, "", 0, True)
                migs.append(
                    dataclasses.replace(
                        instance,
                        uuid=instance.unique_id,
                        memory_mib=0,
                        files=caps.files if mig_minors else caps.files[:1],
                    )
                )
            else:
                migs.append(
                    dataclasses.replace(
                        instance,
                        unique_id="",
                        memory_mib=0,
                        gpu_instance=None,
                        compute_instance=None,
                        files=instance.files[:1],
                    )
                )
        devices.append(dataclasses.replace(device, links=(), mig=tuple(migs)))
    return devices


def test_smi_fallback_reads_gpus_and_mig_devices(tmp_path: Path) -> None:
    write_smi(tmp_path / "bin", listing=list_out())
    proc, sysfs = smi_host(tmp_path)
    devices = probe_smi(str(tmp_path / "bin" / "nvidia-smi"), sysfs=sysfs, proc=proc)
    assert devices == expected_from_smi(old_uuids=False, mig_minors=False)


def test_smi_fallback_with_old_mig_uuids_finds_instance_ids(tmp_path: Path) -> None:
    write_smi(tmp_path / "bin", listing=list_out(old_uuids=True), modes=None)
    proc, sysfs = smi_host(tmp_path)
    minors = tmp_path / "mig-minors"
    minors.write_text(mig_minors_text())
    devices = probe_smi(
        str(tmp_path / "bin" / "nvidia-smi"), sysfs=sysfs, proc=proc, mig_minors=str(minors)
    )
    assert devices == expected_from_smi(old_uuids=True, mig_minors=True)


def test_smi_is_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_smi(tmp_path / "bin", listing=list_out())
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    devices = probe_smi(sysfs=str(tmp_path / "nosys"), proc=str(tmp_path / "noproc"))
    assert devices is not None
    assert [d.device_file for d in devices] == [f"/dev/nvidia{i}" for i in range(8)]
    assert all(d.cpus == () for d in devices)


def test_smi_missing_failing_or_hanging_means_none(tmp_path: Path) -> None:
    assert probe_smi(str(tmp_path / "nvidia-smi")) is None
    failing = tmp_path / "failing"
    failing.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate'\nexit 9\n"
    )
    failing.chmod(0o755)
    assert probe_smi(str(failing)) is None
    hanging = tmp_path / "hanging"
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(0o755)
    assert probe_smi(str(hanging), timeout=0.3) is None


def test_smi_parsers() -> None:
    assert parse_query("0, Tesla T4, GPU-1, [N/A], 00000000:3B:00.0\nbad line\n") == [
        (0, "Tesla T4", "GPU-1", 0, "00000000:3B:00.0")
    ]
    assert parse_list("GPU 0: A (UUID: GPU-a)\n  MIG 1g.5gb Device 0: (UUID: MIG-x)\n") == {
        0: [("1g.5gb", 0, "MIG-x")]
    }


# ---------------------------------------------------------------------------
# Fake sysfs trees


def pci_gpu(
    sysfs: Path,
    bus: str,
    card: int,
    render: int,
    files: dict[str, str],
    card_files: dict[str, str] | None = None,
) -> None:
    """A PCI device under sysfs/devices with its DRM card and render node, and the
    /sys/class/drm links to them, as the kernel lays them out."""
    device = sysfs / "devices" / "pci0000:00" / bus
    (device / "drm").mkdir(parents=True)
    (device / "uevent").write_text(f"DRIVER=x\nPCI_SLOT_NAME={bus}\n")
    for name, text in files.items():
        (device / name).write_text(text + "\n")
    drm = sysfs / "class" / "drm"
    drm.mkdir(parents=True, exist_ok=True)
    for node in (f"card{card}", f"renderD{render}"):
        (device / "drm" / node).mkdir()
        (device / "drm" / node / "device").symlink_to("../..")
        (drm / node).symlink_to(f"../../devices/pci0000:00/{bus}/drm/{node}")
    for name, text in (card_files or {}).items():
        (device / "drm" / f"card{card}" / name).write_text(text + "\n")
    (drm / f"card{card}-DP-1").mkdir()


def dev_tree(root: Path, names: list[str]) -> str:
    dev = root / "dev"
    (dev / "dri").mkdir(parents=True, exist_ok=True)
    for name in names:
        (dev / name).touch()
    return str(dev)


def aspeed(sysfs: Path) -> None:
    """The BMC's VGA controller, a DRM card that is not a GPU to schedule."""
    pci_gpu(sysfs, "0000:03:00.0", 0, 200, {"vendor": "0x1a03", "class": "0x030000"})


AMD_BUSES = (
    "0000:c1:00.0",
    "0000:c6:00.0",
    "0000:c9:00.0",
    "0000:ce:00.0",
    "0000:d1:00.0",
    "0000:d6:00.0",
    "0000:d9:00.0",
    "0000:de:00.0",
)
AMD_CARDS = (5, 6, 7, 8, 1, 2, 3, 4)  # card numbers need not follow bus order


def amd_host(root: Path) -> tuple[str, str]:
    sysfs = root / "sys"
    aspeed(sysfs)
    for i, bus in enumerate(AMD_BUSES):
        files = {
            "vendor": "0x1002",
            "device": "0x740c",
            "class": "0x038000",
            "product_name": "AMD Instinct MI250X",
            "mem_info_vram_total": str(68702699520),
            "unique_id": f"4C0B5A7E1D2F30{i:02X}",
        }
        if i < 4:
            files["local_cpulist"] = "0-27,56-83"
        else:  # only the NUMA node: its CPUs come from the node's cpulist
            files["numa_node"] = "1"
        card = AMD_CARDS[i]
        pci_gpu(sysfs, bus, card, 127 + card, files)
    node1 = sysfs / "devices" / "system" / "node" / "node1"
    node1.mkdir(parents=True)
    (node1 / "cpulist").write_text("28-55,84-111\n")
    renders = [f"dri/renderD{127 + card}" for card in AMD_CARDS]
    return str(sysfs), dev_tree(root, ["kfd", *renders, "dri/renderD200"])


def expected_mi250x() -> list[GpuDevice]:
    return [
        GpuDevice(
            vendor="amd",
            index=i,
            name="AMD Instinct MI250X",
            type="amd_instinct_mi250x",
            uuid=f"4c0b5a7e1d2f30{i:02x}",
            memory_mib=65520,
            pci_bus_id=bus,
            cpus=tuple(sorted(SOCKET0 if i < 4 else SOCKET1)),
            device_file=f"/dev/dri/renderD{127 + AMD_CARDS[i]}",
            links=tuple(-1 if j == i else 0 for j in range(8)),
        )
        for i, bus in enumerate(AMD_BUSES)
    ]


def test_amd_gpus_from_sysfs(tmp_path: Path) -> None:
    sysfs, dev = amd_host(tmp_path)
    devices = probe_amd(sysfs, dev)
    assert devices == expected_mi250x()
    assert format_gres(devices, PLACES, types=["mi250x"]) == "gpu:mi250x:8(S:0-1)"


def test_amd_gpus_need_kfd(tmp_path: Path) -> None:
    sysfs, dev = amd_host(tmp_path)
    os.unlink(os.path.join(dev, "kfd"))
    assert probe_amd(sysfs, dev) == []


def test_amd_gpu_without_render_node_is_left_out(tmp_path: Path) -> None:
    sysfs, dev = amd_host(tmp_path)
    os.unlink(os.path.join(dev, "dri", f"renderD{127 + AMD_CARDS[0]}"))
    devices = probe_amd(sysfs, dev)
    assert [d.pci_bus_id for d in devices] == list(AMD_BUSES[1:])
    assert [d.index for d in devices] == list(range(7))
    assert devices[0].links == (-1, 0, 0, 0, 0, 0, 0)


def test_amd_gpu_without_product_name_is_named_by_device_id(tmp_path: Path) -> None:
    sysfs, dev = amd_host(tmp_path)
    os.unlink(os.path.join(sysfs, "devices", "pci0000:00", AMD_BUSES[0], "product_name"))
    devices = probe_amd(sysfs, dev)
    assert (devices[0].name, devices[0].type) == ("AMD GPU 0x740c", "amd_gpu_0x740c")


INTEL_BUSES = ("0000:29:00.0", "0000:3a:00.0", "0000:9a:00.0", "0000:ca:00.0")


def intel_host(root: Path) -> tuple[str, str]:
    sysfs = root / "sys"
    aspeed(sysfs)
    for i, bus in enumerate(INTEL_BUSES):
        files = {
            "vendor": "0x8086",
            "device": "0x0bd5",
            "class": "0x038000",
            "local_cpulist": "0-27,56-83" if i < 2 else "28-55,84-111",
        }
        lmem = {"prelim_lmem_total_bytes": str(136365211648)} if i != 3 else None
        pci_gpu(sysfs, bus, i + 1, 128 + i, files, lmem)
    return str(sysfs), dev_tree(root, [f"dri/renderD{128 + i}" for i in range(4)])


def test_intel_gpus_from_sysfs(tmp_path: Path) -> None:
    sysfs, dev = intel_host(tmp_path)
    devices = probe_intel(sysfs, dev)
    assert devices == [
        GpuDevice(
            vendor="intel",
            index=i,
            name="Intel GPU 0x0bd5",
            type="intel_gpu_0x0bd5",
            uuid="",
            memory_mib=130048 if i != 3 else 0,
            pci_bus_id=bus,
            cpus=tuple(sorted(SOCKET0 if i < 2 else SOCKET1)),
            device_file=f"/dev/dri/renderD{128 + i}",
            links=tuple(-1 if j == i else 0 for j in range(4)),
        )
        for i, bus in enumerate(INTEL_BUSES)
    ]
    assert format_gres(devices, PLACES, types=["0bd5"]) == "gpu:0bd5:4(S:0-1)"


def neuron_host(root: Path, *, with_sysfs: bool) -> tuple[str, str]:
    dev = dev_tree(root, [f"neuron{i}" for i in range(4)] + ["neuron_dbg", "null"])
    sysfs = root / "sys"
    if with_sysfs:
        ring = {0: "1, 3", 1: "0, 2", 2: "1, 3", 3: "2, 0"}
        for i in range(4):
            base = sysfs / "devices" / "virtual" / "neuron_device" / f"neuron{i}"
            (base / "info" / "architecture").mkdir(parents=True)
            (base / "info" / "architecture" / "device_name").write_text("Trainium2\n")
            (base / "connected_devices").write_text(ring[i] + "\n")
            if i != 3:
                (base / "core_count").write_text("8\n")
            pci = sysfs / "devices" / "pci0000:00" / f"0000:{0x10 + i:02x}:00.0"
            pci.mkdir(parents=True)
            (pci / "uevent").write_text(f"PCI_SLOT_NAME=0000:{0x10 + i:02x}:00.0\n")
            (pci / "local_cpulist").write_text("0-27,56-83\n" if i < 2 else "28-55,84-111\n")
            (base / "device").symlink_to(pci)
    return dev, str(sysfs)


def test_neuron_devices(tmp_path: Path) -> None:
    dev, sysfs = neuron_host(tmp_path, with_sysfs=True)
    links = ((-1, 1, 0, 1), (1, -1, 1, 0), (0, 1, -1, 1), (1, 0, 1, -1))
    devices = probe_neuron(dev, sysfs)
    assert devices == [
        GpuDevice(
            vendor="aws",
            index=i,
            name="Trainium2",
            type="trainium2",
            uuid="",
            memory_mib=0,
            pci_bus_id=f"0000:{0x10 + i:02x}:00.0",
            cpus=tuple(sorted(SOCKET0 if i < 2 else SOCKET1)),
            device_file=f"/dev/neuron{i}",
            links=links[i],
            cores=8 if i != 3 else 2,
        )
        for i in range(4)
    ]
    assert format_gres(devices, PLACES) == "gpu:trainium2:4(S:0-1)"


def test_neuron_cores_follow_each_devices_core_count(tmp_path: Path) -> None:
    from nodeagent.gpus.neuron import NeuronBinding, visible_cores

    _, sysfs = neuron_host(tmp_path, with_sysfs=True)  # 8 cores each, 2 on neuron3
    assert visible_cores([1], sysfs) == "8-15"
    assert visible_cores([0, 3], sysfs) == "0-7,24-25"
    assert visible_cores([], sysfs) == ""
    assert visible_cores([2], str(tmp_path / "none")) == "4-5"  # no sysfs: 2 per device
    binding = NeuronBinding(["trn1"], sysfs)
    assert binding.environment("trn1", [1, 2]) == {"NEURON_RT_VISIBLE_CORES": "8-23"}
    assert binding.environment("trn1", [2]) == {"NEURON_RT_VISIBLE_CORES": "16-23"}
    assert binding.environment("gpu1", [1, 2]) == {}  # not a Neuron node
    assert binding.environment("trn1", []) == {}


def test_neuron_devices_without_sysfs(tmp_path: Path) -> None:
    dev, sysfs = neuron_host(tmp_path, with_sysfs=False)
    devices = probe_neuron(dev, sysfs)
    assert [(d.index, d.device_file, d.cores, d.type, d.links) for d in devices] == [
        (i, f"/dev/neuron{i}", 2, "", ()) for i in range(4)
    ]
    assert format_gres(devices, PLACES) == "gpu:4"
    assert probe_neuron(str(tmp_path / "nodev"), sysfs) == []


# ---------------------------------------------------------------------------
# probe_gpus and AutoDetect


def mixed_host(root: Path) -> tuple[str, str, str]:
    """AMD, Intel and Neuron devices at once: (sysfs, dev, proc)."""
    sysfs, dev = amd_host(root)
    pci_gpu(
        Path(sysfs),
        "0000:e1:00.0",
        20,
        150,
        {"vendor": "0x8086", "device": "0x56c0", "class": "0x030000"},
    )
    Path(dev, "dri", "renderD150").touch()
    for i in range(2):
        Path(dev, f"neuron{i}").touch()
    return sysfs, dev, str(root / "proc")


def test_probe_gpus_prefers_nvidia_then_amd(fake_nvml: str, tmp_path: Path) -> None:
    sysfs, dev, proc = mixed_host(tmp_path)
    absent = str(tmp_path / "absent.so")
    no_smi = str(tmp_path / "no-nvidia-smi")

    def probe(autodetect: str | None, library: str = fake_nvml) -> list[GpuDevice]:
        return probe_gpus(
            autodetect, nvml_library=library, smi=no_smi, sysfs=sysfs, dev=dev, proc=proc
        )

    assert [d.vendor for d in probe(None)] == ["nvidia"] * 8
    assert probe("full", absent) == expected_mi250x()
    assert probe("NVML", absent) == []
    assert probe("rsmi") == expected_mi250x()
    assert [(d.vendor, d.type, d.device_file) for d in probe("oneapi")] == [
        ("intel", "intel_gpu_0x56c0", "/dev/dri/renderD150")
    ]
    assert [(d.vendor, d.device_file) for d in probe("nrt")] == [
        ("aws", "/dev/neuron0"),
        ("aws", "/dev/neuron1"),
    ]
    assert probe("off") == []
    with pytest.raises(ValueError, match="AutoDetect"):
        probe("cuda")


def test_probe_gpus_falls_back_to_nvidia_smi(tmp_path: Path) -> None:
    write_smi(tmp_path / "bin", listing=list_out())
    proc, sysfs = smi_host(tmp_path)
    devices = probe_gpus(
        "nvml",
        nvml_library=str(tmp_path / "absent.so"),
        smi=str(tmp_path / "bin" / "nvidia-smi"),
        sysfs=sysfs,
        proc=proc,
        dev=str(tmp_path / "dev"),
    )
    assert devices == expected_from_smi(old_uuids=False, mig_minors=False)


def test_probe_gpus_reads_mig_minors_under_proc(fake_nvml: str, tmp_path: Path) -> None:
    caps = tmp_path / "proc" / "driver" / "nvidia-caps"
    caps.mkdir(parents=True)
    (caps / "mig-minors").write_text(mig_minors_text())
    devices = probe_gpus(
        nvml_library=fake_nvml,
        sysfs=str(tmp_path / "sys"),
        dev=str(tmp_path / "dev"),
        proc=str(tmp_path / "proc"),
    )
    assert devices == expected_h100s()


# ---------------------------------------------------------------------------
# Registration: what the agent reports and the controller checks


def test_the_agent_reports_its_gpus_under_the_configured_type(
    fake_nvml: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from corral.config import load, parse
    from nodeagent.agent import found_gpus
    from nodeagent.probe import CpuPlace

    monkeypatch.setenv("CORRAL_NVML_LIBRARY", fake_nvml)
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=c\nSlurmctldHost=h(127.0.0.1)\nGresTypes=gpu\n"
        "NodeName=dgx1 CPUs=112 Gres=gpu:h100:8\nPartitionName=p Nodes=dgx1\n"
    )
    trusted = load(str(tmp_path / "slurm.conf"))  # no gres.conf: Gres= is taken on trust
    assert found_gpus(trusted, trusted.node("dgx1"), []) is None
    (tmp_path / "gres.conf").write_text("AutoDetect=nvml\n")
    conf = load(str(tmp_path / "slurm.conf"))
    places = [CpuPlace(cpu, cpu // 56, 0, cpu % 28) for cpu in range(112)]
    found = found_gpus(conf, conf.node("dgx1"), places)
    assert found is not None and found.startswith("gpu:h100:")
    assert found.endswith("(S:0-1)")
    off = parse(
        "ClusterName=c\nSlurmctldHost=h(127.0.0.1)\n"
        "NodeName=cpu1 CPUs=4\nPartitionName=p Nodes=cpu1\n",
        str(tmp_path / "cpu.conf"),
    )
    assert found_gpus(off, off.node("cpu1"), places) is None  # no GPU configured: no probe


def test_a_node_with_fewer_gpus_than_configured_is_drained_with_slurms_reason() -> None:
    from controller.drain import gres_shortfall as _gres_shortfall

    assert _gres_shortfall("gpu:h100:8", "gpu:h100:8(S:0-1)") == ""
    assert _gres_shortfall("gpu:h100:8", "gpu:h100:4(S:0)") == (
        "gres/gpu count reported lower than configured (4 < 8)"
    )
    assert _gres_shortfall("gpu:h100:8,craynetwork:4", "") == (
        "gres/gpu count reported lower than configured (0 < 8)"
    )


def test_mig_instances_are_bound_by_uuid() -> None:
    from nodeagent.gpus.migbinding import bind_mig, mig_uuids

    # GPUs 0-5 whole, GPU 6 in seven 1g.10gb instances, GPU 7 in two 3g.40gb ones,
    # numbered as the controller numbers them from Gres= (types in its order).
    numbering = [("h100", i) for i in range(6)]
    numbering += [("1g.10gb", 6 + i) for i in range(7)] + [("3g.40gb", 13), ("3g.40gb", 14)]
    uuids = mig_uuids(expected_h100s(), numbering)
    assert uuids == {
        **{6 + j: mig_uuid(6, j) for j in range(7)},
        13: mig_uuid(7, 0),
        14: mig_uuid(7, 1),
    }
    env = {"CUDA_VISIBLE_DEVICES": "2,7,14"}
    bind_mig(env, uuids)
    assert env["CUDA_VISIBLE_DEVICES"] == f"2,{mig_uuid(6, 1)},{mig_uuid(7, 1)}"
    whole = {"CUDA_VISIBLE_DEVICES": "0,1"}
    bind_mig(whole, uuids)
    assert whole == {"CUDA_VISIBLE_DEVICES": "0,1"}
    # An untyped Gres= (gpu:15) numbers the same records in probe order.
    assert mig_uuids(expected_h100s(), [("", i) for i in range(15)])[6] == mig_uuid(6, 0)


def test_probed_gpus_give_isolation_their_device_files() -> None:
    from nodeagent.gpus.migbinding import probed_files

    numbering = [("h100", i) for i in range(6)]
    numbering += [("1g.10gb", 6 + i) for i in range(7)] + [("3g.40gb", 13), ("3g.40gb", 14)]
    files = dict(probed_files(expected_h100s(), numbering))
    assert files[0] == (expected_h100s()[0].device_file,)
    # A MIG instance: its GPU's file, then its GI and CI capability files.
    h100s = expected_h100s()
    assert files[6] == h100s[6].mig[0].files and files[6][0] == h100s[6].device_file
    assert files[14] == h100s[7].mig[1].files
    assert sorted(files) == list(range(15))
    from nodeagent.gpus.migbinding import probed_cpus

    near = dict(probed_cpus(h100s, numbering))
    assert near[0] == h100s[0].cpus and near[14] == h100s[7].cpus  # a MIG instance: its GPU's
