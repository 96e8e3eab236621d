"""strigger: set, get or clear event triggers, as Slurm 22.05's strigger does.

The options, their checks and messages follow strigger's ``opts.c``: a bad
command line stops before the controller is asked, with strigger's own words
(``strigger: error: You must specify a --program value``); the controller's
refusals are printed as ``slurm_perror`` prints them (``slurm_set_trigger:
Access/permission denied``). ``--get`` filters the controller's list here, as
strigger does, and prints Slurm's table. The events Corral's controller
watches are node up, down, drained, fail, idle and reconfig, and job time,
fini and the down, fail or up of a job's nodes, and the controller's losing
and regaining dbd (``controller/triggers.py``); the backup controller,
database and burst buffer events refer to machinery Corral does not have or
does not watch (a backup slurmctld, dbd's own link to its database), so those
options are refused rather than accepted to never fire.
"""

from __future__ import annotations

import os
import pwd
import sys

from cli import boundary
from cli.command import THIS_CLUSTER, Command, only_this_cluster
from cli.halt import Halt
from cli.options import OPTIONAL, REFUSED, REQUIRED, Option, OptionTable
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs milliseconds of a client's start-up budget
if TYPE_CHECKING:
    from typing import Any

PROG = "strigger"

USAGE = "Usage: strigger [--set | --get | --clear | --version] [-aAbBcCdDefFgGhHiIjnNopQrtuv]\n"

HELP = """\
Usage: strigger [--set | --get | --clear] [OPTIONS]
      --set           create a trigger
      --get           get trigger information
      --clear         delete a trigger

  -d, --down          trigger event when node goes DOWN
  -D, --drained       trigger event when node becomes DRAINED
  -F, --fail          trigger event when node is expected to FAIL
  -g, --primary_slurmdbd_failure
                      trigger when the controller cannot reach dbd
  -G, --primary_slurmdbd_resumed_operation
                      trigger when the controller reaches dbd again
  -f, --fini          trigger event when job finishes
      --flags=perm    trigger event flag (perm = permanent)
  -i, --id=#          a trigger's ID number
  -I, --idle          trigger event when node remains IDLE
  -j, --jobid=#       trigger related to specific jobid
  -M, --cluster=name  cluster to issue commands to (this one only)
  -n, --node[=host]   trigger related to specific node, all nodes by default
  -N, --noheader      Do not print the message header
  -o, --offset=#      trigger's offset time from event, negative to precede
  -p, --program=path  pathname of program to execute when triggered
  -Q, --quiet         quiet mode (suppress informational messages)
  -r, --reconfig      trigger event on configuration changes
  -t, --time          trigger event on job's time limit
  -u, --up            trigger event when node returned to service from DOWN
      --user          a user name or ID to filter triggers by
  -v, --verbose       print detailed event logging
  -V, --version       print version information and exit

Help options:
  --help              show this help message
  --usage             display brief usage message
"""

DBD_FAIL = "primary_slurmdbd_failure"
DBD_RESUMED = "primary_slurmdbd_resumed_operation"
_NO_BACKUP = "Corral has no backup controller, nor its events"
_NO_DBD_LINK = "dbd's own link to its database is not the controller's to watch"
#: strigger's options for events Corral does not have: (letter, name, why).
_REFUSED = (
    ("", "burst_buffer", "Corral has no burst buffers"),
    ("", "front_end", "Corral has no front end nodes"),
    ("a", "primary_slurmctld_failure", _NO_BACKUP),
    ("A", "primary_slurmctld_resumed_operation", _NO_BACKUP),
    ("b", "primary_slurmctld_resumed_control", _NO_BACKUP),
    ("B", "backup_slurmctld_failure", _NO_BACKUP),
    ("c", "backup_slurmctld_resumed_operation", _NO_BACKUP),
    ("C", "backup_slurmctld_assumed_control", _NO_BACKUP),
    ("e", "primary_slurmctld_acct_buffer_full", "the accounting outbox is on disk, never full"),
    ("h", "primary_database_failure", _NO_DBD_LINK),
    ("H", "primary_database_resumed_operation", _NO_DBD_LINK),
)

TABLE = OptionTable(
    [
        Option("set", "", "set"),
        Option("get", "", "get"),
        Option("clear", "", "clear"),
        Option("down", "d", "down"),
        Option("drained", "D", "drained"),
        Option("fail", "F", "fail", note="scontrol update State=FAIL"),
        Option("fini", "f", "fini"),
        Option("flags", "", "flags", REQUIRED, note="PERM"),
        Option("id", "i", "id", REQUIRED),
        Option("idle", "I", "idle"),
        Option("jobid", "j", "jobid", REQUIRED),
        Option("cluster", "M", "clusters", REQUIRED, note=THIS_CLUSTER),
        Option("node", "n", "node", OPTIONAL),
        Option("noheader", "N", "noheader"),
        Option("offset", "o", "offset", REQUIRED),
        Option("program", "p", "program", REQUIRED),
        Option("quiet", "Q", "quiet"),
        Option("reconfig", "r", "reconfig"),
        Option("time", "t", "time"),
        Option("up", "u", "up"),
        Option(DBD_FAIL, "g", DBD_FAIL, note="the controller's accounting delivery lost dbd"),
        Option(DBD_RESUMED, "G", DBD_RESUMED, note="it reaches dbd again"),
        Option("user", "", "user", REQUIRED),
        Option("verbose", "v", "verbose"),
        Option("version", "V", "version"),
        Option("help", "", "help"),
        Option("usage", "", "usage"),
        *(Option(name, short, name, use=REFUSED, note=note) for short, name, note in _REFUSED),
    ],
    prog=PROG,
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

#: The event flags, in the order Slurm tests them.
EVENTS = (
    "down",
    "drained",
    "fail",
    "idle",
    "up",
    "reconfig",
    "fini",
    "time",
    DBD_FAIL,
    DBD_RESUMED,
)
#: Slurm 22.05's words when --set names no event (with its line breaks).
NO_TRIGGER = (
    "You must specify a trigger (--down, --up, --reconfig, --time, --fini, --burst_buffer,\n"
    "--primary_slurmctld_failure,\n"
    "--primary_slurmctld_resumed_operation,\n"
    "--primary_slurmctld_resumed_control,\n"
    "--primary_slurmctld_acct_buffer_full,\n"
    "--backup_slurmctld_failure,\n"
    "--backup_slurmctld_resumed_operation,\n"
    "--backup_slurmctld_as_ctrl,\n"
    "--primary_slurmdbd_failure,\n"
    "--primary_slurmdbd_resumed_operation,\n"
    "--primary_database_failure, or \n"
    "--primary_database_resumed_operation)\n"
)
HEADER = (
    "TRIG_ID RES_TYPE   RES_ID TYPE                                OFFSET USER     FLAGS PROGRAM"
)


class Params:
    """strigger's parameters (its ``struct strigger_parameters``)."""

    __slots__ = (
        "events",
        "flags_perm",
        "job_id",
        "mode",
        "no_header",
        "node",
        "offset",
        "program",
        "quiet",
        "trigger_id",
        "user_id",
        "verbose",
    )

    def __init__(self) -> None:
        self.mode = ""  # set, get or clear ("" none; "many" more than one)
        self.events: list[str] = []
        self.flags_perm = False
        self.job_id = 0
        self.node: str | None = None  # None: not given; "" every node
        self.offset = 0
        self.program = ""
        self.quiet = False
        self.no_header = False
        self.trigger_id = 0
        self.user_id: int | None = None
        self.verbose = 0


def _error(text: str) -> Halt:
    return Halt(1, f"{PROG}: error: {text}")


def _integer(text: str) -> int:
    """C's atoi: leading digits (with a sign), 0 when there are none."""
    text = text.strip()
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
    number = ""
    for ch in digits:
        if ch not in "0123456789":
            break
        number += ch
    return sign * int(number) if number else 0


def _user(text: str) -> int:
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise _error(f"Invalid user {text}") from None


def parse_args(argv: list[str]) -> Params:
    """strigger's command line, checked as ``opts.c`` checks it; ``Halt`` if bad."""
    found, positional = COMMAND.parse(argv)
    p = Params()
    for opt, value in found:
        COMMAND.answer(opt.key)
        key, text = opt.key, value or ""
        if key in ("set", "get", "clear"):
            p.mode = key if p.mode in ("", key) else "many"
        elif key in EVENTS:
            if key not in p.events:
                p.events.append(key)
        elif key == "flags":
            if not text.lower().startswith("perm"):
                raise _error(f"Invalid flags {text}")
            p.flags_perm = True
        elif key == "id":
            p.trigger_id = _integer(text)
        elif key == "jobid":
            p.job_id = int(text) if text.isascii() and text.isdigit() else 0
            if p.job_id <= 0:
                raise _error(f"Invalid jobid {text}")
        elif key == "cluster":
            only_this_cluster(PROG, text)
        elif key == "node":
            p.node = text
        elif key == "noheader":
            p.no_header = True
        elif key == "offset":
            p.offset = _integer(text)
        elif key == "program":
            p.program = text
        elif key == "quiet":
            p.quiet = True
        elif key == "user":
            p.user_id = _user(text)
        elif key == "verbose":
            p.verbose += 1
    if positional:
        raise _error(f"Unrecognized argument: {positional[0]}")
    _validate(p)
    return p


def _validate(p: Params) -> None:
    if p.mode not in ("set", "get", "clear"):
        raise _error("You must use exactly one of the following options: --set, --get or --clear")
    if p.mode == "clear" and p.user_id is None and not p.trigger_id and not p.job_id:
        raise _error("You must specify a --id, --jobid, or --user to clear")
    if p.mode == "set" and not p.events:
        raise _error(NO_TRIGGER)
    if p.mode == "set" and not p.program:
        raise _error("You must specify a --program value")
    if ("fini" in p.events or "time" in p.events) and not p.job_id:
        raise _error("You must specify a --jobid value")
    if p.program and not p.program.startswith("/"):
        raise _error('The --program value must start with "/"')
    if p.program:
        path = p.program.split()[0]
        if not os.path.exists(path):
            raise _error("Invalid --program value, file not found")
        if not os.path.isfile(path):
            raise _error("Invalid --program value, not regular file")
    if not -32000 <= p.offset <= 32000:
        raise _error("The --offset parameter must be between +/-32000")
    # Slurm's strigger passes these over in silence with --set; Corral says so instead.
    if p.mode == "set" and p.job_id and p.node is not None:
        raise _error("The --node option can not be used in conjunction with the --jobid option")
    if p.mode == "set" and (p.user_id is not None or p.trigger_id):
        raise _error("--user and --id select triggers to get or clear: --set makes a new one")


def set_request(p: Params) -> dict[str, Any]:
    """The Triggers request ``strigger --set`` sends: a job's trigger when --jobid is
    given, else one on --node's nodes or all."""
    trigger: dict[str, Any] = {
        "types": [e for e in EVENTS if e in p.events],
        "offset": p.offset,
        "program": p.program,
        "perm": p.flags_perm,
    }
    if DBD_FAIL in p.events or DBD_RESUMED in p.events:
        trigger |= {"res_type": "slurmdbd", "res_id": ""}
    elif p.job_id:
        trigger |= {"res_type": "job", "res_id": str(p.job_id)}
    else:
        trigger |= {"res_type": "node", "res_id": p.node or "*"}
    return {"action": "set", "trigger": trigger}


def type_name(types: list[str]) -> str:
    """Slurm's trigger_type(): the event's name, "unknown" for several at once."""
    return types[0] if len(types) == 1 else "unknown"


def wanted(t: dict[str, Any], p: Params) -> bool:
    """Whether ``strigger --get`` with ``p`` shows trigger ``t`` (strigger's filters)."""
    only = type_name(list(t["types"]))
    node = t["res_type"] == "node"
    tests = (
        ("fini", only == "fini"),
        ("down", node and only == "down"),
        ("drained", node and only == "drained"),
        ("fail", node and only == "fail"),
        ("idle", node and only == "idle"),
        ("up", node and only == "up"),
        ("time", t["res_type"] == "job" and only == "time"),
        (DBD_FAIL, t["res_type"] == "slurmdbd" and only == DBD_FAIL),
        (DBD_RESUMED, t["res_type"] == "slurmdbd" and only == DBD_RESUMED),
    )
    if any(event in p.events and not ok for event, ok in tests):
        return False
    if p.job_id and (t["res_type"] != "job" or int(t["res_id"]) != p.job_id):
        return False
    if p.node is not None and not node:
        return False
    if p.trigger_id and t["id"] != p.trigger_id:
        return False
    return p.user_id is None or t["uid"] == p.user_id


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "unknown"


def render(triggers: list[dict[str, Any]], p: Params) -> str:
    """strigger --get's table of the triggers ``p`` selects ("" if none)."""
    lines: list[str] = []
    for t in triggers:
        if not wanted(t, p):
            continue
        if not lines and not p.no_header:
            lines.append(HEADER)
        lines.append(
            f"{t['id']:7d} {t['res_type']:<9s} {t['res_id'] or '(null)':>7s} "
            f"{type_name(list(t['types'])):<35s} {t['offset']:6d} "
            f"{_user_name(t['uid']):<8s} "
            f"{'PERM' if t['perm'] else '':<5s} {t['program']}"
        )
    return "".join(line + "\n" for line in lines)


def _verbose(p: Params, text: str) -> None:
    if p.verbose:
        print(f"{PROG}: {text}", file=sys.stderr)


def strigger(argv: list[str]) -> int:
    """Run strigger with ``argv``; return the exit status."""
    try:
        p = parse_args(argv)
    except Halt as halt:
        return halt.report()
    client = boundary.connect()
    if p.mode == "get":
        try:
            reply = client.call("Triggers", {"action": "get"})
        except SlurmError as exc:
            print(f"slurm_get_triggers: {exc}", file=sys.stderr)
            return 1
        triggers = list(reply["triggers"])
        _verbose(p, f"Read {len(triggers)} trigger records")
        sys.stdout.write(render(triggers, p))
        return 0
    if p.mode == "clear":
        request = {
            "action": "clear",
            "id": p.trigger_id,
            "job_id": p.job_id,
            "uid": -1 if p.user_id is None else p.user_id,
        }
        try:
            client.call("Triggers", request)
        except SlurmError as exc:
            if p.quiet:
                return 0
            print(f"slurm_clear_trigger: {exc}", file=sys.stderr)
            return 1
        if p.job_id:
            _verbose(p, f"triggers for job {p.job_id} cleared")
        elif p.user_id is not None:
            _verbose(p, f"triggers for user {p.user_id} cleared")
        else:
            _verbose(p, f"trigger {p.trigger_id} cleared")
        return 0
    try:
        client.call("Triggers", set_request(p))
    except SlurmError as exc:
        print(f"slurm_set_trigger: {exc}", file=sys.stderr)
        return 1
    _verbose(p, "trigger set")
    return 0


def main() -> None:
    boundary.run(PROG, strigger)
