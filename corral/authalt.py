"""slurm.conf's AuthAltParameters, as the controller applies them to ``scontrol token``.

``max_token_lifespan=<seconds>``: no token for an ordinary user may live longer
(root and SlurmUser are not limited, as slurm.conf(5) says); a value that is
not a positive number sets no limit, as slurmctld does, with a warning.
``disable_token_creation``: only root and SlurmUser may get tokens. Words this
module does not know are left to whoever reads them (``jwt_key=`` and the like).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AuthAltParams:
    """The token rules of AuthAltParameters; ``warnings`` for the daemon's log."""

    max_token_lifespan: int | None = None  # seconds; None: no limit
    disable_token_creation: bool = False
    warnings: tuple[str, ...] = ()


def parse(text: str) -> AuthAltParams:
    """AuthAltParameters' comma list (``key=value`` or bare words) as a record."""
    lifespan: int | None = None
    disabled = False
    warnings: list[str] = []
    for word in (w.strip() for w in text.split(",")):
        key, _, value = word.partition("=")
        key = key.strip().lower()
        if key == "disable_token_creation":
            disabled = True
        elif key == "max_token_lifespan":
            value = value.strip()
            if value.isdigit() and int(value) > 0:
                lifespan = int(value)
            else:
                lifespan = None
                warnings.append(
                    "Invalid AuthAltParameters max_token_lifespan option, no limit enforced"
                )
    return AuthAltParams(lifespan, disabled, tuple(warnings))


def from_settings(settings: Mapping[str, str]) -> AuthAltParams:
    """The record for a slurm.conf's top-level settings."""
    return parse(settings.get("AuthAltParameters", ""))
