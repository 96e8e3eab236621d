"""scontrol token against a live controller."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.corral import restd_env
from corral import auth, tokens
from tests.integration.cluster import Cluster


def test_scontrol_token_mints_a_jwt_the_cluster_key_verifies(cluster: Cluster) -> None:
    key = auth.Keys.derive(auth.load_key(auth.key_path(cluster.conf))).jwt
    out = cluster.run("scontrol", "token").stdout
    assert out.startswith("SLURM_JWT=") and out.endswith("\n")
    assert tokens.user_of(key, out.strip().split("=", 1)[1], int(time.time())) == "root"
    other = cluster.run("scontrol", "token", "lifespan=60", "username=nobody").stdout
    token = other.strip().split("=", 1)[1]
    assert tokens.user_of(key, token, int(time.time())) == "nobody"  # root may ask for others
    assert tokens.user_of(key, token, int(time.time()) + 55) == "nobody"
    bad = cluster.run("scontrol", "token", "lifespan=soon", check=False)
    assert (bad.returncode, bad.stderr) == (1, "Invalid lifespan value: soon\n")


def test_a_jwt_key_file_signs_the_tokens_and_nothing_else(make_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """AuthAltParameters=jwt_key=PATH: scontrol token signs with that file's bytes (Slurm's
    key file), and the cluster's other keys are unchanged (the agents still attach)."""
    jwt_file = tmp_path / "jwt_hs256.key"
    jwt_file.write_bytes(os.urandom(32))
    jwt_file.chmod(0o600)
    cluster = make_cluster(settings=(f"AuthAltParameters=jwt_key={jwt_file}",))
    token = cluster.run("scontrol", "token").stdout.strip().split("=", 1)[1]
    assert tokens.user_of(jwt_file.read_bytes(), token, int(time.time())) == "root"
    derived = auth.Keys.derive(auth.load_key(auth.key_path(cluster.conf))).jwt
    with pytest.raises(tokens.TokenError):
        tokens.user_of(derived, token, int(time.time()))
    jwt_file.chmod(0o644)
    restd = subprocess.run(
        [sys.executable, "-m", "restd.main", "-f", cluster.conf, "127.0.0.1:1"],
        env={**os.environ, **restd_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert restd.returncode == 1
    assert f"JWT key {jwt_file} is insecure: mode 0644" in restd.stderr
