"""corral-controller: the one process that owns a cluster's jobs and nodes.

Start reading at ``jobstate.py`` (the job state machine), ``loop.py`` (the
scheduling cycle) and ``service.py`` (the wire protocol's entry points).
"""

#: What other packages may import: ``principal`` (restd names a token's user as the
#: controller would) and ``sim`` (``corral sim``). The rest is the daemon's own.
__all__ = [
    "principal",
    "sim",
]
