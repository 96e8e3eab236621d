"""License lists: the one grammar (corral/licenses.py), slurm.conf's Licenses=, a job's
request checked against it (controller/licenseadmit.py), scontrol update's Licenses=,
and squeue -L's match."""

from __future__ import annotations

import pytest

from cli.squeue import asks_for
from controller.core.snapshot import ResvView
from controller.jobstate import JobState
from controller.jobupdate import changes, parse
from controller.licenseadmit import checked
from controller.licenseviews import reserved, tracked
from controller.views import tres
from corral import errors
from corral.confsyntax import ConfigError
from corral.errors import SlurmError
from corral.licenses import LicenseSyntaxError, canonical
from corral.licenses import parse as parse_licenses
from restd.jobs import spec_from_description
from tests.unit.scenario import NOW, job, slurm_conf

CONF = slurm_conf("Licenses=fluent:30,ansys,matlab@flex:5")


def test_a_name_without_a_count_is_one_and_a_repeated_name_adds_up() -> None:
    assert parse_licenses("fluent:30,ansys") == (("fluent", 30), ("ansys", 1))
    assert parse_licenses(" fluent:1 , fluent:2") == (("fluent", 3),)
    assert parse_licenses("") == ()
    assert canonical("ansys,fluent:2") == "ansys:1,fluent:2"


@pytest.mark.parametrize(
    "text", ["fluent:", "fluent:0", "fluent:-1", "fluent:x", ":3", "a|b", "a,"]
)
def test_a_malformed_list_is_refused(text: str) -> None:
    with pytest.raises(LicenseSyntaxError):
        parse_licenses(text)


def test_slurm_conf_licenses_are_kept_in_order_and_a_bad_list_stops_the_daemon() -> None:
    assert CONF.licenses == (("fluent", 30), ("ansys", 1), ("matlab@flex", 5))
    assert slurm_conf().licenses == ()
    with pytest.raises(ConfigError, match=r"Licenses=fluent:many: invalid count"):
        slurm_conf("Licenses=fluent:many")


def test_a_job_may_ask_only_for_configured_licenses_and_no_more_than_there_are() -> None:
    assert checked("ansys,fluent:30", CONF) == "ansys:1,fluent:30"
    assert checked("", CONF) == ""
    for bad in ("nastran", "fluent:31", "ansys:2", "fluent:0", "fluent|ansys"):
        with pytest.raises(SlurmError) as refused:
            checked(bad, CONF)
        assert refused.value.code == errors.ESLURM_INVALID_LICENSES
        assert str(refused.value) == "Invalid license specification"


def test_scontrol_update_changes_licenses_of_a_pending_job_only() -> None:
    update = parse({"Licenses": "fluent:2"}, NOW)
    assert update.licenses == "fluent:2" and update.pending_only
    assert changes(job(1), update, privileged=False) == {"licenses": "fluent:2"}
    running = job(1, state=JobState.RUNNING, nodes=("n1",), licenses="fluent:1")
    with pytest.raises(SlurmError) as refused:
        changes(running, update, privileged=True)
    assert refused.value.code == errors.ESLURM_JOB_NOT_PENDING


def test_tres_lists_carry_the_licenses_accounting_tracks() -> None:
    tracking = slurm_conf("Licenses=fluent:30,ansys", "AccountingStorageTRES=license/fluent")
    assert tracked("fluent:2,ansys:1", tracking) == (("fluent", 2),)
    assert tracked("fluent:2", CONF) == ()  # tracked only when AccountingStorageTRES says
    shown = tres(4, 0, 1, licenses=(("fluent", 2),))
    assert shown == "cpu=4,node=1,billing=4,license/fluent=2"


def test_a_rest_description_asks_for_licenses_as_sbatch_does() -> None:
    desc = {"licenses": "fluent:2", "environment": ["A=1"]}
    spec = spec_from_description(desc, "#!/bin/sh\n", "/home/x", "restd", [])
    assert spec["licenses"] == "fluent:2"


def test_squeue_selects_jobs_asking_for_any_named_license() -> None:
    assert asks_for("fluent:2,ansys:1", ["ansys"])
    assert asks_for("fluent:2", ["matlab", "fluent"])
    assert not asks_for("fluent:2", ["flu"])
    assert not asks_for("", ["fluent"])


def test_reserved_counts_the_reservations_active_now_with_nodes_or_without() -> None:
    """scontrol show licenses' Reserved= (measured on Slurm 22.05): the licenses of every
    reservation whose window holds now, one of licenses alone (no nodes) as one with nodes;
    a reservation not yet started or already ended keeps none."""
    alone = ResvView("lic", frozenset(), NOW - 10, NOW + 60, (("foo", 2),), any_nodes=True)
    noded = ResvView("n", frozenset({"n1"}), NOW, NOW + 60, (("foo", 1), ("bar", 3)))
    later = ResvView("later", frozenset(), NOW + 1, NOW + 60, (("foo", 4),), any_nodes=True)
    ended = ResvView("ended", frozenset({"n2"}), NOW - 60, NOW, (("bar", 1),))
    assert reserved([alone, noded, later, ended], NOW) == {"foo": 3, "bar": 3}
    assert reserved([later, ended], NOW) == {}
