"""Which SlurmctldHost line this controller is: the address it listens at, its
clients' socket, and its name in ``scontrol ping`` and the lease (docs/ha.md).

Slurm's slurmctld finds its line by this host's name. Several controllers on one
host (a test, a demonstration) cannot be told apart that way, so the environment
variable ``CORRAL_CTLD_HOST`` names the line instead when set.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from corral.config import ConfigError

#: Names the SlurmctldHost line of this controller, overriding the host's name.
ENV = "CORRAL_CTLD_HOST"


def own_index(path: str, hosts: tuple[tuple[str, str], ...], env: Mapping[str, str]) -> int:
    """The index of this controller's line: the one ``CORRAL_CTLD_HOST`` names, else
    the one of this host's name (short or full); a lone line serves whatever the
    host is called. ``ConfigError`` when no line is this controller's."""
    wanted = env.get(ENV, "")
    names = [wanted] if wanted else _host_names()
    for index, (name, _) in enumerate(hosts):
        if name in names:
            return index
    if wanted:
        raise ConfigError(path, None, f"{ENV}={wanted} names no SlurmctldHost line")
    if len(hosts) == 1:
        return 0
    raise ConfigError(path, None, f"This host ({names[0]}) not a valid controller")


def _host_names() -> list[str]:
    full = socket.gethostname()
    return [full.split(".")[0], full]
