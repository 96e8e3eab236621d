"""sbcast: copy a file to every node of a job's allocation, as Slurm's sbcast does.

The file is read here and sent block by block (``-s``, at most ``MAX_BLOCK``: a
request's frame must stay under the controller's bound) in ``Broadcast`` calls;
the controller checks the caller against the job (``controller/broadcast.py``)
and hands each block to the node agents on their authenticated streams, where it
is written as the job's user (``nodeagent/filebcast.py``). Blocks go one after
the other and each waits for every node, so the first node's failure stops the
copy, reported as Slurm reports it (``REQUEST_FILE_BCAST(node): File exists``).

Options as Slurm 22.05's, with its SBCAST_* environment variables under them, and
slurm.conf's BcastParameters and BcastExclude (``corral/bcastparams.py``) as their
defaults: a DEST that is not absolute goes in ``DestDir=`` (else the current
directory), ``Compression=`` compresses without ``-C``, and ``send_libs`` sends the
executable's shared objects (``cli/sharedobjects.py``) into ``DEST_libs`` on each
node, as ``--send-libs`` does. Compression: ``lz4`` (Slurm's default and only one,
LZ4 frames) and ``none``; also ``zlib`` (Python's own), which Slurm 22.05 no longer
has. ``-F`` has no effect (the controller sends each block to all agents at once, no
tree of fan-outs). In DEST, ``%n`` stands for each node's name: one-host clusters
(``corral up``) emulate several nodes on one filesystem, and only so can each node
have its own copy.
"""

from __future__ import annotations

import os
import stat
import sys
import zlib

from cli import boundary
from cli.command import Command
from cli.halt import Halt
from cli.options import (
    OPTIONAL,
    REQUIRED,
    WARNED,
    Option,
    OptionTable,
    check_use,
)
from corral import bcastparams
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs milliseconds of a client's start-up budget
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import BinaryIO

    from corral.client import Client
    from corral.clientconf import ClientSettings

PROG = "sbcast"
USAGE = "Usage: sbcast [-CfFjpstvV] SOURCE DEST\n"
HELP = """\
Usage: sbcast [OPTIONS] SOURCE DEST
  -C, --compress[=lib]  compress the file being transmitted
  --exclude=<path_list> shared object paths to be excluded
  -f, --force           replace destination file as required
  -F, --fanout=num      specify message fanout
  -j, --jobid=#[+#][.#] specify job ID with optional hetjob offset and/or step ID
  -p, --preserve        preserve modes and times of source file
  --send-libs[=yes|no]  autodetect and broadcast executable's shared objects
  -s, --size=num        block size in bytes (rounded off)
  -t, --timeout=secs    specify message timeout (seconds)
  -v, --verbose         provide detailed event logging
  -V, --version         print version information and exit

Help options:
  --help                show this help message
  --usage               display brief usage message
"""

TABLE = OptionTable(
    [
        Option("compress", "C", "compress", OPTIONAL, note="lz4 (the default), none, and zlib"),
        Option("exclude", "", "exclude", REQUIRED, note="absolute directories, or NONE"),
        Option("force", "f", "force"),
        Option(
            "fanout",
            "F",
            "fanout",
            REQUIRED,
            WARNED,
            "the controller sends each block to every node's agent at once",
        ),
        Option(
            "jobid",
            "j",
            "jobid",
            REQUIRED,
            note="job[.step[+part]]: a step of parts (srun a : b) by its id alone is its "
            "first part, as in Slurm 22.05; a hetjob offset is refused",
        ),
        Option("preserve", "p", "preserve"),
        Option("send_libs", "", "send-libs", OPTIONAL, note="the libraries ldd names"),
        Option("size", "s", "size", REQUIRED, note="at most 8 MiB a block"),
        Option("timeout", "t", "timeout", REQUIRED),
        Option("verbose", "v", "verbose"),
        Option("version", "V", "version"),
        Option("help", "", "help"),
        Option("usage", "", "usage"),
    ],
    prog=PROG,
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

#: The largest block sent: the controller reads requests of up to 13 MiB
#: (corral/ratelimit.py), and Slurm's own default is 8 MiB.
MAX_BLOCK = 8 << 20
#: The options the SBCAST_* environment variables stand for (sbcast(1)).
ENVIRONMENT = (
    ("SBCAST_COMPRESS", "compress"),
    ("SBCAST_EXCLUDE", "exclude"),
    ("SBCAST_FANOUT", "fanout"),
    ("SBCAST_FORCE", "force"),
    ("SBCAST_PRESERVE", "preserve"),
    ("SBCAST_SEND_LIBS", "send_libs"),
    ("SBCAST_SIZE", "size"),
    ("SBCAST_TIMEOUT", "timeout"),
)
NO_JOB = (
    "Need a job id to run this command.  Run from within a Slurm job or use the --jobid option."
)


class Params:
    """What the command line (and SBCAST_*) asked for."""

    def __init__(self) -> None:
        self.compress = ""  # "", "lz4" or "zlib"
        self.exclude: tuple[str, ...] = bcastparams.DEFAULT_EXCLUDE
        self.send_libs = False
        self.force = False
        self.preserve = False
        self.job_id = 0
        self.step = ""
        self.size = 0  # 0: the file's size, at most MAX_BLOCK
        self.timeout = 0  # 0: the controller's default (MessageTimeout's)
        self.verbose = False
        self.source = ""
        self.dest = ""


def compression(value: str | None, prog: str = PROG) -> str:
    """``-C``'s library: "lz4" (the default), "zlib" or "" (none); srun ``--compress``'s
    too (``prog``). An unknown name is Slurm's warning, and the file goes uncompressed,
    as there."""
    name = "lz4" if value is None or value == "" else value.lower()
    if name in ("lz4", "zlib"):
        return name
    if name == "none":
        return ""
    print(
        f"{prog}: error: Compression type '{value}' unknown, disabling compression support.",
        file=sys.stderr,
    )
    return ""


def block_size(text: str) -> int:
    """``-s``: bytes, or with a k or m suffix; 0 (the default) when malformed, as Slurm
    says and ignores it. Capped at MAX_BLOCK."""
    digits, unit = (text[:-1], text[-1].lower()) if text[-1:].isalpha() else (text, "")
    if not digits.isdigit() or unit not in ("", "k", "m"):
        print("size specification is invalid, ignored", file=sys.stderr)
        return 0
    size = int(digits) << {"": 0, "k": 10, "m": 20}[unit]
    return min(size, MAX_BLOCK)


def job_and_step(text: str) -> tuple[int, str]:
    """``-j JOB[.STEP[+PART]]`` (PART: one part of a step of parts, ``srun a : b``, as
    Slurm 22.05's sbcast takes it); Halt in Slurm's words when malformed."""
    job, dot, step = text.partition(".")
    if "+" in job:
        raise Halt(1, f"{PROG}: error: --jobid {text}: heterogeneous job offsets are not supported")
    if not job.isdigit() or int(job) == 0:
        raise Halt(1, f"{PROG}: fatal: Invalid job id: {text}")
    step_id, plus, part = step.partition("+")
    if dot and (not step_id.isdigit() or (plus and not part.isdigit())):
        raise Halt(1, f"{PROG}: fatal: Bad step specified: {job}")
    if not dot:
        return int(job), ""
    return int(job), f"{int(step_id)}+{int(part)}" if plus else str(int(step_id))


def send_libs(value: str | None, default: bool, prog: str = PROG) -> bool:
    """``--send-libs[=yes|no]`` (sbcast's, or srun's: ``prog``): an unknown word is
    Slurm's warning, and the default."""
    if value is None or value.lower() in ("", "yes", "1"):
        return True
    if value.lower() in ("no", "0"):
        return False
    print(f"{prog}: error: Ignoring unrecognized --send-libs value '{value}'", file=sys.stderr)
    return default


def excludes(text: str) -> tuple[str, ...]:
    """``--exclude``: Halt in sbcast's words when a path is not absolute."""
    try:
        return bcastparams.parse_exclude(text)
    except ValueError:
        raise Halt(1, f"{PROG}: error: Invalid --exclude: {text}") from None


def parse(
    argv: list[str], environ: dict[str, str], settings: Callable[[], ClientSettings] | None = None
) -> Params:
    """The parameters of a run; Halt(0) after --help, --usage, --version; Halt(1) if bad.

    ``settings``: slurm.conf as a client reads it, whose BcastParameters and
    BcastExclude are the defaults the command line overrides; called only once the
    command line asks for a copy (``--help`` needs no slurm.conf). None: Slurm's
    defaults."""
    found, positional = COMMAND.parse(argv)
    given: list[tuple[str, str | None]] = []
    for variable, key in ENVIRONMENT:
        value = environ.get(variable)
        if value is None:
            continue
        check_use(TABLE, next(opt for opt in TABLE.options if opt.key == key))  # -F: warned
        given.append((key, value))
    given.extend((opt.key, value) for opt, value in found)
    for key, _ in given:
        COMMAND.answer(key)
    if len(positional) != 2:
        raise Halt(
            1,
            f"Need two file names, have {len(positional)} names",
            f'Try "{PROG} --help" for more information',
        )
    params = Params()
    conf, params.exclude = bcastparams.BcastParams(), bcastparams.DEFAULT_EXCLUDE
    if settings is not None:
        conf, params.exclude = settings().bcast, settings().bcast_exclude
    params.send_libs = conf.send_libs
    if conf.compression:
        params.compress = compression(conf.compression)
    for key, value in given:
        if key == "compress":
            params.compress = compression(value)
        elif key == "send_libs":
            params.send_libs = send_libs(value, params.send_libs)
        elif key == "exclude":
            params.exclude = excludes(value or "")
        elif key in ("force", "preserve", "verbose"):
            setattr(params, key, True)
        elif key == "jobid":
            params.job_id, params.step = job_and_step(value or "")
        elif key == "size":
            params.size = block_size(value or "")
        elif key == "timeout":
            text = value or ""
            params.timeout = int(text) if text.isdigit() else 0  # atoi's 0: the default
    params.source, dest = positional
    params.dest = dest if dest.startswith("/") else os.path.join(conf.dest_dir or os.getcwd(), dest)
    if not params.job_id:
        job = environ.get("SLURM_JOB_ID", "")
        if not job:
            raise Halt(1, f"{PROG}: error: {NO_JOB}")
        params.job_id, _ = job_and_step(job)
    return params


class _Settings:
    """slurm.conf, read the first time it is asked for."""

    def __init__(self) -> None:
        self.value: ClientSettings | None = None

    def __call__(self) -> ClientSettings:
        if self.value is None:
            from corral.clientconf import client_settings

            self.value = client_settings()
        return self.value


def sbcast(argv: list[str]) -> int:
    """Run sbcast with ``argv``; return the exit status."""
    settings = _Settings()
    try:
        params = parse(argv, dict(os.environ), settings)
        source = open_source(params.source)
    except Halt as halt:
        return halt.report()
    client = boundary.connect(settings())
    with source:
        status = send_file(client, params, source, params.dest, verbose=params.verbose)
    if status or not params.send_libs:
        return status
    from cli.sharedobjects import shared_objects

    libraries = shared_objects(params.source, params.exclude)
    for number, path in enumerate(libraries, 1):
        try:
            library = open_source(path)
        except Halt as halt:
            return halt.report()
        with library:
            dest = f"{params.dest}_libs/{os.path.basename(path)}"
            status = send_file(client, params, library, dest, library=True)
        if status:
            return status
        if params.verbose:
            print(
                f"{PROG}: Broadcast of shared object '{path}' to destination cache directory "
                f"succeeded ({number}/{len(libraries)})",
                file=sys.stderr,
            )
    return 0


def send_file(
    client: Client,
    params: Params,
    source: BinaryIO,
    dest: str,
    *,
    verbose: bool = False,
    library: bool = False,
    prog: str = PROG,
) -> int:
    """Send one file, block by block, to ``dest`` on the job's nodes: sbcast's status.
    ``library``: one of ``--send-libs``' shared objects, whose directory is made;
    ``prog``: whose errors these are (srun --bcast sends through here too)."""
    info = os.fstat(source.fileno())
    size = params.size or min(max(info.st_size, 1), MAX_BLOCK)
    if verbose:
        _describe(params, size, info.st_size)
    client.timeout = max(client.timeout, (params.timeout or 10) + 30.0)
    offset = 0
    while True:
        data = source.read(size)
        last = offset + len(data) >= info.st_size or len(data) < size
        request = _request(params, info, offset, data, last) | {"dest": dest, "library": library}
        try:
            reply = client.call("Broadcast", request)
        except SlurmError as exc:
            print(
                f"{prog}: error: Slurm job {_named(params)} lookup error: {exc}",
                file=sys.stderr,
            )
            return 1
        failures = reply.get("failures") or []
        for failure in failures:
            print(
                f"{prog}: error: REQUEST_FILE_BCAST({failure['node']}): {failure['message']}",
                file=sys.stderr,
            )
        if failures:
            return 1
        offset += len(data)
        if last:
            return 0


def open_source(path: str) -> BinaryIO:
    try:
        handle = open(path, "rb")  # noqa: SIM115 - read block by block by sbcast()
        if stat.S_ISDIR(os.fstat(handle.fileno()).st_mode):
            handle.close()
            raise IsADirectoryError(21, "Is a directory")
    except OSError as exc:
        raise Halt(1, f"{PROG}: error: Can't open `{path}`: {exc.strerror}") from None
    return handle


def pack(data: bytes, compress: str) -> bytes:
    """A block as sent: compressed as ``-C`` asked (the agent's ``bcastwrite.unpack``
    undoes it). lz4 is imported only here: sbcast without -C does not pay for it."""
    if compress == "lz4":
        import lz4.frame

        packed: bytes = lz4.frame.compress(data)
        return packed
    if compress == "zlib":
        return zlib.compress(data)
    return data


def _request(
    params: Params, info: os.stat_result, offset: int, data: bytes, last: bool
) -> dict[str, object]:
    """One block's BroadcastRequest (the codec's dict)."""
    packed = pack(data, params.compress)
    return {
        "job_id": params.job_id,
        "step": params.step,
        "dest": params.dest,
        "offset": offset,
        "data": packed,
        "compress": params.compress,
        "size": len(data),
        "last": last,
        "force": params.force,
        "mode": stat.S_IMODE(info.st_mode),
        "preserve": params.preserve,
        "atime": int(info.st_atime),
        "mtime": int(info.st_mtime),
        "timeout": params.timeout,
    }


def _named(params: Params) -> str:
    return f"{params.job_id}.{params.step}" if params.step else str(params.job_id)


def _describe(params: Params, block: int, size: int) -> None:
    """-v: the parameters, as Slurm's sbcast lists them."""
    lines = (
        "-----------------------------",
        f"block_size = {block}",
        f"compress   = {params.compress or 'none'}",
        f"exclude    = {','.join(params.exclude) or 'none'}",
        f"force      = {'true' if params.force else 'false'}",
        f"jobid      = {_named(params)}",
        f"preserve   = {'true' if params.preserve else 'false'}",
        f"send_libs  = {'true' if params.send_libs else 'false'}",
        f"timeout    = {params.timeout}",
        f"dest       = {params.dest}",
        f"src        = {params.source}",
        f"size       = {size}",
        "-----------------------------",
    )
    for line in lines:
        print(f"{PROG}: {line}", file=sys.stderr)


def main() -> None:
    boundary.run(PROG, sbcast)
