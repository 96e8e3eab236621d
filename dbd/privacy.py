"""What slurmdbd.conf's PrivateData lets a caller see of jobs and usage.

As slurmdbd decides it: root, SlurmUser and users with AdminLevel Operator or
Administrator see everything. Anyone else sees their own jobs and usage, and
an account coordinator also the jobs of the accounts they coordinate and of
those below. A user with no association sees nothing ("has no associations,
and is not admin, so not returning any jobs"). Asking for other users narrows
what one may see; it never widens it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from dbd.admin import ADMINS, account_under
from dbd.models import Association, Coordinator, User


@dataclass(frozen=True, slots=True)
class Sight:
    """Whose jobs a caller may see: ``everything``, or ``uids`` and ``accounts``."""

    everything: bool
    uids: tuple[int, ...] = ()
    accounts: tuple[str, ...] = ()


EVERYTHING = Sight(True)


def sight(engine: Engine, uid: int, name: str, slurm_uid: int) -> Sight:
    """What ``uid`` (user ``name``) may see under PrivateData."""
    if uid in (0, slurm_uid):
        return EVERYTHING
    with Session(engine) as session:
        user = session.get(User, name)
        if user is not None and user.admin_level in ADMINS:
            return EVERYTHING
        if not session.scalars(select(Association.id).where(Association.user == name)).first():
            return Sight(False)
        tops = set(session.scalars(select(Coordinator.account).where(Coordinator.user == name)))
        parents = {
            a.account: a.parent
            for a in session.scalars(select(Association).where(Association.user == ""))
        }
    return Sight(
        False, (uid,), tuple(sorted(a for a in parents if account_under(a, tops, parents)))
    )
