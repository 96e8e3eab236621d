"""slurm.conf syntax: the one line reader shared by the daemons and the clients.

Slurm's syntax, as ``corral.config`` documents it: case-insensitive
``Key=Value`` pairs (several per line, ``"quoted values"``), ``#`` comments
unless escaped as ``\\#``, a trailing ``\\`` continuing a line, and
``Include <file>`` (``%c`` is the ClusterName, relative names are relative to
the including file). ``Reader`` walks a file and the files it includes and
hands each logical line's pairs to ``line``; ``corral.config`` builds the
daemons' full model on it and ``corral.clientconf`` the few settings a client
command needs.

Every client command imports this module, so it imports nothing but ``os``
and ``corral.errors``: no ``re`` (which imports ``enum``), no ``typing``, no
``dataclasses``. The tokenizer is plain string scanning; a slurm.conf is a
few kilobytes at most.
"""

from __future__ import annotations

import os

from corral.errors import CorralError

DEFAULT_PATH = "/etc/corral/slurm.conf"
MAX_INCLUDE_DEPTH = 16
UINT32 = 0xFFFFFFFF

# Defaults of the settings both the daemons' model and the clients read.
STATE_SAVE_LOCATION = "/var/spool/corral/ctld"
SLURMD_SPOOL_DIR = "/var/spool/corral/slurmd"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
MAX_ARRAY_SIZE = 1001

#: The keys that start a record line (``NodeName=...``), lowercase -> Slurm's spelling.
#: Every later key of such a line belongs to the record, not to the cluster.
RECORD_TYPES = {
    "nodename": "NodeName",
    "partitionname": "PartitionName",
    "downnodes": "DownNodes",
    "nodeset": "NodeSet",
    "poweraction": "PowerAction",
}

_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
_DIGITS = frozenset("0123456789")

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Iterator

#: (file, line number) of a logical line; the number is 0 for "not from the file".
Where = tuple[str, int]
#: Where a default value comes from.
NOWHERE: Where = ("", 0)


class ConfigError(CorralError):
    """A slurm.conf that cannot be used; ``str()`` is ``path:line: message``."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")


#: Where ``corral up`` keeps its cluster unless told otherwise (relative to $HOME).
CORRAL_UP_CONF = os.path.join(".corral", "cluster", "slurm.conf")


def default_path() -> str:
    """``$SLURM_CONF`` if set, else the standard location, else (when that does not
    exist) what Slurm's configless mode would find: inside a job, the slurm.conf
    its node agent published for it (``corral.configless``), so that a job whose
    tool strips SLURM_CONF from srun's environment (Snakemake's jobstep plugin
    keeps only the job's identity) still reaches its own cluster; else the
    cluster ``corral up`` runs for this user."""
    given = os.environ.get("SLURM_CONF")
    if given:
        return given
    if not os.path.exists(DEFAULT_PATH):
        from corral import configless  # only without SLURM_CONF: a file or two read

        published = configless.lookup(os.environ)
        if published is not None:
            return published
        personal = os.path.join(os.path.expanduser("~"), CORRAL_UP_CONF)
        if os.path.exists(personal):
            return personal
    return DEFAULT_PATH


def read_text(path: str, where: tuple[str, int | None], what: str) -> str:
    """A file's text, or a ConfigError at ``where`` saying why it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(*where, f"{what}cannot read: {reason}") from exc


# ------------------------------------------------------------------ lexing
def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) per logical line: comments cut, continuations joined.

    As in Slurm, a ``#`` after an even run of backslashes starts a comment, a
    line ending in an odd run of backslashes continues on the next, and
    ``\\x`` becomes ``x`` once the line is whole.
    """
    pending: list[str] = []
    start = 1
    for number, raw in enumerate(text.split("\n"), 1):
        if not pending:
            start = number
        body = _uncomment(raw)
        stripped = body.rstrip()
        backslashes = len(stripped) - len(stripped.rstrip("\\"))
        if backslashes % 2:
            pending.append(stripped[:-1])
            continue
        pending.append(body)
        yield start, _unescape("".join(pending))
        pending = []
    if pending:
        yield start, _unescape("".join(pending))


def _uncomment(raw: str) -> str:
    """``raw`` up to its first ``#`` that follows an even run of backslashes (none counts)."""
    hash_at = raw.find("#")
    while hash_at >= 0:
        before = raw[:hash_at]
        if (len(before) - len(before.rstrip("\\"))) % 2 == 0:
            return before
        hash_at = raw.find("#", hash_at + 1)
    return raw


def _unescape(text: str) -> str:
    """Each ``\\x`` as ``x`` (``\\\\`` as one backslash); a final lone backslash goes."""
    if "\\" not in text:
        return text
    out: list[str] = []
    pos = 0
    while (slash := text.find("\\", pos)) >= 0:
        out.append(text[pos:slash])
        out.append(text[slash + 1 : slash + 2])
        pos = slash + 2
    out.append(text[pos:])
    return "".join(out)


def include_target(line: str) -> str | None:
    """The file an ``Include <file>`` line names (any case), else None."""
    words = line.split()
    if len(words) == 2 and words[0].lower() == "include":
        return words[1]
    return None


def pairs(line: str, where: Where) -> list[tuple[str, str]]:
    """The ``Key=Value`` pairs of one logical line, values unquoted.

    A key is letters, digits, ``_`` and ``.``; spaces may surround the ``=``.
    A value is ``"anything but a quote"`` followed by a space or the end of the
    line, or else a run of non-space characters (so ``"a b`` is the value
    ``"a`` followed by the stray word ``b``). Anything that is not a pair is a
    ``cannot parse`` error naming the rest of the line.
    """
    simple = _simple_pairs(line)
    if simple is not None:
        return simple
    found: list[tuple[str, str]] = []
    end = len(line)
    pos = 0
    while True:
        key_at = _skip_space(line, pos, end)
        key_end = key_at
        while key_end < end and line[key_end] in _KEY_CHARS:
            key_end += 1
        equals = _skip_space(line, key_end, end)
        if key_end == key_at or equals == end or line[equals] != "=":
            break
        value_at = _skip_space(line, equals + 1, end)
        if value_at == end:
            break
        if line[value_at] == '"':
            close = line.find('"', value_at + 1)
            if close >= 0 and (close + 1 == end or line[close + 1].isspace()):
                found.append((line[key_at:key_end], line[value_at + 1 : close]))
                pos = close + 1
                continue
        value_end = value_at
        while value_end < end and not line[value_end].isspace():
            value_end += 1
        found.append((line[key_at:key_end], line[value_at:value_end]))
        pos = value_end
    rest = line[pos:].strip()
    if rest:
        raise ConfigError(*where, f'cannot parse "{rest}"')
    return found


def _simple_pairs(line: str) -> list[tuple[str, str]] | None:
    """The pairs of a line whose every word is ``Key=Value``, else None.

    The common case, read with ``split`` rather than a character at a time
    (a client reads a 2,000-node slurm.conf in a few milliseconds): a quote is
    allowed only around a whole value, and anything else (spaces around
    ``=``, a stray word) is left to the scanner in ``pairs``.
    """
    found: list[tuple[str, str]] = []
    for word in line.split():
        key, _, value = word.partition("=")
        if not key or not value or not _KEY_CHARS.issuperset(key):
            return None
        if '"' in value:
            inner = value[1:-1]
            if len(value) < 2 or value[0] != '"' or value[-1] != '"' or '"' in inner:
                return None
            value = inner
        found.append((key, value))
    return found


def _skip_space(line: str, pos: int, end: int) -> int:
    while pos < end and line[pos].isspace():
        pos += 1
    return pos


class Reader:
    """Walks slurm.conf and the files it includes, one logical line at a time.

    Subclasses implement ``line`` (what to do with a line's pairs) and
    ``cluster_name`` (the ClusterName seen so far, for ``%c`` in Include).
    """

    def feed(self, text: str, path: str, chain: tuple[str, ...]) -> None:
        """Read ``text`` (the contents of ``path``); ``chain`` holds the includers' paths."""
        for number, line in logical_lines(text):
            where = (path, number)
            include = include_target(line)
            if include is not None:
                self._include(include, where, chain)
                continue
            self.line(pairs(line, where), where)

    def read(self, path: str) -> None:
        """Read the file ``path`` itself, a ConfigError naming it if it cannot be read."""
        self.feed(read_text(path, (path, None), ""), path, (os.path.abspath(path),))

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        raise NotImplementedError

    def cluster_name(self) -> str | None:
        raise NotImplementedError

    def _include(self, name: str, where: Where, chain: tuple[str, ...]) -> None:
        """Read an included file in place; relative names are relative to the includer."""
        if "%c" in name:
            cluster = self.cluster_name()
            if cluster is None:
                raise ConfigError(*where, f"Include {name}: %c used before ClusterName is set")
            name = name.replace("%c", cluster.lower())
        path = os.path.join(os.path.dirname(where[0]), name)
        if len(chain) >= MAX_INCLUDE_DEPTH or os.path.abspath(path) in chain:
            raise ConfigError(*where, f"Include {name}: include loop")
        text = read_text(path, where, f"Include {name}: ")
        self.feed(text, path, (*chain, os.path.abspath(path)))


# ------------------------------------------------------------------ values
def _digits(text: str, most: int) -> bool:
    """Whether ``text`` is 1 to ``most`` ASCII decimal digits."""
    return 0 < len(text) <= most and _DIGITS.issuperset(text)


def integer(key: str, value: str, where: Where, *, minimum: int = 0, maximum: int = UINT32) -> int:
    """A Slurm integer: 1 to 20 decimal digits, optionally ``k`` for x1024."""
    scale = 1024 if value[-1:] in ("k", "K") else 1
    digits = value[:-1] if scale > 1 else value
    if not _digits(digits, 20):
        raise ConfigError(*where, f"bad {key} value '{value}': not a number")
    number = int(digits) * scale
    if not minimum <= number <= maximum:
        raise ConfigError(*where, f"bad {key} value '{value}': not in {minimum}..{maximum}")
    return number


def boolean(key: str, value: str, where: Where) -> bool:
    """Slurm's booleans: yes/up/true/1 and no/down/false/0, any case."""
    lowered = value.lower()
    if lowered in ("yes", "up", "true", "1"):
        return True
    if lowered in ("no", "down", "false", "0"):
        return False
    raise ConfigError(*where, f"bad {key} value '{value}': expected YES or NO")


def port_range(key: str, value: str, where: Where) -> list[int]:
    """A port, or a ``LO-HI`` range of them (brackets allowed, as in a hostlist)."""
    low_text, dash, high_text = value.removeprefix("[").removesuffix("]").partition("-")
    if not _digits(low_text, 5) or (dash and not _digits(high_text, 5)):
        raise ConfigError(*where, f"bad {key} value '{value}': not a port or port range")
    low = int(low_text)
    high = int(high_text) if dash else low
    if not 0 < low <= high <= 65535:
        raise ConfigError(*where, f"bad {key} value '{value}': not in 1..65535")
    return list(range(low, high + 1))


def _host_word(text: str) -> bool:
    """Whether ``text`` can be a host in SlurmctldHost: no space, no parenthesis."""
    return bool(text) and not any(char in "()" or char.isspace() for char in text)


def controller(value: str, where: Where) -> tuple[str, str]:
    """A ``SlurmctldHost`` value, ``host`` or ``host(addr)``, as (host, address)."""
    host, paren, rest = value.partition("(")
    addr = rest[:-1] if paren and rest.endswith(")") else host
    if not _host_word(host) or (paren and not rest.endswith(")")) or not _host_word(addr):
        raise ConfigError(*where, f"bad SlurmctldHost value '{value}'")
    return host, addr


def controllers(
    hosts: list[tuple[str, Where]], settings: dict[str, tuple[str, Where]], path: str
) -> tuple[tuple[str, str], ...]:
    """SlurmctldHost lines in order, or the legacy ControlMachine/BackupController keys.

    ``settings`` maps Slurm's spelling of the legacy keys to (value, where).
    """
    found = [controller(value, where) for value, where in hosts]
    for machine_key, addr_key in (
        ("ControlMachine", "ControlAddr"),
        ("BackupController", "BackupAddr"),
    ):
        machine = settings.get(machine_key)
        if machine is None:
            continue
        if hosts:
            raise ConfigError(*machine[1], f"{machine_key} cannot be used with SlurmctldHost")
        found.append((machine[0], settings.get(addr_key, machine)[0]))
    if not found:
        raise ConfigError(path, None, "SlurmctldHost needs to be specified")
    return tuple(found)
