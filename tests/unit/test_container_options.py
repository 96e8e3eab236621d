"""--container and --container-id in the clients: the JobSpec sbatch sends, srun's step
request fields, and scontrol's Container= line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.failure import Failure
from cli.halt import Halt
from cli.jobs import record
from cli.sbatch.settings import CLI, ENV, Settings
from cli.sbatch.spec import Script, build
from cli.srun.launch import _container_fields, parse
from corral.wire import codec
from corral.wire import corral_pb2 as pb

SCRIPT = Script("#!/bin/sh\ntrue\n", None, [], wrapped=True)


def _spec(cwd: Path, *options: tuple[str, str], source: str = CLI) -> dict[str, object]:
    settings = Settings()
    for key, text in options:
        settings.apply(key, text, source)
    return build(settings, SCRIPT, cwd=str(cwd), environ={}, command_line=[])


def test_a_bundle_is_sent_by_its_absolute_path_with_its_id(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "config.json").write_text("{}")
    spec = _spec(tmp_path, ("container", "img/"), ("container-id", "abc"))
    assert spec["container"] == str(tmp_path / "img")
    assert spec["container_id"] == "abc"
    assert "container" not in _spec(tmp_path)


def test_a_path_that_is_no_bundle_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Failure) as caught:
        _spec(tmp_path, ("container", str(tmp_path)), source=ENV)
    assert caught.value.lines == (
        f"--container={tmp_path}: not an OCI bundle: no config.json in it",
    )


def test_srun_takes_its_own_option_else_srun_container(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    settings = parse(["--container-id=x", "true"])
    assert _container_fields(settings, {"SRUN_CONTAINER": str(tmp_path)}, "/") == {
        "container": str(tmp_path),
        "container_id": "x",
    }
    assert _container_fields(parse(["true"]), {}, "/") == {}
    with pytest.raises(Halt) as caught:
        _container_fields(parse(["--container=nowhere", "true"]), {}, str(tmp_path))
    assert caught.value.lines == (
        f"srun: error: --container={tmp_path}/nowhere: not an OCI bundle: no such directory",
    )


def test_scontrol_shows_the_container_only_when_there_is_one() -> None:
    def shown(**fields: str) -> list[str]:
        info = pb.JobInfo(job_id=3, state="RUNNING", batch_flag=True, **fields)
        return record.lines(codec.decode("JobInfo", info.SerializeToString()), 100)

    with_both = shown(container="/images/a", container_id="abc")
    assert "Container=/images/a ContainerID=abc" in with_both
    assert with_both.index("Container=/images/a ContainerID=abc") > next(
        i for i, line in enumerate(with_both) if line.startswith("StdOut=")
    )
    assert not any(line.startswith("Container=") for line in shown())
