"""The site-program runner (corral/hooks.py), TaskProlog's output, the health check's
rules, and what a failed Prolog does to a job and a node."""

from __future__ import annotations

import pwd
import time
from pathlib import Path

import pytest
from scenario import running

from controller import drain, jobstate
from controller.jobspec import from_fields
from controller.jobstate import JobState, Reason
from controller.journal import Journal
from controller.model import NodeRuntime
from controller.nodehooks import NodeHooks
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral import hooks
from corral.config import parse
from corral.wire import corral_pb2 as pb
from nodeagent import health


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    ("output", "environment", "printed"),
    [
        pytest.param("export FOO=bar baz\n", {"KEEP": "1", "FOO": "bar baz"}, (), id="export"),
        pytest.param("export A=x=y\n", {"KEEP": "1", "A": "x=y"}, (), id="value keeps ="),
        pytest.param("export E=\n", {"KEEP": "1", "E": ""}, (), id="empty value"),
        pytest.param("unset KEEP\n", {}, (), id="unset"),
        pytest.param("unset NOPE\n", {"KEEP": "1"}, (), id="unset of nothing"),
        pytest.param("print  two spaces\n", {"KEEP": "1"}, (" two spaces",), id="print"),
        pytest.param(
            "export A=1\nunset A\nexport A=2\n", {"KEEP": "1", "A": "2"}, (), id="in order"
        ),
        pytest.param(
            "echo hi\nexport\nexport =v\nexport NOEQ\nEXPORT X=1\n  export Y=1\n",
            {"KEEP": "1"},
            (),
            id="other lines ignored",
        ),
    ],
)
def test_task_prolog_output_sets_unsets_and_prints(
    output: str, environment: dict[str, str], printed: tuple[str, ...]
) -> None:
    setup = hooks.task_setup(output, {"KEEP": "1"})
    assert setup.environment == environment
    assert setup.printed == printed


def test_a_program_gets_only_its_environment_and_its_output_is_kept(tmp_path: Path) -> None:
    program = _script(tmp_path / "p", "/usr/bin/env; echo oops >&2; exit 3\n")
    result = hooks.run(program, {"A": "1"})
    assert not result.ok and result.status == 3 << 8
    assert result.describe() == "rc:3"
    assert result.output.splitlines()[-1] == "oops"
    assert "A=1" in result.output.splitlines() and "PATH=" not in result.output
    assert result.first_line() == "A=1"


def test_a_program_past_its_time_is_killed_with_what_it_started(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    program = _script(tmp_path / "p", f"(/bin/sleep 2; : > {marker}) &\nexec /bin/sleep 30\n")
    started = time.monotonic()
    result = hooks.run(program, {}, timeout=0.5)
    assert result.timed_out and not result.ok and result.describe() == "timed out"
    assert time.monotonic() - started < 5
    time.sleep(2.5)
    assert not marker.exists()  # its background child went with it


def test_a_glob_runs_each_program_in_order_until_one_fails(tmp_path: Path) -> None:
    log = tmp_path / "log"
    (tmp_path / "d").mkdir()
    _script(tmp_path / "d" / "10-a", f"echo a >> {log}\n")
    _script(tmp_path / "d" / "20-b", f"echo b >> {log}\nexit 1\n")
    _script(tmp_path / "d" / "30-c", f"echo c >> {log}\n")
    result = hooks.run(str(tmp_path / "d" / "*"), {})
    assert result.program.endswith("20-b") and result.status == 1 << 8
    assert log.read_text() == "a\nb\n"
    assert hooks.run(str(tmp_path / "none" / "*"), {}).ok  # no match: nothing to fail


def test_a_program_that_cannot_start_fails_with_the_reason(tmp_path: Path) -> None:
    result = hooks.run(str(tmp_path / "missing"), {})
    assert result.status == -1 and result.describe() == "could not be run"
    assert "No such file" in result.output


def test_a_hook_sees_the_jobs_variables_and_its_context() -> None:
    job_env = {"SLURM_JOB_ID": "7", "SLURM_JOB_UID": "1000", "HOME": "/h", "SLURM_NTASKS": "2"}
    env = hooks.job_environment(job_env, "prolog_slurmctld")
    assert env == {
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_UID": "1000",
        "SLURM_UID": "1000",
        "SLURM_SCRIPT_CONTEXT": "prolog_slurmctld",
    }
    assert hooks.exit_variables(2 << 8 | 0) == {
        "SLURM_JOB_EXIT_CODE": "512",
        "SLURM_JOB_EXIT_CODE2": "2:0",
        "SLURM_JOB_DERIVED_EC": "2",
    }
    assert hooks.exit_variables(9)["SLURM_JOB_EXIT_CODE2"] == "0:9"


@pytest.mark.parametrize(
    ("states", "busy", "due"),
    [
        pytest.param(("ANY",), False, True, id="any idle"),
        pytest.param(("ANY",), True, True, id="any busy"),
        pytest.param(("IDLE",), True, False, id="idle only, busy"),
        pytest.param(("NONDRAINED_IDLE",), False, True, id="nondrained idle"),
        pytest.param(("ALLOC", "CYCLE"), True, True, id="alloc busy"),
        pytest.param(("MIXED",), False, False, id="mixed idle"),
        pytest.param(("CYCLE",), True, True, id="cycle alone is any"),
    ],
)
def test_health_check_runs_in_the_states_asked(
    states: tuple[str, ...], busy: bool, due: bool
) -> None:
    assert health.due(states, busy) is due


def test_a_failed_health_check_drains_with_its_first_line() -> None:
    assert health.reason(hooks.HookResult("/hc", 1 << 8, "\n  disk full \nmore\n")) == "disk full"
    assert health.reason(hooks.HookResult("/hc", 2 << 8)) == "HealthCheckProgram failed: rc:2"


def test_a_failed_site_program_drains_a_node_once_keeping_an_earlier_reason() -> None:
    node = NodeRuntime(name="n1", state="UP")
    drained = drain.failed_check(node, "Prolog error", "slurm", 100)
    assert drained.drain and drained.reason == "Prolog error" and drained.reason_time == 100
    assert drain.failed_check(drained, "Epilog error", "slurm", 200) == drained


def test_a_failed_prolog_requeues_the_job_held_with_slurms_reason() -> None:
    job = jobstate.apply(running(1), jobstate.Requeue(20, jobstate.PROLOG_HOLD))
    job = jobstate.apply(job, jobstate.Finish(20, 1 << 8, "prolog_failed"))
    assert job.state is JobState.PENDING and job.restarts == 1 and not job.nodes
    assert job.held == jobstate.PROLOG_HOLD
    assert job.reason is Reason.LAUNCH_FAILED_REQUEUED_HELD
    job = jobstate.apply(job, jobstate.Release())
    assert not job.held and job.reason is Reason.NONE


def test_a_program_runs_as_the_user_it_is_given() -> None:
    """TaskEpilog and the like run as the job's user (the tests run as root)."""
    nobody = pwd.getpwnam("nobody")
    user = hooks.RunAs(nobody.pw_uid, nobody.pw_gid, "nobody")
    result = hooks.run("/usr/bin/id", {}, argv=("-u",), user=user)
    assert result.ok and result.output.strip() == str(nobody.pw_uid)


def test_an_allocation_waits_for_each_nodes_prolog_asked_again_after_an_agent_restart(
    tmp_path: Path,
) -> None:
    """PrologFlags=Alloc: salloc's allocation waits for the Prolog of each node; a
    re-attached agent is asked again for those it has not answered; a failure drains
    the node and, as an allocation cannot be requeued, kills it."""
    conf = parse(
        "ClusterName=test\nSlurmctldHost=ctl\nNodeName=n[1-2] CPUs=8 RealMemory=16000\n"
        "PartitionName=p Nodes=ALL Default=YES\nPrologFlags=Alloc\nProlog=/bin/true\n",
        str(tmp_path / "slurm.conf"),
    )
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    for name in ("n1", "n2"):
        store.node_registered(Registration(name=name, cpus=8, real_memory=16000), 0.0, 100)
    spec = from_fields({"name": "a", "interactive": True, "work_dir": "/tmp"})
    job_id = store.submit(spec, principal_for(0, 0), now=100).job.job_id
    store.post(job_id, jobstate.Start(110, "p", ("n1", "n2"), (4, 4), (1000, 1000), 2))
    assert store.configuring[job_id] == {"n1", "n2"}
    sent: list[tuple[str, pb.ControllerMessage]] = []
    hooks_link = NodeHooks(store, lambda node, msg: sent.append((node, msg)) is None)
    hooks_link.resend(["n2"])
    assert [(n, m.hook.job_id, m.hook.epilog) for n, m in sent] == [("n2", job_id, False)]
    assert sent[0][1].hook.environment["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd"
    ok = pb.HookDone(job_id=job_id, node="n2", ok=True)
    assert hooks_link.done(ok, ["n1"]) is None  # not the session's node: dropped
    ack = hooks_link.done(ok, ["n2"])
    assert ack is not None and ack.ack_hook.node == "n2"
    assert store.configuring[job_id] == {"n1"}
    hooks_link.done(pb.HookDone(job_id=job_id, node="n1", message="rc:1"), ["n1"])
    assert job_id not in store.configuring
    assert store.nodes["n1"].drain and store.nodes["n1"].reason == "Prolog error"
    assert store.jobs[job_id].state is JobState.CANCELLED
