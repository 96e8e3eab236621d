"""TLSType and TLSParameters: whether internal connections use TLS, and the files for it.

The keys are Slurm's (25.05): ``TLSType=tls/s2n`` turns TLS on (Corral speaks it
through gRPC's own TLS, so the plugin name only says "TLS"), ``TLSType=tls/none``
turns it off, and ``TLSParameters`` names the PEM files::

    TLSParameters=ca_cert_file=/etc/slurm/ca_cert.pem,ctld_cert_file=...,ctld_cert_key_file=...

with ``ca_cert_file``, and ``NAME_cert_file`` / ``NAME_cert_key_file`` for each
daemon NAME of ``ctld`` (the controller), ``dbd``, ``restd`` and ``slurmd`` (node
agents). A file not named is Slurm's default name in the directory of the
configuration file (``ca_cert.pem``, ``ctld_cert.pem``, ``ctld_cert_key.pem``, ...);
a relative path is taken from that directory too.

Where Corral departs from Slurm: a configuration **without TLSType** means TLS,
not plaintext. Slurm's default is ``tls/none``, but a cluster key or a job script
on the wire in clear is not something to get by leaving a line out; an existing
slurm.conf without the key keeps working once the CA and certificates exist
(``corral cert``), or says ``TLSType=tls/none`` to ask for plaintext. Daemons
that cannot read the files they need refuse to start, naming the file.

Only the parsing lives here (no gRPC import): ``corral.grpctls`` makes the
channels and ports from what this returns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from corral.confsyntax import ConfigError, Where

#: The daemons that have certificates, by the names TLSParameters uses.
ROLES = ("ctld", "dbd", "restd", "slurmd")
TLS_TYPES = ("tls/s2n", "tls/none")


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """Whether TLS is on, and the PEM files: the CA and each role's (certificate, key)."""

    enabled: bool = True
    ca_cert_file: str = ""
    files: tuple[tuple[str, str, str], ...] = ()  # (role, certificate, key)

    def cert_pair(self, role: str) -> tuple[str, str]:
        """(certificate, key) files of ``role`` (one of ``ROLES``)."""
        for name, cert, key in self.files:
            if name == role:
                return cert, key
        raise KeyError(role)


def parse(
    tls_type: tuple[str, Where] | None,
    parameters: tuple[str, Where] | None,
    config_path: str,
    warnings: list[str],
) -> TlsConfig:
    """The TLS settings of a configuration file at ``config_path``; ConfigError if invalid."""
    enabled = True
    if tls_type is not None:
        value, where = tls_type
        if value.strip().lower() not in TLS_TYPES:
            raise ConfigError(*where, f"TLSType={value}: expected one of {', '.join(TLS_TYPES)}")
        enabled = value.strip().lower() == "tls/s2n"
    base = os.path.dirname(os.path.abspath(config_path))
    named: dict[str, str] = {}
    if parameters is not None:
        text, where = parameters
        known = {"ca_cert_file"} | {
            f"{role}_{kind}" for role in ROLES for kind in ("cert_file", "cert_key_file")
        }
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            key, equals, value = item.partition("=")
            key = key.strip().lower()
            if key not in known:
                warnings.append(f"{where[0]}:{where[1]}: TLSParameters: '{key}' ignored")
                continue
            if not equals or not value.strip():
                raise ConfigError(*where, f"TLSParameters: {key} needs a file name")
            named[key] = value.strip()

    def path(key: str) -> str:
        return os.path.join(base, named.get(key, key.replace("_file", "") + ".pem"))

    files = tuple(
        (role, path(f"{role}_cert_file"), path(f"{role}_cert_key_file")) for role in ROLES
    )
    return TlsConfig(
        enabled=enabled,
        ca_cert_file=path("ca_cert_file"),
        files=files,
    )
