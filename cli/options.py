"""A getopt_long work-alike shared by every client command.

Slurm's commands parse their arguments with glibc's ``getopt_long``, and users
and wrapper scripts depend on its exact behaviour: ``-n4`` and ``-n 4``,
``--ntasks=4`` and ``--ntasks 4``, clustered flags (``-HQ``), unambiguous
prefixes of long names (``--part`` for ``--partition``), ``--`` to end the
options, and the error messages it prints. ``argparse`` differs on several of
these and costs start-up time, so this module reimplements the semantics.

Commands describe their options with ``Option`` rows collected in an
``OptionTable``; ``parse`` returns the options in the order given plus the
positional arguments. Errors raise ``OptionError`` carrying glibc's wording;
the command prints it with ``print_error`` followed by Slurm's
``Try "<prog> --help" for more information`` hint.
"""

from __future__ import annotations

import sys

from cli.boundary import UsageError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Iterable

#: Values of ``Option.arg``: how an option takes its argument.
NO_ARGUMENT = 0
REQUIRED = 1
OPTIONAL = 2

#: Values of ``Option.use``: what Corral does with an option it accepts. Slurm's
#: option names are all accepted (scripts written for Slurm must parse), but none
#: may be silently ignored where that could change what happens: an option is
#: either honoured, or refused with an error, or, when it cannot change an
#: outcome (mail, profiling, frequencies), warned about once. docs/compatibility.md
#: is generated from these (``python -m cli.compat``).
HONOURED = "honoured"
WARNED = "warned"
REFUSED = "refused"


class OptionError(UsageError):
    """A command line getopt rejects; ``str()`` is glibc's message without the prefix."""


class OptionRefused(OptionError):
    """An option Slurm has and Corral does not implement, where ignoring it could
    change the outcome: the command stops, as for a bad option."""


class Option:
    """One row of an option table.

    ``key`` names the option for the command (the long name without dashes by
    convention); ``short`` is a single letter or ``""``; ``long`` the long name
    or ``""``; ``arg`` one of ``NO_ARGUMENT``, ``REQUIRED`` or ``OPTIONAL``;
    ``use`` one of ``HONOURED``, ``WARNED`` or ``REFUSED``, and ``note`` why
    (or a limit of what is honoured), for the message and the compatibility table.
    """

    __slots__ = ("arg", "key", "long", "note", "short", "use")

    def __init__(
        self,
        key: str,
        short: str = "",
        long: str = "",
        arg: int = NO_ARGUMENT,
        use: str = HONOURED,
        note: str = "",
    ) -> None:
        self.key = key
        self.short = short
        self.long = long
        self.arg = arg
        self.use = use
        self.note = note

    @property
    def name(self) -> str:
        """How a message names the option: ``--long``, else ``-s``."""
        return f"--{self.long}" if self.long else f"-{self.short}"

    def __repr__(self) -> str:
        return f"Option({self.key!r}, {self.short!r}, {self.long!r}, {self.arg})"


class OptionTable:
    """The options of one command, indexed for lookup by letter and by long name.

    ``prog`` names the command in warnings."""

    def __init__(self, options: Iterable[Option], prog: str = "") -> None:
        self.prog = prog
        self.options = tuple(options)
        self.by_short = {opt.short: opt for opt in self.options if opt.short}
        self.by_long = {opt.long: opt for opt in self.options if opt.long}

    def find_long(self, typed: str, name: str) -> Option:
        """The option ``--name`` names, exactly or as an unambiguous prefix.

        ``typed`` is the whole argument as given (``--par=x``); glibc quotes it
        in its messages. Prefixes of several names are ambiguous unless they
        all denote the same option (aliases such as ``--tasks-per-node``).
        """
        exact = self.by_long.get(name)
        if exact is not None:
            return exact
        matches = [opt for opt in self.options if opt.long.startswith(name)] if name else []
        if not matches:
            raise OptionError(f"unrecognized option '{typed}'")
        first = matches[0]
        if any(opt.key != first.key or opt.arg != first.arg for opt in matches[1:]):
            names = " ".join(f"'--{opt.long}'" for opt in matches)
            raise OptionError(f"option '{typed}' is ambiguous; possibilities: {names}")
        return first


Parsed = tuple[list[tuple[Option, str | None]], list[str]]


def parse(table: OptionTable, argv: list[str], *, permute: bool = False) -> Parsed:
    """Split ``argv`` into ``(option, argument)`` pairs and positional arguments.

    With ``permute`` (scancel, squeue) options may follow positionals, as with
    glibc's default; without it (sbatch, where everything after the script
    name belongs to the script) the first positional ends the options, as
    with a ``+`` optstring. A flag's argument is ``None``; so is an optional
    argument that was not attached (``--nice`` but not ``--nice=5``).
    """
    found: list[tuple[Option, str | None]] = []
    positional: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--":
            positional.extend(argv[i:])
            break
        if word.startswith("--"):
            i = _long(table, word, argv, i, found)
        elif word.startswith("-") and word != "-":
            i = _shorts(table, word, argv, i, found)
        elif permute:
            positional.append(word)
        else:
            positional.extend(argv[i - 1 :])
            break
    for opt, _ in found:
        check_use(table, opt)
    return found, positional


#: Options warned about in this process: each is said once, however often given.
_warned: set[tuple[str, str]] = set()


def put_last(options: dict[str, str | None], key: str, value: str | None) -> None:
    """Give ``key`` its ``value`` in ``options`` as the last entry: so the dict keeps
    its options in the order they were last given, and those that set the same field
    (``-B`` and ``--sockets-per-node``), applied in that order, let the last given
    win, as Slurm's clients read the command line."""
    options.pop(key, None)
    options[key] = value


def check_use(table: OptionTable, opt: Option) -> None:
    """Refuse a ``REFUSED`` option (``OptionRefused``); warn once about a ``WARNED`` one.

    Called for every option given, on the command line or (sbatch) in a script or
    an environment variable that stands for it."""
    if opt.use == REFUSED:
        raise OptionRefused(f"error: {opt.name} is not supported: {opt.note}")
    if opt.use == WARNED and (table.prog, opt.key) not in _warned:
        _warned.add((table.prog, opt.key))
        print(f"{table.prog}: warning: {opt.name} has no effect: {opt.note}", file=sys.stderr)


def _long(
    table: OptionTable, word: str, argv: list[str], i: int, found: list[tuple[Option, str | None]]
) -> int:
    """Consume ``--name[=value]`` (and a separate value if required); return the next index."""
    name, eq, value = word[2:].partition("=")
    opt = table.find_long(word, name)
    if opt.arg == NO_ARGUMENT:
        if eq:
            raise OptionError(f"option '--{opt.long}' doesn't allow an argument")
        found.append((opt, None))
    elif eq:
        found.append((opt, value))
    elif opt.arg == OPTIONAL:
        found.append((opt, None))
    elif i < len(argv):
        found.append((opt, argv[i]))
        i += 1
    else:
        raise OptionError(f"option '--{opt.long}' requires an argument")
    return i


def _shorts(
    table: OptionTable, word: str, argv: list[str], i: int, found: list[tuple[Option, str | None]]
) -> int:
    """Consume a cluster of short options such as ``-HQ`` or ``-Hn4``; return the next index."""
    pos = 1
    while pos < len(word):
        letter = word[pos]
        pos += 1
        opt = table.by_short.get(letter)
        if opt is None:
            raise OptionError(f"invalid option -- '{letter}'")
        if opt.arg == NO_ARGUMENT:
            found.append((opt, None))
            continue
        rest = word[pos:]
        if rest:
            found.append((opt, rest))
        elif opt.arg == OPTIONAL:
            found.append((opt, None))
        elif i < len(argv):
            found.append((opt, argv[i]))
            i += 1
        else:
            raise OptionError(f"option requires an argument -- '{letter}'")
        break
    return i


def print_error(prog: str, error: OptionError) -> None:
    """Print a getopt error the way Slurm's commands do: the message, then the hint."""
    print(f"{prog}: {error}", file=sys.stderr)
    print(f'Try "{prog} --help" for more information', file=sys.stderr)
