"""srun --bcast's pieces without daemons: its options, the file it sends, and where."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli.halt import Halt
from cli.srun import bcast
from cli.srun.launch import parse
from corral import bcastparams
from corral.clientconf import ClientSettings


def _conf(params: str = "", exclude: tuple[str, ...] = ("/lib",)) -> ClientSettings:
    return ClientSettings(
        path="/etc/slurm.conf",
        cluster_name="c",
        controller_hosts=(("h", "127.0.0.1"),),
        state_save_location="/s",
        slurmctld_port=6817,
        slurmd_port=6818,
        max_array_size=1001,
        bcast=bcastparams.parse(params),
        bcast_exclude=exclude,
    )


def _halt(*argv: str) -> tuple[str, ...]:
    with pytest.raises(Halt) as halt:
        parse(list(argv))
    return halt.value.lines


def test_compress_and_send_libs_need_bcast() -> None:
    assert _halt("--compress", "true") == ("srun: error: --compress needs --bcast",)
    assert _halt("--send-libs=no", "true") == ("srun: error: --send-libs needs --bcast",)
    assert parse(["--bcast", "--compress=lz4", "--send-libs", "true"]).has("bcast")


def test_bcast_is_refused_with_multi_prog() -> None:
    assert _halt("--bcast", "--multi-prog", "conf") == (
        "srun: error: --bcast is not supported with --multi-prog",
    )


def test_the_executable_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A path as given (from srun's cwd), else the first executable on PATH; Slurm's
    fatal line when there is none."""
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    (tmp_path / "plain").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"/nonexistent:{tmp_path}")
    assert bcast.executable("./prog") == os.path.join(str(tmp_path), "./prog")
    assert bcast.executable("prog") == str(program)
    for missing in ("./plain", "nothing-here", str(tmp_path)):
        with pytest.raises(Halt) as halt:
            bcast.executable(missing)
        assert halt.value.lines == (f"srun: fatal: Can not execute {missing}",)


def test_bcast_parameters_are_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    conf = _conf("DestDir=/dest,Compression=zlib,send_libs")
    copy = bcast.Copy({"bcast": None}, "/bin/sh", conf)
    assert copy.fields() == {"bcast_dir": "/dest", "bcast_dest": "", "bcast_libs": True}
    assert (copy.params.compress, copy.params.exclude, copy.params.force) == (
        "zlib",
        ("/lib",),
        True,
    )
    given = {"bcast": "/x/%n", "compress": "none", "send-libs": "no"}
    copy = bcast.Copy(given, "/bin/sh", conf)
    assert copy.fields() == {"bcast_dir": "/dest", "bcast_dest": "/x/%n", "bcast_libs": False}
    assert copy.params.compress == ""


def test_a_relative_dest_is_the_default_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As measured on Slurm 22.05: --bcast=rel is slurm_bcast_J.S_NODE in srun's cwd."""
    monkeypatch.chdir(tmp_path)
    copy = bcast.Copy({"bcast": "rel"}, "/bin/sh", _conf())
    assert copy.fields() == {"bcast_dir": str(tmp_path), "bcast_dest": "", "bcast_libs": False}
