"""slurmdbd.conf: the accounting daemon's settings, in Slurm's syntax.

The same reader as slurm.conf (``corral.confsyntax``: case-insensitive keys,
comments, continuations, Include). Slurm's storage plugins are named as in
Slurm: ``accounting_storage/mysql`` (MariaDB or MySQL through PyMySQL) and,
Corral's addition, ``accounting_storage/sqlite`` (the embedded default, with
StorageLoc the database file). Errors are ``path:line: message``.

``database_url`` turns the Storage* settings into a SQLAlchemy URL; a URL can
also be given whole (``corral-dbd --database URL``, or ``corral up --database``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sqlalchemy.engine import URL

from corral import confkeys, tlsconf
from corral.confsyntax import NOWHERE, ConfigError, Reader, Where, integer
from corral.tlsconf import TlsConfig

DEFAULT_DBD_PORT = 6819
STORAGE_TYPES = ("accounting_storage/mysql", "accounting_storage/sqlite")

#: Purge periods: Slurm's unit words (singular or plural) -> seconds.
_PURGE_UNITS = {"hour": 3600, "day": 86_400, "month": 30 * 86_400}

#: Keys Slurm's slurmdbd.conf accepts, with what Corral does with each.
KNOWN_KEYS = confkeys.DBD


@dataclass(frozen=True, slots=True)
class DbdConfig:
    path: str
    storage_type: str
    storage_host: str
    storage_port: int
    storage_user: str
    storage_pass: str
    storage_loc: str  # MySQL: the database name; SQLite: the file
    dbd_host: str
    dbd_addr: str  # where to listen (DbdAddr, else DbdHost's address)
    dbd_port: int
    purge_job_after: int  # seconds; 0 = never
    purge_event_after: int
    private_data: tuple[str, ...]
    slurm_user: str  # who runs dbd, and administers accounting data (SlurmUser)
    auth_type: str  # AuthType as written ("" when not): auth/munge turns MUNGE on
    auth_info: str  # AuthInfo: its ttl= is how long credentials live (socket=: munged's)
    warnings: tuple[str, ...]
    tls: TlsConfig = field(default_factory=TlsConfig)  # TLSType, TLSParameters (dbd_cert_file, ...)

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL of the configured storage."""
        if self.storage_type == "accounting_storage/sqlite":
            return str(URL.create("sqlite", database=self.storage_loc))
        url = URL.create(
            "mysql+pymysql",
            username=self.storage_user or "root",
            password=self.storage_pass or None,
            host=self.storage_host or "localhost",
            port=self.storage_port,
            database=self.storage_loc,
            query={"charset": "utf8mb4"},
        )
        return url.render_as_string(hide_password=False)


def purge_period(key: str, value: str, where: Where) -> int:
    """``12months``, ``30day``, ``720hours`` (months when no unit) -> seconds."""
    digits = value.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = value[len(digits) :].lower().rstrip("s") or "month"
    if unit not in _PURGE_UNITS:
        raise ConfigError(*where, f"{key}={value}: unit must be hours, days or months")
    return integer(key, digits, where) * _PURGE_UNITS[unit]


class _DbdReader(Reader):
    def __init__(self) -> None:
        self.settings: dict[str, tuple[str, Where]] = {}
        self.warnings: list[str] = []

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        for key, value in found:
            known = KNOWN_KEYS.get(key.lower())
            if known is None:
                self.warnings.append(f"{where[0]}:{where[1]}: unknown key '{key}' ignored")
                continue
            confkeys.check(known, value, where, self.warnings)
            self.settings[known.key] = (value, where)

    def cluster_name(self) -> str | None:
        return None

    def get(self, key: str, default: str = "") -> tuple[str, Where]:
        return self.settings.get(key, (default, NOWHERE))


def default_path(slurm_conf: str) -> str:
    """slurmdbd.conf beside slurm.conf, as Slurm's default layout has it."""
    return os.path.join(os.path.dirname(os.path.abspath(slurm_conf)), "slurmdbd.conf")


def load(path: str) -> DbdConfig:
    """Parse slurmdbd.conf at ``path``; ConfigError (``path:line: message``) if invalid."""
    reader = _DbdReader()
    reader.read(path)
    storage_type, where = reader.get("StorageType", "accounting_storage/sqlite")
    if storage_type.lower() not in STORAGE_TYPES:
        raise ConfigError(
            *where, f"StorageType={storage_type}: expected one of {', '.join(STORAGE_TYPES)}"
        )
    storage_type = storage_type.lower()
    sqlite = storage_type == "accounting_storage/sqlite"
    loc, loc_where = reader.get("StorageLoc", "corral_acct_db")
    if sqlite and not os.path.isabs(loc):
        loc = os.path.join(os.path.dirname(os.path.abspath(path)), loc)
    if not sqlite and (not loc or "/" in loc):
        raise ConfigError(*loc_where, f"StorageLoc={loc}: a database name for MySQL")
    port_text, port_where = reader.get("StoragePort", "3306")
    dbd_port_text, dbd_port_where = reader.get("DbdPort", str(DEFAULT_DBD_PORT))
    host = reader.get("DbdHost", "localhost")[0]
    purges = {}
    for key in ("PurgeJobAfter", "PurgeEventAfter"):
        text, at = reader.get(key)
        purges[key] = purge_period(key, text, at) if text else 0
    private, _ = reader.get("PrivateData")
    tls = tlsconf.parse(
        reader.settings.get("TLSType"), reader.settings.get("TLSParameters"), path, reader.warnings
    )
    return DbdConfig(
        path=path,
        storage_type=storage_type,
        storage_host=reader.get("StorageHost", "localhost")[0],
        storage_port=integer("StoragePort", port_text, port_where, minimum=1, maximum=65535),
        storage_user=reader.get("StorageUser")[0],
        storage_pass=reader.get("StoragePass")[0],
        storage_loc=loc,
        dbd_host=host,
        dbd_addr=reader.get("DbdAddr", "127.0.0.1" if host == "localhost" else host)[0],
        dbd_port=integer("DbdPort", dbd_port_text, dbd_port_where, minimum=1, maximum=65535),
        purge_job_after=purges["PurgeJobAfter"],
        purge_event_after=purges["PurgeEventAfter"],
        private_data=tuple(p.strip().lower() for p in private.split(",") if p.strip()),
        slurm_user=reader.get("SlurmUser", "root")[0],
        auth_type=reader.get("AuthType")[0],
        auth_info=reader.get("AuthInfo")[0],
        warnings=tuple(reader.warnings),
        tls=tls,
    )
