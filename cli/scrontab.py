"""scrontab: set, edit, list and remove a user's Slurm-managed crontab.

``scrontab [-u user] [-e | -l | -r] [file]``. As Slurm's: ``-l`` prints the
crontab (lines ``scancel`` disabled as ``#DISABLED: ``), ``-r`` removes it, and
``-e`` (the default) opens it in ``$VISUAL``, ``$EDITOR`` or ``vi``; after a bad
edit it offers the file again with the failed lines marked ``#BAD: ``. A
``file`` argument (``-`` for standard input) installs that file, as crontab(1)
does, and stops with an error instead of asking when a line is bad.

The client parses the file (corral/crontab.py) and makes each entry's job as
sbatch would from its ``#SCRON`` lines (cli/sbatch); the controller keeps the
crontab and works out when each job is due. Line numbers count from 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from cli import boundary
from cli.command import Command
from cli.failure import Failure
from cli.halt import Halt
from cli.options import REQUIRED, Option, OptionError, OptionTable, parse
from corral.crontab import CrontabError, Entry, parse_crontab
from corral.errors import ESLURM_DISABLED, SlurmError

TYPE_CHECKING = False  # typing costs milliseconds of a client's start-up budget
if TYPE_CHECKING:
    from typing import Any

PROG = "scrontab"

USAGE = "Usage: scrontab [-u user] [-e|-l|-r] [file]\n"

HELP = """\
Usage: scrontab [-u user] [-e|-l|-r] [file]
  -e                    edit the crontab (the default)
  -l                    list the crontab
  -r                    remove the crontab
  -u <user>             the crontab of another user
  -v                    verbose: tracebacks on errors
  -V, --version         output version information and exit
  file                  install this file as the crontab (- for standard input)
"""

TABLE = OptionTable(
    [
        Option("edit", "e", note="with $VISUAL, $EDITOR or vi"),
        Option("list", "l"),
        Option("remove", "r"),
        Option("user", "u", arg=REQUIRED, note="others' crontabs: operators list, root changes"),
        Option("verbose", "v", note="tracebacks on errors"),
        Option("version", "V", "version"),
        Option("help", "", "help"),
        Option("usage", "", "usage"),
    ],
    prog=PROG,
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

#: What ``-e`` offers a user with no crontab (Slurm's default_crontab.txt).
DEFAULT_CRONTAB = """\
# Welcome to scrontab, Slurm's cron-like interface.
#
# Edit this file to submit recurring jobs to be run by Slurm.
#
# Note that jobs will be run based on the Slurm controller's
# time and timezone.
#
# Lines must either be valid entries, comments (start with '#'),
# or blank.
#
# Lines starting with #SCRON will be parsed for options to use
# with the next cron line. E.g., "#SCRON --time 1" would request
# a one minute timelimit be applied. See the sbatch man page for
# options, although note that not all options are supported here.
#
# For example, the following line (when uncommented) would request
# a job be run at 5am each day.
# 0 5 * * * /my/script/to/run
#
# min hour day-of-month month day-of-week command
"""

#: The head of every cron job's script (Slurm's).
SCRIPT_HEADER = "#!/bin/sh\n# This job was submitted through scrontab\n"


def scrontab(argv: list[str]) -> int:
    """Run scrontab with ``argv``; return the exit status."""
    try:
        found, positional = COMMAND.parse(argv)
        action, user = "edit", None
        for opt, value in found:
            COMMAND.answer(opt.key)
            if opt.key in ("list", "remove"):
                action = opt.key
            elif opt.key == "user":
                user = value
    except Halt as halt:
        return halt.report()
    uid = _uid(user) if user is not None else os.getuid()
    client = boundary.connect()
    target: dict[str, Any] = {"uid": uid}
    if action == "remove":
        _call(client, {"action": "remove", **target}, "slurm_remove_crontab failed")
        return 0
    if positional and action == "edit":
        return _install_file(client, target, positional[0])
    reply = _call(client, {"action": "get", **target}, "slurm_request_crontab failed")
    text = reply["crontab"] if reply["exists"] else None
    if text is not None and reply["disabled_lines"]:  # else shown as written
        text = _marked(text, reply["disabled_lines"], "#DISABLED: ")
    if action == "list":
        if text is None:
            print(f"no crontab for {_name(uid)}")
            return 1
        sys.stdout.write(text)
        return 0
    return _edit(client, target, text if text is not None else DEFAULT_CRONTAB)


def _uid(user: str) -> int:
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        if user.isdigit():
            return int(user)
        raise Failure(f"Could not find user {user}", level="fatal", status=1) from None


def _name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _call(client: Any, request: dict[str, Any], failed: str) -> dict[str, Any]:
    try:
        reply: dict[str, Any] = client.call("Crontab", request)
    except SlurmError as exc:
        if exc.code == ESLURM_DISABLED:  # ScronParameters lacks enable
            raise Failure(exc.message, level="fatal", status=1) from None
        raise Failure(f"{failed}: {exc.message}", level="fatal", status=1) from None
    return reply


def _install_file(client: Any, target: dict[str, Any], path: str) -> int:
    """``scrontab file``: install it, or stop at its first bad line."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8", errors="surrogateescape") as file:
                text = file.read()
    except OSError as exc:
        raise Failure(f"{path}: {exc.strerror}", status=1) from None
    try:
        jobs = entries_to_jobs(text)
    except CrontabError as exc:
        raise Failure(exc.detail, f"There are errors in your crontab: line {exc.line}") from None
    reply = _set(client, target, text, jobs)
    if reply["failed_lines"]:
        raise Failure(
            f"There was an issue with the job submission on lines {reply['failed_lines']}: "
            f"{reply['error']}"
        )
    return 0


def _edit(client: Any, target: dict[str, Any], text: str) -> int:
    """``scrontab -e``: edit until the crontab is good and installed, or the user gives up."""
    while True:
        text = _run_editor(text)
        try:
            jobs = entries_to_jobs(text)
        except CrontabError as exc:
            print(f"{PROG}: error: {exc.detail}", file=sys.stderr)
            question = (
                "There are errors in your crontab.\n"
                "The failed line(s) is commented out with #BAD:\n"
                "Do you want to retry the edit? (y/n) "
            )
            if not _yes(question):
                return 0
            text = _marked(text, str(exc.line), "#BAD: ")
            continue
        reply = _set(client, target, text, jobs)
        if not reply["failed_lines"]:
            return 0
        question = (
            f"There was an issue with the job submission on lines {reply['failed_lines']}\n"
            f"The error message was: {reply['error']}\n"
            "The failed lines are commented out with #BAD:\n"
            "Do you want to retry the edit? (y/n) "
        )
        if not _yes(question):
            return 0
        text = _marked(text, reply["failed_lines"], "#BAD: ")


def _run_editor(text: str) -> str:
    """The text after the user's editor saved it (Slurm's: a private temporary file)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    old_mask = os.umask(0o077)
    try:
        fd, path = tempfile.mkstemp(prefix="scrontab-", dir=os.environ.get("TMPDIR") or "/tmp")
    finally:
        os.umask(old_mask)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as file:
            file.write(text)
        try:
            status = subprocess.call([editor, path])
        except OSError:
            status = 127
        if status:
            raise Failure("editor returned non-zero exit code", level="fatal", status=1)
        with open(path, encoding="utf-8", errors="surrogateescape") as file:
            return file.read()
    finally:
        os.unlink(path)


def _yes(question: str) -> bool:
    """Ask until the answer is y or n (end of input: n)."""
    while True:
        sys.stdout.write(question)
        sys.stdout.flush()
        answer = sys.stdin.readline()
        if not answer:
            return False
        if answer[:1].lower() in ("y", "n"):
            return answer[:1].lower() == "y"


def _set(
    client: Any, target: dict[str, Any], text: str, jobs: list[dict[str, Any]]
) -> dict[str, Any]:
    return _call(
        client,
        {"action": "set", **target, "crontab": text, "entries": jobs},
        "slurm_update_crontab failed",
    )


def entries_to_jobs(text: str) -> list[dict[str, Any]]:
    """Each entry of a crontab as the controller's ``CronEntry``: the job sbatch would
    make of its ``#SCRON`` options and a script running its command."""
    return [_job(entry) for entry in parse_crontab(text)]


def _job(entry: Entry) -> dict[str, Any]:
    from cli.sbatch.options import COMMAND_LINE_ONLY
    from cli.sbatch.options import TABLE as SBATCH
    from cli.sbatch.settings import SCRIPT, Settings
    from cli.sbatch.spec import Script, build

    settings = Settings()
    try:
        given, extra = parse(SBATCH, list(entry.options))
        if extra:
            raise CrontabError(entry.line_start, f"Invalid option found in #SCRON line: {extra[0]}")
        for opt, arg in given:
            if opt.key not in COMMAND_LINE_ONLY:
                settings.apply(opt.key, arg, SCRIPT)
        settings.verify()
        times = entry.spec.text()
        script = SCRIPT_HEADER + "".join(f"{line}\n" for line in entry.scron_lines)
        script += f"# crontab time request was: '{times}'\n{entry.command}\n"
        home = os.environ.get("HOME") or "/"
        spec = build(
            settings,
            Script(script, None, [], wrapped=False),
            cwd=home,
            environ=os.environ,
            command_line=[],
        )
    except (OptionError, Failure) as exc:
        raise CrontabError(entry.line_start, str(exc)) from None
    if not settings.fields.get("name"):
        spec["name"] = entry.command.split(" ")[0]
    spec["submit_line"] = "scrontab"
    return {
        "spec": spec,
        "cron_spec": times,
        "line_start": entry.line_start,
        "line_end": entry.line_end,
    }


def _marked(text: str, lines: str, prefix: str) -> str:
    """``text`` with ``lines`` (``3-4,9``, from 1) prefixed, as Slurm marks them."""
    chosen: set[int] = set()
    for item in filter(None, lines.split(",")):
        first, _, last = item.partition("-")
        chosen.update(range(int(first), int(last or first) + 1))
    rows = text.split("\n")
    ended = rows[-1] == ""
    rows = rows[:-1] if ended else rows
    marked = [prefix + row if number in chosen else row for number, row in enumerate(rows, 1)]
    return "\n".join(marked) + "\n"


def main() -> None:
    boundary.run(PROG, _reporting)


def _reporting(argv: list[str]) -> int:
    from cli.failure import report

    try:
        return scrontab(argv)
    except Failure as exc:
        return report(PROG, exc)
