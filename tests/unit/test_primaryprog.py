"""SlurmctldPrimaryOnProg and SlurmctldPrimaryOffProg (controller/primaryprog.py):
each runs with the controller's environment and no arguments, and its failure is
logged with the first line of its output, never raised."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from controller import primaryprog
from corral.config import HookConfig, parse


def script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_each_program_runs_with_the_controllers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SITE_VIP", "10.0.0.9")
    out = tmp_path / "out"
    conf = HookConfig(
        primary_on_prog=script(tmp_path / "on", f'echo "on $# $SITE_VIP" >> {out}'),
        primary_off_prog=script(tmp_path / "off", f'echo "off $#" >> {out}'),
    )
    caplog.set_level(logging.INFO, "corral.controller")
    asyncio.run(primaryprog.run(conf, serving=True))
    asyncio.run(primaryprog.run(conf, serving=False))
    assert out.read_text() == "on 0 10.0.0.9\noff 0\n"
    assert "SlurmctldPrimaryOnProg completed successfully" in caplog.text
    assert "SlurmctldPrimaryOffProg completed successfully" in caplog.text


def test_a_failing_program_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing = script(tmp_path / "on", "echo 'no such interface' >&2; exit 3")
    asyncio.run(primaryprog.run(HookConfig(primary_on_prog=failing), serving=True))
    assert f"SlurmctldPrimaryOnProg {failing} failed (rc:3): no such interface" in caplog.text
    asyncio.run(primaryprog.run(HookConfig(), serving=False))  # none set: nothing runs


def test_slurm_conf_names_them(tmp_path: Path) -> None:
    conf = parse(
        "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=ALL\n"
        "SlurmctldPrimaryOnProg=/etc/slurm/on\nSlurmctldPrimaryOffProg=/etc/slurm/off\n",
        str(tmp_path / "slurm.conf"),
    )
    assert (conf.hooks.primary_on_prog, conf.hooks.primary_off_prog) == (
        "/etc/slurm/on",
        "/etc/slurm/off",
    )
    assert not [w for w in conf.warnings if "Primary" in w]
