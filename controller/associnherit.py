"""The limits an association takes from the accounts above it, as Slurm fills them.

slurmdbd hands slurmctld each association with the per-job and per-user limits it
does not set itself taken from the nearest account above that does: MaxJobs,
MaxSubmitJobs, MaxWall, MaxTRES, MaxTRESPerNode, MaxTRESMins (these three TRES by
TRES: a user's own ``mem=100`` beside its account's ``cpu=2`` is ``cpu=2,mem=100``)
and Priority. slurmctld enforces and ``scontrol show assoc_mgr`` prints those values,
an inherited limit just as an own one. The Grp* limits are not inherited: they cap
the sum of their own subtree, which the accounts above already count (measured on
Slurm 22.05 with slurmdbd on MariaDB: an account's ``GrpTRES=cpu=8 GrpJobs=5
MaxJobs=3 MaxWall=60`` shows on its users as ``GrpJobs=N(0) ... MaxJobs=3(0)
... MaxWallPJ=60``).

dbd stores and sends each association's own values (sacctmgr shows and modifies
those); the controller fills the rest here, once per fetched set.
"""

from __future__ import annotations

from collections.abc import Iterable

from corral.wire import corral_pb2 as pb

__all__ = ["filled"]

#: The optional counts and minutes an association takes from above when unset.
COUNTS = ("max_jobs", "max_submit", "max_wall", "priority")
#: The TRES limits it takes from above, TRES by TRES.
TRES = ("max_tres", "max_tres_per_node", "max_tres_mins")
#: Deeper than any account tree: a cycle a damaged database could hold stops here.
MAX_DEPTH = 64


def _fill(own: pb.AssociationLimits, above: pb.AssociationLimits) -> pb.AssociationLimits:
    """``own`` with what it leaves unset taken from ``above`` (already filled)."""
    out = pb.AssociationLimits()
    out.CopyFrom(own)
    for name in COUNTS:
        if not out.HasField(name) and above.HasField(name):
            setattr(out, name, getattr(above, name))
    for name in TRES:
        mine = getattr(out, name)
        for tres, cap in getattr(above, name).items():
            if tres not in mine:
                mine[tres] = cap
    return out


def filled(associations: Iterable[pb.AssociationLimits]) -> list[pb.AssociationLimits]:
    """Every association of ``associations`` (in their order) with the limits it
    inherits filled in: a user's from its account, an account's from its parent."""
    given = list(associations)
    accounts = {m.account: m for m in given if not m.user and not m.partition}
    done: dict[str, pb.AssociationLimits] = {}

    def account(name: str, depth: int = 0) -> pb.AssociationLimits | None:
        if name in done:
            return done[name]
        own = accounts.get(name)
        if own is None:
            return None
        above = account(own.parent, depth + 1) if own.parent and depth < MAX_DEPTH else None
        done[name] = _fill(own, above) if above is not None else own
        return done[name]

    out: list[pb.AssociationLimits] = []
    for m in given:
        if not m.user and not m.partition:
            out.append(account(m.account) or m)
            continue
        above = account(m.account)
        out.append(_fill(m, above) if above is not None else m)
    return out
