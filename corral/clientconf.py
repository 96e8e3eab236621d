"""The few slurm.conf settings a client command needs, read without the daemons' model.

A client needs StateSaveLocation (where the controller's socket is), the
ClusterName and the controller's host (``scontrol ping``), and a couple of
ports and limits. ``corral.config.load`` builds the whole validated model with
dataclasses, ``re`` and the hostlist and time parsers, which costs more than a
client's whole start-up budget; ``client_settings`` reads the same file with
the same line reader (``corral.confsyntax``: comments, continuations, quotes,
Include, case-insensitive keys) and checks only the settings it returns.
Syntax errors are the same ``path:line: message`` errors either way; node and
partition lines are skipped, so mistakes in them are the daemons' to report.
"""

from __future__ import annotations

from corral import bcastparams, confsyntax
from corral.confsyntax import (
    MAX_ARRAY_SIZE,
    NOWHERE,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMD_SPOOL_DIR,
    STATE_SAVE_LOCATION,
    ConfigError,
    Where,
    controllers,
    default_path,
    integer,
    port_range,
)

TYPE_CHECKING = False  # typing costs a client's start-up time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

#: The top-level keys read here, lowercase -> Slurm's spelling.
_WANTED = {
    key.lower(): key
    for key in (
        "ClusterName",
        "StateSaveLocation",
        "SlurmdSpoolDir",
        "SlurmctldPort",
        "SlurmdPort",
        "MaxArraySize",
        "KillOnBadExit",
        "ControlMachine",
        "ControlAddr",
        "BackupController",
        "BackupAddr",
        "SrunProlog",
        "SrunEpilog",
        "MpiDefault",
        "BcastParameters",
        "BcastExclude",
        "SlurmctldTimeout",
    )
}


class ClientSettings:
    """What a client command reads from slurm.conf. Immutable by convention.

    ``controller_hosts`` lists (host name, address) pairs, the primary first.
    """

    __slots__ = (
        "bcast",
        "bcast_exclude",
        "cluster_name",
        "controller_hosts",
        "kill_on_bad_exit",
        "max_array_size",
        "mpi_default",
        "path",
        "slurmctld_port",
        "slurmctld_timeout",
        "slurmd_port",
        "slurmd_spool_dir",
        "srun_epilog",
        "srun_prolog",
        "state_save_location",
    )

    def __init__(
        self,
        *,
        path: str,
        cluster_name: str,
        controller_hosts: tuple[tuple[str, str], ...],
        state_save_location: str,
        slurmctld_port: int,
        slurmd_port: int,
        max_array_size: int,
        slurmd_spool_dir: str = SLURMD_SPOOL_DIR,
        kill_on_bad_exit: bool = False,
        srun_prolog: str = "",
        srun_epilog: str = "",
        mpi_default: str = "",
        bcast: bcastparams.BcastParams | None = None,
        bcast_exclude: tuple[str, ...] = bcastparams.DEFAULT_EXCLUDE,
        slurmctld_timeout: int = 10,
    ) -> None:
        self.path = path
        self.cluster_name = cluster_name
        self.controller_hosts = controller_hosts
        self.state_save_location = state_save_location
        self.slurmctld_port = slurmctld_port
        self.slurmd_port = slurmd_port
        self.max_array_size = max_array_size
        self.slurmd_spool_dir = slurmd_spool_dir
        self.kill_on_bad_exit = kill_on_bad_exit
        self.srun_prolog = srun_prolog  # SrunProlog and SrunEpilog: run by srun itself
        self.srun_epilog = srun_epilog
        self.mpi_default = mpi_default  # as written: srun refuses a type it cannot serve
        self.bcast = bcast or bcastparams.BcastParams()  # sbcast's defaults
        self.bcast_exclude = bcast_exclude
        self.slurmctld_timeout = slurmctld_timeout  # how long a backup may take to serve

    @property
    def controller_host(self) -> tuple[str, str]:
        """The primary controller's (host name, address)."""
        return self.controller_hosts[0]

    @property
    def failover_s(self) -> float:
        """How long a client waits for some controller to serve when there are
        several (a backup needs SlurmctldTimeout to see the primary gone, then
        loads the state): twice SlurmctldTimeout; none with one controller."""
        return 2.0 * self.slurmctld_timeout if len(self.controller_hosts) > 1 else 0.0

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"ClientSettings({fields})"


class _ClientReader(confsyntax.Reader):
    """Keeps the wanted top-level keys (last one wins) and the SlurmctldHost lines."""

    def __init__(self) -> None:
        self.settings: dict[str, tuple[str, Where]] = {}
        self.hosts: list[tuple[str, Where]] = []

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        for key, value in found:
            lowered = key.lower()
            if lowered in confsyntax.RECORD_TYPES:
                return  # the rest of the line belongs to the record
            if lowered == "slurmctldhost":
                self.hosts.append((value, where))
            elif lowered in _WANTED:
                self.settings[_WANTED[lowered]] = (value, where)

    def cluster_name(self) -> str | None:
        entry = self.settings.get("ClusterName")
        return None if entry is None else entry[0]


def client_settings(path: str | None = None) -> ClientSettings:
    """Read slurm.conf (``$SLURM_CONF`` or the standard path unless given) for a client.

    Raises ``ConfigError`` (``path:line: message``) as ``corral.config.load``
    would for the lines and settings it reads; the values agree with the full
    model's (``tests/unit/test_clientconf.py`` holds them side by side).
    """
    path = path or default_path()
    reader = _ClientReader()
    reader.read(path)
    settings = reader.settings
    cluster = settings.get("ClusterName")
    if cluster is None or not cluster[0]:
        raise ConfigError(path, None, "ClusterName needs to be specified")
    hosts = controllers(reader.hosts, settings, path)
    ctld_ports = settings.get("SlurmctldPort")
    slurmd_port = settings.get("SlurmdPort")
    array_size = settings.get("MaxArraySize")
    bad_exit = settings.get("KillOnBadExit")
    exclude = _read(bcastparams.parse_exclude, settings.get("BcastExclude"))
    timeout = settings.get("SlurmctldTimeout")
    return ClientSettings(
        path=path,
        cluster_name=cluster[0].lower(),
        controller_hosts=hosts,
        state_save_location=settings.get("StateSaveLocation", (STATE_SAVE_LOCATION, NOWHERE))[0],
        slurmd_spool_dir=settings.get("SlurmdSpoolDir", (SLURMD_SPOOL_DIR, NOWHERE))[0],
        slurmctld_port=(
            SLURMCTLD_PORT if ctld_ports is None else port_range("SlurmctldPort", *ctld_ports)[0]
        ),
        slurmd_port=(
            SLURMD_PORT
            if slurmd_port is None
            else integer("SlurmdPort", *slurmd_port, minimum=1, maximum=65535)
        ),
        max_array_size=(
            MAX_ARRAY_SIZE if array_size is None else integer("MaxArraySize", *array_size)
        ),
        kill_on_bad_exit=bad_exit is not None and integer("KillOnBadExit", *bad_exit) != 0,
        srun_prolog=settings.get("SrunProlog", ("", NOWHERE))[0],
        srun_epilog=settings.get("SrunEpilog", ("", NOWHERE))[0],
        mpi_default=settings.get("MpiDefault", ("", NOWHERE))[0],
        bcast=_read(bcastparams.parse, settings.get("BcastParameters")),
        bcast_exclude=bcastparams.DEFAULT_EXCLUDE if exclude is None else exclude,
        slurmctld_timeout=(
            10
            if timeout is None
            else integer("SlurmctldTimeout", *timeout, minimum=3, maximum=65535)
        ),
    )


def _read(read: Callable[[str], T], setting: tuple[str, Where] | None) -> T | None:
    """``read`` of a setting's value (None when unset), its ValueError a ConfigError."""
    if setting is None:
        return None
    value, where = setting
    try:
        return read(value)
    except ValueError as exc:
        raise ConfigError(*where, str(exc)) from None
