"""Configless lookup: a job finds its cluster's slurm.conf without SLURM_CONF.

Slurm's slurmd, in configless mode, keeps the configuration it runs with under
``/run/slurm/conf``, and a client that finds no slurm.conf of its own reads it
there. Corral's equivalent must also work when several clusters run on one host
(every test cluster does), so one host-wide copy will not do. What a job's
process still carries when its tool has stripped the environment (Snakemake's
jobstep plugin keeps only ``SLURM_JOB_ID``, ``SLURM_CLUSTER_NAME`` and a few
other identity variables for its srun) is its job id and its session: each
batch script's supervisor leads a session of its own, and everything the script
starts stays in it. So the supervisor publishes, for its session id, the job id
and the path of the slurm.conf its node agent runs with; a client looks up its
own session (``os.getsid``) and takes the path only when the job id matches its
``SLURM_JOB_ID`` (a stale entry of a reused session id names another job).

Entries live in ``/run/corral/configless`` when the agent runs as root and in
``/tmp/corral-configless-UID`` when it runs as UID (its jobs then run as UID
too); a directory, or entry, that someone other than root or the caller owns, or
that others may write, is not believed.

Imported by every client (``corral.confsyntax``), so it imports only ``os``.
"""

from __future__ import annotations

import os

#: Where a root node agent's supervisors publish their entries.
ROOT_DIRECTORY = "/run/corral/configless"

TYPE_CHECKING = False  # typing costs a client milliseconds
if TYPE_CHECKING:
    from collections.abc import Mapping

#: The most of an entry read (a job id, a cluster name and a path).
_MAX_ENTRY = 8192


def directory(uid: int) -> str:
    """Where supervisors running as ``uid`` publish their entries."""
    return ROOT_DIRECTORY if uid == 0 else f"/tmp/corral-configless-{uid}"


def publish(session: int, job_id: int, cluster: str, conf: str) -> str:
    """Say that session ``session`` runs job ``job_id`` of ``cluster``, configured by
    ``conf``; the entry's path (for ``withdraw``). Raises OSError if it cannot."""
    where = directory(os.geteuid())
    os.makedirs(where, mode=0o755, exist_ok=True)
    if not _trusted(where):
        raise PermissionError(f"{where} is not this user's alone")
    path = os.path.join(where, str(session))
    staged = f"{path}.{os.getpid()}.new"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, f"{job_id}\n{cluster}\n{conf}\n".encode())
    finally:
        os.close(fd)
    os.replace(staged, path)
    return path


def withdraw(path: str, job_id: int) -> None:
    """Remove the entry at ``path`` if it is still job ``job_id``'s."""
    entry = _entry(path)
    if entry is not None and entry[0] == str(job_id):
        try:
            os.unlink(path)
        except FileNotFoundError:
            return  # gone already (the node cleaned /run)


def lookup(env: Mapping[str, str]) -> str | None:
    """The slurm.conf of the job this process belongs to, or None.

    Only inside a job (``SLURM_JOB_ID`` or ``SLURM_JOBID`` set) and only an entry
    for this process's session that names that job (and its cluster, when
    ``SLURM_CLUSTER_NAME`` is set) and a file that exists.
    """
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job_id:
        return None
    try:
        session = os.getsid(0)
    except OSError:
        return None
    uid = os.geteuid()
    for where in dict.fromkeys((ROOT_DIRECTORY, directory(uid))):
        entry = _entry(os.path.join(where, str(session))) if _trusted(where) else None
        if entry is None or entry[0] != job_id:
            continue
        cluster = env.get("SLURM_CLUSTER_NAME")
        if (not cluster or entry[1] in ("", cluster)) and os.path.isfile(entry[2]):
            return entry[2]
    return None


def _trusted(path: str) -> bool:
    """Owned by root or by the caller, and writable by no one else."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022


def _entry(path: str) -> tuple[str, str, str] | None:
    """An entry's (job id, cluster, slurm.conf path), or None."""
    if not _trusted(path):
        return None
    try:
        with open(path, "rb") as handle:
            text = handle.read(_MAX_ENTRY).decode(errors="replace")
    except OSError:
        return None
    parts = text.split("\n")
    if len(parts) < 3 or not parts[0].isdigit() or not parts[2]:
        return None
    return parts[0], parts[1], parts[2]
