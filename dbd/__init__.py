"""corral-dbd, the accounting daemon (SQLAlchemy on MariaDB/MySQL or SQLite).

The daemon itself is issue 4; the package exists now so that every Corral
program has its final import path from the start.
"""
