"""sacctmgr: view and change the accounting database, as Slurm 24.11's sacctmgr does.

Every command is one ``AcctAdmin`` call on the controller, which forwards it
to the accounting daemon as the calling user: ``list`` returns rows already
formatted, keyed by sacctmgr's column headers, plus the kind's columns and
default columns; ``add``, ``modify`` and ``delete`` are asked first with
``commit`` false, which says what would change, then (after ``-i`` or a
``y`` at the 30-second prompt) again with ``commit`` true. Parsing the words
(``words``), laying out the tables (``fields``), wording the changes
(``text``) and the flat files of ``dump``/``load`` (``file``), modules of this
package, happen on this side, where Slurm does them.

The call is a parameter (``sacctmgr(argv, call=...)``), as is the terminal
the prompt reads, so tests drive the whole command without daemons.
"""

from __future__ import annotations

import os
import sys
import time

from cli import boundary
from cli.command import Command
from cli.halt import Halt
from cli.options import OPTIONAL, REFUSED, Option, OptionTable
from cli.printfields import NOT_PARSABLE, PARSABLE, PARSABLE2
from cli.sacctmgr import resourcetext
from cli.sacctmgr.fields import (
    Field,
    FieldError,
    abbreviates,
    field_by_header,
    find_field,
    parse_format,
    render,
)
from cli.sacctmgr.text import conditions, describe_add, describe_delete, describe_modify
from cli.sacctmgr.words import parse as parse_request
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Protocol

    from cli.sacctmgr.text import Outcome
    from cli.sacctmgr.words import Request

    #: An ``AcctAdmin`` call: request dict in, reply dict out; ``SlurmError`` on failure.
    Call = Callable[[dict[str, Any]], Mapping[str, Any]]

    class Keyboard(Protocol):
        """What the commit prompt and interactive mode read from (``Terminal``)."""

        def read_char(self, timeout: float) -> str | None: ...

        def read_line(self) -> str | None: ...


PROG = "sacctmgr"

USAGE = """\
sacctmgr [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -h or --help: equivalent to "help" command
     -i or --immediate: commit changes immediately
     -n or --noheader: no header will be added to the beginning of output
     -o or --oneliner: equivalent to "oneliner" command
     -p or --parsable: output will be '|' delimited with a '|' at the end
     -P or --parsable2: output will be '|' delimited without a '|' at the end
     -Q or --quiet: equivalent to "quiet" command
     -r or --readonly: equivalent to "readonly" command
     -s or --associations: equivalent to "associations" command
     -v or --verbose: equivalent to "verbose" command
     -V or --version: equivalent to "version" command

  <keyword> may be omitted from the execute line and sacctmgr will execute
  in interactive mode. It will process commands as entered until explicitly
  terminated.

  Valid <COMMAND> values are:
     add <ENTITY> <SPECS>     add entity
     associations             when using show/list will list the
                              associations associated with the entity.
     delete <ENTITY> <SPECS>  delete the specified entity(s)
     dump <CLUSTER> [File=<FILENAME>]
                              dump database information of the
                              specified cluster to the flat file.
     exit                     terminate sacctmgr
     help                     print this description of use.
     list <ENTITY> [<SPECS>]  display info of identified entity, default
                              is display all.
     load <FILE> [<SPECS>]    read in the file to update the database
                              with the file contents. <SPECS> here consist
                              of 'cluster='.
     modify <ENTITY> <SPECS>  modify entity
     oneliner                 report output one record per line.
     quiet                    print no messages other than error messages.
     quit                     terminate this command.
     readonly                 makes it so no modification can happen.
     show                     same as list
     verbose                  enable detailed logging.
     version                  display tool version number.
     !!                       Repeat the last command entered.

  <ENTITY> may be "account", "association", "cluster", "qos", "resource",
           "tres" or "user" (add, modify and delete: "account", "cluster",
           "qos", "resource" or "user").

  <SPECS> are options to identify the entity: Name=, Cluster=, Account=,
          User=, Partition=, Parent=, ... ; with modify, the words "where"
          and "set" separate the conditions from the new values; with list,
          Format=field[%width],... chooses the columns and WithAssoc adds
          the associations of users and accounts.
"""

TABLE = OptionTable(
    [
        Option("help", "h", "help"),
        Option("usage", "", "usage"),
        Option("immediate", "i", "immediate"),
        Option("noheader", "n", "noheader"),
        Option("oneliner", "o", "oneliner"),
        Option("parsable", "p", "parsable"),
        Option("parsable2", "P", "parsable2"),
        Option("quiet", "Q", "quiet"),
        Option("readonly", "r", "readonly"),
        Option("associations", "s", "associations"),
        Option("verbose", "v", "verbose"),
        Option("version", "V", "version"),
        Option("json", "", "json", OPTIONAL, REFUSED, "JSON output is not implemented"),
        Option("yaml", "", "yaml", OPTIONAL, REFUSED, "YAML output is not implemented"),
    ],
    prog="sacctmgr",
)
#: What ``-h``, ``--usage`` and the ``help`` command print (Slurm adds a newline).
HELP = USAGE + "\n"
COMMAND = Command(PROG, TABLE, HELP, HELP)

#: How long the commit prompt waits, in seconds.
ANSWER_SECONDS = 30.0

#: What Slurm shows when the daemon names no default columns (its list functions).
DEFAULT_FORMATS = {
    "account": "Acc,Des,O",
    "user": "U,DefaultA,Ad",
    "qos": (
        "Name,Prio,GraceT,Preempt,PreemptE,PreemptM,Flags%40,UsageThres,UsageFactor,"
        "GrpTRES,GrpTRESMins,GrpTRESRunMins,GrpJ,GrpS,GrpW,MaxTRES,MaxTRESPerN,"
        "MaxTRESMins,MaxW,MaxTRESPerUser,MaxJobsPerUser,MaxSubmitJobsPerUser,"
        "MaxTRESPerAcct,MaxTRESRunMinsPerAcct%22,MaxTRESRunMinsPerUser%22,"
        "MaxJobsPerAcct,MaxSubmitJobsPerAcct,MinTRES"
    ),
    "cluster": (
        "Cl,Controlh,Controlp,RPC,Fa,GrpJ,GrpTRES,GrpS,MaxJ,MaxTRES,MaxS,MaxW,QOS,DefaultQOS"
    ),
    "association": (
        "Cluster,Account,User,Part,Share,Priority,GrpJ,GrpTRES,GrpS,GrpWall,GrpTRESMins,"
        "MaxJ,MaxTRES,MaxTRESPerN,MaxS,MaxW,MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins"
    ),
    "tres": "Type,Name%15,ID",
    "resource": "Name,Server,Type,Count,Allocated,ServerType",
}
#: Columns Slurm adds to its defaults for ``withassoc``, ``withcoord``, ``withfed``.
_WITH_ASSOC = {
    "account": (
        "Cl,ParentN,U,Share,Priority,GrpJ,GrpN,GrpCPUs,GrpMEM,GrpS,GrpWall,GrpCPUMins,"
        "MaxJ,MaxN,MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS"
    ),
    "user": "Cl,Acc,Part,Share,Priority,MaxJ,MaxN,MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS",
}
_WITH_FED = "Federation,ID,Features,FedState"
#: Widths Slurm's default formats give some columns (``Flags%40``).
_DEFAULT_WIDTHS = {
    ("qos", "Flags"): 40,
    ("qos", "MaxTRESRunMinsPA"): 22,
    ("qos", "MaxTRESRunMinsPU"): 22,
    ("tres", "Name"): 15,
}

_NO_WHERE = "You didn't set any conditions with 'WHERE'.\nAre you sure you want to continue?"

#: Top-level keywords: ``(word, least, command)`` in Slurm's order.
_KEYWORDS = (
    ("associations", 3, "associations"),
    ("dump", 3, "dump"),
    ("help", 2, "help"),
    ("load", 2, "load"),
    ("oneliner", 1, "oneliner"),
    ("quiet", 4, "quiet"),
    ("exit", 4, "exit"),
    ("\\q", 2, "exit"),
    ("quit", 4, "exit"),
    ("add", 3, "add"),
    ("create", 3, "add"),
    ("archive", 3, None),
    ("clear", 3, None),
    ("show", 3, "list"),
    ("list", 3, "list"),
    ("modify", 1, "modify"),
    ("update", 1, "modify"),
    ("delete", 3, "delete"),
    ("remove", 3, "delete"),
    ("verbose", 4, "verbose"),
    ("ping", 4, None),
    ("readonly", 4, "readonly"),
    ("reconfigure", 4, None),
    ("rollup", 2, None),
    ("shutdown", 4, None),
    ("version", 4, "version"),
)


class Terminal:
    """Where the commit prompt and interactive mode read: file descriptor 0, unbuffered.

    On a terminal the prompt takes a single key, as Slurm's does (the line
    discipline is switched off while it waits).
    """

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd

    def read_char(self, timeout: float) -> str | None:
        """One character, ``""`` at end of input, None if nothing came in ``timeout`` seconds."""
        import select

        saved = self._single_keys()
        try:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return None
            return os.read(self.fd, 1).decode(errors="replace")
        finally:
            if saved is not None:
                import termios

                termios.tcsetattr(self.fd, termios.TCSANOW, saved)

    def _single_keys(self) -> list[Any] | None:
        """Turn off line buffering on a terminal; return the settings to restore."""
        if not os.isatty(self.fd):
            return None
        import termios

        saved = termios.tcgetattr(self.fd)
        changed = termios.tcgetattr(self.fd)
        changed[3] &= ~termios.ICANON
        changed[6][termios.VMIN] = 1
        termios.tcsetattr(self.fd, termios.TCSANOW, changed)
        return saved

    def read_line(self) -> str | None:
        """One line without its newline; None at end of input."""
        data = bytearray()
        while True:
            byte = os.read(self.fd, 1)
            if not byte:
                return data.decode(errors="replace") if data else None
            if byte == b"\n":
                return data.decode(errors="replace")
            data += byte


def _controller_call(request: dict[str, Any]) -> Mapping[str, Any]:
    """The ``AcctAdmin`` call on the controller named by slurm.conf."""
    return boundary.connect().call("AcctAdmin", request)


class Session:
    """One sacctmgr run: its options, its connection and its terminal."""

    def __init__(self, call: Call | None = None, terminal: Keyboard | None = None) -> None:
        self.call: Call = call or _controller_call
        self.terminal: Keyboard = terminal or Terminal()
        self.immediate = False
        self.header = True
        self.parsable = NOT_PARSABLE
        self.quiet = False
        self.readonly = False
        self.with_assoc = False
        self.status = 0

    # -------------------------------------------------------------- output
    @staticmethod
    def say(text: str) -> None:
        sys.stdout.write(text)

    def info(self, text: str) -> None:
        """A log line on stderr (Slurm's ``info()``), unless ``-Q``."""
        if not self.quiet:
            print(f"{PROG}: {text}", file=sys.stderr)

    def confirm(self, warning: str) -> bool:
        """Slurm's ``commit_check``: true at once with ``-i``, else ask for 30 seconds."""
        if self.immediate:
            return True
        out = sys.stdout
        out.write(f"{warning} (You have 30 seconds to decide)\n")
        answer = ""
        while answer not in ("Y", "y", "N", "n", "\n"):
            if answer:
                out.write("Y or N please\n")
            out.write("(N/y): ")
            out.flush()
            got = self.terminal.read_char(ANSWER_SECONDS)
            if got is None:
                out.write("timeout\n")
                return False
            answer = got or "\n"  # end of input answers no
            out.write("\n")
        return answer in ("Y", "y")

    # -------------------------------------------------------------- options
    def options(self, argv: list[str]) -> list[str]:
        """Apply the options in ``argv``; return the command words."""
        found, words = COMMAND.parse(argv)
        for opt, _ in found:
            key = opt.key
            COMMAND.answer(key)
            if key == "immediate":
                self.immediate = True
            elif key == "noheader":
                self.header = False
            elif key == "parsable":
                self.parsable = PARSABLE
            elif key == "parsable2":
                self.parsable = PARSABLE2
            elif key == "quiet":
                self.quiet = True
            elif key == "readonly":
                self.readonly = True
            elif key == "associations":
                self.with_assoc = True
        return words

    # -------------------------------------------------------------- commands
    def run(self, words: Sequence[str]) -> int:
        """Run one command; its exit status (also folded into ``self.status``)."""
        try:
            status = self._dispatch(list(words))
        except Halt as halt:
            status = halt.report()
        if status:
            self.status = status
        return status

    def _dispatch(self, words: list[str]) -> int:
        if not words:
            return 1
        first, rest = words[0], words[1:]
        command = next(
            (cmd for word, least, cmd in _KEYWORDS if abbreviates(first, word, least)), ""
        )
        if command == "":
            raise Halt(1, f"invalid keyword: {first}")
        if command is None:
            raise Halt(1, f"{PROG}: error: {first} is not supported by Corral")
        if command in ("add", "modify", "delete", "load") and self.readonly:
            raise Halt(1, "Can't run this command in readonly mode.")
        if command in ("add", "modify", "delete"):
            return self.change(parse_request(command, rest))
        if command == "list":
            return self.show(parse_request("list", rest))
        if command in ("dump", "load"):
            from cli.sacctmgr.file import dump, load

            if command == "dump":
                return dump(self, rest)
            return load(self, rest)
        return self._setting(command, first, rest)

    def _setting(self, command: str, first: str, rest: list[str]) -> int:
        """The keywords that change how this session behaves, and help and version."""
        status = 0
        if rest and command != "associations":
            short = command in ("help", "oneliner", "quiet", "exit")
            noun = f"keyword:{first}" if short else f"{first} keyword"
            print(f"too many arguments for {noun}", file=sys.stderr)
            status = 1
        if command == "associations":
            self.with_assoc = True
        elif command == "help":
            self.say(HELP)
        elif command == "quiet":
            self.quiet = True
        elif command == "verbose":
            self.quiet = False
        elif command == "readonly":
            self.readonly = True
        elif command == "version":
            print(boundary.version_line())
        elif command == "exit":
            raise _Exit(status)
        return status

    # -------------------------------------------------------------- list
    def show(self, request: Request) -> int:
        """``list``/``show``: one table of what the daemon returns."""
        if self.with_assoc and request.kind in ("account", "user"):
            request.where.setdefault("withassoc", "yes")
        if request.kind == "reservation":
            _reservation_window(request, int(time.time()))
        chosen = self._format(request) if request.format else None
        reply = self.call(request.message())
        rows = [row["fields"] for row in reply.get("rows", ())]
        columns = chosen if chosen is not None else self._defaults(request, reply)
        self.say(render(rows, columns, self.parsable, self.header))
        return 0

    @staticmethod
    def _format(request: Request) -> list[Field]:
        try:
            return parse_format(request.format)
        except FieldError as error:
            raise Halt(1, f"Unknown field '{error}'") from None

    @staticmethod
    def _defaults(request: Request, reply: Mapping[str, Any]) -> list[Field]:
        """The columns without ``format=``: the daemon's (or Slurm's), plus the ``with`` ones."""
        kind, where = request.kind, request.where
        if kind == "association" and "woplimits" in where:
            return parse_format(["cluster", "account", "user", "part"])
        if kind == "cluster" and "wolimits" in where:
            columns = parse_format(["cl", "controlh", "controlp", "rpc"])
        elif reply.get("defaults"):
            columns = [_default_field(kind, name) for name in reply["defaults"]]
        else:
            columns = parse_format(DEFAULT_FORMATS[kind].split(","))
        extra = []
        if "withcoord" in where and kind in ("account", "user"):
            extra.append("Coord")
        if "withassoc" in where and kind in _WITH_ASSOC:
            extra.extend(_WITH_ASSOC[kind].split(","))
        if "withfed" in where and kind == "cluster":
            extra.extend(_WITH_FED.split(","))
        if "withclusters" in where and kind == "resource":
            extra.extend(("Cluster", "Allowed"))
        headers = {field.header for field in columns}
        for field in parse_format(extra):
            if field.header not in headers:
                columns.append(field)
                headers.add(field.header)
        return columns

    # -------------------------------------------------------------- changes
    def change(self, request: Request) -> int:
        """``add``, ``modify``, ``delete``: ask what would change, say it, then commit or not."""
        _check(request)
        unconditional = request.verb == "modify" and not conditions(request)
        if unconditional and not self.confirm(_NO_WHERE):
            self.say("Aborted\n")
            return 0
        reply = self.call(request.message(commit=self.immediate))
        outcome = describe(request, [row["fields"] for row in reply.get("rows", ())])
        self.say(outcome.text)
        if not outcome.changed or self.immediate:
            return outcome.status
        if self.confirm("Would you like to commit changes?"):
            self.call(request.message(commit=True))
        else:
            self.say(" Changes Discarded\n")
        return outcome.status

    # -------------------------------------------------------------- interactive
    def interactive(self) -> int:
        """Read commands from the terminal until ``exit`` or end of input."""
        last: list[str] = []
        while True:
            self.say(f"{PROG}: ")
            sys.stdout.flush()
            line = self.terminal.read_line()
            if line is None:
                self.say("\n")
                return self.status
            words = split_line(line)
            if not words or words[0].startswith("#"):
                continue
            if words == ["!!"]:
                words = last
            last = words
            try:
                self.run(words)
            except _Exit:
                return self.status
            except SlurmError as error:
                print(f"{PROG}: error: {error}", file=sys.stderr)
                self.status = 1


class _Exit(Exception):
    """``exit``/``quit``: leave interactive mode."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _reservation_window(request: Request, now: int) -> None:
    """``list reservation``'s ``Start=``/``End=`` as epoch seconds for the daemon; with
    no condition and no format at all, since 00:00 yesterday (Slurm's default)."""
    from corral.timefmt import parse_timestamp

    where = request.where
    if not where and not request.format:
        today = time.localtime(now)
        midnight = (today.tm_year, today.tm_mon, today.tm_mday - 1, 0, 0, 0, 0, 0, -1)
        where["start"] = str(int(time.mktime(midnight)))
        return
    for key in ("start", "end"):
        text = where.get(key)
        if isinstance(text, str) and text:
            try:
                where[key] = str(parse_timestamp(text, now, past=True))
            except ValueError:
                raise Halt(1, f"Invalid time specification (pos=0): {text}") from None


def _default_field(kind: str, name: str) -> Field:
    """A column the daemon lists as a default: a header (or format word), maybe ``%N``."""
    word, percent, width = name.partition("%")
    field = field_by_header(word)
    if field.header != word:
        field = find_field(word) or field
    size = int(width) if percent and width.isdigit() else _DEFAULT_WIDTHS.get((kind, field.header))
    return Field(field.header, size or field.width, field.kind)


def _check(request: Request) -> None:
    """What Slurm refuses before asking the daemon anything."""
    kind, verb = request.kind, request.verb
    if kind == "resource":
        resourcetext.check(request)
    if verb == "add":
        if not request.names():
            raise Halt(1, f" Need name of {kind} to add.")
        settings = request.settings
        if kind == "user" and not settings.get("account") and not settings.get("wckeys"):
            raise Halt(1, " Need name of account or wckey to add.")
    elif verb == "modify":
        if not request.settings:
            raise Halt(1, " You didn't give me anything to set")
    elif verb == "delete":
        if not conditions(request):
            raise Halt(1, " No conditions given to remove, not executing.")
        if kind == "account" and "root" in request.names():
            raise Halt(
                1,
                " You are not allowed to remove the root account.",
                " Use remove cluster instead.",
            )


def describe(request: Request, rows: Sequence[Mapping[str, str]]) -> Outcome:
    """The description of a change for its verb."""
    if request.kind == "resource":
        return resourcetext.describe(request, rows)
    if request.verb == "add":
        return describe_add(request, rows)
    if request.verb == "modify":
        return describe_modify(request, rows)
    return describe_delete(request, rows)


def split_line(line: str) -> list[str]:
    """An interactive line as Slurm splits it: at blanks outside quotes, quotes kept."""
    words = []
    current = ""
    quote = ""
    started = False
    for char in line:
        if quote:
            current += char
            if char == quote:
                quote = ""
        elif char in ("'", '"'):
            current += char
            quote = char
            started = True
        elif char.isspace():
            if started:
                words.append(current)
            current, started = "", False
        else:
            current += char
            started = True
    if started:
        words.append(current)
    return words


def sacctmgr(argv: list[str], call: Call | None = None, terminal: Keyboard | None = None) -> int:
    """Run sacctmgr with ``argv``; return the exit status."""
    session = Session(call, terminal)
    try:
        words = session.options(argv)
    except Halt as halt:
        return halt.report()
    if words:
        try:
            return session.run(words)
        except _Exit as stop:
            return stop.status
    return session.interactive()
