"""Rights from accounting (controller.privilege, controller.principal) and what they
let a caller see (controller.visibility); AuthAltParameters' token rules (corral.authalt)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from scenario import GID, UID, job, slurm_conf

from controller import visibility
from controller.associations import AssocSet
from controller.principal import Principal, principal_for
from controller.privilege import elevate
from corral import authalt, errors
from corral.errors import SlurmError


def _assoc(account: str, user: str = "", parent: str = "root") -> dict[str, str]:
    return {"Account": account, "User": user, "Partition": "", "ParentName": parent}


ASSOCS = AssocSet.from_rows(
    [
        _assoc("root", parent=""),
        _assoc("science"),
        _assoc("chem", parent="science"),
        _assoc("bio"),
        _assoc("chem", "carol"),
        _assoc("bio", "bob"),
    ],
    [
        {"User": "olga", "Def Acct": "bio", "Admin": "Operator"},
        {"User": "ada", "Def Acct": "bio", "Admin": "Administrator"},
        {"User": "bob", "Def Acct": "bio", "Admin": "None"},
    ],
    [],
    [{"User": "carol", "Account": "science"}],
)
USER = principal_for(UID, GID)


def named(name: str) -> Principal:
    """The test user's principal under another name (the rights follow the name)."""
    return elevate(replace(USER, user=name), ASSOCS)


def test_admin_level_and_coordinators_from_dbd_rows() -> None:
    assert ASSOCS.admin_levels == {"olga": "Operator", "ada": "Administrator"}
    assert ASSOCS.coordinated("carol") == {"science", "chem"}  # and the accounts below
    assert ASSOCS.coordinated("bob") == frozenset()


def test_an_operator_manages_any_job_but_is_not_super_user() -> None:
    olga = named("olga")
    assert olga.is_operator and olga.may_manage(12345, "bio")
    assert not olga.is_super_user and not olga.is_admin
    assert named("ada").is_super_user


def test_a_coordinator_manages_their_accounts_only() -> None:
    carol = named("carol")
    assert carol.may_manage(12345, "chem")
    assert not carol.may_manage(12345, "bio")
    assert not carol.is_operator
    # Over chem's jobs she has an operator's rights (Slurm's "privileged" job update).
    assert carol.privileged_over("chem") and not carol.privileged_over("bio")
    assert named("olga").privileged_over("bio") and not named("bob").privileged_over("bio")


def test_an_ordinary_user_manages_their_own_jobs() -> None:
    bob = named("bob")
    assert bob.may_manage(UID, "bio") and not bob.may_manage(UID + 1, "bio")
    assert elevate(USER, None) is USER


def test_journaled_set_without_coordinators_still_reads() -> None:
    """A set journaled before coordinators were fetched (three kinds of rows)."""
    old = '{"rows": [[], [{"User": "bob", "Def Acct": "bio", "Admin": "Operator"}], []]}'
    assert AssocSet.from_json(old).admin_levels == {"bob": "Operator"}
    assert AssocSet.from_json(ASSOCS.to_json()).coordinators == ASSOCS.coordinators


HIDDEN = slurm_conf(
    "NodeName=n1 CPUs=4 RealMemory=4000",
    "PartitionName=main Nodes=n1 Default=YES",
    "PartitionName=secret Nodes=n1 Hidden=YES",
    "PartitionName=staff Nodes=n1 AllowGroups=corral-no-such-group",
    "PrivateData=jobs,nodes,usage",
)


def test_hidden_and_unusable_partitions_are_not_shown_without_all() -> None:
    assert visibility.shown_partitions(HIDDEN, USER, None, False) == {"main"}
    assert visibility.shown_partitions(HIDDEN, USER, None, True) == {"main", "secret", "staff"}
    root = principal_for(0, 0)
    assert visibility.shown_partitions(HIDDEN, root, None, False) == {"main", "secret", "staff"}


def test_jobs_shown_under_private_data_and_hidden_partitions() -> None:
    jobs = [
        job(1, partitions=("main",)),  # the caller's own
        job(2, partitions=("secret",)),  # their own, in a hidden partition
        job(3, uid=UID + 1, account="chem", partitions=("main",)),
        job(4, uid=UID + 1, account="bio", partitions=("main",)),
    ]

    def shown(who: Principal, *, everything: bool = False, named: bool = False) -> list[int]:
        found = visibility.jobs_shown(jobs, HIDDEN, who, ASSOCS, everything=everything, named=named)
        return [j.job_id for j in found]

    assert shown(USER) == [1]
    assert shown(USER, everything=True) == [1, 2]
    assert shown(USER, named=True) == [1, 2]  # ids named: hidden partitions do not matter
    assert shown(named("carol")) == [1, 3]  # her own (same uid) and chem's: she coordinates science
    assert shown(named("olga")) == [1, 2, 3, 4]  # an operator


def test_private_nodes_refused_to_users() -> None:
    with pytest.raises(SlurmError) as info:
        visibility.check_nodes(HIDDEN, USER)
    assert info.value.code == errors.ESLURM_ACCESS_DENIED
    visibility.check_nodes(HIDDEN, named("olga"))


def test_private_usage_keeps_own_rows_and_the_accounts_above() -> None:
    rows = [("root", ""), ("bio", ""), ("bio", "bob"), ("bio", "eve"), ("science", ""),
            ("chem", ""), ("chem", "carol")]  # fmt: skip
    bob = named("bob")
    seen = visibility.share_rows_shown(rows, bob, ASSOCS, True)
    assert seen == {("root", ""), ("bio", ""), ("bio", "bob")}
    assert visibility.share_rows_shown(rows, bob, ASSOCS, False) == set(rows)


@pytest.mark.parametrize(
    ("text", "lifespan", "disabled", "warned"),
    [
        ("", None, False, False),
        ("max_token_lifespan=3600", 3600, False, False),
        ("jwt_key=/k,disable_token_creation", None, True, False),
        ("max_token_lifespan=soon", None, False, True),
        ("max_token_lifespan=0", None, False, True),
    ],
)
def test_auth_alt_parameters(text: str, lifespan: int | None, disabled: bool, warned: bool) -> None:
    rules = authalt.parse(text)
    assert (rules.max_token_lifespan, rules.disable_token_creation) == (lifespan, disabled)
    assert bool(rules.warnings) == warned
