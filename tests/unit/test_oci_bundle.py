"""A task's copy of an OCI bundle's config.json, and the create/start mode's driver
(nodeagent/oci.py); the launch's container as the agent describes it (runkinds)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli.bundle import bundle_error
from corral.ociconf import OciConf
from corral.wire import corral_pb2 as pb
from nodeagent import oci
from nodeagent.devcgroup import DeviceGuard
from nodeagent.runkinds import launch_spec, step_spec

BASE = {
    "ociVersion": "1.0.2",
    "root": {"path": "rootfs", "readonly": True},
    "process": {"terminal": True, "args": ["sh"], "cwd": "/", "capabilities": {"bounding": []}},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
    "hooks": {"prestart": [{"path": "/bin/true"}], "poststop": [{"path": "/bin/true"}]},
    "linux": {"namespaces": [{"type": "pid"}]},
}


def _config(conf: OciConf, **changes: object) -> dict[str, object]:
    given: dict[str, object] = {
        "bundle": "/images/alpine",
        "args": ["/spool/job_7/script", "x"],
        "env": {"PATH": "/bin", "SLURM_JOB_ID": "7", "SECRET_TOKEN": "s"},
        "cwd": "/home/alice",
        "user": (1000, 100, [10, 20]),
        "spool": ("/spool/job_7", "/slurm"),
        "cgroup": "/corral/node1/job_7/step_batch/oci_task_0",
        "devices": ["/dev/null"],
        "conf": conf,
        **changes,
    }
    return oci.task_config(BASE, **given)  # type: ignore[arg-type]


def test_the_copy_is_the_jobs_and_the_bundle_is_left_as_it_was() -> None:
    before = json.dumps(BASE)
    config = _config(OciConf(env_exclude="^SECRET_", disable_hooks=("prestart",)))
    assert json.dumps(BASE) == before
    assert config["root"] == {"path": "/images/alpine/rootfs", "readonly": True}
    process = config["process"]
    assert isinstance(process, dict)
    assert process["args"] == ["/spool/job_7/script", "x"]
    assert process["env"] == ["PATH=/bin", "SLURM_JOB_ID=7"]
    assert process["cwd"] == "/home/alice" and process["terminal"] is False
    assert process["user"] == {"uid": 1000, "gid": 100, "additionalGids": [10, 20]}
    assert process["capabilities"] == {"bounding": []}  # the rest of the bundle's stays
    assert config["mounts"] == [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/slurm",
            "type": "bind",
            "source": "/spool/job_7",
            "options": ["rbind", "rw"],
        },
    ]
    assert config["hooks"] == {"poststop": [{"path": "/bin/true"}]}
    linux = config["linux"]
    assert isinstance(linux, dict)
    assert linux["cgroupsPath"] == "/corral/node1/job_7/step_batch/oci_task_0"
    null = os.stat("/dev/null")
    major, minor = os.major(null.st_rdev), os.minor(null.st_rdev)
    assert [(d["path"], d["type"], d["major"], d["minor"]) for d in linux["devices"]] == [
        ("/dev/null", "c", major, minor)
    ]
    assert linux["resources"]["devices"] == [
        {"allow": True, "type": "c", "major": major, "minor": minor, "access": "rwm"}
    ]


def test_no_cgroup_and_no_devices_leave_the_bundles_own() -> None:
    config = _config(OciConf(), cgroup="", devices=["/nonexistent/gpu0", "/etc/passwd"])
    assert config["linux"] == {"namespaces": [{"type": "pid"}]}


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("6:freezer:/corral/job_1/step_0\n4:memory:/m/corral\n0::/\n", "/corral/job_1/step_0"),
        ("6:freezer:/\n0::/corral/job_1/step_batch\n", "/corral/job_1/step_batch"),
        ("6:freezer:/\n4:memory:/m\n0::/\n", ""),
        ("0::/\n", ""),
    ],
)
def test_the_task_cgroup_is_the_memory_hierarchys_else_the_unified_one(
    text: str, path: str
) -> None:
    assert oci.current_cgroup(text) == path
    assert oci.container_cgroup(path, 3) == (f"{path}/oci_task_3" if path else "")


def test_environment_files_in_both_styles() -> None:
    env = {"A": "1", "B": "two\nlines"}
    assert oci._env_file(env, "null") == b"A=1\0B=two\nlines\0"
    assert oci._env_file(env, "newline") == b"A=1\n"  # a value with a newline is left out


def test_create_start_query_until_stopped_then_delete(tmp_path: Path) -> None:
    log, state = tmp_path / "log", tmp_path / "state"
    stop = f"sleep 0.3; echo stopped > {state}"  # the container's end, a moment later
    commands = {
        "create": f"echo create >> {log}; echo created > {state}",
        "start": f"echo start >> {log}; echo running > {state}; ({stop}) &",
        "query": f'printf \'{{"status": "%s"}}\' $(cat {state})',
        "kill": f"echo kill >> {log}",
        "delete": f"echo delete >> {log}",
    }
    assert oci.drive(commands) == 0
    assert log.read_text() == "create\nstart\ndelete\n"
    failing = {**commands, "create": f"echo create >> {log}; exit 4"}
    log.unlink()
    assert oci.drive(failing) == 4
    assert log.read_text() == "create\ndelete\n"


def test_a_bundle_without_config_json_is_refused_by_client_and_node(tmp_path: Path) -> None:
    assert bundle_error(str(tmp_path)) == (
        f"--container={tmp_path}: not an OCI bundle: no config.json in it"
    )
    assert bundle_error(str(tmp_path / "none")) == (
        f"--container={tmp_path / 'none'}: not an OCI bundle: no such directory"
    )
    with pytest.raises(oci.BundleError, match=r"no config\.json in it"):
        oci._read_base(str(tmp_path), OciConf())
    assert (
        oci._read_base(str(tmp_path), OciConf(ignore_config_json=True))["root"]["path"] == "rootfs"
    )
    (tmp_path / "config.json").write_text(json.dumps(BASE))
    assert bundle_error(str(tmp_path)) is None
    assert oci._read_base(str(tmp_path), OciConf()) == BASE


def test_the_agent_refuses_a_container_without_oci_conf_and_describes_one_with_it() -> None:
    launch = pb.LaunchJob(job_id=7, node="node1", uid=0, gid=0, user="root", container="/b")
    launch.grant.gpus.append(1)
    assert launch_spec(launch, "host", "/etc/slurm.conf").refused == oci.NOT_CONFIGURED
    guard = DeviceGuard("/cg", {"node1": [(0, ["/dev/nvidia0"]), (1, ["/dev/nvidia1"])]})
    spec = launch_spec(launch, "host", "/etc/slurm.conf", guard, oci_conf=OciConf(run="runc run"))
    assert spec.container["bundle"] == "/b" and spec.container["contained"] is False
    assert spec.container["devices"][0] == "/dev/nvidia1"  # its own GPU's only
    assert spec.container["conf"]["run"] == "runc run"
    step = pb.LaunchStep(job_id=7, step_id=0, node="node1", user="root", container="/b")
    assert step_spec(step).refused == oci.NOT_CONFIGURED
    assert step_spec(pb.LaunchStep(job_id=7, node="node1")).container == {}
