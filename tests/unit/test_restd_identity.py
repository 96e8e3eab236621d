"""restd/identity.py: corral-restd refuses root as slurmrestd does, and reads
SLURMRESTD_SECURITY as slurmrestd 22.05 does (values in any case; an unknown one stops it)."""

from __future__ import annotations

import pytest

from restd.identity import refusal


@pytest.mark.parametrize(
    ("uid", "gid", "security", "expected"),
    [
        (0, 0, "", "corral-restd should not be run as the root user."),
        (64030, 0, "", "corral-restd should not be run with the root group."),
        (64030, 64030, "", None),
        (0, 0, "disable_user_check", None),
        (0, 0, "disable_unshare_files,DISABLE_USER_CHECK", None),
        (0, 0, "disable_unshare_sysv", "corral-restd should not be run as the root user."),
        (64030, 64030, "disable_user_check,bogus", "Unexpected value in SLURMRESTD_SECURITY=bogus"),
    ],
    ids=["root", "root group", "SlurmUser", "allowed", "allowed in any case", "other value", "bad"],
)
def test_restd_refuses_root_as_slurmrestd_does(
    uid: int, gid: int, security: str, expected: str | None
) -> None:
    assert refusal(uid, gid, {"SLURMRESTD_SECURITY": security}) == expected
