"""GPU isolation with the cgroup v2 device program (nodeagent/devcgroup.py).

The kernel tests load and attach real programs to real cgroups and open real
device nodes (made with mknod in tmp_path, with the numbers of /dev/null,
/dev/zero and /dev/full); they need root and a cgroup2 mount, and every cgroup
they make is removed afterwards.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.config import SlurmConfig, load
from nodeagent import devcgroup
from nodeagent.agent import device_guard, gpu_files
from nodeagent.devcgroup import CHAR, DeviceGuard
from nodeagent.runas import LaunchError
from nodeagent.spool import JobDir, LaunchSpec, StepSpec

REPO = Path(__file__).resolve().parents[2]
NULL, ZERO, FULL, RANDOM = (CHAR, 1, 3), (CHAR, 1, 5), (CHAR, 1, 7), (CHAR, 1, 8)

TOP = devcgroup.default_top()
WHY_NOT = devcgroup.unavailable(TOP)
needs_kernel = pytest.mark.skipif(WHY_NOT is not None, reason=f"no device isolation: {WHY_NOT}")


def mknod(path: Path, rule: tuple[int, int, int]) -> str:
    kind, major, minor = rule
    assert kind == CHAR
    os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))  # S_IFCHR
    return str(path)


def remove_tree(path: str) -> None:
    """rmdir a cgroup tree bottom-up (cgroups are removed with rmdir, never unlinked)."""
    if not os.path.isdir(path):
        return
    for name in os.listdir(path):
        child = os.path.join(path, name)
        if os.path.isdir(child):
            remove_tree(child)
    try:
        os.rmdir(path)
    except OSError as exc:
        raise AssertionError(f"cgroup {path} left behind: {exc}") from None


@pytest.fixture
def node_top() -> Iterator[str]:
    """A node's directory of its own under <cgroup2>/corral, removed afterwards."""
    assert TOP is not None
    path = os.path.join(TOP, f"unit{os.getpid()}")
    try:
        yield path
    finally:
        remove_tree(path)
        try:
            os.rmdir(TOP)
        except OSError as exc:  # an agent running meanwhile may use it
            assert exc.errno in (errno.ENOENT, errno.EBUSY, errno.ENOTEMPTY), exc


# ------------------------------------------------------------------ no kernel needed


def decode(code: bytes) -> list[tuple[int, int, int, int, int]]:
    out = []
    for offset in range(0, len(code), 8):
        op, regs, off, imm = struct.unpack_from("<BBhi", code, offset)
        out.append((op, regs & 0xF, regs >> 4, off, imm))
    return out


def test_program_refuses_each_listed_device_and_allows_the_rest() -> None:
    insns = decode(devcgroup.program([ZERO, FULL, ZERO]))
    assert len(insns) == 4 + 2 * 5 + 2  # the context, a block per distinct rule, allow
    assert insns[0] == (0x61, 2, 1, 0, 0)  # r2 = ctx->access_type
    assert insns[1] == (0x57, 2, 0, 0, 0xFFFF)  # r2 &= 0xffff: the device kind
    assert insns[2:4] == [(0x61, 3, 1, 4, 0), (0x61, 4, 1, 8, 0)]  # r3 = major, r4 = minor
    assert insns[4:9] == [
        (0x55, 2, 0, 4, CHAR),
        (0x55, 3, 0, 3, 1),
        (0x55, 4, 0, 2, 5),
        (0xB7, 0, 0, 0, 0),  # r0 = 0: refused
        (0x95, 0, 0, 0, 0),
    ]
    assert insns[9 + 2][4] == 7  # the second rule: /dev/full's minor
    assert insns[-2:] == [(0xB7, 0, 0, 0, 1), (0x95, 0, 0, 0, 0)]  # anything else: allowed
    assert decode(devcgroup.program([])) == insns[:4] + insns[-2:]


def test_a_confined_program_numbers_its_gpus_from_zero() -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "4,6",
        "GPU_DEVICE_ORDINAL": "4,6",
        "ROCR_VISIBLE_DEVICES": "4,6",
        "ZE_AFFINITY_MASK": "6",
        "SLURM_JOB_GPUS": "4,6",
    }
    devcgroup.local_binding(env, {4, 6})
    assert env == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "GPU_DEVICE_ORDINAL": "0,1",
        "ROCR_VISIBLE_DEVICES": "0,1",
        "ZE_AFFINITY_MASK": "1",  # GPU 6 is the second the job sees
        "SLURM_JOB_GPUS": "4,6",  # the node's indices
    }
    for value in ("3", "GPU-8e6a", "4,x", ""):  # not the job's, or not indices: left alone
        untouched = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": value}
        devcgroup.local_binding(untouched, {4})
        assert untouched == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": value}
    only = {"PATH": "/bin"}
    devcgroup.local_binding(only, {2})  # none set: none added
    assert only == {"PATH": "/bin"}


def test_cgroup2_mount_is_read_from_the_mount_table(tmp_path: Path) -> None:
    table = tmp_path / "mounts"
    table.write_text(
        "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
        "cgroup /sys/fs/cgroup/devices cgroup rw,devices 0 0\n"
        "cgroup2 /sys/fs/cgroup/uni\\040fied cgroup2 rw 0 0\n"
    )
    assert devcgroup.cgroup2_mount(str(table)) == "/sys/fs/cgroup/uni fied"
    table.write_text("proc /proc proc rw 0 0\n")
    assert devcgroup.cgroup2_mount(str(table)) is None
    assert devcgroup.cgroup2_mount(str(tmp_path / "missing")) is None


def test_isolation_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert devcgroup.unavailable("/sys/fs/cgroup/corral") == "the node agent is not root"


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_guard_refuses_the_files_of_the_gpus_not_given(tmp_path: Path) -> None:
    gpu0, gpu1 = mknod(tmp_path / "gpu0", NULL), mknod(tmp_path / "gpu1", ZERO)
    # A MIG-like GPU 2: its own file plus gpu0's, shared with GPU 0.
    cap = mknod(tmp_path / "cap2", FULL)
    plain = tmp_path / "plain"
    plain.write_text("no device")
    guard = DeviceGuard(
        "/cg/corral",
        {"n1": [(0, [gpu0]), (1, [gpu1]), (2, [cap, gpu0]), (3, [str(plain), "/nonexistent"])]},
    )
    assert guard.denied("n1", {0}) == [ZERO, FULL]
    assert guard.denied("n1", {1}) == [NULL, FULL]
    assert guard.denied("n1", {2}) == [ZERO]  # gpu0's file goes with GPU 2 too
    assert guard.denied("n1", {0, 1, 2, 3}) == []
    assert guard.denied("n1", set()) == [NULL, ZERO, FULL]
    assert guard.denied("n2", set()) == []  # no GPU files on n2
    assert guard.confine("n1", 12, devcgroup.BATCH, {0, 1, 2}) == ("", [])  # nothing to refuse
    assert guard.confine("n1", 12, "step_3", {1}) == (
        "/cg/corral/n1/job_12/step_3",
        [[CHAR, 1, 3], [CHAR, 1, 7]],
    )


def write_conf(tmp_path: Path, gres: str) -> SlurmConfig:
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=c\nSlurmctldHost=ctl(127.0.0.1)\nGresTypes=gpu\n"
        "NodeName=n[1-2] CPUs=2 Gres=gpu:a100:2,gpu:v100:2\nPartitionName=p Nodes=ALL\n"
    )
    (tmp_path / "gres.conf").write_text(gres)
    return load(str(tmp_path / "slurm.conf"))


def test_the_agent_numbers_the_gpus_as_the_controller_does(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path,
        "NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[4-5]\n"
        "NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia[0-1]\n"
        "NodeName=n2 Name=gpu Type=a100 Count=2\nNodeName=n2 Name=gpu Type=v100 Count=2\n",
    )
    assert gpu_files(conf, "n1") == [
        (4, ("/dev/nvidia4",)),
        (5, ("/dev/nvidia5",)),
        (0, ("/dev/nvidia0",)),
        (1, ("/dev/nvidia1",)),
    ]
    assert gpu_files(conf, "n2") == []  # no File=: nothing to confine


def test_the_agent_confines_only_nodes_with_gpu_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = write_conf(tmp_path, "NodeName=n1 Name=gpu File=/dev/nvidia[0-3]\n")
    n1, n2 = conf.node("n1"), conf.node("n2")
    assert device_guard(conf, [n2]) is None  # n2 has none: nothing tried, nothing said
    assert caplog.records == []
    # Where isolation cannot work (no cgroup file system there), it is said once,
    # and a launch with GPUs to refuse is refused rather than run unfenced.
    broken = device_guard(conf, [n1, n2], top=str(tmp_path / "top"))
    assert broken is not None and broken.broken is not None
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1, errors
    assert errors[0].startswith("GPU isolation unavailable (")
    assert errors[0].endswith("): launches on n1 that must be fenced from GPUs will fail")
    assert not (tmp_path / "top").exists() or os.listdir(tmp_path / "top") == []
    if WHY_NOT is None:
        guard = device_guard(conf, [n1, n2])
        assert guard is not None and guard.top == TOP
        assert [index for index, _ in guard.gpus["n1"]] == [0, 1, 2, 3]
        assert "n2" not in guard.gpus
        # GPUs that only the probe found (AutoDetect, no File=) are guarded too.
        probed = {"n2": [(0, ("/dev/nvidia0",)), (1, ("/dev/nvidia1",))]}
        guard = device_guard(conf, [n1, n2], probed=probed)
        assert guard is not None and guard.gpus["n2"] == tuple(probed["n2"])
        assert [index for index, _ in guard.gpus["n1"]] == [0, 1, 2, 3]  # File= first


def test_launch_descriptions_carry_the_isolation() -> None:
    spec = LaunchSpec(1, 0, "n1", 0, 0, "root", cgroup="/cg/x", deny_devices=[[2, 1, 5]])
    assert LaunchSpec.from_json(spec.to_json()) == spec
    step = StepSpec(1, 2, "n1", 0, 0, "root", cgroup="/cg/y", deny_devices=[[2, 195, 1]])
    assert StepSpec.from_json(step.to_json()) == step
    # A description written before isolation existed reads as none.
    old = json.loads(spec.to_json())
    del old["cgroup"], old["deny_devices"]
    assert LaunchSpec.from_json(json.dumps(old)).deny_devices == []


# ------------------------------------------------------------------ the kernel


def try_open(paths: list[str], cgroup: str | None) -> dict[str, str]:
    """Open each path in a forked child (moved into ``cgroup`` first): "ok" or the error."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_end)
            if cgroup is not None:
                devcgroup.join(cgroup)
            seen = {}
            for path in paths:
                try:
                    os.close(os.open(path, os.O_RDONLY))
                    seen[path] = "ok"
                except OSError as exc:
                    seen[path] = errno.errorcode[exc.errno or 0]
            os.write(write_end, json.dumps(seen).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as src:
        text = src.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0 and text, status
    found: dict[str, str] = json.loads(text)
    return found


@needs_kernel
def test_a_process_in_the_cgroup_cannot_open_refused_devices(tmp_path: Path, node_top: str) -> None:
    null, zero = mknod(tmp_path / "null", NULL), mknod(tmp_path / "zero", ZERO)
    cgroup = devcgroup.prepare(os.path.join(node_top, "job_1", devcgroup.BATCH), [ZERO])
    assert cgroup == os.path.join(node_top, "job_1", "step_batch")
    paths = [null, zero, "/dev/null", "/dev/zero", "/dev/urandom", str(tmp_path)]
    assert try_open(paths, cgroup) == {
        null: "ok",
        zero: "EPERM",
        "/dev/null": "ok",
        "/dev/zero": "EPERM",  # the device, by whatever name
        "/dev/urandom": "ok",
        str(tmp_path): "ok",
    }
    assert try_open([zero], None) == {zero: "ok"}  # outside the cgroup: no constraint
    assert devcgroup.remove(cgroup)
    assert not os.path.exists(os.path.dirname(cgroup))  # the job's, with its last cgroup


@needs_kernel
def test_refused_devices_cannot_be_made_anew(tmp_path: Path, node_top: str) -> None:
    cgroup = devcgroup.prepare(os.path.join(node_top, "job_2", "step_0"), [NULL, FULL])
    assert cgroup is not None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        outcome = b"?"
        try:
            devcgroup.join(cgroup)
            try:
                mknod(tmp_path / "again", FULL)
                outcome = b"made"
            except PermissionError:
                outcome = b"EPERM"
            os.write(write_end, outcome)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as src:
        assert src.read() == b"EPERM"
    os.waitpid(pid, 0)
    assert devcgroup.remove(cgroup)


@needs_kernel
def test_removal_waits_for_the_processes(node_top: str) -> None:
    cgroup = devcgroup.prepare(os.path.join(node_top, "job_3", "step_batch"), [ZERO])
    assert cgroup is not None
    sibling = devcgroup.prepare(os.path.join(node_top, "job_3", "step_0"), [ZERO])
    assert sibling is not None
    child = subprocess.Popen(["sleep", "30"])
    try:
        devcgroup.join(cgroup, child.pid)
        assert not devcgroup.remove(cgroup, wait=0.05)  # still busy: left in place
        assert os.path.isdir(cgroup)
        child.kill()
        assert devcgroup.remove(cgroup)
    finally:
        child.kill()
        child.wait()
    assert not os.path.exists(cgroup)
    assert os.path.isdir(sibling)  # the job's directory stays while a step's cgroup is there
    assert devcgroup.remove(sibling)
    assert not os.path.exists(os.path.dirname(sibling))


@needs_kernel
def test_an_existing_cgroup_is_left_alone(node_top: str) -> None:
    taken = os.path.join(node_top, "job_4", "step_batch")
    os.makedirs(taken)
    cgroup = devcgroup.prepare(taken, [ZERO])
    assert cgroup == f"{taken}.{os.getpid()}"
    assert try_open(["/dev/zero"], taken) == {"/dev/zero": "ok"}  # no program of ours there
    assert try_open(["/dev/zero"], cgroup) == {"/dev/zero": "EPERM"}
    assert devcgroup.remove(cgroup)
    os.rmdir(taken)


@needs_kernel
def test_isolation_that_cannot_be_set_up_fails_the_launch(tmp_path: Path) -> None:
    # Not a cgroup: the directory is made, the attach fails, nothing is left, and
    # the caller is told to fail the launch (running unfenced would give every GPU).
    with pytest.raises(LaunchError, match=r"cannot fence GPUs: cgroup .*job_5/step_batch"):
        devcgroup.prepare(str(tmp_path / "job_5" / "step_batch"), [ZERO])
    assert not (tmp_path / "job_5" / "step_batch").exists()
    assert devcgroup.unavailable(str(tmp_path / "top")) is not None
    with pytest.raises(LaunchError, match="cannot join cgroup"):
        devcgroup.enter(str(tmp_path / "nowhere"))
    assert devcgroup.enter(None) is False  # nothing to fence: nothing to join


def test_a_guard_that_cannot_fence_refuses_launches_with_gpus_to_refuse(tmp_path: Path) -> None:
    zero = str(tmp_path / "zero")
    os.symlink("/dev/zero", zero)  # a real device file, no mknod needed
    guard = DeviceGuard("/nowhere", {"n1": [(0, (zero,))]}, broken="no cgroup2 mount")
    with pytest.raises(LaunchError, match="cannot fence GPUs on node n1: no cgroup2 mount"):
        guard.confine("n1", 5, "step_batch", set())
    assert guard.confine("n1", 5, "step_batch", {0}) == ("", [])  # its GPU: nothing to fence
    assert guard.confine("n2", 5, "step_batch", set()) == ("", [])  # no GPUs there


@needs_kernel
def test_a_supervisor_that_cannot_fence_never_runs_the_script(
    tmp_path: Path, node_top: str
) -> None:
    """The cgroup cannot be made (cgroup.max.depth): the job fails to launch, its
    script never runs, and its error file says why."""
    os.makedirs(node_top)
    with open(os.path.join(node_top, "cgroup.max.depth"), "w") as limit:
        limit.write("0")
    me = pwd.getpwuid(os.getuid())
    spec = LaunchSpec(
        job_id=43,
        restarts=0,
        node="n7",
        uid=me.pw_uid,
        gid=me.pw_gid,
        user=me.pw_name,
        work_dir=str(tmp_path),
        environment={"PATH": "/usr/bin:/bin", "SLURM_JOB_GPUS": "3"},
        cgroup=os.path.join(node_top, "job_43", "step_batch"),
        deny_devices=[list(ZERO)],
    )
    jobdir = JobDir(str(tmp_path / "job43.0"))
    jobdir.create()
    jobdir.write_launch(spec)
    jobdir.write_script(f"#!/bin/sh\ntouch {tmp_path}/ran\n", spec.uid, spec.gid)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "nodeagent.supervisor", jobdir.path]
    subprocess.run(run, env=env, check=True, timeout=20)
    result = jobdir.read_result()
    assert result is not None and result.outcome == "launch_failed", result
    assert result.message.startswith("cannot fence GPUs: cgroup "), result
    assert not (tmp_path / "ran").exists()
    said = (tmp_path / "slurm-43.out").read_text()
    assert said.startswith("corral: error: job 43: launch failed: cannot fence GPUs"), said


# ------------------------------------------------------------------ the supervisor


@needs_kernel
def test_the_batch_script_runs_confined(tmp_path: Path, node_top: str) -> None:
    """A supervisor run for real: the script cannot open the refused device, the
    cgroup is gone once the job is."""
    null, zero = mknod(tmp_path / "gpu0", NULL), mknod(tmp_path / "gpu1", ZERO)
    me = pwd.getpwuid(os.getuid())
    path = os.path.join(node_top, "job_42", "step_batch")
    spec = LaunchSpec(
        job_id=42,
        restarts=0,
        node="n7",
        uid=me.pw_uid,
        gid=me.pw_gid,
        user=me.pw_name,
        work_dir=str(tmp_path),
        environment={"PATH": "/usr/bin:/bin", "SLURM_JOB_GPUS": "3", "CUDA_VISIBLE_DEVICES": "3"},
        cgroup=path,
        deny_devices=[list(ZERO)],
        gpus=[3],  # what its launch's grant gave
    )
    jobdir = JobDir(str(tmp_path / "job42.0"))
    jobdir.create()
    jobdir.write_launch(spec)
    script = (
        "#!/bin/sh\n"
        "grep '^0::' /proc/self/cgroup\n"
        "echo $SLURM_JOB_GPUS $CUDA_VISIBLE_DEVICES\n"
        f"for f in {null} {zero}; do if true < $f; then echo $f ok; fi; done\n"
        "sleep 30 &\n"  # the script's process group goes with it
    )
    jobdir.write_script(script, spec.uid, spec.gid)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "nodeagent.supervisor", jobdir.path]
    subprocess.run(run, env=env, check=True, timeout=20)
    result = jobdir.read_result()
    assert result is not None and result.exit_status == 0
    out = (tmp_path / "slurm-42.out").read_text().splitlines()
    mount = os.path.dirname(TOP or "")
    assert out[0] == f"0::{path.removeprefix(mount)}"
    assert out[1] == "3 0"  # GPU 3 of the node is the job's GPU 0
    assert out[2] == f"{null} ok"
    assert out[3].endswith(f"{zero}: Operation not permitted")
    assert len(out) == 4, out
    assert not os.path.exists(path)
    assert not os.path.exists(os.path.dirname(path))


@needs_kernel
def test_a_supervisor_without_isolation_makes_no_cgroup(tmp_path: Path, node_top: str) -> None:
    me = pwd.getpwuid(os.getuid())
    spec = LaunchSpec(
        7,
        0,
        "n7",
        me.pw_uid,
        me.pw_gid,
        me.pw_name,
        work_dir=str(tmp_path),
        environment={"PATH": "/usr/bin:/bin", "SLURM_JOB_GPUS": "3", "CUDA_VISIBLE_DEVICES": "3"},
    )
    jobdir = JobDir(str(tmp_path / "job7.0"))
    jobdir.create()
    jobdir.write_launch(spec)
    script = "#!/bin/sh\ngrep '^0::' /proc/self/cgroup\necho $CUDA_VISIBLE_DEVICES\n"
    jobdir.write_script(script, spec.uid, spec.gid)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "nodeagent.supervisor", jobdir.path]
    subprocess.run(run, env=env, check=True, timeout=20)
    out = (tmp_path / "slurm-7.out").read_text()
    assert "corral" not in out
    assert out.endswith("\n3\n")  # not confined: the node's index
    assert not os.path.exists(node_top)
