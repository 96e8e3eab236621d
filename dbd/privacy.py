"""What slurmdbd.conf's PrivateData lets a caller see of jobs, usage, users and accounts.

As slurmdbd decides it: root, SlurmUser and users with AdminLevel Operator or
Administrator see everything. Anyone else sees their own jobs and usage, and
an account coordinator also the jobs of the accounts they coordinate and of
those below. A user with no association sees nothing ("has no associations,
and is not admin, so not returning any jobs"). Asking for other users narrows
what one may see; it never widens it.

``users`` and ``accounts`` apply the same sight to sacctmgr's listings
(``rows_shown``): with ``users``, user, association and coordinator rows of
other users are left out unless they lie in accounts the caller coordinates;
with ``accounts``, account rows are shown only for those accounts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def rows_shown(
    kind: str,
    rows: Iterable[Mapping[str, str]],
    name: str,
    seen: Sight,
    private: Iterable[str],
) -> list[Mapping[str, str]]:
    """Of sacctmgr's ``rows`` of ``kind``, those user ``name`` may see under
    PrivateData ``private`` (``users``, ``accounts``) with ``seen`` (``sight``)."""
    rows = list(rows)
    if seen.everything:
        return rows
    words = set(private)
    mine = set(seen.accounts)
    if kind == "account" and "accounts" in words:
        return [r for r in rows if r.get("Account") in mine]
    if kind in ("user", "association", "coordinator") and "users" in words:
        return [
            r
            for r in rows
            if r.get("User", "").lower() == name or (r.get("Account") in mine and kind != "user")
        ]
    return rows
