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
from corral import SLURM_PROTOCOL_VERSION
from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from corral.client import Client


def unreachable(text: str) -> UsageError:
    """Slurm's answer to a ``-M`` list naming a cluster it cannot find (printed after
    ``prog: error: ``, exit status 1)."""
    return UsageError(
        f"'{text}' can't be reached now, or it is an invalid entry for --cluster.  "
        "Use 'sacctmgr list clusters' to see available clusters."
    )


def addresses(text: str, client: Client) -> list[dict[str, Any]]:
    """The clusters ``text`` names (``all``: every known one), each once, in the order
    given: name as registered, and its controller's host and port."""
    known = {c["name"].lower(): c for c in client.call("Clusters")["clusters"]}
    if text.strip().lower() == "all":
        return sorted(known.values(), key=lambda c: str(c["name"]))
    wanted = split_list(text)
    if not wanted or any(name.lower() not in known for name in wanted):
        raise unreachable(text)
    return list({name.lower(): known[name.lower()] for name in wanted}.values())


def clients(text: str) -> list[tuple[str, Client]]:
    """A client for each cluster ``text`` names, through this host's socket."""
    from corral.client import Client

    local = boundary.connect()
    return [
        (
            c["name"],
            Client(local.paths, local.timeout, cluster=c["name"], failover_s=local.failover_s),
        )
        for c in addresses(text, local)
    ]


def soonest(found: list[tuple[str, Client]], ask: dict[str, Any]) -> tuple[str, Client]:
    """Of several clusters, the one whose own plan starts the job first (``ask``: the
    Submit request with ``test_only``), the first named on a tie, as Slurm's sbatch,
    salloc and srun pick; one alone is taken as it is. Refused everywhere: the first
    refusal is raised."""
    if len(found) == 1:
        return found[0]
    best, start, refusal = None, 0, None
    for each in found:
        try:
            when = int(each[1].call("Submit", ask)["start_time"])
        except SlurmError as exc:
            refusal = refusal or exc
            continue
        if best is None or when < start:
            best, start = each, when
    if best is None:
        assert refusal is not None
        raise refusal
    return best


def local(name: str) -> bool:
    """Whether ``name`` is this host's own cluster."""
    from corral.clientconf import client_settings

    return name.lower() == client_settings().cluster_name.lower()


#: Slurm's variable naming the cluster a job or allocation of another cluster belongs
#: to ("name:host:port:rpc"), set by sbatch/salloc/srun -M for what runs in it: clients
#: started there talk to that cluster's controller (``boundary.connect``).
WORKING_CLUSTER = "SLURM_WORKING_CLUSTER"


def working(name: str, text: str) -> str:
    """``SLURM_WORKING_CLUSTER``'s value for the cluster ``name`` (one of ``text``'s),
    as Slurm writes it: name, controller host and port, protocol version."""
    address = next(c for c in addresses(text, boundary.connect()) if c["name"] == name)
    return f"{name}:{address['host']}:{address['port']}:{SLURM_PROTOCOL_VERSION}"


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
