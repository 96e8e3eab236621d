"""Client commands stay off the heavy standard-library modules (a structural check).

Every client command has a 30 ms budget including Python's own start-up
(about 11 ms), so what they import is part of their interface. Measured on the
reference 2-core machine with bytecode cached: ``re`` +5 ms (it imports
``enum``), ``typing`` +9 ms, ``dataclasses`` +14 ms (``inspect``, ``re``),
``socket`` +6 ms (``enum``, ``selectors``), ``argparse`` and ``asyncio`` more,
``google.protobuf`` ~30 ms and ``grpc`` ~60 ms. The idioms that keep them out:
``TYPE_CHECKING = False`` for typing-only imports (mypy honours it), classes
with ``__slots__`` instead of dataclasses, string methods instead of ``re``
(or ``re`` imported inside a rarely used function), ``_socket`` for the
controller connection, and ``corral.clientconf`` instead of ``corral.config``.

Each command is imported in a fresh interpreter and then run far enough to
build its request and connect (to a socket where no controller listens), so
modules imported lazily on the common path count too. The interpreter runs
with ``-S``: site-packages hooks (setuptools' editable-install finder imports
``re`` at every start) are not the command's doing, and a regular
``pip install .`` has none.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

FORBIDDEN = (
    "argparse",
    "asyncio",
    "dataclasses",
    "enum",
    "google.protobuf",
    "grpc",
    "inspect",
    "re",
    "socket",
    "typing",
)

#: What a fresh interpreter runs: import ``cli.<command>``, note the modules, run
#: ``main`` with the arguments, note the modules again (``json`` imports ``re``,
#: so it comes last).
_PROBE = """
import sys
baseline = set(sys.modules)  # what the interpreter and site-packages loaded already
command, argv = sys.argv[1], sys.argv[2:]
module = __import__("cli." + command, fromlist=["main"])
imported = sorted(set(sys.modules) - baseline)
sys.argv = [command, *argv]
try:
    module.main()
except SystemExit:
    pass
ran = sorted(set(sys.modules) - baseline)
import json
print(json.dumps({"import": imported, "run": ran}), file=sys.__stderr__)
"""

COMMANDS = [
    pytest.param(
        "sbatch", ["--hold", "-n2", "-t", "10", "--mem=1G", "--wrap", "true"], id="sbatch"
    ),
    pytest.param(
        "sbatch",
        ["-w", "n[1-2]", "-d", "afterok:1", "--array=1-3", "-N1-2", "--wrap", "true"],
        id="sbatch-nodes-deps-array",
    ),
    pytest.param("squeue", [], id="squeue"),
    pytest.param("squeue", ["-l", "-w", "n1", "-t", "all"], id="squeue-long"),
    pytest.param("sinfo", [], id="sinfo"),
    pytest.param("sinfo", ["-N", "-l"], id="sinfo-nodes"),
    pytest.param("scontrol", ["show", "job", "1"], id="scontrol-show-job"),
    pytest.param("scontrol", ["show", "node"], id="scontrol-show-node"),
    pytest.param("scontrol", ["ping"], id="scontrol-ping"),
    pytest.param("scancel", ["1"], id="scancel"),
    pytest.param("sprio", [], id="sprio"),
    pytest.param("sprio", ["-l", "-j", "1", "-u", "root", "-S", "-y"], id="sprio-long"),
    pytest.param("sshare", [], id="sshare"),
    pytest.param("sshare", ["-l", "-a", "-A", "bench", "-P"], id="sshare-long"),
    pytest.param("sstat", ["-j", "1"], id="sstat"),
    pytest.param("sstat", ["-a", "-P", "-n", "-o", "JobID,MaxRSS,AveCPU", "-j", "1"], id="sstat-o"),
    pytest.param("sbcast", ["-j", "1", "-Cnone", "/etc/hostname", "/tmp/x"], id="sbcast"),
    pytest.param("sattach", ["--layout", "1.0"], id="sattach"),
    pytest.param("sacct", [], id="sacct"),
    pytest.param(
        "sacct",
        ["-X", "--parsable2", "--clusters", "all", "--noheader", "--format=JobIdRaw,State"],
        id="sacct-snakemake",
    ),
    pytest.param(
        "sacct",
        ["-o", "JobID,State,NodeList", "--parsable2", "-j", "1", "-j", "2"],
        id="sacct-submitit",
    ),
    pytest.param("sdiag", [], id="sdiag"),
    pytest.param("strigger", ["--get"], id="strigger"),
    pytest.param("sreport", ["cluster", "utilization"], id="sreport"),
    pytest.param(
        "sreport",
        ["-P", "-t", "hourper", "user", "topusage", "TopCount=5", "Group"],
        id="sreport-top",
    ),
    pytest.param("sacctmgr", ["show", "assoc", "-P"], id="sacctmgr"),
    pytest.param(
        "sacctmgr",
        ["-n", "-s", "list", "user", "root", "format=account%256"],
        id="sacctmgr-snakemake",
    ),
    pytest.param("sacctmgr", ["-i", "add", "account", "physics", "parent=root"], id="sacctmgr-add"),
    pytest.param("why", ["7"], id="corral-why"),  # cli.why: `corral why` without cli.corral
    pytest.param("queues", ["-P"], id="corral-queues"),  # cli.queues without cli.corral
]


def _modules(tmp_path: pathlib.Path, command: str, argv: list[str]) -> dict[str, list[str]]:
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        f"ClusterName=probe\nSlurmctldHost=ctl(127.0.0.1)\nStateSaveLocation={tmp_path}\n"
        "NodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=ALL Default=YES\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "SLURM_CONF": str(conf),
    }
    result = subprocess.run(
        # -S: no site-packages hooks, so the check is as strict in an editable
        # install as in a plain one (the clients need nothing from site-packages).
        [sys.executable, "-S", "-c", _PROBE, command, *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
    assert last.startswith("{"), result.stderr
    found: dict[str, list[str]] = json.loads(last)
    return found


def _heavy(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if any(name == banned or name.startswith(banned + ".") for banned in FORBIDDEN)
    ]


@pytest.mark.parametrize(("command", "argv"), COMMANDS)
def test_client_commands_import_no_heavy_modules(
    tmp_path: pathlib.Path, command: str, argv: list[str]
) -> None:
    modules = _modules(tmp_path, command, argv)
    assert _heavy(modules["import"]) == [], f"importing cli.{command}"
    assert _heavy(modules["run"]) == [], f"running {command} {' '.join(argv)}"
    assert "corral.config" not in modules["run"], "clients read corral.clientconf"


CLIENT_SCRIPTS = sorted((ROOT / "bin").iterdir())


def test_every_client_has_a_plain_script() -> None:
    """pip's console_scripts wrapper imports ``re``: the clients ship plain scripts."""
    names = {path.name for path in CLIENT_SCRIPTS}
    assert names == {
        "sbatch",
        "squeue",
        "scancel",
        "sinfo",
        "scontrol",
        "sprio",
        "sshare",
        "sstat",
        "sacct",
        "sacctmgr",
        "sdiag",
        "strigger",
        "sreport",
        "srun",
        "salloc",
        "scrontab",
        "sbcast",
        "sattach",
    }
    for path in CLIENT_SCRIPTS:
        code = [line for line in path.read_text().splitlines() if line and line[0] != "#"]
        assert code == [f"from cli.{path.name} import main", "main()"], path


@pytest.mark.parametrize("script", CLIENT_SCRIPTS, ids=lambda p: p.name)
def test_client_script_prints_the_slurm_version(script: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "slurm 24.11.0\n"), done.stderr
