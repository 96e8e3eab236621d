"""What the tests that need privileges check first: fail under CI (root there), else skip."""

from __future__ import annotations

import os

import pytest

#: The capability that lowering a process's oom_score_adj needs (linux/capability.h).
CAP_SYS_RESOURCE = 24


def may_lower_oom_score() -> bool:
    """True if this process holds CAP_SYS_RESOURCE: root, but not the root of every
    container (Docker's default set lacks it)."""
    with open("/proc/self/status") as src:
        for line in src:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def require_oom_protection() -> None:
    """Skip the test where oom_score_adj cannot be lowered; under CI, fail it."""
    if may_lower_oom_score():
        return
    reason = "lowering oom_score_adj needs CAP_SYS_RESOURCE (root)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)
