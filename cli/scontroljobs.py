"""scontrol's ``top``, ``notify`` and ``listpids``: a user's jobs reordered, a word to
a job's client, a job's processes on this host.

Kept apart from ``cli/scontrol.py`` (which registers them) so that each command
of scontrol's later additions is one small module.
"""

from __future__ import annotations

from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Protocol

    class Session(Protocol):
        """What of scontrol's session (``cli.scontrol.Session``) these commands use."""

        def call(self, method: str, request: dict[str, Any]) -> Any: ...
        def fail(self, text: str, *, quiet_ok: bool = True) -> None: ...
        def print(self, text: str = "", end: str = "\n") -> None: ...


def top(session: Session, words: Sequence[str]) -> None:
    """``top <job_list>``: Slurm's scontrol_top_job, one error for the whole list
    (``<error> for job <job_list>``)."""
    if len(words) < 2:
        session.fail(f"too few arguments for keyword:{words[0]}", quiet_ok=False)
        return
    if len(words) > 2:
        session.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
        return
    text = words[1]
    for prefix in ("jobid=", "job="):
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
    try:
        reply = session.call("TopJob", {"job_ids": [i for i in text.split(",") if i]})
    except SlurmError as exc:
        session.fail(f"{exc} for job {text}")
        return
    if reply["code"]:
        session.fail(f"{reply['message'] or SlurmError(reply['code'])} for job {text}")


def notify(session: Session, words: Sequence[str]) -> None:
    """``notify <job_id> <message>``: the words after the id, joined by spaces, for
    the job's salloc or srun to print on its stderr."""
    if len(words) < 3:
        session.fail(f"too few arguments for keyword:{words[0]}", quiet_ok=False)
        return
    job_id = words[1]
    if not job_id.isdigit() or int(job_id) <= 0:
        session.fail(f"Invalid job_id {job_id}", quiet_ok=False)
        return
    try:
        session.call("Notify", {"job_id": int(job_id), "message": " ".join(words[2:])})
    except SlurmError as exc:
        session.fail(f"job notify failure: {exc}")


def listpids(session: Session, words: Sequence[str]) -> None:
    """``listpids [<job_id>[.<step_id>]] [<NodeName>]``: the processes of the jobs on
    this host, asked of its node agent (``nodeagent/listpids.py``), in Slurm's table."""
    from corral.client import Client, agent_socket_path
    from corral.clientconf import client_settings

    if len(words) > 3:
        session.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
        return
    text = words[1] if len(words) > 1 else "*"
    node = words[2] if len(words) > 2 else ""
    job_text, dot, step = text.partition(".")
    if job_text != "*" and not job_text.isdigit():
        session.fail(f'"{job_text}" does not look like a jobid', quiet_ok=False)
        return
    if dot and not (step.isdigit() or step in ("batch", "extern")):
        session.fail(f'"{step}" does not look like a stepid', quiet_ok=False)
        return
    job_id = 0 if job_text == "*" else int(job_text)
    client = Client(agent_socket_path(client_settings().slurmd_spool_dir))
    request = {"job_id": job_id, "step": step, "node": node}
    try:
        reply = client.call("ListPids", request)
    except SlurmError as exc:
        session.fail(f"Unable to connect to slurmstepd: {exc}", quiet_ok=False)
        return
    if not reply["runs"]:
        where = f"node {node}" if node else "this node"
        what = f"Job step {text}" if dot else f"Job {job_id}"
        if not job_id:
            session.fail("No job steps exist on this node.", quiet_ok=False)
        else:
            session.fail(f"{what} does not exist on {where}.", quiet_ok=False)
        return
    session.print(f"{'PID':<8} {'JOBID':<8} {'STEPID':<8} {'LOCALID':<7} {'GLOBALID':<8}")
    for row in reply["rows"]:
        task = row["local_id"] >= 0
        local = str(row["local_id"]) if task else "-"
        rank = str(row["global_id"]) if task else "-"
        session.print(f"{row['pid']:<8} {row['job_id']:<8} {row['step']:<8} {local:<7} {rank:<8}")
