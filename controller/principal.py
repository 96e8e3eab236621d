"""Who is calling: an authenticated uid/gid with its names and groups."""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass
from functools import lru_cache

from corral import errors
from corral.errors import SlurmError


@dataclass(frozen=True, slots=True)
class Principal:
    uid: int
    gid: int
    user: str
    groups: frozenset[int]

    @property
    def is_admin(self) -> bool:
        """root and the user the controller runs as (Slurm's SlurmUser) are operators."""
        return self.uid == 0 or self.uid == os.getuid()


@lru_cache(maxsize=4096)
def principal_for(uid: int, gid: int) -> Principal:
    """Resolve names and supplementary groups from the system databases."""
    user = user_name(uid)
    try:
        groups = frozenset(os.getgrouplist(user, gid))
    except OSError:
        groups = frozenset({gid})
    return Principal(uid, gid, user, groups)


@lru_cache(maxsize=4096)
def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@lru_cache(maxsize=4096)
def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def uid_for(user: str) -> int | None:
    """A user name or a numeric uid as typed on a command line."""
    if user.isdigit():
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def submitting_as(who: Principal, uid: int | None, gid: int | None) -> Principal:
    """Whom a submission is for: the caller, or the user (and group) an operator names
    (sbatch --uid/--gid, which Slurm allows root alone).

    Anyone else naming another identity is refused, not ignored: a job must never run
    as someone its submitter is not. A uid no passwd entry names is refused too (the
    node could not become it); its group, unless named, is the user's own.
    """
    if uid is None and gid is None:
        return who
    if not who.is_admin and (uid not in (None, who.uid) or gid not in (None, who.gid)):
        raise SlurmError(errors.ESLURM_USER_ID_MISSING)
    if uid is None:
        uid = who.uid
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        raise SlurmError(errors.ESLURM_USER_ID_MISSING) from None
    return principal_for(uid, entry.pw_gid if gid is None else gid)
