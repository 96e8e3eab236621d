"""SLURM_RESUME_FILE: the jobs a ResumeProgram wakes nodes for, and their nodes.

slurm.conf(5) (22.05) says only that "a job to node mapping is available in JSON
format by reading the temporary file specified by the SLURM_RESUME_FILE environment
variable". What Debian's slurmctld 22.05 writes, seen beside Corral (CLOUD nodes, a
ResumeProgram that copies the file), is one compact JSON line with two keys in this
order::

    {"jobs":[{"job_id":1,"nodes":"node[1-2]"}],"all_nodes":"node[1-2]"}

``jobs`` lists the jobs whose allocation the resume is for (each with all of its
nodes), ``all_nodes`` the program's argument; a resume no job asked for
(``scontrol update State=POWER_UP``) has ``"jobs":[]``. The richer form of later
Slurm (``all_nodes_resume``, ``nodes_alloc``, ``features``, ...) is 23.02's.
Slurmctld hands the program ``/proc/<its pid>/fd/<n>`` of an anonymous memory file,
and so does Corral: nothing is left on disk, and the file goes when the program ends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from controller.model import Job
from corral import hostlist

#: The environment variable that names the file.
VARIABLE = "SLURM_RESUME_FILE"


def content(jobs: Iterable[Job], names: Iterable[str]) -> str:
    """The file's text for a resume of ``names`` on behalf of ``jobs`` (by id)."""
    record = {
        "jobs": [
            {"job_id": job.job_id, "nodes": hostlist.compress(job.nodes)}
            for job in sorted(jobs, key=lambda j: j.job_id)
        ],
        "all_nodes": hostlist.compress(list(names)),
    }
    return json.dumps(record, separators=(",", ":"))


@contextmanager
def memory_file(text: str) -> Iterator[str]:
    """A path other processes of this user can read ``text`` at while the block runs:
    an anonymous memory file of this process, as slurmctld's."""
    fd = os.memfd_create("resume_file", os.MFD_CLOEXEC)
    try:
        os.write(fd, text.encode())
        yield f"/proc/{os.getpid()}/fd/{fd}"
    finally:
        os.close(fd)
