"""A caller's rights from accounting: AdminLevel and the accounts they coordinate.

Kept apart from ``controller.principal`` (which resolves the caller from the
system's databases, cached) because these rights change with every sacctmgr
call: they are added to the principal per request, from the association set
the controller holds (``controller.associations``).
"""

from __future__ import annotations

from dataclasses import replace

from controller.associations import AssocSet
from controller.principal import Principal


def elevate(who: Principal, assocs: AssocSet | None) -> Principal:
    """``who`` with their AdminLevel and coordinated accounts (none without accounting)."""
    if assocs is None or who.is_admin:
        return who
    level = assocs.admin_levels.get(who.user, "")
    accounts = assocs.coordinated(who.user)
    if not level and not accounts:
        return who
    return replace(who, admin_level=level, coordinates=accounts)
