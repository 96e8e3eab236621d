"""scancel: cancel or signal jobs by id and/or filters, as Slurm's scancel does.

Ids are checked here the way Slurm checks them (``scancel: error: Invalid
job id x`` before anything is sent); the controller then signals every job
the ids and filters select and answers one result per id or job. What is
reported follows Slurm: a plain cancel of a job that is unknown or already
finished is not an error (workflow tools cancel jobs that may have ended),
``-v`` reports every job acted on and every failure.
"""

from __future__ import annotations

import os
import sys

from cli import boundary
from cli.command import Command, known_user
from cli.halt import Halt
from cli.jobs import statenames
from cli.jobs.ids import InvalidJobId, cancel_ids, leader_step
from cli.options import REFUSED, REQUIRED, WARNED, Option, OptionTable
from corral.errors import ESLURM_ALREADY_DONE, ESLURM_INVALID_JOB_ID, SlurmError
from corral.hostlist import expand

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

PROG = "scancel"

USAGE = """\
Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]
               [-p partition] [-Q] [-q qos] [--reservation=reservation]
               [-s signal | integer] [-t PENDING | RUNNING | SUSPENDED]
               [--usage] [-u user_name] [--me] [-V] [-v] [-w hostlist]
               [job_id[_array_id][.step_id]]
"""

HELP = """\
Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]
  -A, --account=account           act only on jobs charging this account
  -b, --batch                     signal the batch shell only
  -f, --full                      signal the batch shell and all steps
  -i, --interactive               confirm each job before acting on it
  -n, --name=job_name             act only on jobs with this name
  -p, --partition=partition       act only on jobs in this partition
  -Q, --quiet                     do not report jobs that already completed
  -q, --qos=qos                   act only on jobs with this QOS
  -s, --signal=name | integer     signal to send instead of cancelling
  -t, --state=states              act only on jobs in this state
  -u, --user=user_name            act only on jobs of this user
      --me                        act only on my jobs
  -v, --verbose                   report what is done
  -V, --version                   print the version and exit
  -w, --nodelist=hostlist         act only on jobs using these nodes

  --help                          show this help
  --usage                         show a short usage summary
"""

TABLE = OptionTable(
    [
        Option("account", "A", "account", REQUIRED),
        Option("batch", "b", "batch"),
        Option("ctld", "", "ctld", note="requests always go through the controller"),
        Option("full", "f", "full"),
        Option("help", "", "help"),
        Option("hurry", "H", "hurry", use=WARNED, note="burst buffers are not implemented"),
        Option("interactive", "i", "interactive"),
        Option("cluster", "M", "cluster", REQUIRED),
        Option("cluster", "", "clusters", REQUIRED),
        Option("name", "n", "name", REQUIRED),
        Option("name", "", "jobname", REQUIRED),
        Option("me", "", "me"),
        Option("nodelist", "w", "nodelist", REQUIRED),
        Option("partition", "p", "partition", REQUIRED),
        Option("qos", "q", "qos", REQUIRED),
        Option("quiet", "Q", "quiet"),
        Option("reservation", "R", "reservation", REQUIRED),
        Option("sibling", "", "sibling", REQUIRED, REFUSED, "federation is not implemented"),
        Option(
            "signal", "s", "signal", REQUIRED, note="a signal name (with or without SIG) or number"
        ),
        Option("state", "t", "state", REQUIRED, note="PENDING, RUNNING or SUSPENDED (as in Slurm)"),
        Option("usage", "", "usage"),
        Option("user", "u", "user", REQUIRED),
        Option("verbose", "v", "verbose"),
        Option("version", "V", "version"),
        Option("wckey", "", "wckey", REQUIRED, REFUSED, "WCKeys are not tracked"),
    ],
    prog="scancel",
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

#: Signal names scancel knows, with or without ``SIG``, any case.
SIGNALS = {
    "HUP": 1,
    "INT": 2,
    "QUIT": 3,
    "ABRT": 6,
    "KILL": 9,
    "ALRM": 14,
    "TERM": 15,
    "USR1": 10,
    "USR2": 12,
    "URG": 23,
    "CONT": 18,
    "STOP": 19,
    "TSTP": 20,
    "TTIN": 21,
    "TTOU": 22,
    "XCPU": 24,
}
_SIGKILL = 9


class Settings:
    """What the command line and environment asked for."""

    __slots__ = (
        "account",
        "batch",
        "cluster",
        "full",
        "interactive",
        "job_ids",
        "name",
        "nodelist",
        "partition",
        "qos",
        "reservation",
        "signal",
        "state",
        "user",
        "verbose",
    )

    def __init__(self) -> None:
        self.job_ids: list[str] = []
        self.account: str = ""
        self.name: str = ""
        self.nodelist: str = ""
        self.partition: str = ""
        self.qos: str = ""
        self.reservation: str = ""
        self.cluster: str = ""  # -M: the cluster whose jobs these are
        self.state: str = ""
        self.user: str = ""
        self.signal: int | None = None
        self.batch: bool = False
        self.full: bool = False
        self.interactive: bool = False
        self.verbose: int = 0

    def has_filter(self) -> bool:
        return any(
            (
                self.account,
                self.name,
                self.nodelist,
                self.partition,
                self.qos,
                self.reservation,
                self.state,
                self.user,
            )
        )

    def filter_text(self) -> str:
        """The filters as the no-match message lists them."""
        parts = [
            ("account", self.account),
            ("job_name", self.name),
            ("nodelist", self.nodelist),
            ("partition", self.partition),
            ("qos", self.qos),
            ("reservation", self.reservation),
            ("state", self.state),
            ("user_name", self.user),
        ]
        return "".join(f"{key}={value} " for key, value in parts if value)


def signal_number(text: str) -> int:
    """A signal given as a number or a name (``USR1``, ``SIGUSR1``); 0 if unknown."""
    stripped = text.strip()
    sign = stripped[:1] if stripped[:1] in "+-" else ""
    if stripped[len(sign) :].isdigit():
        return int(stripped)
    name = stripped.upper()
    if name.startswith("SIG"):
        name = name[3:]
    return SIGNALS.get(name, 0)


def _truth(value: str) -> bool | None:
    lowered = value.lower()
    if lowered in ("true", "t"):
        return True
    if lowered in ("false", "f"):
        return False
    return None


def _from_env(settings: Settings, env: Mapping[str, str]) -> None:
    """SCANCEL_* variables, which the command line overrides."""
    settings.account = env.get("SCANCEL_ACCOUNT", "").lower()
    settings.name = env.get("SCANCEL_NAME", "")
    settings.partition = env.get("SCANCEL_PARTITION", "")
    settings.qos = env.get("SCANCEL_QOS", "").lower()
    settings.user = env.get("SCANCEL_USER", "")
    if "SCANCEL_VERBOSE" in env:
        settings.verbose = 1
    for variable in ("SCANCEL_BATCH", "SCANCEL_FULL", "SCANCEL_INTERACTIVE"):
        if variable in env:
            value = _truth(env[variable])
            if value is None:
                print(
                    f"{PROG}: error: Unrecognized {variable} value: {env[variable]}",
                    file=sys.stderr,
                )
            else:
                setattr(settings, variable.split("_")[1].lower(), value)
    if "SCANCEL_STATE" in env:
        settings.state = _state(env["SCANCEL_STATE"], "Unrecognized SCANCEL_STATE value")


def _state(text: str, complaint: str) -> str:
    name = statenames.parse_state(text)
    if name is None:
        raise Halt(
            1, f"{complaint}: {text}", "Valid job states are PENDING, RUNNING, and SUSPENDED"
        )
    return name


def parse_settings(argv: list[str], env: Mapping[str, str]) -> Settings:
    """Settings from the environment and command line; ``Halt`` on errors."""
    found, positional = COMMAND.parse(argv)
    settings = Settings()
    _from_env(settings, env)
    for opt, value in found:
        key, text = opt.key, value or ""
        COMMAND.answer(key)
        if key == "signal":
            settings.signal = signal_number(text)
            if not settings.signal:
                raise Halt(1, f"Unknown job signal: {text}")
        elif key == "state":
            settings.state = _state(text, "Invalid job state specified")
        elif key in ("account", "qos"):
            setattr(settings, key, text.lower())
        elif key in ("name", "nodelist", "partition", "reservation", "user"):
            setattr(settings, key, text)
        elif key == "cluster":
            settings.cluster = text
        elif key == "me":
            settings.user = str(os.getuid())
        elif key in ("batch", "full", "interactive"):
            setattr(settings, key, True)
        elif key == "quiet":
            settings.verbose = -1
        elif key == "verbose":
            settings.verbose += 1
    try:
        ids = cancel_ids(positional)
    except InvalidJobId as exc:
        raise Halt(1, f"{PROG}: error: Invalid job id {exc}") from None
    # A component's step (123+1.0) names the leader's, as 22.05's scancel reads it;
    # a component alone (123+1) stays itself.
    settings.job_ids = [leader_step(text) if "." in text else text for text in ids]
    if settings.user and not known_user(settings.user):
        raise Halt(1, f"{PROG}: error: Invalid user name: {settings.user}")
    if not settings.job_ids and not settings.has_filter():
        raise Halt(1, f"{PROG}: error: No job identification provided")
    return settings


def request(settings: Settings, job_ids: list[str]) -> dict[str, Any]:
    """The ``Signal`` request for these settings and ids."""
    nodes = expand(settings.nodelist) if settings.nodelist else []
    return {
        "filter": {
            "job_ids": job_ids,
            "users": [settings.user] if settings.user else [],
            "partitions": [settings.partition] if settings.partition else [],
            "states": [settings.state] if settings.state else [],
            "names": [settings.name] if settings.name else [],
            "nodes": nodes,
            "accounts": [settings.account] if settings.account else [],
            "qos": [settings.qos] if settings.qos else [],
            "reservations": [settings.reservation] if settings.reservation else [],
        },
        "signal": settings.signal or 0,
        "batch_only": settings.batch,
        "full": settings.full,
    }


def outcome(settings: Settings, results: list[Mapping[str, Any]]) -> tuple[list[str], int]:
    """The stderr lines and exit status for the controller's per-job results."""
    kind = "batch " if settings.batch else "full " if settings.full else ""
    killing = settings.signal in (None, _SIGKILL)
    lines: list[str] = []
    status = 0
    for result in results:
        job_id, code = result["job_id"], int(result["code"])
        step = "." in job_id
        target = "step" if step else f"{kind}job"
        if settings.verbose > 0:
            if settings.signal is None:
                lines.append(f"{PROG}: Terminating {target} {job_id}")
            else:
                lines.append(f"{PROG}: Signal {settings.signal} to {target} {job_id}")
        if not code:
            continue
        message = result["message"] or str(SlurmError(code))
        if step:
            # A step id: only "already done" is no error, as in Slurm.
            if settings.verbose > 0 or code != ESLURM_ALREADY_DONE:
                lines.append(f"{PROG}: error: Kill job error on job step id {job_id}: {message}")
            if code != ESLURM_ALREADY_DONE:
                status = 1
            continue
        gone = code in (ESLURM_INVALID_JOB_ID, ESLURM_ALREADY_DONE)
        named = code == ESLURM_INVALID_JOB_ID and settings.has_filter()
        if named:
            if settings.verbose >= 0:
                lines.append(f"{PROG}: error: Kill job error on job id {job_id}: {message}")
            status = 1
            continue
        if settings.verbose > 0 or not gone:
            lines.append(f"{PROG}: error: Kill job error on job id {job_id}: {message}")
        if not gone:
            # Slurm 22.05's scancel exits with the largest error code, cut to a byte as
            # exit() cuts it: 210 for Access/permission denied (2002), 60 for 2108.
            status = max(status, code & 0xFF or 1)
        elif not killing:
            status = max(status, 1)
    acted = any(not result["code"] for result in results)
    if settings.verbose > 0 and settings.has_filter() and not acted:
        lines.append(
            f"{PROG}: error: No active jobs match ALL job filters, including: "
            + settings.filter_text()
        )
    return lines, status


def _confirmed(client: Any, settings: Settings) -> list[str]:
    """``-i``: the ids of the selected jobs the user answers ``y`` for."""
    query = request(settings, settings.job_ids)
    reply = client.call("Jobs", {"filter": query["filter"], "expand_arrays": False})
    chosen: list[str] = []
    for job in reply["jobs"]:
        if job["array_task_str"]:
            job_id = f"{job['array_job_id']}_[{job['array_task_str']}]"
        elif job["array_task_id"] is not None:
            job_id = f"{job['array_job_id']}_{job['array_task_id']}"
        else:
            job_id = str(job["job_id"])
        while True:
            sys.stdout.write(
                f"Cancel job_id={job_id} name={job['name']} partition={job['partition']} [y/n]? "
            )
            sys.stdout.flush()
            answer = sys.stdin.readline()
            if not answer:
                return chosen
            if answer[:1] in "yY":
                chosen.append(job_id)
                break
            if answer[:1] in "nN":
                break
    return chosen


def scancel(argv: list[str]) -> int:
    """Run scancel with ``argv``; return the exit status."""
    try:
        settings = parse_settings(argv, os.environ)
    except Halt as halt:
        return halt.report()
    from cli import clusters

    wanted = settings.cluster or os.environ.get("SLURM_CLUSTERS", "")
    client = clusters.one(PROG, wanted) if wanted else boundary.connect()
    job_ids = settings.job_ids
    if settings.interactive:
        job_ids = _confirmed(client, settings)
        if not job_ids:
            return 0
    results = client.call("Signal", request(settings, job_ids))["results"]
    lines, status = outcome(settings, results)
    for text in lines:
        print(text, file=sys.stderr)
    return status


def main() -> None:
    boundary.run(PROG, scancel)
