"""``-M``/``--clusters``: the clusters whose controllers a command talks to.

The daemon behind the local socket (the controller, or the host's node agent)
carries a frame that names another cluster to that cluster's controller, signed
for the caller (corral/clusterroute.py), so a client only says which cluster a
call is for. The names are checked against the clusters the accounting daemon
knows (the controller's ``Clusters``); ``all`` is every one of them. A name that
is not there is refused in Slurm's words before anything is sent.
"""

from __future__ import annotations

from cli import boundary
from cli.boundary import UsageError
from cli.command import split_list

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable

    from corral.client import Client


def unreachable(text: str) -> UsageError:
    """Slurm's answer to a ``-M`` list naming a cluster it cannot find (printed after
    ``prog: error: ``, exit status 1)."""
    return UsageError(
        f"'{text}' can't be reached now, or it is an invalid entry for --cluster.  "
        "Use 'sacctmgr list clusters' to see available clusters."
    )


def names(text: str, client: Client) -> list[str]:
    """The clusters ``text`` names (``all``: every known one), as they are spelled
    where they registered, each once, in the order given."""
    known = {c["name"].lower(): c["name"] for c in client.call("Clusters")["clusters"]}
    if text.strip().lower() == "all":
        return sorted(known.values())
    wanted = split_list(text)
    if not wanted or any(name.lower() not in known for name in wanted):
        raise unreachable(text)
    return list(dict.fromkeys(known[name.lower()] for name in wanted))


def clients(text: str) -> list[tuple[str, Client]]:
    """A client for each cluster ``text`` names, through this host's socket."""
    from corral.client import Client

    local = boundary.connect()
    return [
        (name, Client(local.paths, local.timeout, cluster=name, failover_s=local.failover_s))
        for name in names(text, local)
    ]


def targets(wanted: str) -> list[tuple[str, Client]]:
    """``clients`` for a ``-M`` list (or SLURM_CLUSTERS, given by the caller), or
    this cluster's controller alone, unnamed, when there is none."""
    return clients(wanted) if wanted else [("", boundary.connect())]


def each(found: list[tuple[str, Client]], show: Callable[[Client], int]) -> int:
    """``show`` for each cluster, under Slurm's ``CLUSTER: name`` line (printed under
    ``-h`` too) when ``-M`` named it; the last failure's status, else 0."""
    status = 0
    for name, client in found:
        if name:
            print(f"CLUSTER: {name}", flush=True)
        status = show(client) or status
    return status


def one(prog: str, text: str) -> Client:
    """The client of the one cluster ``text`` names, for commands that act on a single
    cluster (scontrol, scancel, sdiag, strigger): a list of several is refused."""
    found = clients(text)
    if len(found) > 1:
        raise UsageError(f"{prog} acts on one cluster at a time: '{text}'")
    return found[0][1]
