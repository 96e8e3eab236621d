"""sbatch as a command: precedence, output, --test-only, -W, and failures before submitting.

In-process tests replace the controller connection with a fake that records
the request; subprocess tests run the real entry point with a throw-away
slurm.conf and no controller, for the paths that must fail (or finish) before
contacting one.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cli import boundary, clusters
from cli.sbatch.submission import sbatch
from corral import SLURM_VERSION
from corral.errors import ESLURM_INVALID_JOB_ID, ESLURM_INVALID_PARTITION_NAME, SlurmError

ROOT = Path(__file__).resolve().parents[2]

JOB = """#!/bin/sh
#SBATCH -J script --time=5
#SBATCH -p pscript
#SBATCH --comment="from the script"   # a comment
#SBATCH -Q --wrap=ignored
hostname
"""


class FakeClient:
    """Answers Submit with ``reply`` (or raises ``error``) and Jobs from ``jobs`` in turn."""

    def __init__(self, reply: dict[str, Any] | None = None) -> None:
        self.reply = {"job_id": 42, "cluster": "test", **(reply or {})}
        self.error: SlurmError | None = None
        self.jobs: list[list[dict[str, Any]] | SlurmError] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((method, request))
        if method == "Submit":
            if self.error is not None:
                raise self.error
            return self.reply
        answer = self.jobs.pop(0)
        if isinstance(answer, SlurmError):
            raise answer
        return {"jobs": answer}

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.calls[0][1]["spec"]
        return spec


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeClient:
    fake = FakeClient()
    monkeypatch.setattr(boundary, "connect", lambda: fake)
    # -M: each named cluster's controller is this one (cli/clusters.py picks among them).
    monkeypatch.setattr(clusters, "clients", lambda text: [(n, fake) for n in text.split(",")])
    monkeypatch.setattr(clusters, "local", lambda name: True)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    for name in list(os.environ):
        if name.startswith("SBATCH_") or name == "SLURM_EXIT_ERROR":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(JOB)
    return fake


def test_precedence(client: FakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """defaults < #SBATCH < SBATCH_* < command line."""
    monkeypatch.setenv("SBATCH_JOB_NAME", "env")
    monkeypatch.setenv("SBATCH_TIMELIMIT", "7")
    monkeypatch.setenv("SBATCH_ACCOUNT", "envacct")
    assert sbatch(["-J", "cli", "-A", "cliacct", "job.sh", "arg1"]) == 0
    spec = client.spec
    assert (spec["name"], spec["time_limit"], spec["account"]) == ("cli", 7, "cliacct")
    assert (spec["partitions"], spec["comment"]) == (["pscript"], "from the script")
    assert (spec["command"], spec["argv"]) == (os.path.join(os.getcwd(), "job.sh"), ["arg1"])
    assert spec["script"] == JOB
    assert spec["submit_line"] == "sbatch -J cli -A cliacct job.sh arg1"
    assert client.calls[0][1]["test_only"] is False


@pytest.mark.parametrize(
    ("directive", "env", "command_line", "name"),
    [
        pytest.param(None, None, None, "named.sh", id="default"),
        pytest.param("d", None, None, "d", id="directive"),
        pytest.param("d", "e", None, "e", id="env-over-directive"),
        pytest.param(None, "e", None, "e", id="env"),
        pytest.param("d", "e", "c", "c", id="command-line-over-all"),
        pytest.param("d", None, "c", "c", id="command-line-over-directive"),
    ],
)
def test_precedence_table(
    client: FakeClient,
    monkeypatch: pytest.MonkeyPatch,
    directive: str | None,
    env: str | None,
    command_line: str | None,
    name: str,
) -> None:
    lines = ["#!/bin/sh"] + ([f"#SBATCH --job-name={directive}"] if directive else []) + ["true"]
    Path("named.sh").write_text("\n".join(lines) + "\n")
    if env:
        monkeypatch.setenv("SBATCH_JOB_NAME", env)
    assert sbatch([*(["-J", command_line] if command_line else []), "named.sh"]) == 0
    assert client.spec["name"] == name


def test_directive_defaults_without_overrides(client: FakeClient) -> None:
    assert sbatch(["job.sh"]) == 0
    assert (client.spec["name"], client.spec["time_limit"]) == ("script", 5)


@pytest.mark.parametrize(
    ("args", "out"),
    [
        pytest.param([], "Submitted batch job 42\n", id="default"),
        pytest.param(["--parsable"], "42\n", id="parsable"),
        pytest.param(["-Q"], "", id="quiet"),
        pytest.param(["-M", "test"], "Submitted batch job 42 on cluster test\n", id="cluster"),
        pytest.param(["--parsable", "-M", "test"], "42;test\n", id="parsable-cluster"),
    ],
)
def test_output(
    client: FakeClient, capsys: pytest.CaptureFixture[str], args: list[str], out: str
) -> None:
    assert sbatch([*args, "job.sh"]) == 0
    assert capsys.readouterr().out == out


def test_wrap_and_stdin(client: FakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sbatch(["--wrap", "echo hi"]) == 0
    assert client.spec["name"] == "wrap"
    assert client.spec["script"].endswith("\n\necho hi\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(JOB.encode())))
    assert sbatch(["--parsable"]) == 0
    stdin_spec = client.calls[1][1]["spec"]
    assert (stdin_spec["name"], stdin_spec["command"], stdin_spec["argv"]) == ("script", "", [])


@pytest.mark.parametrize(
    ("args", "err", "status"),
    [
        pytest.param(["--nosuch", "job.sh"],
                     "sbatch: unrecognized option '--nosuch'\n"
                     'Try "sbatch --help" for more information\n', 255, id="unknown-option"),
        pytest.param(["-t", "abc", "--wrap", "true"],
                     "sbatch: error: Invalid --time specification\n", 255, id="bad-time"),
        pytest.param(["--mem=1G", "--mem-per-cpu=1G", "job.sh"],
                     "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually "
                     "exclusive.\n", 1, id="memory-conflict"),
        pytest.param(["--wrap=true", "job.sh"],
                     "sbatch: error: Script arguments not permitted with --wrap option\n", 1,
                     id="wrap-with-script"),
        pytest.param(["-v", "-Q", "job.sh"],
                     "sbatch: error: don't specify both --verbose (-v) and --quiet (-Q)\n", 1,
                     id="verbose-and-quiet"),
        pytest.param(["--array=5-1", "job.sh"],
                     "sbatch: error: Batch job submission failed: Invalid job array "
                     "specification\n", 1, id="bad-array"),
    ],
)  # fmt: skip
def test_failures_before_submitting(
    client: FakeClient, capsys: pytest.CaptureFixture[str], args: list[str], err: str, status: int
) -> None:
    assert sbatch(args) == status
    assert capsys.readouterr().err == err
    assert client.calls == []


@pytest.mark.parametrize(
    ("directive", "err"),
    [
        pytest.param("#SBATCH foo", "sbatch: error: Invalid directive found in batch script: foo\n",
                     id="positional"),
        pytest.param("#SBATCH -N 1 --nosuch", "sbatch: unrecognized option '--nosuch'\n"
                     'Try "sbatch --help" for more information\n', id="unknown-option"),
    ],
)  # fmt: skip
def test_bad_directives(
    client: FakeClient, capsys: pytest.CaptureFixture[str], directive: str, err: str
) -> None:
    Path("bad.sh").write_text(f"#!/bin/sh\n{directive}\ntrue\n")
    assert sbatch(["bad.sh"]) == 255
    assert capsys.readouterr().err == err


def test_submission_failure(
    client: FakeClient, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client.error = SlurmError(ESLURM_INVALID_PARTITION_NAME)
    assert sbatch(["-p", "nosuch", "job.sh"]) == 1
    assert capsys.readouterr() == (
        "",
        "sbatch: error: invalid partition specified: nosuch\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
    )
    monkeypatch.setenv("SLURM_EXIT_ERROR", "7")
    assert sbatch(["-p", "nosuch", "job.sh"]) == 7


def test_test_only(
    client: FakeClient, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "UTC")
    client.reply.update(start_time=1796014614, num_cpus=2, nodes="n[1-2]", partition="debug")
    assert sbatch(["--test-only", "-N", "2", "--wrap", "true"]) == 0
    assert client.calls[0][1]["test_only"] is True
    assert capsys.readouterr() == (
        "",
        "sbatch: Job 42 to start at 2026-11-30T04:56:54 using 2 processors on nodes n[1-2] "
        "in partition debug\n",
    )
    client.error = SlurmError(ESLURM_INVALID_PARTITION_NAME)
    assert sbatch(["--test-only", "job.sh"]) == 1
    assert capsys.readouterr().err == (
        "sbatch: error: invalid partition specified: pscript\n"
        "allocation failure: Invalid partition name specified\n"
    )  # a real Slurm 22.05's two lines


def job(state: str, exit_status: int = 0) -> dict[str, Any]:
    return {"state": state, "exit_status": exit_status}


@pytest.mark.parametrize(
    ("replies", "status"),
    [
        pytest.param([[job("PENDING")], [job("RUNNING")], [job("COMPLETED", 3 << 8)]], 3,
                     id="exit-code"),
        pytest.param([[job("CANCELLED", 9)]], 1, id="signal"),
        pytest.param([[job("FAILED", 2 << 8), job("RUNNING")],
                      [job("FAILED", 2 << 8), job("TIMEOUT", 5 << 8)]], 5, id="array-max"),
        pytest.param([SlurmError(ESLURM_INVALID_JOB_ID)], 0, id="vanished"),
        pytest.param([[]], 0, id="no-records"),
    ],
)  # fmt: skip
def test_wait(client: FakeClient, replies: list[Any], status: int) -> None:
    client.jobs = list(replies)
    assert sbatch(["-W", "job.sh"]) == status
    assert client.calls[1] == ("Jobs", {"filter": {"job_ids": ["42"], "states": ["ALL"]}})
    assert client.jobs == []


def test_wait_retries_when_the_controller_is_away(
    client: FakeClient, capsys: pytest.CaptureFixture[str]
) -> None:
    client.jobs = [SlurmError(1000, "Unable to contact slurm controller"), [job("COMPLETED")]]
    assert sbatch(["--wait", "--parsable", "job.sh"]) == 0
    assert "retrying: Unable to contact slurm controller" in capsys.readouterr().err


def test_verbose_lists_options(client: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert sbatch(["-v", "-n", "2", "job.sh"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "sbatch: defined options"
    assert "sbatch: ntasks              : 2" in err
    assert "sbatch: job-name            : script" in err
    assert err[-1] == "sbatch: end of defined options"


@pytest.mark.parametrize(
    ("debug", "status", "listed"),
    [("2", 0, True), ("", 0, False), ("0", 0, False), ("-1", 1, False), ("yes", 1, False)],
)
def test_sbatch_debug(
    client: FakeClient,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    debug: str,
    status: int,
    listed: bool,
) -> None:
    monkeypatch.setenv("SBATCH_DEBUG", debug)
    assert sbatch(["job.sh"]) == status
    assert ("defined options" in capsys.readouterr().err) is listed


@pytest.mark.parametrize("flag", ["-h", "--help", "--usage"])
def test_help(client: FakeClient, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    assert sbatch([flag]) == 0
    assert "Usage: sbatch" in capsys.readouterr().out


# ---------------------------------------------------------------- the real entry point


@pytest.fixture
def run(tmp_path: Path) -> Any:
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=test\nSlurmctldHost=localhost\n"
        f"StateSaveLocation={tmp_path}/state\n"
        "NodeName=n[1-2] CPUs=2 RealMemory=1000\nPartitionName=debug Nodes=n[1-2] Default=YES\n"
    )
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("SBATCH_", "SLURM_"))
    }
    env.update(SLURM_CONF=str(conf), PYTHONPATH=str(ROOT))

    def sbatch_process(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        done = subprocess.run(
            [sys.executable, "-c", "from cli.sbatch import main; main()", *args],
            input=stdin, capture_output=True, cwd=tmp_path, env=env, timeout=60, check=False,
        )  # fmt: skip
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    (tmp_path / "bad.sh").write_text("echo hi\n")
    (tmp_path / "dos.sh").write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    (tmp_path / "job.sh").write_text("#!/bin/sh\n#SBATCH foo\n")
    return sbatch_process


def test_version(run: Any) -> None:
    assert run("--version") == (0, f"slurm {SLURM_VERSION}\n", "")
    assert run("-V") == (0, f"slurm {SLURM_VERSION}\n", "")


@pytest.mark.parametrize(
    ("args", "stdin", "status", "err"),
    [
        pytest.param(["--nosuch", "--wrap", "true"], b"", 255,
                     "sbatch: unrecognized option '--nosuch'\n"
                     'Try "sbatch --help" for more information\n', id="golden-unknown-option"),
        pytest.param(["-t", "abc", "--wrap", "true"], b"", 255,
                     "sbatch: error: Invalid --time specification\n", id="golden-bad-time"),
        pytest.param(["bad.sh"], b"", 1,
                     "sbatch: error: This does not look like a batch script.  The first\n"
                     "sbatch: error: line must start with #! followed by the path to an "
                     "interpreter.\n"
                     "sbatch: error: For instance: #!/bin/sh\n", id="golden-no-shebang"),
        pytest.param(["dos.sh"], b"", 1,
                     "sbatch: error: Batch script contains DOS line breaks (\\r\\n)\n"
                     "sbatch: error: instead of expected UNIX line breaks (\\n).\n",
                     id="golden-dos"),
        pytest.param([], b"", 1, "sbatch: error: Batch script is empty!\n", id="empty-stdin"),
        pytest.param(["job.sh"], b"", 255,
                     "sbatch: error: Invalid directive found in batch script: foo\n",
                     id="invalid-directive"),
        pytest.param(["missing.sh"], b"", 1, "sbatch: error: Unable to open file missing.sh\n",
                     id="missing-file"),
        pytest.param(["--wrap", "true"], b"", 1,
                     "sbatch: error: Batch job submission failed: Unable to contact slurm "
                     "controller (connect failure)\n", id="no-controller"),
    ],
)  # fmt: skip
def test_entry_point_failures(
    run: Any, args: list[str], stdin: bytes, status: int, err: str
) -> None:
    assert run(*args, stdin=stdin) == (status, "", err)
