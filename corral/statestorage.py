"""Where the controller keeps its durable state: StateStorage* in slurm.conf.

Corral's own keys, named after slurmdbd.conf's Storage* ones (docs/ha.md):
``StateStorageType=state/sqlite`` (the default) keeps the journal in
StateSaveLocation on local disk, which only one controller can use;
``state/mysql`` keeps it in a MariaDB or MySQL database (``StateStorageHost``,
``StateStoragePort``, ``StateStorageUser``, ``StateStoragePass``,
``StateStorageLoc``: the database, which must exist), shared by every
SlurmctldHost, which then take turns through a leader lease whose length is
SlurmctldTimeout. The keys are parsed by every daemon (a bad value is a bad
slurm.conf) but only the controller uses them.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.confsyntax import NOWHERE, ConfigError, Where, integer

TYPES = ("state/sqlite", "state/mysql")
DEFAULT_PORT = 3306
DEFAULT_DATABASE = "corral_state"
#: How long a lease lasts without renewal, and so how long a standby waits for a
#: dead primary: SlurmctldTimeout, 10 s unless set (Slurm's default is 120 s).
DEFAULT_LEASE_S = 10


@dataclass(frozen=True, slots=True)
class StateStorage:
    """The journal's backend; ``kind`` is ``sqlite`` or ``mysql``."""

    kind: str = "sqlite"
    host: str = "localhost"
    port: int = DEFAULT_PORT
    user: str = "root"
    password: str = ""
    database: str = DEFAULT_DATABASE
    lease_s: float = DEFAULT_LEASE_S  # seconds (a fraction only in tests)

    @property
    def shared(self) -> bool:
        """Whether more than one controller can use the state (a database server)."""
        return self.kind == "mysql"

    def url(self, *, hide_password: bool = False) -> str:
        """The SQLAlchemy URL of the database (``mysql`` only), as dbd's."""
        from sqlalchemy.engine import URL  # only the controller pays for SQLAlchemy

        url = URL.create(
            "mysql+pymysql",
            username=self.user,
            password=self.password or None,
            host=self.host,
            port=self.port,
            database=self.database,
            query={"charset": "utf8mb4"},
        )
        return url.render_as_string(hide_password=hide_password)

    @property
    def where(self) -> str:
        """The database as log lines and errors name it (never with the password)."""
        return f"mysql://{self.user}@{self.host}:{self.port}/{self.database}"


def parse(settings: dict[str, tuple[str, Where]]) -> StateStorage:
    """StateStorage* and SlurmctldTimeout from slurm.conf's top-level settings."""

    def get(key: str, default: str) -> str:
        return settings.get(key, (default, NOWHERE))[0] or default

    value, where = settings.get("StateStorageType", (TYPES[0], NOWHERE))
    kind = value.lower()
    if kind not in TYPES:
        raise ConfigError(*where, f"bad StateStorageType value '{value}': use {', '.join(TYPES)}")
    mysql_only = [k for k in settings if k.startswith("StateStorage") and k != "StateStorageType"]
    if kind == "state/sqlite" and mysql_only:
        key = mysql_only[0]
        raise ConfigError(*settings[key][1], f"{key} needs StateStorageType=state/mysql")
    port = settings.get("StateStoragePort")
    timeout = settings.get("SlurmctldTimeout")
    return StateStorage(
        kind=kind.removeprefix("state/"),
        host=get("StateStorageHost", "localhost"),
        port=DEFAULT_PORT
        if port is None
        else integer("StateStoragePort", *port, minimum=1, maximum=65535),
        user=get("StateStorageUser", "root"),
        password=get("StateStoragePass", ""),
        database=_database(*settings.get("StateStorageLoc", (DEFAULT_DATABASE, NOWHERE))),
        lease_s=DEFAULT_LEASE_S
        if timeout is None
        else integer("SlurmctldTimeout", *timeout, minimum=3, maximum=65535),
    )


def _database(value: str, where: Where) -> str:
    """A database name the journal can use unquoted: letters, digits and ``_``."""
    if not value or not all(c.isascii() and (c.isalnum() or c == "_") for c in value):
        raise ConfigError(*where, f"bad StateStorageLoc value '{value}': a database name")
    return value


def check_controllers(path: str, hosts: tuple[tuple[str, str], ...], storage: StateStorage) -> None:
    """Refuse more than one SlurmctldHost without shared state: a backup taking
    over from a local disk would serve a queue the primary had moved on from."""
    if len(hosts) > 1 and not storage.shared:
        names = ", ".join(name for name, _ in hosts)
        raise ConfigError(
            path,
            None,
            f"{len(hosts)} SlurmctldHost lines ({names}) need a shared state: "
            "StateStorageType=state/mysql (docs/ha.md); StateSaveLocation on local disk "
            "serves one controller",
        )
