"""Who is calling: an authenticated uid/gid with its names, groups and rights.

Rights come in Slurm's three tiers: root and SlurmUser (``is_admin``) may do
anything; users with AdminLevel Operator or Administrator in accounting
(``is_operator``) act on any job and node; an account coordinator acts on the
jobs of the accounts they coordinate and of those below (``coordinates``).
Everyone else acts on their own jobs only. The controller learns levels and
coordinators from dbd (``controller.associations``) and ``elevate`` adds them.
"""

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
    admin_level: str = ""  # accounting's AdminLevel: "Operator", "Administrator" or ""
    coordinates: frozenset[str] = frozenset()  # accounts, with those below them

    @property
    def is_admin(self) -> bool:
        """root and the user the controller runs as (Slurm's SlurmUser)."""
        return self.uid == 0 or self.uid == os.getuid()

    @property
    def is_operator(self) -> bool:
        """root, SlurmUser, or AdminLevel Operator or Administrator: rights over every
        job and node (Slurm's ``validate_operator``)."""
        return self.is_admin or bool(self.admin_level)

    @property
    def is_super_user(self) -> bool:
        """root, SlurmUser or AdminLevel Administrator: may reconfigure and shut the
        controller down (Slurm's ``validate_super_user``)."""
        return self.is_admin or self.admin_level == "Administrator"

    def privileged_over(self, account: str) -> bool:
        """Whether this caller has operator's rights over the jobs of ``account``: as
        Slurm's job update, an operator or a coordinator of the account (holds that
        only they release, longer time limits, priorities, partition limits)."""
        return self.is_operator or account in self.coordinates

    def may_manage(self, uid: int, account: str) -> bool:
        """Whether this caller may act on (cancel, hold, update...) a job of ``uid``
        charged to ``account``: its owner, an operator, or a coordinator of the account."""
        return uid == self.uid or self.is_operator or account in self.coordinates

    def group_names(self) -> frozenset[str]:
        """The names of the caller's primary and supplementary groups."""
        return frozenset(group_name(g) for g in self.groups | {self.gid})

    def sees_all(self, private: bool) -> bool:
        """Whether PrivateData (``private``: the kind in question is private) leaves
        this caller everything: it does for operators, as in Slurm."""
        return not private or self.is_operator

    def may_see(self, uid: int, account: str, private: bool) -> bool:
        """Whether a job of ``uid`` in ``account`` is visible under PrivateData=jobs
        (``private``): to its owner, operators and the account's coordinators."""
        return self.sees_all(private) or uid == self.uid or account in self.coordinates


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
