"""The cluster CA and daemon certificates (corral/certs.py), and TLSType/TLSParameters."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from corral import certs, grpctls, tlsconf
from corral.config import parse
from corral.confsyntax import ConfigError


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tls")
    certs.create_ca(str(where / "ca_cert.pem"), str(where / "ca_key.pem"))
    certs.issue(
        str(where / "ca_cert.pem"),
        str(where / "ca_key.pem"),
        "ctld",
        ["ctl1", "127.0.0.1"],
        str(where / "ctld_cert.pem"),
        str(where / "ctld_cert_key.pem"),
    )
    return where


def test_private_keys_are_mode_0600_and_certificates_world_readable(material: Path) -> None:
    for name in ("ca_key.pem", "ctld_cert_key.pem"):
        assert stat.S_IMODE(os.stat(material / name).st_mode) == 0o600
    for name in ("ca_cert.pem", "ctld_cert.pem"):
        assert stat.S_IMODE(os.stat(material / name).st_mode) == 0o644


def test_a_daemon_certificate_chains_to_the_ca_and_names_its_hosts(material: Path) -> None:
    ca = x509.load_pem_x509_certificate((material / "ca_cert.pem").read_bytes())
    cert = x509.load_pem_x509_certificate((material / "ctld_cert.pem").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["ctl1"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usage) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_issuing_needs_a_host_and_a_readable_ca(tmp_path: Path, material: Path) -> None:
    out = (str(tmp_path / "c.pem"), str(tmp_path / "k.pem"))
    with pytest.raises(certs.CertError, match="host"):
        certs.issue(str(material / "ca_cert.pem"), str(material / "ca_key.pem"), "x", [], *out)
    with pytest.raises(certs.CertError, match="cannot read"):
        certs.issue(str(tmp_path / "none.pem"), str(tmp_path / "none"), "x", ["h"], *out)


def test_a_key_others_can_read_is_refused(tmp_path: Path, material: Path) -> None:
    key = tmp_path / "ctld_cert_key.pem"
    key.write_bytes((material / "ctld_cert_key.pem").read_bytes())
    key.chmod(0o644)
    for name in ("ctld_cert.pem", "ca_cert.pem"):
        (tmp_path / name).write_bytes((material / name).read_bytes())
    tls = tlsconf.parse(None, None, str(tmp_path / "slurm.conf"), [])
    with pytest.raises(grpctls.TlsError, match="readable by others"):
        grpctls.channel_credentials(tls, "ctld")


def test_missing_material_names_the_file_and_the_way_out(tmp_path: Path) -> None:
    tls = tlsconf.parse(None, None, str(tmp_path / "slurm.conf"), [])
    with pytest.raises(grpctls.TlsError) as caught:
        grpctls.channel_credentials(tls)
    assert str(tmp_path / "ca_cert.pem") in str(caught.value)
    assert "TLSType=tls/none" in str(caught.value)


BASE = "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=ALL\n"


def test_no_tls_type_means_tls_with_slurms_default_file_names(tmp_path: Path) -> None:
    conf = parse(BASE, str(tmp_path / "slurm.conf"))
    assert conf.tls.enabled
    assert conf.tls.ca_cert_file == str(tmp_path / "ca_cert.pem")
    assert conf.tls.cert_pair("ctld") == (
        str(tmp_path / "ctld_cert.pem"),
        str(tmp_path / "ctld_cert_key.pem"),
    )


def test_tls_parameters_name_the_files_and_tls_none_asks_for_plaintext(tmp_path: Path) -> None:
    text = BASE + "TLSType=tls/s2n\nTLSParameters=ca_cert_file=/etc/ca.pem,dbd_cert_file=d.pem\n"
    conf = parse(text, str(tmp_path / "slurm.conf"))
    assert conf.tls.enabled and conf.tls.ca_cert_file == "/etc/ca.pem"
    assert conf.tls.cert_pair("dbd")[0] == str(tmp_path / "d.pem")
    assert not parse(BASE + "TLSType=tls/none\n", str(tmp_path / "slurm.conf")).tls.enabled


def test_an_unknown_tls_type_is_an_error_and_an_unknown_parameter_a_warning(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="TLSType=tls/openssl"):
        parse(BASE + "TLSType=tls/openssl\n", str(tmp_path / "slurm.conf"))
    conf = parse(BASE + "TLSParameters=security_policy_version=x\n", str(tmp_path / "s.conf"))
    assert any("security_policy_version" in warning for warning in conf.warnings)


def test_corral_cert_makes_a_ca_and_issues_from_it(tmp_path: Path) -> None:
    from cli.boundary import UsageError
    from cli.corral import cert

    ca_dir, out = tmp_path / "ca", tmp_path / "etc"
    assert cert(["ca", str(ca_dir)]) == 0
    with pytest.raises(UsageError, match="already holds a CA"):
        cert(["ca", str(ca_dir)])  # never overwrites the CA every certificate chains to
    assert cert(["issue", "dbd", "--ca", str(ca_dir), "--host", "db1", "--out", str(out)]) == 0
    ca = x509.load_pem_x509_certificate((ca_dir / "ca_cert.pem").read_bytes())
    x509.load_pem_x509_certificate((out / "dbd_cert.pem").read_bytes()).verify_directly_issued_by(
        ca
    )
    assert stat.S_IMODE(os.stat(out / "dbd_cert_key.pem").st_mode) == 0o600
    with pytest.raises(UsageError, match="--host"):
        cert(["issue", "dbd", "--ca", str(ca_dir)])


def test_daemons_without_their_tls_files_refuse_to_start_and_say_why(tmp_path: Path) -> None:
    """No TLSType and no files: not plaintext, but a clear refusal naming the file."""
    import subprocess
    import sys

    from corral import auth

    conf = tmp_path / "slurm.conf"
    conf.write_text(BASE + f"SlurmctldPort=1\nStateSaveLocation={tmp_path}/state\n")
    auth.create_key(auth.key_path(str(conf)))
    done = subprocess.run(
        [sys.executable, "-m", "controller.main", "-f", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"cannot read TLS key {tmp_path}/ctld_cert_key.pem" in done.stderr
    assert "TLSType=tls/none" in done.stderr
