"""scontrol's ``top`` and ``notify``: a user's jobs reordered, a word to a job's client.

Kept apart from ``cli/scontrol.py`` (which registers them) so that each command
of scontrol's later additions is one small module.
"""

from __future__ import annotations

from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Sequence

    from cli.scontrol import Session


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
