"""Which licenses a TRES limit may name: those some cluster tracks as TRES.

Slurm limits a license like any TRES (``GrpTRES=license/fluent=4``), but only
one its database knows, i.e. one a controller's AccountingStorageTRES named
(``license/fluent``), which registration stores in dbd's ``tres`` table
(``Storage.register_cluster``). sacctmgr's limits on any other license are
refused here with Slurm 22.05's words, before anything is stored.
MaxTRESPerNode on a tracked license is kept like any limit, as Slurm 22.05
keeps it (the controller spreads a job's licenses over its nodes to check it).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from dbd import entities
from dbd.entities import invalid
from dbd.models import Tres

#: sacctmgr's words for TRES lists, over every kind (an account's or user's limits
#: are its associations'), with the name sacctmgr shows for each.
_TRES_WORDS = {
    s.word: s.header
    for kind in entities.SETTINGS.values()
    for s in kind
    if s.read is entities.tres_list
}


def check(session: Session, values: Mapping[str, str]) -> None:
    """Refuse ``values``' TRES lists that name a license dbd does not track."""
    tres_words = _TRES_WORDS
    named = [
        (entities.canonical(key), item.partition("=")[0].strip(), text)
        for key, text in values.items()
        if entities.canonical(key) in tres_words
        for item in text.split(",")
        if item.strip().lower().startswith("license/")
    ]
    if not named:
        return
    known = {
        name.lower() for name in session.scalars(select(Tres.name).where(Tres.type == "license"))
    }
    for key, name, text in named:
        if name.partition("/")[2].lower() not in known:
            # Slurm 22.05's sacctmgr, measured (its first line is an error of its own).
            raise invalid(
                f"slurmdb_format_tres_str: no TRES known by type {name}\n"
                f" Unknown option: {tres_words[key]}={text}\n"
                " Use keyword 'where' to modify condition"
            )
