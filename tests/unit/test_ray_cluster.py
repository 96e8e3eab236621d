"""``corral ray``'s run without Ray or a cluster: srun and Ray's Python are fakes at
their seams (programs that record what they were asked and behave as told), the head
a socket listening here, the driver a real program.

What is checked: the driver's status and RAY_ADDRESS, both steps ended whatever
happened, the bounded wait naming the nodes missing, a step that ends early, and
a signal stopping the driver and the steps.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.boundary import UsageError
from cli.ray import cluster, plan

#: srun: notes its job name (-J) and Ray's auth mode in its environment (which it
#: would pass on to its tasks), and exits 0 on SIGTERM; exits 1 at once when that
#: name is in $FAKE_SRUN_FAIL.
FAKE_SRUN = """\
import os, signal, sys, time
name = sys.argv[sys.argv.index("-J") + 1]
log = os.environ["FAKE_LOG"]
if name == os.environ.get("FAKE_SRUN_FAIL"):
    sys.exit(1)
def stop(signum, frame):
    with open(log, "a") as out:
        out.write(f"{name} stopped\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with open(log, "a") as out:
    out.write(f"{name} started, {os.environ.get('RAY_AUTH_MODE')} auth\\n")
time.sleep(60)
"""

#: Ray's Python running CHECK: prints the nodes of $FAKE_JOINED (";" between the
#: lines it prints), then exits, or sleeps when $FAKE_HANG is set. A worker joins
#: only once the workers' step has started, as a real one does.
FAKE_CHECK = """\
import json, os, sys, time
assert sys.argv[1] == "-c" and "ray.nodes()" in sys.argv[2]
for line in os.environ["FAKE_JOINED"].split(";"):
    while "," in line and "ray-workers started" not in open(os.environ["FAKE_LOG"]).read():
        time.sleep(0.01)
    print(json.dumps([[name, 2, 0] for name in line.split(",") if name]), flush=True)
if os.environ.get("FAKE_HANG"):
    time.sleep(60)
"""


@pytest.fixture
def head() -> Iterator[socket.socket]:
    """The head's GCS port: something listening, as the Ray head would."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener


@pytest.fixture
def setup(
    tmp_path: Path, head: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> tuple[plan.Plan, Path]:
    srun = tmp_path / "srun.py"
    srun.write_text(FAKE_SRUN)
    check = tmp_path / "check.py"
    check.write_text(FAKE_CHECK)
    log = tmp_path / "log"
    log.touch()
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_JOINED", "n1;n1,n2")
    port = head.getsockname()[1]
    return (
        plan.Plan(
            allocation=plan.Allocation("9", ("n1", "n2"), (2, 2)),
            ray="/fake/ray",
            python=(sys.executable, str(check)),
            srun=(sys.executable, str(srun)),
            launcher=("launcher",),
            address=f"127.0.0.1:{port}",
            token="c0ffee",
        ),
        log,
    )


def _driver(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _ended(log: Path) -> list[str]:
    return sorted(line for line in log.read_text().splitlines() if line.endswith("stopped"))


def test_the_driver_gets_the_address_its_status_is_returned_and_the_steps_end(
    setup: tuple[plan.Plan, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    setup_plan, log = setup
    code = (
        "import os, sys\n"
        "print('driver at', os.environ['RAY_ADDRESS'], os.environ['RAY_AUTH_TOKEN'])\n"
        "sys.exit(7)\n"
    )
    assert cluster.run(setup_plan, _driver(code), timeout=30) == 7
    out, err = capfd.readouterr()
    assert out == f"driver at {setup_plan.address} {setup_plan.token}\n"
    assert "ray-workers started, token auth" in log.read_text()
    assert f"corral ray: Ray is up at {setup_plan.address}: n1 (2 CPUs), n2 (2 CPUs)" in err
    assert _ended(log) == ["ray-head stopped", "ray-workers stopped"]


def test_a_driver_killed_by_a_signal_gives_128_plus_the_signal(
    setup: tuple[plan.Plan, Path],
) -> None:
    setup_plan, _ = setup
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    assert cluster.run(setup_plan, _driver(code), timeout=30) == 128 + signal.SIGKILL


def test_nodes_missing_at_the_deadline_are_named_and_the_steps_end(
    setup: tuple[plan.Plan, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    setup_plan, log = setup
    monkeypatch.setenv("FAKE_JOINED", "n1")
    monkeypatch.setenv("FAKE_HANG", "1")
    ran = tmp_path / "ran"
    with pytest.raises(UsageError) as error:
        cluster.run(setup_plan, _driver(f"open({str(ran)!r}, 'w')"), timeout=1)
    assert str(error.value) == "Ray nodes did not join within 1 s: n2 missing (joined: n1)"
    assert not ran.exists()  # no driver on a partial cluster
    assert _ended(log) == ["ray-head stopped", "ray-workers stopped"]


def test_the_workers_start_once_the_head_has_joined(
    setup: tuple[plan.Plan, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ray worker gives up after 40 s without a head in the GCS: none is started
    while the head has not joined."""
    setup_plan, log = setup
    monkeypatch.setenv("FAKE_JOINED", "")
    monkeypatch.setenv("FAKE_HANG", "1")
    with pytest.raises(UsageError, match=r"n\[1-2\] missing \(joined: none\)"):
        cluster.run(setup_plan, _driver("pass"), timeout=1)
    assert log.read_text() == "ray-head started, token auth\nray-head stopped\n"


def test_a_step_that_ends_before_its_nodes_joined_is_an_error(
    setup: tuple[plan.Plan, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    setup_plan, log = setup
    monkeypatch.setenv("FAKE_SRUN_FAIL", "ray-workers")
    monkeypatch.setenv("FAKE_JOINED", "n1")
    monkeypatch.setenv("FAKE_HANG", "1")
    with pytest.raises(
        UsageError, match=r"job 9: the Ray workers step ended \(srun exit status 1\)"
    ):
        cluster.run(setup_plan, _driver("pass"), timeout=30)
    assert _ended(log) == ["ray-head stopped"]


def test_a_head_that_never_listens_is_an_error(
    setup: tuple[plan.Plan, Path], head: socket.socket
) -> None:
    setup_plan, _ = setup
    head.close()
    with pytest.raises(UsageError, match=r"the Ray head on n1 did not listen on 127.0.0.1:\d+"):
        cluster.run(setup_plan, _driver("pass"), timeout=1)


def test_sigterm_stops_the_driver_and_the_steps(
    setup: tuple[plan.Plan, Path], tmp_path: Path
) -> None:
    """As when the job is cancelled: corral ray passes SIGTERM to the driver, ends the
    steps and exits with the driver's status (its handler's 5 here); and this
    process's handlers are as they were."""
    setup_plan, log = setup
    started, stopped = tmp_path / "started", tmp_path / "stopped"
    code = (
        "import signal, sys, time\n"
        f"def stop(*_):\n    open({str(stopped)!r}, 'w'); sys.exit(5)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"open({str(started)!r}, 'w')\n"
        "time.sleep(60)\n"
    )

    def cancel() -> None:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=cancel, daemon=True).start()
    assert cluster.run(setup_plan, _driver(code), timeout=30) == 5
    assert stopped.exists()
    assert _ended(log) == ["ray-head stopped", "ray-workers stopped"]
    assert signal.getsignal(signal.SIGTERM) == before
