"""scontrol token against a live controller."""

from __future__ import annotations

import time

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
