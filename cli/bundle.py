"""``--container``: the OCI bundle a job or step runs in, checked where the user sees it.

sbatch(1), salloc(1) and srun(1) take ``--container=PATH``, an OCI bundle: a
directory holding ``config.json`` (and, usually, the ``rootfs`` it names). The
nodes read it at launch, when a mistake could only fail the job after its wait
in the queue; so the client that can see the path refuses one that is not a
bundle now (``sbatch: error: ...``), as it refuses any other bad option. A
relative path is made absolute against the working directory here, since the
nodes cannot know what it was relative to. (Slurm itself checks nothing at
submission; its ``slurmstepd`` fails the launch.)
"""

from __future__ import annotations

import os

#: The file that makes a directory an OCI bundle (OCI runtime-spec, "Filesystem Bundle").
CONFIG = "config.json"


def bundle_error(path: str) -> str | None:
    """Why ``path`` (absolute) is not an OCI bundle; None when it is one."""
    if not os.path.isdir(path):
        return f"--container={path}: not an OCI bundle: no such directory"
    if not os.path.isfile(os.path.join(path, CONFIG)):
        return f"--container={path}: not an OCI bundle: no {CONFIG} in it"
    return None


def absolute(path: str, cwd: str) -> str:
    """``path`` made absolute against ``cwd`` and normalized."""
    return os.path.normpath(os.path.join(cwd, path))
