"""MPI types: which Corral serves, how srun lists them, and the refusal of the rest.

Slurm loads an ``mpi/TYPE`` plugin for each step: ``srun --mpi=TYPE``, else
``SLURM_MPI_TYPE``, else slurm.conf's ``MpiDefault``. Corral serves two:

* ``none``: nothing; the tasks start unwired (each alone, unless the program
  wires itself, as ``mpirun`` under an allocation does);
* ``pmi2``: Slurm's PMI-2 plugin, which also answers PMI-1 clients (MPICH's
  default "simple" PMI): each step runner serves its node's tasks over a
  socketpair (``PMI_FD``) and every fence is exchanged through srun
  (``nodeagent/pmi.py``, ``cli/srun/pmifence.py``).

Any other type (``pmix``, ``cray_shasta``, a typo) is refused where srun
resolves it, in the words Slurm's srun uses for a plugin it cannot load; the
daemons refuse an ``MpiDefault`` they cannot serve when they read slurm.conf.

No imports: srun reads this on every start.
"""

from __future__ import annotations

NONE = "none"
PMI2 = "pmi2"
#: The types Corral serves, as ``srun --mpi=list`` prints them.
SERVED = (NONE, PMI2)


def listing() -> str:
    """``srun --mpi=list``'s output (Slurm prints the plugins it finds installed)."""
    return "MPI plugin types are...\n" + "".join(f"\t{name}\n" for name in SERVED)


def refusal(prog: str, name: str) -> list[str]:
    """What srun says of a type it cannot serve, line by line, as Slurm's srun says it of
    a plugin it cannot load (before it exits 1)."""
    return [
        f"{prog}: error: Couldn't find the specified plugin name for mpi/{name} "
        "looking at all files",
        f"{prog}: error: cannot find mpi plugin for mpi/{name}",
        f"{prog}: error: MPI: Cannot create context for mpi/{name}",
        f"{prog}: error: MPI: Unable to load any plugin",
        f"{prog}: error: Invalid MPI type '{name}', --mpi=list for acceptable types",
    ]


def resolve(option: str | None, environ_value: str, default: str) -> str:
    """The step's type: ``--mpi``, else ``SLURM_MPI_TYPE``, else ``MpiDefault`` (else
    none), as written; the caller refuses what ``SERVED`` lacks."""
    for value in (option, environ_value, default):
        if value:
            return value
    return NONE


def wires(name: str) -> bool:
    """Whether a step of type ``name`` gets PMI served to its tasks."""
    return name == PMI2
