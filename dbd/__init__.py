"""corral-dbd, the accounting daemon (SQLAlchemy on MariaDB/MySQL or SQLite).

``service`` is its gRPC face, ``storage`` the job records, ``admin`` sacctmgr's
operations over ``models``, ``enforced`` what controllers enforce, ``report``
and ``rollup`` sreport's usage, ``schema`` and ``migrations`` the tables.
"""

#: What other packages may import: ``config`` (``corral up`` writes and reads slurmdbd.conf).
__all__ = [
    "config",
]
