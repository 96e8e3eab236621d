"""corral-controller: the one process that owns a cluster's jobs and nodes.

Start reading at ``jobstate.py`` (the job state machine), ``loop.py`` (the
scheduling cycle) and ``service.py`` (the wire protocol's entry points).
"""
