"""What the tests that depend on a privilege check first."""

from __future__ import annotations

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
