"""sbatch's ``--hint`` and ``--threads-per-core``, checked as Slurm 22.05's sbatch
checks them and passed on: the threads of each core the job's tasks use
(``JobSpec.threads_per_core``, ``controller/core/threads.py``) and SLURM_HINT and
SLURM_THREADS_PER_CORE in its environment, which its steps' srun reads.

Measured on Slurm 22.05: nomultithread, compute_bound and memory_bound use one
thread of each core (memory_bound's "one core in each socket" is a minimum that
every node meets: ``-n3`` still gets three cores); multithread all of them.
``--threads-per-core`` and ``-B`` (and ``--ntasks-per-core``, which this sbatch refuses)
beside ``--hint`` drop the hint, as Slurm's sbatch drops it (saying so only under -v, in
``DROPPED``'s words, which salloc and srun share). A hint that holds drops
``--sockets-per-node`` and ``--cores-per-socket`` instead, in either order (measured:
``--cores-per-socket=2 --hint=nomultithread -w n1`` gives ReqB:S:C:T=0:0:*:1 and one
task, ``--sockets-per-node=2 --hint=nomultithread`` Socks/Node=* and one task,
``--cores-per-socket=2 --hint=memory_bound`` ReqB:S:C:T=0:0:1:1).
"""

from __future__ import annotations

from cli.failure import Failure

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Each hint's threads per core (0: all).
HINTS = {"compute_bound": 1, "memory_bound": 1, "multithread": 0, "nomultithread": 1}

#: What Slurm 22.05's sbatch, salloc and srun print under -v (no "error:") when an
#: option more specific than ``--hint`` drops it (measured: ``-v --hint=nomultithread
#: --threads-per-core=1``, and ``--ntasks-per-core=1`` in its place).
DROPPED = (
    "Following options are mutually exclusive with --hint: --ntasks-per-core, "
    "--threads-per-core, -B and --cpu-bind (other then --cpu-bind=verbose). Ignoring --hint."
)

HELP = """Application hint options:
    --hint=             Bind tasks according to application hints
        compute_bound   use all cores in each socket
        memory_bound    use only one core in each socket
        [no]multithread [don't] use extra threads with in-core multi-threading
        help            show this help message"""


def hint(text: str | None) -> dict[str, Any]:
    """``--hint``'s setter: a comma list of Slurm's hint words, in any case; ``help``
    prints them and exits 1, as Slurm's sbatch does."""
    value = text or ""
    for word in value.split(","):
        if word.lower() == "help":
            print(HELP)
            raise Failure(status=1)
        if word.lower() not in HINTS:
            raise Failure(f'unrecognized --hint argument "{word}", see --hint=help', status=1)
    return {"hint": value}


def threads(fields: Mapping[str, Any]) -> int:
    """The threads of each core the job's tasks use: --threads-per-core's, else its
    hint's (the last word that says), else 0 (all)."""
    if "threads_per_core" in fields:
        return int(fields["threads_per_core"])
    count = 0
    for word in fields.get("hint", "").split(","):
        if word:
            count = HINTS[word.lower()]
    return count


def cores(fields: Mapping[str, Any]) -> int:
    """The cores of each socket the job asks for: under a hint that holds 1 for
    memory_bound ("one core in each socket", ReqB:S:C:T=0:0:1:1 on Slurm 22.05) and
    0 (any) for the others, else --cores-per-socket's or -B's (0: any)."""
    if fields.get("hint") and not dropped(fields):
        return 1 if "memory_bound" in fields["hint"].lower().split(",") else 0
    return int(fields.get("cores_per_socket", 0))


def sockets(fields: Mapping[str, Any]) -> int:
    """The sockets of each node the job asks for: --sockets-per-node's or -B's
    unless a hint that holds drops them (0: any)."""
    if fields.get("hint") and not dropped(fields):
        return 0
    return int(fields.get("sockets_per_node", 0))


def dropped(fields: Mapping[str, Any]) -> bool:
    """Whether ``--threads-per-core`` or ``-B`` (which sets the threads, even to any)
    drops the job's ``--hint`` (``DROPPED``)."""
    return bool(fields.get("hint")) and "threads_per_core" in fields


def environment(fields: Mapping[str, Any]) -> dict[str, str]:
    """SLURM_HINT (unless --threads-per-core dropped the hint) and
    SLURM_THREADS_PER_CORE, as Slurm's sbatch exports them to the job."""
    env: dict[str, str] = {}
    if fields.get("hint") and "threads_per_core" not in fields:
        env["SLURM_HINT"] = fields["hint"]
    count = threads(fields)
    if count:
        env["SLURM_THREADS_PER_CORE"] = str(count)
    return env
