"""What sacctmgr says about a change of resources (remote licenses), in Slurm 22.05's words.

Slurm words these itself rather than through the association code the other
kinds share (``text``): `` Adding Resource(s)`` lists each new ``name@server``
and each cluster newly given a share, then the settings of the last resource;
``modify`` and ``delete`` list the objects the daemon names (``fluent@flex``,
``Cluster - bench\\t- fluent@flex``). The checks Slurm's sacctmgr makes before
asking the daemon are here too (``check``), with its lines.
"""

from __future__ import annotations

from cli.halt import Halt
from cli.sacctmgr.text import Outcome, conditions

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cli.sacctmgr.words import Request

    Row = Mapping[str, str]


def check(request: Request) -> None:
    """What Slurm's sacctmgr refuses before asking the daemon (its words, exit 1)."""
    if request.verb != "modify":
        return
    clusters = "cluster" in conditions(request)
    if "count" in request.settings and clusters:
        raise Halt(
            1, 'Can\'t change "count" on a cluster-based resource. Remove cluster selection.'
        )
    if "percentallowed" in request.settings and not clusters:
        raise Halt(1, 'Can\'t change "percentallowed" without specifying a cluster.')


def describe(request: Request, rows: Sequence[Row]) -> Outcome:
    """What ``add``, ``modify`` or ``delete resource`` prints for the daemon's rows."""
    if request.verb == "add":
        return _add(rows)
    objects = [f"  {row['Object']}\n" for row in rows]
    if request.verb == "modify":
        if not objects:
            return Outcome(" Nothing modified\n", False, 1)
        return Outcome(" Modified server resource ...\n" + "".join(objects), True)
    if not objects:
        return Outcome(" Nothing deleted\n", False, 1)
    return Outcome(" Deleting resource(s)...\n" + "".join(objects), True)


def _add(rows: Sequence[Row]) -> Outcome:
    if not rows:
        return Outcome(" Nothing new added.\n", False, 1)
    listed: list[str] = []
    new: set[str] = set()
    lines = [" Adding Resource(s)\n"]
    for row in rows:
        label = f"{row['Name']}@{row['Server']}"
        if label not in listed:
            listed.append(label)
            lines.append(f"  {label}\n")
        if row["Cluster"]:
            lines.append(f"   Cluster - {row['Cluster']}\t{row['% Allowed']}%\n")
        else:
            new.add(label)
    last = rows[-1]
    lines.append(" Settings\n")
    if f"{last['Name']}@{last['Server']}" not in new:  # shares of a resource found
        lines.append(f"  Server         = {last['Server']}\n")
        lines.append(f"  Type           = {last['Type']}\n")
        return Outcome("".join(lines), True)
    lines.append(f"  Name           = {last['Name']}\n")
    lines.append(f"  Server         = {last['Server']}\n")
    lines.append(f"  Description    = {last['Descr']}\n")
    if last["ServerType"]:
        lines.append(f"  ServerType     = {last['ServerType']}\n")
    lines.append(f"  Count          = {last['Count']}\n")
    lines.append(f"  Type           = {last['Type']}\n")
    return Outcome("".join(lines), True)
