"""corral-restd, the Slurm-compatible REST gateway: HTTP in, the same gRPC
Controller calls the CLI makes out. It owns no state.

Where to look: ``api`` (every operation: path, schemas, handler), ``app``
(routing, checks, Slurm's error envelope), ``jobs``/``cluster``/``accounting``
(slurmrestd's record shapes), ``auth`` (JWT headers), ``openapi`` (the
document, written from ``api``), ``main`` (listening, TLS).
"""

#: What other packages may import: ``jobfields`` (``corral compat`` lists the REST
#: job fields beside the options); ``jobs`` and ``cluster``, whose record builders
#: squeue's and sinfo's ``--json``/``--yaml`` print (cli/jsonout.py).
__all__ = [
    "cluster",
    "jobfields",
    "jobs",
]
