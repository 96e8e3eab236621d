"""Who is calling: an authenticated uid/gid with its names and groups."""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass
from functools import lru_cache


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
