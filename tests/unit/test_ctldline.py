"""Which SlurmctldHost line a controller is (controller/ctldline.py)."""

from __future__ import annotations

import socket

import pytest

from controller.ctldline import ENV, own_index
from corral.config import ConfigError

HOSTS = (("ctl1", "127.0.0.1"), ("ctl2", "127.0.0.2"))


def test_the_environment_names_the_line() -> None:
    assert own_index("slurm.conf", HOSTS, {ENV: "ctl2"}) == 1
    assert own_index("slurm.conf", HOSTS, {ENV: "ctl1"}) == 0


def test_the_host_name_finds_the_line_as_slurmctld_does() -> None:
    here = socket.gethostname().split(".")[0]
    assert own_index("slurm.conf", (("ctl1", "a"), (here, "b")), {}) == 1


def test_a_lone_line_serves_whatever_the_host_is_called() -> None:
    assert own_index("slurm.conf", (("elsewhere", "10.0.0.1"),), {}) == 0


def test_a_host_of_no_line_is_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        own_index("slurm.conf", HOSTS, {})
    here = socket.gethostname().split(".")[0]
    assert str(refused.value) == f"slurm.conf: This host ({here}) not a valid controller"
    with pytest.raises(ConfigError, match="CORRAL_CTLD_HOST=ctl9 names no SlurmctldHost line"):
        own_index("slurm.conf", HOSTS, {ENV: "ctl9"})
