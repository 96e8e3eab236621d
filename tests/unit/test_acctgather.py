"""The step sampler (nodeagent/acctgather.py) on real processes and real cgroups.

A child process group allocates memory and burns CPU; the /proc gatherer must
see its size, its CPU time and its tasks. The cgroup reader is pointed at a
cgroup made here (v1 memory and cpuacct, v2 cpu.stat), which needs root: without
it the cgroup tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodeagent.acctgather import Sampler, Target, read_cgroup, read_proc, scan

#: A task: holds ~64 MiB, burns CPU for a while, reads a file, then sleeps.
HOG = """
import os, sys, time
block = bytearray(64 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
while time.process_time() < float(sys.argv[1]):
    pass
with open("/dev/zero", "rb") as f:
    f.read(1 << 20)
print("ready", flush=True)
time.sleep(60)
"""


def _hog(burn: float, procid: int, pgid: int = 0) -> subprocess.Popen[str]:
    env = {**os.environ, "SLURM_PROCID": str(procid)}
    return subprocess.Popen(
        [sys.executable, "-c", HOG, str(burn)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        process_group=pgid,
    )


@pytest.fixture
def tasks() -> Iterator[list[subprocess.Popen[str]]]:
    """Two tasks of one step in one process group: task 0 burns more CPU than task 1."""
    first = _hog(0.6, 0)
    second = _hog(0.2, 1, pgid=first.pid)
    started = [first, second]
    try:
        for proc in started:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
        yield started
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_read_proc_sees_a_live_process(tasks: list[subprocess.Popen[str]]) -> None:
    proc = read_proc(tasks[0].pid)
    assert proc is not None
    assert proc.pgid == tasks[0].pid
    assert proc.rss_kb >= 60 * 1024
    assert proc.vmsize_kb >= proc.rss_kb
    assert proc.cpu_us >= 300_000
    assert proc.read_bytes >= 1 << 20
    assert read_proc(2**22 + 7) is None


def test_read_proc_takes_a_command_name_with_parentheses(tmp_path: Path) -> None:
    fields = ["S", "1", "77", "77"] + ["0"] * 5 + ["3", "0", "200", "100", "5", "5"]
    fields += ["20", "0", "1", "0", "1234", str(8192 * 1024), "10"]
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "stat").write_text("42 (a) (b c) " + " ".join(fields) + " 0 0\n")
    proc = read_proc(42, str(tmp_path))
    assert proc is not None
    assert (proc.pgid, proc.start, proc.pages, proc.vmsize_kb) == (77, 1234, 3, 8192)
    assert proc.rss_kb == 10 * (os.sysconf("SC_PAGE_SIZE") // 1024)
    assert proc.cpu_us == 310 * (1_000_000 // os.sysconf("SC_CLK_TCK"))
    assert (proc.read_bytes, proc.write_bytes) == (0, 0)  # no io file: unreadable


def test_scan_finds_the_group_and_nothing_else(tasks: list[subprocess.Popen[str]]) -> None:
    group = tasks[0].pid
    found = scan([group])
    assert sorted(p.pid for p in found[group]) == sorted(t.pid for t in tasks)
    assert list(found) == [group]


def test_the_sampler_sums_per_task_and_keeps_peaks(tasks: list[subprocess.Popen[str]]) -> None:
    sampler = Sampler("linux")
    target = Target(7, "0", "n1", tasks[0].pid, (0, 1))
    usage = sampler.sample([target], 1000)[0]
    assert (usage.job_id, usage.step, usage.node, usage.ntasks) == (7, "0", "n1", 2)
    assert sorted(usage.pids) == sorted(t.pid for t in tasks)
    assert usage.max_rss_kb >= 60 * 1024
    assert usage.sum_rss_kb >= 2 * 60 * 1024
    assert usage.max_cpu_task == 0 and usage.min_cpu_task == 1
    assert usage.max_cpu_us > usage.min_cpu_us >= 100_000
    assert usage.sum_cpu_us >= usage.max_cpu_us + usage.min_cpu_us
    assert usage.sum_read_bytes >= 2 << 20
    # A task that ends keeps its peak and its CPU time; the sum of sizes now drops.
    tasks[1].kill()
    tasks[1].wait()
    later = sampler.sample([target], 1001)[0]
    assert later.min_cpu_us >= usage.min_cpu_us
    assert later.max_rss_kb >= usage.max_rss_kb
    assert later.sum_rss_kb < usage.sum_rss_kb
    assert list(later.pids) == [tasks[0].pid]
    # What the run's result takes at its end: the largest task's peak, and all of them.
    assert sampler.peaks(target.key) == (later.max_rss_kb, pytest.approx(usage.sum_rss_kb, 0.1))
    # A run no longer given is forgotten: sampled again, it starts afresh.
    sampler.sample([], 1002)
    assert sampler.peaks(target.key) is None
    gone = sampler.sample([Target(7, "0", "n1", tasks[1].pid, (0,))], 1003)[0]
    assert (gone.max_rss_kb, gone.sum_cpu_us, list(gone.pids)) == (0, 0, [])


def _cgroup_root(path: str) -> Path:
    """``path`` as a writable cgroup hierarchy, or skip (fail under CI) without one."""
    root = Path(path)
    if os.geteuid() != 0 or not root.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root with {path}")
        pytest.skip(f"needs root and {path}")
    return root


@pytest.fixture
def cgroups() -> Iterator[list[Path]]:
    """Fresh cgroups (v1 memory, v1 cpuacct, v2), removed afterwards."""
    name = f"corral-test-acct-{os.getpid()}"
    made = []
    for hierarchy in ("/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/unified"):
        directory = _cgroup_root(hierarchy) / name
        directory.mkdir()
        made.append(directory)
    try:
        yield made
    finally:
        for directory in made:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


@contextlib.contextmanager
def _hog_in(*cgroups: Path) -> Iterator[subprocess.Popen[str]]:
    """A task in its own process group that joins ``cgroups`` before it allocates or
    burns anything, so they see all it uses."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()\n" + HOG, "0.4"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        for cgroup in cgroups:
            (cgroup / "cgroup.procs").write_text(str(child.pid))
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "ready\n"
        yield child
    finally:
        child.kill()
        child.wait()


def test_read_cgroup_v1_memory_and_cpuacct(cgroups: list[Path]) -> None:
    memory, cpuacct, _ = cgroups
    empty = read_cgroup([str(memory), str(cpuacct)])
    assert empty is not None and empty.current_kb < 1024 and empty.cpu_us == 0
    with _hog_in(memory, cpuacct):
        use = read_cgroup([str(memory), str(cpuacct)])
        assert use is not None
        assert use.current_kb >= 60 * 1024
        assert use.peak_kb >= use.current_kb
        assert use.cpu_us >= 300_000


def test_read_cgroup_v2_cpu_stat_and_the_cgroup_sampler(cgroups: list[Path]) -> None:
    memory, _, unified = cgroups
    assert read_cgroup([str(unified / "missing")]) is None
    with _hog_in(unified, memory) as child:
        use = read_cgroup([str(unified)])
        assert use is not None and use.cpu_us >= 300_000
        # jobacct_gather/cgroup: memory and CPU from the cgroup, charged to task 3.
        target = Target(9, "batch", "n1", child.pid, (3, 4), (str(unified), str(memory)))
        usage = Sampler("cgroup").sample([target], 5)[0]
        assert usage.max_rss_task == 3 and usage.max_rss_kb >= 60 * 1024
        assert usage.sum_cpu_us >= 300_000
        assert usage.max_vmsize_kb >= usage.max_rss_kb
