"""The environment a batch job starts with, as ``--export`` and ``--export-file`` choose it.

Slurm copies the submitter's environment into the job (``--export=ALL``, the
default; workers found through ``$PATH`` depend on it). ``NONE`` and ``NIL``
send only the ``SLURM*`` variables; a list such as ``ALL,A=1,B`` or ``A=1,B``
sends what it names (``ALL`` in a list adds the whole environment) plus the
``SLURM*`` variables. ``NONE`` and lists also ask the node to load the user's
login environment (``SLURM_GET_USER_ENV=1``), as does ``--get-user-env``.

sbatch adds a few variables of its own before copying: the submit directory
and host, the submitter's umask and scheduling priority, and the
``--export`` and ``--dependency`` values, because only the submitting side
knows them.
"""

from __future__ import annotations

import os

from cli.failure import Failure

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping

#: Variables never taken from an --export-file (they describe the submitting session).
_SESSION_ONLY = frozenset({"DISPLAY", "ENVIRONMENT", "HOSTNAME"})


def job_environment(
    *,
    export: str | None,
    export_file: str | None,
    environ: Mapping[str, str],
    submit_dir: str,
    dependency: str | None,
    get_user_env: bool,
) -> dict[str, str]:
    """The job's environment for the given ``--export`` text and submitter ``environ``."""
    source = dict(environ)
    if export is not None and export.upper() != "ALL":
        source.setdefault("SLURM_EXPORT_ENV", export)
    if dependency:
        source["SLURM_JOB_DEPENDENCY"] = dependency
    base: dict[str, str] = {}
    if export_file is not None:
        # Slurm clears its own environment when the job's comes from a file.
        base = read_export_file(export_file)
        source = {}
    source.update(_submitter(environ, submit_dir))
    mode = "ALL" if export is None else export.upper()
    if mode == "ALL":
        env = {**base, **source}
    elif mode in ("NONE", "NIL"):
        env = _slurm_only(source)
        get_user_env = get_user_env or mode == "NONE"
    else:
        env = base
        for token in split_export(export or ""):
            name, eq, value = token.partition("=")
            if token.upper() == "ALL":
                env.update(source)
            elif eq:
                env[name] = value
            elif token in source:
                env[token] = source[token]
        env.update(_slurm_only(source))
        get_user_env = True
    if get_user_env:
        env["SLURM_GET_USER_ENV"] = "1"
    return {name: value for name, value in env.items() if _utf8(name) and _utf8(value)}


def _submitter(environ: Mapping[str, str], submit_dir: str) -> dict[str, str]:
    """What sbatch itself sets for the job: where, from which host, umask, priority."""
    variables = {
        "SLURM_PRIO_PROCESS": str(os.getpriority(os.PRIO_PROCESS, 0)),
        "SLURM_SUBMIT_DIR": submit_dir,
        "SLURM_SUBMIT_HOST": os.uname().nodename,
    }
    if "SLURM_UMASK" not in environ:
        mask = os.umask(0)
        os.umask(mask)
        variables["SLURM_UMASK"] = f"0{mask >> 6 & 7}{mask >> 3 & 7}{mask & 7}"
    return variables


def _slurm_only(variables: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in variables.items() if name.startswith("SLURM")}


def _utf8(text: str) -> bool:
    """Whether ``text`` can travel in a protobuf string (the environment may hold any bytes)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def split_export(text: str) -> list[str]:
    """Split an --export list at commas outside quotes; a token wholly in quotes loses them."""
    tokens: list[str] = []
    start = 0
    quote = ""
    for i, char in enumerate(text + ","):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == ",":
            token = text[start:i]
            if len(token) >= 2 and token[0] in "\"'" and token[-1] == token[0]:
                token = token[1:-1]
            if token:
                tokens.append(token)
            start = i + 1
    if quote:
        tokens.append(text[start:])
    return tokens


def read_export_file(name: str) -> dict[str, str]:
    """``--export-file``: NUL-separated ``NAME=value`` entries from a file, or an open fd >= 3."""
    try:
        if name.isdigit() and int(name) >= 3:
            with os.fdopen(int(name), "rb", closefd=False) as file:
                data = file.read()
        else:
            with open(name, "rb") as file:
                data = file.read()
    except (OSError, ValueError):
        raise Failure(f"Could not open user environment file {name}", status=1) from None
    env: dict[str, str] = {}
    for entry in data.decode(errors="surrogateescape").split("\0"):
        if not entry:
            break
        key, eq, value = entry.partition("=")
        if eq and key not in _SESSION_ONLY:
            env[key] = value
    return env
