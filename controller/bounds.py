"""How large a submission may be: each text a user sends has a ceiling.

Why: the controller keeps every pending job in memory, writes its script and
environment to the journal on the state disk, and reads its array and
dependency specifications on every submission. Without ceilings one user's
7.8 MB script, megabytes of environment or a 10 MB array list fill the disk
or stall the event loop for everyone. slurmctld checks the same fields at
submission: the script at ``SchedulerParameters=max_script_size`` (4 MiB by
default), the array specification at 4 KiB and the dependency list at 128
KiB follow Slurm; the job name, comment, paths and the other texts have
ceilings of Corral's choosing (``TEXT_LIMITS``), generous for any real use.
The environment and the arguments are held to the script's ceiling each,
since they are stored the same way. A text over its ceiling is refused as Slurm refuses it:
ESLURM_PATHNAME_TOO_LONG, "Pathname of a file, directory or other parameter
too long".
"""

from __future__ import annotations

from controller.depspec import parse
from controller.jobspec import JobSpec
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.ratelimit import max_script_size

ARRAY_SPEC_MAX = 4 << 10
DEPENDENCY_MAX = 128 << 10
PATH_MAX = 4096
#: JobSpec text fields and their ceilings (bytes); the script and environment are apart.
TEXT_LIMITS = {
    "array": ARRAY_SPEC_MAX,
    "dependency": DEPENDENCY_MAX,
    "name": 1024,
    "comment": 1024 * 4,
    "mail_type": 1024,
    "mail_user": 1024,
    "account": 1024,
    "qos": 1024,
    "constraint": 1024,
    "gres": 1024,
    "prefer": 1024,
    "container": PATH_MAX,
    "container_id": 1024,
    "licenses": 1024,
    "reservation": 1024,
    "req_nodes": 64 << 10,
    "exc_nodes": 64 << 10,
    "work_dir": PATH_MAX,
    "std_out": PATH_MAX,
    "std_err": PATH_MAX,
    "std_in": PATH_MAX,
    "submit_dir": PATH_MAX,
    "submit_line": 64 << 10,
    "command": 64 << 10,
    "export_env": 64 << 10,
}


def _too_long() -> SlurmError:
    return SlurmError(errors.ESLURM_PATHNAME_TOO_LONG)


def check_submission(spec: JobSpec, conf: SlurmConfig) -> None:
    """Refuse a JobSpec with any text over its ceiling."""
    ceiling = max_script_size(conf)
    script = spec.script
    if len(script) > ceiling or len(script.encode()) > ceiling:
        raise _too_long()
    size = sum(len(k) + len(v) + 2 for k, v in spec.environment.items())
    if size > ceiling:
        raise _too_long()
    if sum(len(a) + 1 for a in spec.argv) > ceiling:
        raise _too_long()
    for name, limit in TEXT_LIMITS.items():
        value = getattr(spec, name)
        if isinstance(value, str) and len(value) > limit:
            raise _too_long()
    if sum(len(p) + 1 for p in spec.partitions) > 64 << 10:
        raise _too_long()


def check_dependency(text: str) -> str:
    """A dependency list for ``scontrol update``: bounded and well-formed, as submitted.

    Returns the text to store ("" clears it).
    """
    if text in ("", "0"):
        return ""
    if len(text) > DEPENDENCY_MAX:
        raise _too_long()
    try:
        parse(text)
    except ValueError:
        raise SlurmError(errors.ESLURM_DEPENDENCY) from None
    return text
