"""systemd/: the four units as `corral install-units` installs them pass `systemd-analyze
verify` (their programs resolvable: installed into a temporary root), say what issue 16
asks of them (Type=notify, a watchdog, restarts, the users, the node agent's KillMode and
Delegate, the sandbox), and their `systemd-analyze security` scores are the ones
docs/install.md records. install-units itself refuses what it would overwrite or cannot
point at, before writing anything."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.boundary import UsageError
from cli.installunits import install_units

ROOT = Path(__file__).resolve().parents[2]
UNITS = ("controller", "nodeagent", "dbd", "restd")
SANDBOX = (
    "NoNewPrivileges",
    "ProtectSystem",
    "ProtectHome",
    "PrivateTmp",
    "CapabilityBoundingSet",
    "RestrictAddressFamilies",
)


def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing: install systemd")
        pytest.skip("systemd-analyze is not installed here")
    return found


def install(*args: str) -> str:
    """``corral install-units ARGS``, in this process; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert install_units(list(args)) == 0
    return out.getvalue()


def settings(path: Path) -> dict[str, list[str]]:
    """A unit's Key=Value lines, every value of a key repeated (sections ignored)."""
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The units installed by `corral install-units` into a temporary root, pointing at
    programs of a bin directory made for them (the daemons' entry points)."""
    top = tmp_path_factory.mktemp("units")
    bindir = top / "bin"
    bindir.mkdir()
    for unit in UNITS:
        program = bindir / f"corral-{unit}"
        program.write_text(f"#!{sys.executable}\n")
        program.chmod(0o755)
    assert "systemctl daemon-reload" in install(
        "--root", str(top / "root"), "--bindir", str(bindir)
    )
    return top / "root" / "etc" / "systemd" / "system"


@pytest.mark.parametrize("unit", UNITS)
def test_each_unit_passes_systemd_analyze_verify(installed: Path, unit: str) -> None:
    path = installed / f"corral-{unit}.service"
    done = subprocess.run(
        [_analyze(), "verify", str(path)], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
    assert settings(path)["ExecStart"][0].startswith(f"{installed.parents[3]}/bin/corral-{unit}")


@pytest.mark.parametrize("unit", UNITS)
def test_each_unit_notifies_is_watched_and_restarts_on_failure(installed: Path, unit: str) -> None:
    got = settings(installed / f"corral-{unit}.service")
    assert got["Type"] == ["notify"]
    assert int(got["WatchdogSec"][0]) >= 30
    assert got["Restart"] == ["on-failure"]
    assert int(got["RestartSec"][0]) > 0


def test_dbd_and_restd_run_as_slurm_user_and_are_sandboxed(installed: Path) -> None:
    for unit in ("dbd", "restd"):
        got = settings(installed / f"corral-{unit}.service")
        assert (got["User"], got["Group"]) == (["slurm"], ["slurm"])
        assert got["CapabilityBoundingSet"] == [""]
        for key in SANDBOX:
            assert key in got, (unit, key)
        assert got["ProtectHome"] == ["yes"] and got["ProtectSystem"] == ["strict"]
    controller = settings(installed / "corral-controller.service")
    for key in SANDBOX:
        assert key in controller, key


def test_the_units_set_the_oom_score_the_daemons_cannot_set_themselves(installed: Path) -> None:
    """corral/oomscore.py: without CAP_SYS_RESOURCE a daemon cannot lower its
    oom_score_adj; systemd sets it as root. The agent, root, sets its own."""
    for unit in ("controller", "dbd", "restd"):
        assert settings(installed / f"corral-{unit}.service")["OOMScoreAdjust"] == ["-1000"]
    assert "OOMScoreAdjust" not in settings(installed / "corral-nodeagent.service")


def test_the_node_agent_keeps_its_jobs_across_its_restart(installed: Path) -> None:
    got = settings(installed / "corral-nodeagent.service")
    assert got["KillMode"] == ["process"]
    assert got["Delegate"] == ["yes"]
    assert "User" not in got  # root: it starts jobs as their users
    for key in ("NoNewPrivileges", "ProtectSystem", "PrivateTmp", "RestrictAddressFamilies"):
        assert key not in got, key  # every job would inherit it


def test_security_scores_are_the_ones_docs_install_records(installed: Path) -> None:
    recorded = dict(
        re.findall(
            r"^\| `corral-(\w+)\.service` \| (\d+\.\d \w+) \|",
            (ROOT / "docs" / "install.md").read_text(),
            re.MULTILINE,
        )
    )
    assert sorted(recorded) == sorted(UNITS)
    for unit in UNITS:
        done = subprocess.run(
            [_analyze(), "security", "--offline=yes", str(installed / f"corral-{unit}.service")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        score = re.search(r"Overall exposure level for \S+: (\d+\.\d \w+)", done.stdout)
        assert score is not None, done.stdout + done.stderr
        assert score.group(1) == recorded[unit], unit


def test_install_units_changes_nothing_it_would_overwrite(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    if not os.access(bindir / "corral-controller", os.X_OK):
        bindir = tmp_path / "bin"
        bindir.mkdir()
        for unit in UNITS:
            (bindir / f"corral-{unit}").write_text("#!/bin/sh\n")
            (bindir / f"corral-{unit}").chmod(0o755)
    root = tmp_path / "root"
    install("--root", str(root), "--bindir", str(bindir), "nodeagent")
    units = root / "etc" / "systemd" / "system"
    assert sorted(p.name for p in units.iterdir()) == ["corral-nodeagent.service"]
    again = install("--root", str(root), "--bindir", str(bindir), "nodeagent")
    assert f"unchanged {units}/corral-nodeagent.service" in again
    edited = units / "corral-nodeagent.service"
    edited.write_text(edited.read_text() + "# a local edit\n")
    with pytest.raises(UsageError) as refused:
        install("--root", str(root), "--bindir", str(bindir))
    assert str(refused.value).startswith(f"{edited} exists and differs; --force replaces it")
    assert sorted(p.name for p in units.iterdir()) == ["corral-nodeagent.service"]
    install("--root", str(root), "--bindir", str(bindir), "--force")
    assert "# a local edit" not in edited.read_text()
    assert len(list(units.iterdir())) == 4
    install("--root", str(root), "--bindir", str(bindir), "--user", "batch", "restd", "--force")
    assert settings(units / "corral-restd.service")["User"] == ["batch"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("slurmctld",), "unknown unit 'slurmctld': give any of controller, nodeagent, dbd, restd"),
        (
            ("--bindir", "/nonexistent"),
            "/nonexistent/corral-controller is not an installed program",
        ),
        (("--user", "root;rm"), "--user wants a user name, got 'root;rm'"),
        (("--root", ""), "--root wants a directory"),
        (
            ("--bindir", "/opt/my venv/bin"),
            "/opt/my venv/bin: a unit's ExecStart cannot name a path with spaces or quotes",
        ),
    ],
    ids=["unknown unit", "no programs there", "not a user name", "empty root", "a space"],
)
def test_install_units_refuses_before_writing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(UsageError) as refused:
        install("--root", str(tmp_path), *args)
    assert str(refused.value) == message
    assert list(tmp_path.iterdir()) == []
