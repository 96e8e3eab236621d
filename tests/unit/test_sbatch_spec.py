"""cli.sbatch.spec and cli.sbatch.environment: the JobSpec sbatch sends."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.failure import Failure
from cli.sbatch.environment import job_environment, read_export_file, split_export
from cli.sbatch.settings import CLI, Settings
from cli.sbatch.spec import Script, build, check_array, check_dependency
from corral.wire import codec

ENVIRON = {"HOME": "/home/a", "PATH": "/bin", "SLURM_CONF": "/etc/s.conf", "A": "1", "B": "2"}
SCRIPT = Script("#!/bin/sh\ntrue\n", "/work/job.sh", ["x", "y"], wrapped=False)


def spec_for(*options: tuple[str, str | None], script: Script = SCRIPT) -> dict[str, Any]:
    settings = Settings()
    for key, text in options:
        settings.apply(key, text, CLI)
    return build(settings, script, cwd="/work", environ=ENVIRON, command_line=["-N", "2"])


def test_defaults() -> None:
    spec = spec_for()
    assert spec["name"] == "job.sh"
    assert (spec["command"], spec["argv"]) == ("/work/job.sh", ["x", "y"])
    assert (spec["work_dir"], spec["submit_dir"]) == ("/work", "/work")
    assert (spec["std_out"], spec["std_err"], spec["std_in"]) == ("", "", "")
    assert spec["submit_line"] == "sbatch -N 2"
    assert spec["export_env"] == ""
    assert "." not in spec["submit_host"]
    for absent in ("min_nodes", "max_nodes", "time_limit", "requeue", "priority", "dependency"):
        assert absent not in spec


@pytest.mark.parametrize(
    ("script", "name"),
    [
        pytest.param(Script("#!/bin/sh\n", None, [], wrapped=False), "sbatch", id="stdin"),
        pytest.param(Script("#!/bin/sh\n", None, [], wrapped=True), "wrap", id="wrap"),
    ],
)
def test_default_names(script: Script, name: str) -> None:
    spec = spec_for(script=script)
    assert (spec["name"], spec["command"], spec["argv"]) == (name, "", [])


def test_paths_are_made_absolute_against_chdir() -> None:
    spec = spec_for(("chdir", "sub"), ("output", "o-%j.out"), ("error", "/abs/e"),
                    ("input", "none"))  # fmt: skip
    assert spec["work_dir"] == "/work/sub"
    assert spec["std_out"] == "/work/sub/o-%j.out"
    assert spec["std_err"] == "/abs/e"
    assert spec["std_in"] == "/dev/null"
    assert spec["submit_dir"] == "/work"


def test_absolute_chdir() -> None:
    assert spec_for(("chdir", "/scratch"))["work_dir"] == "/scratch"


@pytest.mark.parametrize(
    ("options", "nodes"),
    [
        pytest.param([("nodes", "2-4")], (2, 4), id="range"),
        pytest.param([("nodes", "3")], (3, 3), id="fixed"),
        # -w alone sets no count: the controller gives the job those nodes and more
        # where its tasks need them (test_gpu_semantics.py: -w n1 -n10).
        pytest.param([("nodelist", "n[1-3],n1")], (None, None), id="nodelist-sets-no-count"),
        pytest.param([("nodelist", "n[1-3]"), ("ntasks", "2")], (2, 2), id="nodelist-tasks-cap"),
        pytest.param([("nodes", "2-8"), ("ntasks", "4")], (2, 4), id="tasks-cap-max"),
        pytest.param([("nodes", "4"), ("ntasks", "2")], (2, 2), id="tasks-cap-min"),
    ],
)
def test_node_counts(options: list[tuple[str, str]], nodes: tuple[int, int | None]) -> None:
    spec = spec_for(*options)
    assert (spec.get("min_nodes"), spec.get("max_nodes")) == nodes


def test_fewer_tasks_than_nodes_warns(capsys: pytest.CaptureFixture[str]) -> None:
    spec_for(("nodes", "4"), ("ntasks", "2"))
    assert capsys.readouterr().err == (
        "sbatch: warning: can't run 2 processes on 4 nodes, setting nnodes to 2\n"
    )


def test_min_cpus_covers_a_task() -> None:
    assert spec_for(("cpus-per-task", "4"))["min_cpus"] == 4
    assert spec_for(("cpus-per-task", "4"), ("mincpus", "8"))["min_cpus"] == 8
    assert spec_for(("mincpus", "2"))["min_cpus"] == 2


def test_bad_nodelist() -> None:
    with pytest.raises(Failure) as info:
        spec_for(("nodelist", "n[1-"))
    assert info.value.lines == ("Invalid node list specified",)


def test_nodelist_file(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("n1 # first\n\nn2\n")
    assert spec_for(("nodelist", str(hosts)))["req_nodes"] == "n1,n2"


def test_every_field_encodes_as_a_jobspec() -> None:
    spec = spec_for(
        ("job-name", "j"), ("partition", "a,b"), ("nodes", "1-2"), ("ntasks", "2"),
        ("cpus-per-task", "2"), ("ntasks-per-node", "1"), ("mem", "1G"), ("time", "10"),
        ("time-min", "5"), ("hold", None), ("begin", "now"), ("nice", None), ("comment", "c"),
        ("requeue", None), ("open-mode", "a"), ("signal", "B:USR1@30"), ("nodelist", "n1"),
        ("exclude", "n2"), ("constraint", "x&y"), ("exclusive", None),
        ("dependency", "afterok:1"), ("array", "1-3%1"), ("account", "acct"), ("qos", "q"),
        ("mincpus", "1"), ("export", "ALL"), ("gres", "gpu:1"), ("kill-on-invalid-dep", "yes"),
        ("priority", "3"), ("deadline", "now+1day"),
    )  # fmt: skip
    decoded = codec.decode("JobSpec", codec.encode("JobSpec", spec))
    assert {key: decoded[key] for key in spec} == spec


def test_oversubscribe_encodes_as_a_jobspec() -> None:
    spec = spec_for(("oversubscribe", None), ("gres", "gpu:a100:2,nic:1"))
    decoded = codec.decode("JobSpec", codec.encode("JobSpec", spec))
    assert (decoded["oversubscribe"], decoded["gres"]) == (True, "gpu:a100:2,nic:1")


@pytest.mark.parametrize(
    "text", ["0-15", "0,6,16-32", "0-15:4", "1-9:2%3", "0-15%4", "[1-5]", "[1-3,7]", "7", "1,,2"]
)
def test_good_arrays(text: str) -> None:
    check_array(text)


@pytest.mark.parametrize(
    "text", ["a", "1-", "-1", "5-1", "1:2", "0-15:0", "1-5%", "1-5%x", "1-5%2%3", ",", "1.5",
             "0-15:-1", "1-3:2:1"],
)  # fmt: skip
def test_bad_arrays(text: str) -> None:
    with pytest.raises(Failure) as info:
        check_array(text)
    assert info.value.lines == ("Batch job submission failed: Invalid job array specification",)


@pytest.mark.parametrize(
    "text",
    ["afterok:12", "afterok:12:13", "afterany:12,afterok:13", "afterany:12?afternotok:14",
     "after:5+10", "AFTEROK:5", "aftercorr:7_*", "afterok:7_3", "singleton", "12", "12,13",
     "singleton,afterok:1", "0", "afterburstbuffer:3"],
)  # fmt: skip
def test_good_dependencies(text: str) -> None:
    check_dependency(text)


@pytest.mark.parametrize(
    "text",
    ["afterok", "afterok:", "afterok:0", "afterok:x", "afterok:1,afterany:2?afterok:3",
     "before:1", "afterok:1+", "afterok:1+0", "after:1+x", "1_", "singletons", ",", "afterok:1,"],
)  # fmt: skip
def test_bad_dependencies(text: str) -> None:
    with pytest.raises(Failure) as info:
        check_dependency(text)
    assert info.value.lines == ("Batch job submission failed: Job dependency problem",)


@given(st.text(max_size=30))
def test_grammar_checks_raise_only_failure(text: str) -> None:
    for check in (check_array, check_dependency):
        with contextlib.suppress(Failure):
            check(text)


def environment(export: str | None, **kwargs: Any) -> dict[str, str]:
    options: dict[str, Any] = {"export_file": None, "dependency": None, "get_user_env": False}
    options.update(kwargs)
    return job_environment(export=export, environ=ENVIRON, submit_dir="/work", **options)


SUBMITTER = {"SLURM_PRIO_PROCESS", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST", "SLURM_UMASK"}


@pytest.mark.parametrize(
    ("export", "names"),
    [
        pytest.param(None, set(ENVIRON) | SUBMITTER, id="default-all"),
        pytest.param("ALL", set(ENVIRON) | SUBMITTER, id="all"),
        pytest.param("none", {"SLURM_CONF", "SLURM_EXPORT_ENV", "SLURM_GET_USER_ENV"} | SUBMITTER,
                     id="none"),
        pytest.param("NIL", {"SLURM_CONF", "SLURM_EXPORT_ENV"} | SUBMITTER, id="nil"),
        pytest.param("A,C=3", {"A", "C", "SLURM_CONF", "SLURM_EXPORT_ENV", "SLURM_GET_USER_ENV"}
                     | SUBMITTER, id="list"),
        pytest.param("ALL,C=3", set(ENVIRON) | {"C", "SLURM_EXPORT_ENV", "SLURM_GET_USER_ENV"}
                     | SUBMITTER, id="all-plus-list"),
    ],
)  # fmt: skip
def test_export_modes(export: str | None, names: set[str]) -> None:
    assert set(environment(export)) == names


def test_export_values() -> None:
    env = environment('A=x,"B=y,z",D')
    assert (env["A"], env["B"], env["SLURM_EXPORT_ENV"]) == ("x", "y,z", 'A=x,"B=y,z",D')
    assert "D" not in env
    assert env["SLURM_SUBMIT_DIR"] == "/work"


def test_dependency_and_user_env_variables() -> None:
    env = environment(None, dependency="afterok:3", get_user_env=True)
    assert (env["SLURM_JOB_DEPENDENCY"], env["SLURM_GET_USER_ENV"]) == ("afterok:3", "1")


def test_umask_kept_when_set() -> None:
    env = job_environment(export=None, export_file=None, environ={"SLURM_UMASK": "0077"},
                          submit_dir="/", dependency=None, get_user_env=False)  # fmt: skip
    assert env["SLURM_UMASK"] == "0077"


def test_export_file(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_bytes(b"X=1\0DISPLAY=:0\0Y=a=b\0\0Z=ignored\0")
    assert read_export_file(str(path)) == {"X": "1", "Y": "a=b"}
    env = environment(None, export_file=str(path))
    assert (env["X"], env["Y"]) == ("1", "a=b")
    assert "HOME" not in env


def test_missing_export_file() -> None:
    with pytest.raises(Failure) as info:
        read_export_file("/nonexistent/env")
    assert info.value.lines == ("Could not open user environment file /nonexistent/env",)


def test_unencodable_variables_are_dropped() -> None:
    env = job_environment(export=None, export_file=None, environ={"BAD": "\udcff", "OK": "1"},
                          submit_dir="/", dependency=None, get_user_env=False)  # fmt: skip
    assert "BAD" not in env and env["OK"] == "1"


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("A,B", ["A", "B"]), ("'A=1,2',B", ["A=1,2", "B"]), ('A="1,2"', ['A="1,2"']),
     ("A,,B,", ["A", "B"])],
)  # fmt: skip
def test_split_export(text: str, tokens: list[str]) -> None:
    assert split_export(text) == tokens
