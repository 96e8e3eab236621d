"""The cluster's certificate authority and the daemons' certificates (``corral cert``).

Every internal gRPC connection is TLS (``corral.tls``), and TLS needs a CA all
components trust and a certificate per daemon that chains to it. ``corral up``
makes them for its one-machine cluster; on a real cluster the administrator runs
``corral cert ca DIR`` once and ``corral cert issue NAME --host H`` per daemon,
or brings certificates from the site's own CA (any PEM certificates work).

Keys are EC P-256: generating and signing take well under a millisecond each, so
a test suite can give every cluster fresh material. Every certificate names its
hosts and addresses as subject alternative names (gRPC checks the name a client
dialled against them) and may be used for both ends of a connection, since the
controller is a server to the agents and a client of dbd (which asks for
certificates from its clients). Private keys are written mode 0600, created
without ever being readable by others.
"""

from __future__ import annotations

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from corral.errors import CorralError

#: How long a CA and a daemon certificate stay valid.
CA_DAYS = 3650
CERT_DAYS = 825


class CertError(CorralError):
    """A certificate or key that cannot be read, written or used."""


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Corral"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(path: str, key: ec.EllipticCurvePrivateKey) -> None:
    """The key in PEM, mode 0600 from its creation (a replaced file is removed first)."""
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)


def _write_cert(path: str, cert: x509.Certificate) -> None:
    with open(path + ".tmp", "wb") as out:
        out.write(cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(path + ".tmp", 0o644)
    os.replace(path + ".tmp", path)


def create_ca(cert_path: str, key_path: str, name: str = "Corral cluster CA") -> None:
    """A new self-signed CA: its certificate at ``cert_path``, its key at ``key_path``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    _write_cert(cert_path, cert)


def _load_ca(cert_path: str, key_path: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        with open(cert_path, "rb") as src:
            cert = x509.load_pem_x509_certificate(src.read())
        with open(key_path, "rb") as src:
            key = serialization.load_pem_private_key(src.read(), password=None)
    except OSError as exc:
        raise CertError(f"cannot read {exc.filename}: {exc.strerror}") from None
    except ValueError as exc:
        raise CertError(f"{cert_path} or {key_path}: not a PEM certificate or key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{key_path}: the CA key must be an EC key")
    return cert, key


def _alt_names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def issue(
    ca_cert_path: str,
    ca_key_path: str,
    name: str,
    hosts: list[str],
    cert_path: str,
    key_path: str,
) -> None:
    """A certificate for daemon ``name`` on ``hosts`` (names or addresses), signed by the CA."""
    if not hosts:
        raise CertError(f"certificate {name}: at least one host name or address is needed")
    ca_cert, ca_key = _load_ca(ca_cert_path, ca_key_path)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_alt_names(hosts)), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
