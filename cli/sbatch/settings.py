"""sbatch's settings: each option's value checked and stored, in Slurm's precedence.

Options arrive from three places, applied in this order so that later ones win:
#SBATCH directives, then SBATCH_* environment variables, then the command
line. Each option's setter checks its argument as it is applied, with Slurm's
message and exit status (255 for a bad option value, 1 for a bad number, as
Slurm's ``exit(-1)`` and ``exit(1)``), and returns the fields it sets. Fields
are named after the ``JobSpec`` fields where one exists.

Settings Slurm only checks once all sources are in (mutually exclusive memory
options, begin after deadline) are checked by ``Settings.verify``.
"""

from __future__ import annotations

import os
import sys
import time

from cli.failure import Failure
from cli.options import NO_ARGUMENT, OPTIONAL, check_use
from cli.sbatch.cnumbers import (
    C_SPACE,
    INT_MAX,
    clamp,
    count,
    digit_run,
    is_digits,
    is_integer,
    signed,
    strtol,
)
from cli.sbatch.options import ENVIRONMENT, TABLE, WAIT4SWITCH

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

#: Where a setting came from. Slurm counts #SBATCH lines as command line when
#: it checks for conflicting options, and only the environment apart.
SCRIPT, ENV, CLI = "script", "env", "cli"

_NICE_MAX = 2**31 - 3
_NO_VAL = 4294967294
_SIGNALS = {
    "HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "ALRM": 14, "TERM": 15, "CHLD": 17,
    "USR1": 10, "USR2": 12, "PIPE": 13, "URG": 23, "CONT": 18, "STOP": 19, "TSTP": 20,
    "TTIN": 21, "TTOU": 22, "XCPU": 24,
}  # fmt: skip

#: ``--elastic``'s signal by default: SIGWINCH, whose default action is to be ignored,
#: so a job that does not catch it goes on as before (docs/design.md, "Elastic jobs").
ELASTIC_SIGNAL = 28
_ELASTIC_SIGNALS = {**_SIGNALS, "WINCH": ELASTIC_SIGNAL}

Fields = dict[str, "Any"]


def _invalid(option: str) -> Failure:
    return Failure(f"Invalid {option} specification", status=255)


def node_count(text: str) -> tuple[int, int]:
    """``-N``: ``N``, ``MIN-MAX`` or a size list such as ``1-15:4`` or ``2,4``.

    Returns (min, max); max 0 means no maximum. ``k`` and ``m`` suffixes
    multiply by 1024 and 1024², as in Slurm.
    """
    if "," in text or ":" in text:
        return _size_list(text)
    low, dash, high = text.partition("-")
    if not dash:
        value = _nodes(low, text)
        if value < 0:
            raise Failure(f'"{text}" is not a valid node count', status=255)
        return value, value
    minimum = max(_nodes(low, low), 1)
    maximum = _nodes(high, high)
    if maximum != 0 and maximum < minimum:
        raise Failure(
            f"Maximum node count {maximum} is less than minimum node count {minimum}", status=255
        )
    return minimum, maximum


def _nodes(text: str, shown: str) -> int:
    """One node count with an optional k/m multiplier; -1 if empty or out of range.

    The text is ``[ \\t]*[+-]?[0-9]*[kKmM]?`` and trailing white space.
    """
    sign, rest = signed(text, " \t")
    digits = digit_run(rest)
    rest = rest[len(digits) :]
    suffix = rest[:1].lower() if rest[:1] in ("k", "K", "m", "M") else ""
    if rest[len(suffix) :].strip(C_SPACE):
        raise Failure(f'"{shown}" is not a valid node count', status=255)
    if not digits:
        return -1
    value = clamp(sign + digits) * {"": 1, "k": 1024, "m": 1024 * 1024}[suffix]
    return value if 0 <= value <= INT_MAX else -1


def _size_list(text: str) -> tuple[int, int]:
    """The smallest and largest node count of a list like ``1-15:4,20``."""
    sizes: list[int] = []
    for item in text.split(","):
        low, dash, rest = item.partition("-")  # LO[-HI[:STEP]]
        high, colon, stride = rest.partition(":")
        if not is_digits(low) or (
            dash and (not is_digits(high) or (colon and not is_digits(stride)))
        ):
            raise Failure(f'"{text}" is not a valid node count', status=255)
        first = clamp(low)
        last = clamp(high if dash else low)
        step = clamp(stride if colon else "1")
        if last < first or step == 0 or last > INT_MAX:
            raise Failure(f'"{text}" is not a valid node count', status=255)
        sizes += [first, last - (last - first) % step]
    return min(sizes), max(sizes)


def memory(option: str, text: str) -> int:
    """A memory size in MiB, or Slurm's ``Invalid --mem specification``."""
    from corral.units import parse_memory

    try:
        return parse_memory(text)
    except ValueError:
        raise _invalid(option) from None


def minutes(option: str, text: str) -> int:
    """A time limit in minutes, -1 for UNLIMITED."""
    from corral.timefmt import parse_duration

    try:
        return parse_duration(text)
    except ValueError:
        raise _invalid(option) from None


def timestamp(option: str, text: str) -> int:
    """A ``--begin``/``--deadline`` time as epoch seconds."""
    from corral.timefmt import parse_timestamp

    try:
        return parse_timestamp(text, int(time.time()))
    except ValueError:
        raise _invalid(option) from None


def signal_spec(text: str) -> tuple[int, int, bool]:
    """``--signal=[R][B][:]SIG[@SECS]``: (signal number, seconds before the end, batch only).

    SIG is a number or a name with or without ``SIG``; SECS defaults to 60.
    The ``R`` flag (reservations) has no meaning in Corral and is accepted.
    """
    rest = text
    batch_only = False
    if rest[:1] in ("R", "r"):
        rest = rest[1:]
    if rest[:1] in ("B", "b"):
        batch_only = True
        rest = rest[1:]
    if rest[:1] in ("R", "r"):
        rest = rest[1:]
    rest = rest.removeprefix(":")
    name, at, secs = rest.partition("@")
    number = _signal_number(name)
    if not 1 <= number <= 0xFFFF:
        raise _invalid("--signal")
    if not at:
        return number, 60, batch_only
    if not is_digits(secs) or clamp(secs) > 0xFFFF:
        raise _invalid("--signal")
    return number, int(secs), batch_only


def _signal_number(name: str) -> int:
    """A signal given by number or by name (``USR1``, ``SIGUSR1``, any case); 0 if unknown."""
    stripped = name.strip(C_SPACE)
    if is_integer(stripped):
        return clamp(stripped)
    upper = stripped.upper()
    return _SIGNALS.get(upper.removeprefix("SIG"), 0)


def _nice(text: str | None) -> Fields:
    value = 100 if text is None else strtol(text)
    if abs(value) > _NICE_MAX:
        raise Failure(f"Invalid --nice value, out of range (+/- {_NICE_MAX})", status=255)
    return {"nice": value}


def _priority(text: str | None) -> Fields:
    if (text or "").upper() == "TOP":
        return {"priority": _NO_VAL - 1}
    value = strtol(text or "")
    if value < 0:
        raise Failure("Priority must be >= 0", status=255)
    if value >= _NO_VAL:
        raise Failure(f"Priority must be < {_NO_VAL}", status=255)
    return {"priority": value}


def _exclusive(text: str | None) -> Fields:
    """``--exclusive[=oversubscribe]``; only the plain form is whole nodes. Nodes kept to
    one user, MCS label or topology block are not implemented: refused, since
    taking them for shared nodes would put other jobs beside the job."""
    word = "exclusive" if text is None else text.lower()
    if word not in ("exclusive", "oversubscribe", "user", "mcs", "topo"):
        raise _invalid("--exclusive")
    if word in ("user", "mcs", "topo"):
        raise Failure(f"--exclusive={word} is not supported: only whole nodes are", status=255)
    return {"exclusive": word == "exclusive"}


def _open_mode(text: str | None) -> Fields:
    first = (text or "")[:1].lower()
    if first == "a":
        return {"open_mode": "append"}
    if first == "t":
        return {"open_mode": "truncate"}
    raise _invalid("--open-mode")


def _mail_type(text: str | None) -> Fields:
    from corral.mailtype import parse

    try:
        return {"mail_type": parse(text or "")}
    except ValueError:
        raise _invalid("--mail-type") from None


def node_file(path: str) -> str:
    """-F/--nodefile: the hosts the file names (whitespace or lines apart, ``#``
    comments), as -w would give them; Slurm's words for a file it cannot open or
    that names none. srun reads its -F here too."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError as exc:
        raise Failure(
            f"slurm_allocate_resources error opening file {path}, {exc.strerror}",
            "Invalid --nodefile node file",
            status=255,
        ) from None
    names = [name for line in lines for name in line.split("#", 1)[0].split()]
    if not names:
        raise Failure("Hostlist is empty!", "Invalid --nodefile node file", status=255)
    return ",".join(names)


def _kill_on_invalid_dep(text: str | None) -> Fields:
    word = (text or "").lower()
    if word not in ("yes", "no"):
        raise _invalid("--kill-on-invalid-dep")
    return {"kill_on_invalid_dep": word == "yes"}


def _signal(text: str | None) -> Fields:
    """``--signal``; the ``R`` flag lets a job overlap a reservation's MaxStartDelay,
    which Corral's reservations do not have: said, as it changes nothing."""
    flags, colon, _ = (text or "").partition(":")
    if colon and "R" in flags.upper():
        print(
            "sbatch: warning: --signal=R: has no effect: reservations have no MaxStartDelay",
            file=sys.stderr,
        )
    number, secs, batch_only = signal_spec(text or "")
    return {"signal_num": number, "signal_time": secs, "signal_batch_only": batch_only}


def _seconds(option: str, text: str) -> int:
    """A Slurm time string in seconds (Slurm's time_str2secs), or ``Invalid <option>``."""
    from corral.timefmt import parse_seconds

    try:
        return parse_seconds(text)
    except ValueError:
        raise _invalid(option) from None


def _switches(text: str | None) -> Fields:
    """``--switches=N[@max-time]``: at most N leaf switches, waiting up to max-time."""
    number, at, wait = (text or "").partition("@")
    fields: Fields = {"switches": count("--switches", number)}
    if at:
        fields["switch_wait"] = _seconds("--switches", wait)
    return fields


def _segment(text: str | None) -> Fields:
    """``--segment=S`` (Slurm 24.11's parse_uint16: 0 to 65533; 0 asks for none)."""
    value = text or ""
    if not is_digits(value) or int(value) >= 65534:
        raise _invalid("--segment")
    return {"segment": int(value)}


def _topology_level(text: str | None) -> Fields:
    """Corral's ``--topology-level=[REQUIRED][:PREFERRED]``: switch (block) levels."""
    required, colon, preferred = (text or "").partition(":")
    if not required and not preferred:
        raise _invalid("--topology-level")
    fields: Fields = {}
    for field, value in (("topology_required", required), ("topology_preferred", preferred)):
        if value:
            if not is_digits(value) or len(value) > 4:
                raise _invalid("--topology-level")
            fields[field] = int(value)
    if colon and not preferred:
        raise _invalid("--topology-level")
    return fields


def _elastic(text: str | None) -> Fields:
    """``--elastic[=SIG]`` (Corral's): with ``-N min-max`` the job grows toward max as
    nodes free and shrinks toward min under pressure while it runs; SIG (a number or
    a name, WINCH by default) tells it each time."""
    if text is None:
        return {"elastic_signal": ELASTIC_SIGNAL}
    name = text.strip(C_SPACE).upper().removeprefix("SIG")
    number = clamp(name) if is_integer(name) else _ELASTIC_SIGNALS.get(name, 0)
    if not 1 <= number <= 64:
        raise _invalid("--elastic")
    return {"elastic_signal": number}


def _get_user_env(text: str | None) -> Fields:
    """``--get-user-env[=timeout][S|L]``. Slurm loads the user's login environment
    for root's submissions only (it ignores the option for anyone else); Corral never
    loads it, so root's is refused rather than run with the wrong environment."""
    value = text or ""
    digits = value[:-1] if value[-1:] in ("S", "s", "L", "l") else value
    if digits and not is_digits(digits):
        raise _invalid("--get-user-env")
    if os.geteuid() == 0:
        raise Failure(
            "--get-user-env is not supported: the login environment is not loaded", status=255
        )
    return {"get_user_env": True}


def _nodes_option(text: str | None) -> Fields:
    low, high = node_count(text or "")
    return {"min_nodes": low, "max_nodes": high}


def _identity(
    option: str, field: str, lookup: Callable[[str], int]
) -> Callable[[str | None], Fields]:
    """``--uid``/``--gid``: root's alone, as in Slurm (the job then runs as that
    user or group); a name or a number the system knows."""

    def setter(text: str | None) -> Fields:
        if os.getuid() != 0:
            raise Failure(f"--{option} only permitted by root user", status=255)
        try:
            return {field: lookup(text or "")}
        except (KeyError, ValueError, OverflowError):
            raise _invalid(f"--{option}") from None

    return setter


def _uid_of(text: str) -> int:
    import pwd

    return pwd.getpwuid(int(text)).pw_uid if is_digits(text) else pwd.getpwnam(text).pw_uid


def _gid_of(text: str) -> int:
    import grp

    return grp.getgrgid(int(text)).gr_gid if is_digits(text) else grp.getgrnam(text).gr_gid


def _stdio(field: str) -> Callable[[str | None], Fields]:
    """``-o/-e/-i``: ``none`` in any case means /dev/null."""
    return lambda text: {field: "/dev/null" if (text or "").lower() == "none" else text}


def _text(field: str) -> Callable[[str | None], Fields]:
    return lambda text: {field: text}


def _flag(field: str, value: bool = True) -> Callable[[str | None], Fields]:
    return lambda _text: {field: value}


def _count(field: str, option: str) -> Callable[[str | None], Fields]:
    return lambda text: {field: count(option, text or "")}


def _memory(field: str, option: str) -> Callable[[str | None], Fields]:
    return lambda text: {field: memory(option, text or "")}


def _gpus(field: str, option: str) -> Callable[[str | None], Fields]:
    """``--gpus``, ``--gpus-per-node``, ``--gpus-per-socket``, ``--gpus-per-task``:
    ``[type:]count`` (cli/sbatch/gpuopts.py)."""

    def setter(text: str | None) -> Fields:
        from cli.sbatch.gpuopts import gpu_count, job_counts

        if field == "gpus":  # a list of types, a total of each
            return job_counts(option, text or "")
        return {field: gpu_count(option, text or "")}

    return setter


def _node_gpus(text: str | None) -> Fields:
    """``--gpus-per-node``: ``[type:]count`` or a list of them, one per type."""
    from cli.sbatch.gpuopts import node_counts

    return {"gpus_per_node": node_counts("--gpus-per-node", text or "")}


def _gpu_bind(text: str | None) -> Fields:
    from cli.sbatch.gpuopts import bind_valid

    if not bind_valid(text or ""):
        raise Failure(f"Invalid --gpu-bind argument: gpu:{text or ''}", status=255)
    return {"gpu_bind": text}


def _gres_flags(text: str | None) -> Fields:
    """``--gres-flags``: Slurm 22.05's two words, in any case."""
    value = (text or "").lower()
    if value not in ("enforce-binding", "disable-binding"):
        raise Failure("Invalid --gres-flags specification", status=255)
    return {"gres_flags": value}


def _distribution(text: str | None) -> Fields:
    from cli.sbatch.layoutopts import distribution

    return distribution(text)


def _extra_node_info(text: str | None) -> Fields:
    from cli.sbatch.nodeinfo import extra_node_info

    return extra_node_info(text)


def _hint(text: str | None) -> Fields:
    from cli.sbatch.hintopts import hint

    return hint(text)


def _minutes(field: str, option: str) -> Callable[[str | None], Fields]:
    return lambda text: {field: minutes(option, text or "")}


def _timestamp(field: str, option: str) -> Callable[[str | None], Fields]:
    return lambda text: {field: timestamp(option, text or "")}


#: Option key -> setter. The table's other options are refused or warned about
#: (``cli.options.check_use``), or acted on by the command itself (``--wrap``).
SETTERS: dict[str, Callable[[str | None], Fields]] = {
    "account": _text("account"),
    "array": _text("array"),
    "begin": _timestamp("begin_time", "--begin"),
    "chdir": _text("chdir"),
    "clusters": _text("clusters"),
    "comment": _text("comment"),
    "container": _text("container"),
    "container-id": _text("container_id"),
    "constraint": _text("constraint"),
    "cores-per-socket": _count("cores_per_socket", "--cores-per-socket"),
    "cpus-per-task": _count("cpus_per_task", "--cpus-per-task"),
    "deadline": _timestamp("deadline", "--deadline"),
    "dependency": _text("dependency"),
    "distribution": _distribution,
    "hint": _hint,
    "error": _stdio("std_err"),
    "exclude": _text("exc_nodes"),
    "elastic": _elastic,
    "exclusive": _exclusive,
    "export": _text("export"),
    "export-file": _text("export_file"),
    "extra-node-info": _extra_node_info,
    "get-user-env": _get_user_env,
    "gres": lambda text: {"gres": "" if (text or "").lower() == "none" else text},
    "gpus": _gpus("gpus", "--gpus"),
    "gpus-per-node": _node_gpus,
    "gpus-per-task": _gpus("gpus_per_task", "--gpus-per-task"),
    "gpus-per-socket": _gpus("gpus_per_socket", "--gpus-per-socket"),
    "sockets-per-node": _count("sockets_per_node", "--sockets-per-node"),
    "cpus-per-gpu": _count("cpus_per_gpu", "--cpus-per-gpu"),
    "mem-per-gpu": _memory("mem_per_gpu", "--mem-per-gpu"),
    "ntasks-per-gpu": _count("ntasks_per_gpu", "--ntasks-per-gpu"),
    "gpu-bind": _gpu_bind,
    "gres-flags": _gres_flags,
    "hold": _flag("hold"),
    "input": _stdio("std_in"),
    "job-name": _text("name"),
    "kill-on-invalid-dep": _kill_on_invalid_dep,
    "licenses": _text("licenses"),
    "mail-type": _mail_type,
    "mail-user": _text("mail_user"),
    "mem": _memory("mem_per_node", "--mem"),
    "mem-per-cpu": _memory("mem_per_cpu", "--mem-per-cpu"),
    "mincpus": _count("min_cpus", "--mincpus"),
    "nice": _nice,
    "no-requeue": _flag("requeue", False),
    "nodefile": lambda text: {"req_nodes": node_file(text or "")},
    "nodelist": _text("req_nodes"),
    "nodes": _nodes_option,
    "ntasks": _count("num_tasks", "--ntasks"),
    "ntasks-per-node": _count("ntasks_per_node", "--ntasks-per-node"),
    "ntasks-per-socket": _count("ntasks_per_socket", "--ntasks-per-socket"),
    "open-mode": _open_mode,
    "output": _stdio("std_out"),
    "oversubscribe": _flag("oversubscribe"),
    "parsable": _flag("parsable"),
    "partition": lambda text: {"partitions": [p for p in (text or "").split(",") if p]},
    "prefer": _text("prefer"),
    "priority": _priority,
    "qos": _text("qos"),
    "reservation": _text("reservation"),
    "requeue": _flag("requeue"),
    "segment": _segment,
    "signal": _signal,
    "switches": _switches,
    "test-only": _flag("test_only"),
    "threads-per-core": _count("threads_per_core", "--threads-per-core"),
    "time": _minutes("time_limit", "--time"),
    "time-min": _minutes("time_min", "--time-min"),
    "topology-level": _topology_level,
    # SBATCH_WAIT4SWITCH (no option of its own): --switches' max-time alone.
    "wait4switch": lambda text: {"switch_wait": _seconds("SBATCH_WAIT4SWITCH", text or "")},
    "wait": _flag("wait"),
    "uid": _identity("uid", "run_as_uid", _uid_of),
    "gid": _identity("gid", "run_as_gid", _gid_of),
}


class Settings:
    """The options given so far: ``fields`` for the job and the command, and their sources."""

    def __init__(self) -> None:
        self.fields: Fields = {}
        self.sources: dict[str, str] = {}
        self.texts: dict[str, str] = {}
        self._touched: dict[str, tuple[str, ...]] = {}

    def apply(self, key: str, text: str | None, source: str) -> None:
        """Check and store option ``key`` with argument ``text`` (None for a flag)."""
        setter = SETTERS.get(key)
        if setter is not None:
            self.reset(key)
            updates = setter(text)
            self.fields.update(updates)
            self._touched[key] = tuple(updates)
        self.sources[key] = source
        self.texts[key] = "set" if text is None else text

    def reset(self, key: str) -> None:
        """Forget option ``key`` (an SBATCH_* flag variable set to e.g. ``no`` does this)."""
        for field in self._touched.pop(key, ()):
            self.fields.pop(field, None)
        self.sources.pop(key, None)
        self.texts.pop(key, None)

    def apply_environment(self, environ: Mapping[str, str]) -> None:
        """Apply the SBATCH_* variables that stand for options.

        A flag variable counts as given when empty, ``yes`` or a non-zero
        number and clears the option otherwise; an empty value for an option
        with an optional argument means "no argument", as in Slurm.
        """
        for variable, key in ENVIRONMENT:
            value = environ.get(variable)
            if value is None:
                continue
            check_use(TABLE, TABLE.by_long[key])  # SBATCH_WCKEY is refused as --wckey is
            kind = TABLE.by_long[key].arg
            if kind == NO_ARGUMENT:
                if value == "" or value.lower() == "yes" or _nonzero(value):
                    self.apply(key, None, ENV)
                else:
                    self.reset(key)
            elif kind == OPTIONAL and value == "":
                self.apply(key, None, ENV)
            else:
                self.apply(key, value, ENV)
        if WAIT4SWITCH in environ:  # read by Slurm after SBATCH_REQ_SWITCH
            self.apply("wait4switch", environ[WAIT4SWITCH], ENV)

    def verify(self) -> None:
        """Checks Slurm makes once every source has been applied."""
        given = [key for key in ("mem", "mem-per-cpu", "mem-per-gpu") if key in self.sources]
        typed = [key for key in given if self.sources[key] != ENV]
        if len(typed) > 1:
            raise Failure(
                "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.",
                status=1,
                level="fatal",
            )
        if typed:
            for key in given:
                if key != typed[0]:
                    self.reset(key)
        elif len(given) > 1:
            raise Failure(
                "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually "
                "exclusive.",
                status=1,
                level="fatal",
            )
        if (
            self.sources.get("exclusive", ENV) != ENV
            and self.sources.get("oversubscribe", ENV) != ENV
        ):
            raise Failure(
                "--exclusive and --oversubscribe options are mutually exclusive",
                status=1,
                level="fatal",
            )
        begin = self.fields.get("begin_time", 0)
        deadline = self.fields.get("deadline", 0)
        if begin and deadline and deadline < begin:
            raise Failure("Incompatible begin and deadline time specification")


def _nonzero(text: str) -> bool:
    return is_integer(text, " \t") and clamp(text) != 0
