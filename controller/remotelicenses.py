"""Remote licenses: those accounting serves (``sacctmgr add resource``), merged into
slurm.conf's ``Licenses=``.

dbd sends each cluster's share of every resource with the associations the
controller fetches every few seconds (``AssocSet.remote_licenses``); the store
merges them into its configuration's licenses as ``name@server``, so admission
(``-L fluent@flex``), the scheduler, backfill and reservations count them
exactly as local ones, and a change made with sacctmgr takes effect at the next
fetch without a restart. A remote license replaces a local one of the same name.
"""

from __future__ import annotations

from collections.abc import Mapping

from corral.licenses import Licenses


def merged(local: Licenses, remote: Mapping[str, int]) -> Licenses:
    """slurm.conf's ``local`` licenses then the ``remote`` ones, sorted by name."""
    kept = tuple((name, count) for name, count in local if name not in remote)
    return kept + tuple(sorted(remote.items()))
