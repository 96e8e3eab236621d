"""Runs' cgroups (nodeagent/cgroups.py): the layout read from the mounts, and real
cgroups made, joined, limited, killed and removed on this host, whichever layout
it has (pure cgroup v2, or v2 for processes and v1 for the controllers).

The kernel tests need root and a cgroup file system; where CI is set they fail
rather than skip. Every cgroup they make is removed afterwards.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import cgroupconf
from corral.confsyntax import ConfigError
from nodeagent import cgroups, containment
from nodeagent.cgroups import V1, V2, RunCgroups
from nodeagent.containment import Containment

LAYOUT = cgroups.detect()
WHY_NOT = cgroups.unusable(LAYOUT)
if WHY_NOT is not None and os.environ.get("CI"):
    pytest.fail(f"cgroups unusable in CI: {WHY_NOT}", pytrace=False)
needs_kernel = pytest.mark.skipif(WHY_NOT is not None, reason=f"no cgroups: {WHY_NOT}")

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def test_mounts_are_read_with_their_controllers(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(HYBRID.replace("/sys/fs/cgroup/unified", "/sys/fs/cgroup/uni\\040fied"))
    found = cgroups.cgroup_mounts(str(mounts))
    assert found[1] == (
        V1,
        "/sys/fs/cgroup/cpu,cpuacct",
        frozenset({"rw", "relatime", "cpu", "cpuacct"}),
    )
    assert found[-1] == (V2, "/sys/fs/cgroup/uni fied", frozenset())
    assert cgroups.cgroup2_mount(str(mounts)) == "/sys/fs/cgroup/uni fied"
    assert cgroups.cgroup_mounts(str(tmp_path / "none")) == []


def test_a_hybrid_host_contains_in_v2_and_limits_in_v1(tmp_path: Path) -> None:
    """The unified hierarchy's cgroup.controllers (of the agent's cgroup) offers
    nothing here: the controllers come from their v1 hierarchies, and the v1
    freezer is not used (v2 holds the processes)."""
    mounts = tmp_path / "mounts"
    mounts.write_text(HYBRID.replace("/sys/fs/cgroup/unified", str(tmp_path / "unified")))
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.controllers").write_text("hugetlb\n")
    own = cgroups.own_cgroups()
    layout = cgroups.detect(mounts=str(mounts))
    v1 = {names[0]: base for version, base, names in layout if version == V1}
    unified = f"{tmp_path}/unified{own.get('', '/').rstrip('/')}"
    assert layout[0] == (V2, f"{unified}/corral", ("procs",))
    assert v1 == {
        name: f"/sys/fs/cgroup/{name}{own.get(name, '/').rstrip('/')}/corral"
        for name in ("memory", "cpuset", "pids")
    }
    # cgroup/v1 alone: the freezer holds the processes.
    only_v1 = cgroups.detect("cgroup/v1", mounts=str(mounts))
    assert [names for _, _, names in only_v1] == [("memory",), ("cpuset",), ("pids",), ("procs",)]
    assert cgroups.detect("cgroup/v2", mounts=str(mounts))[0][2] == ("procs",)


def test_a_launch_gets_the_limits_task_cgroup_and_cgroup_conf_give() -> None:
    layout = ((V2, "/cg/corral", ("procs",)), (V1, "/m/corral", ("memory",)))
    conf = cgroupconf.parse(
        "ConstrainRAMSpace=yes\nConstrainCores=yes\nPidsMax=9\nMemorySwappiness=5", "c"
    )
    run = Containment(layout, conf, limits=True).describe("n/1", 4, "step_2", 100, [3, 1])
    assert run == {
        "places": [[V2, "/cg/corral", ["procs"]], [V1, "/m/corral", ["memory"]]],
        "path": "n_1/job_4/step_2",
        "memory": 100 << 20,
        "memsw": 0,
        "swappiness": 5,
        "cpus": [1, 3],
        "pids": 9,
        "unkillable": 60,  # Slurm's UnkillableStepTimeout by default
        "job_memory": 100 << 20,
        "job_memsw": 0,
    }
    # A step's own memory (srun --mem) limits its cgroup; the job's keeps the job's.
    step = Containment(layout, conf, limits=True).describe("n1", 4, "step_2", 100, [3], 30)
    assert (step["memory"], step["job_memory"]) == (30 << 20, 100 << 20)
    bare = Containment(layout, conf, False, 7).describe("n1", 4, "step_batch", 100, [3])
    assert (bare["memory"], bare["cpus"], bare["pids"], bare["swappiness"]) == (0, [], 0, -1)
    assert RunCgroups(bare).unkillable == 7


def test_cgroup_conf_asking_for_a_missing_controller_stops_the_agent() -> None:
    conf = cgroupconf.parse("ConstrainCores=yes\nPidsMax=5", "c")
    with pytest.raises(ConfigError, match="no cgroup hierarchy here has the cpuset, pids"):
        containment._check(conf, {"procs", "memory"})
    containment._check(conf, {"procs", "cpuset", "pids"})


def test_a_v1_cpuset_made_under_a_parent_not_yet_filled_fills_it_first(tmp_path: Path) -> None:
    """Another run's end removed the node's cpuset and a third run made it again, empty,
    after this run filled it: this run's job cpuset made under it copies the root's CPUs
    and memory nodes through it, not the nothing it has yet (a job cpuset with none
    fails the task's join with ENOSPC, a launch failure)."""
    root = tmp_path / "cpuset"
    node = root / "corral" / "node2"
    job = node / "job_300"
    job.mkdir(parents=True)
    for level, cpus, mems in ((root, "0-3\n", "0\n"), (root / "corral", "0-3\n", "0\n")):
        (level / "cpuset.cpus").write_text(cpus)
        (level / "cpuset.mems").write_text(mems)
    for level in (node, job):  # as the kernel makes a v1 cpuset: both empty
        (level / "cpuset.cpus").write_text("")
        (level / "cpuset.mems").write_text("")
    RunCgroups._copy_cpuset(str(job))
    for level in (node, job):
        assert (level / "cpuset.cpus").read_text() == "0-3"
        assert (level / "cpuset.mems").read_text() == "0"


def test_agents_probing_at_once_do_not_take_the_others_cleanup_for_no_cgroups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two agents of one host start together (a test cluster's, or cloud nodes resumed
    by one ResumeProgram): each makes a probe cgroup below the top one, removes it and
    removes the top one if empty. The other's removal of the top between this agent's
    making it and making its probe (ENOENT) once stopped this agent as though the host
    had no cgroups; now the top is made again."""
    base = tmp_path / "corral"
    real_mkdir = os.mkdir
    raced: list[str] = []

    def other_agent_cleans_up_first(path: str, *args: int) -> None:
        if os.path.basename(path).startswith("probe.") and len(raced) < 2:
            raced.append(path)
            os.rmdir(base)  # the other agent's probe gone, the top empty: removed
        real_mkdir(path, *args)

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "mkdir", other_agent_cleans_up_first)
    assert cgroups.unusable(((V2, str(base), ("procs",)),)) is None
    assert len(raced) == 2 and not base.exists()  # tried thrice; the probe's top removed


def test_cpu_lists() -> None:
    assert cgroups.cpu_list("0-3,8\n") == {0, 1, 2, 3, 8}
    assert cgroups.cpu_list("\n") == set()


@pytest.fixture
def run() -> Iterator[RunCgroups]:
    """A run's cgroups with a 40 MiB memory limit (no swap) and pids.max 8;
    removed (what is left in them killed) afterwards."""
    description = cgroups.describe(
        LAYOUT,
        f"test{os.getpid()}",
        7,
        cgroups.BATCH,
        memory=40 << 20,
        memsw=40 << 20,
        cpus=[0],
        pids=8,
    )
    made = RunCgroups(description)
    made.make()
    try:
        yield made
    finally:
        made.kill()
        assert made.remove()


def _child(made: RunCgroups, command: str) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            made.join()
            os.execvp("sh", ["sh", "-c", command])
        finally:
            os._exit(127)
    return pid


def _wait_joined(made: RunCgroups, count: int) -> None:
    """Until ``count`` processes are in ``made`` (a forked child joins on its own time,
    later under load), at most 5 s."""
    deadline = time.monotonic() + 5
    while len(made.procs()) < count and time.monotonic() < deadline:
        time.sleep(0.01)


@needs_kernel
def test_a_runs_cgroups_hold_its_limits(run: RunCgroups, tmp_path: Path) -> None:
    roles = {role for _, _, names in LAYOUT for role in names}
    out = tmp_path / "out"
    pid = _child(
        run, f"grep Cpus_allowed_list /proc/self/status > {out}; cat /proc/self/cgroup >> {out}"
    )
    os.waitpid(pid, 0)
    text = out.read_text()
    if "cpuset" in roles:
        assert "Cpus_allowed_list:\t0\n" in text
    for version, path, _ in run.made:
        suffix = path.split("/corral/", 1)[1]
        assert suffix == f"test{os.getpid()}/job_7/step_batch"
        assert ("0::" if version == V2 else ":") in text
    run.record(str(tmp_path))
    assert set(cgroups.run_paths(str(tmp_path))) == roles
    assert cgroups.run_paths(str(tmp_path / "nowhere")) == {}


@needs_kernel
def test_what_leaves_the_process_group_is_killed_with_the_run(run: RunCgroups) -> None:
    pid = _child(run, "setsid sleep 1000 & exec sleep 1000")
    _wait_joined(run, 2)
    assert len(run.procs()) == 2
    assert run.kill() == []
    os.waitpid(pid, 0)
    assert run.procs() == []


@needs_kernel
def test_a_starting_agent_clears_the_cgroups_of_runs_it_does_not_know(run: RunCgroups) -> None:
    """Job 7's run (the fixture's) was not recovered: what is in it is killed, its
    cgroups go; job 8's, recovered, is left alone."""
    node = f"test{os.getpid()}"
    kept = RunCgroups(cgroups.describe(LAYOUT, node, 8, cgroups.BATCH))
    kept.make()
    stale = _child(run, "setsid sleep 1000 & exec sleep 1000")
    alive = _child(kept, "exec sleep 1000")
    try:
        _wait_joined(run, 2)
        _wait_joined(kept, 1)  # CI once asserted before it had joined
        cleared = cgroups.clear_stale(LAYOUT, node, keep={8})
        assert sorted(cleared) == sorted(os.path.join(b, node, "job_7") for _, b, _ in LAYOUT)
        os.waitpid(stale, 0)
        assert all(not os.path.exists(path) for path in run.paths())
        assert kept.procs() == [alive]
    finally:
        kept.kill()
        with contextlib.suppress(ProcessLookupError):  # not in the cgroup (yet): by its pid
            os.kill(alive, signal.SIGKILL)
        os.waitpid(alive, 0)
        assert kept.remove()
    run.made = []  # gone already


@needs_kernel
def test_an_oom_kill_is_counted(run: RunCgroups) -> None:
    if "memory" not in {role for _, _, names in LAYOUT for role in names}:
        pytest.fail("no memory controller here")
    assert run.oom_kills() == 0
    pid = _child(run, "exec python3 -c 'x = bytearray(200 << 20)'")
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert run.oom_kills() == 1


def _command(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as src:
            return src.read().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


@needs_kernel
def test_pids_max_stops_a_fork_bomb(run: RunCgroups) -> None:
    if "pids" not in {role for _, _, names in LAYOUT for role in names}:
        pytest.fail("no pids controller here")
    pid = _child(run, "for i in $(seq 20); do sleep 1000 & done 2>/dev/null; exec sleep 1000")
    # The loop is over once the shell has exec'd its last sleep, or has ended: dash
    # gives up at the first fork refused. A loaded machine can take seconds to get there.
    # The shell's own command line names sleep too, so only the exec'd one counts.
    last = ["sleep", "1000"]
    deadline = time.monotonic() + 30
    ended = False
    while not ended and _command(pid) != last and time.monotonic() < deadline:
        ended = os.waitpid(pid, os.WNOHANG)[0] == pid
        time.sleep(0.01)
    assert ended or _command(pid) == last, "the shell never finished its loop"
    # Of the 21 it would have been; a fork refused while seq or a subshell held a slot
    # leaves fewer.
    assert 2 <= len(run.procs()) <= 8
    assert run.kill() == []
    if not ended:
        os.waitpid(pid, 0)


@needs_kernel
def test_a_job_cgroup_left_behind_does_not_keep_its_old_limit(run: RunCgroups) -> None:
    """A later run of that job id without a memory limit lifts the job's old one."""
    memory = run.path("memory")
    if memory is None:
        pytest.fail("no memory controller here")
    version = next(v for v, p, _ in run.made if p == memory)
    name = "memory.max" if version == V2 else "memory.limit_in_bytes"
    job = os.path.dirname(memory)
    assert int(Path(job, name).read_text()) == 40 << 20
    later = RunCgroups(cgroups.describe(LAYOUT, f"test{os.getpid()}", 7, "step_0"))
    later.make()
    try:
        assert Path(job, name).read_text().strip() in ("max", str(2**63 - 4096))
    finally:
        assert later.remove()


@needs_kernel
def test_a_steps_own_memory_limits_its_cgroup_within_the_jobs(run: RunCgroups) -> None:
    """srun --mem=20M in a job of 40 MiB: the step's cgroup is held to 20 MiB, and the
    job's stays at 40 MiB (the batch script's run holds it there meanwhile)."""
    memory = run.path("memory")
    if memory is None:
        pytest.fail("no memory controller here")
    version = next(v for v, p, _ in run.made if p == memory)
    name = "memory.max" if version == V2 else "memory.limit_in_bytes"
    step = RunCgroups(
        cgroups.describe(
            LAYOUT, f"test{os.getpid()}", 7, "step_0", memory=20 << 20, job_memory=40 << 20
        )
    )
    step.make()
    try:
        own = step.path("memory")
        assert own is not None
        assert int(Path(own, name).read_text()) == 20 << 20
        assert int(Path(os.path.dirname(own), name).read_text()) == 40 << 20
    finally:
        assert step.remove()


@needs_kernel
def test_a_taken_name_is_not_shared(run: RunCgroups) -> None:
    """A second run of the same node, job and leaf (another agent on this host) gets
    ``<leaf>.<pid>`` in every hierarchy."""
    again = RunCgroups(cgroups.describe(LAYOUT, f"test{os.getpid()}", 7, cgroups.BATCH))
    again.make()
    try:
        assert {p.rsplit("/", 1)[1] for p in again.paths()} == {f"step_batch.{os.getpid()}"}
    finally:
        assert again.remove()


@needs_kernel
def test_a_parent_the_kernel_is_taking_down_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last other run of a node ending removes the node's cgroup while this one
    makes its own below it: mkdir there fails ENODEV (the cgroup is dying) and the
    run makes the path again, as for ENOENT once it is gone."""
    description = cgroups.describe(LAYOUT, f"dying{os.getpid()}", 9, cgroups.BATCH)
    made = RunCgroups(description)
    real_mkdir = os.mkdir
    failed: list[str] = []

    def dying_once(path: str, *args: int) -> None:
        if path.endswith("step_batch") and not failed:
            failed.append(path)
            raise OSError(errno.ENODEV, "No such device", path)
        real_mkdir(path, *args)

    monkeypatch.setattr(os, "mkdir", dying_once)
    made.make()
    monkeypatch.setattr(os, "mkdir", real_mkdir)
    try:
        assert failed and all(os.path.isdir(path) for _, path, _ in made.made)
    finally:
        made.kill()
        assert made.remove()
