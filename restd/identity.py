"""Who corral-restd may run as: never root, as slurmrestd refuses (``SLURMRESTD_SECURITY``).

Why: the gateway parses whatever HTTP the network sends it; as root, one bug in
that parsing would be root on the host. slurmrestd refuses to start as the root
user or with the root group unless ``SLURMRESTD_SECURITY=disable_user_check``
(values comma-separated, in any case; an unknown one stops it with "Unexpected
value in SLURMRESTD_SECURITY=..."). Corral follows that rule and that variable.

Unlike slurmrestd's manual, SlurmUser is accepted: corral-restd signs calls for
its token's users with the cluster key, which only root or SlurmUser may own
(``corral/auth.py``), so SlurmUser is the one unprivileged user that can hold it,
and a separate user given the key would hold exactly SlurmUser's power. (Slurm
22.05's slurmrestd, tried on Debian 12, starts as SlurmUser too: its check runs
before slurm.conf is read.) The systemd unit runs it as SlurmUser; ``corral up``,
which runs the whole cluster as whoever starts it, root included, sets
``disable_user_check`` for its own restd alone.

slurmrestd's other values (``disable_unshare_files``, ``disable_unshare_sysv``)
are accepted and change nothing: corral-restd unshares nothing at start, the
unit's sandbox does that work.
"""

from __future__ import annotations

from collections.abc import Mapping

VARIABLE = "SLURMRESTD_SECURITY"
DISABLE_USER_CHECK = "disable_user_check"
KNOWN = frozenset({DISABLE_USER_CHECK, "disable_unshare_files", "disable_unshare_sysv"})


def refusal(uid: int, gid: int, environ: Mapping[str, str]) -> str | None:
    """Why corral-restd must not start as ``uid``:``gid``, in slurmrestd's words; None
    if it may (not root, or root allowed by ``SLURMRESTD_SECURITY``)."""
    values = [v.strip().lower() for v in environ.get(VARIABLE, "").split(",") if v.strip()]
    for value in values:
        if value not in KNOWN:
            return f"Unexpected value in {VARIABLE}={value}"
    if DISABLE_USER_CHECK in values:
        return None
    if uid == 0:
        return "corral-restd should not be run as the root user."
    if gid == 0:
        return "corral-restd should not be run with the root group."
    return None
