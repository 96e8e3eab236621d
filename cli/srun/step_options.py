"""srun's job options inside an existing allocation: honoured, warned about, or refused.

Inside a batch job or salloc (``SLURM_JOB_ID``, or ``--jobid``) srun makes no job,
so the options that shape a job either apply to the step or to nothing, and srun
used to drop the ones its step request has no field for without a word. Slurm:

* applies ``--mem``, ``--mem-per-cpu``, ``--mem-per-gpu`` and ``--gres`` to the
  step: a memory limit on its tasks, and memory and generic resources held
  against the job's other steps. Corral does that for memory (the controller
  refuses more than the job has on a node: controller/steps.py) and for GPUs;
  another generic resource with a count is refused. A GPU type is warned
  about: the step takes GPUs of the job's, which Slurm would refuse if of
  another type;
* ignores ``--gres-flags``, ``--sockets-per-node``, ``--cores-per-socket`` and ``-B``
  (the job's allocation made that choice; said once: Slurm 22.05 runs ``srun -B 3`` in
  a job on nodes of two sockets without a word), and ``--mail-type``/``--mail-user``
  (a step is never mailed about) and refuses ``--gpus-per-socket``, which Corral lays out for
  jobs only;
* ignores the job's account, ``--licenses``, partition, ``--prefer`` and QOS,
  ``--exclusive``'s job-level values (``user``, ``mcs``, ``topo``, ``oversubscribe``)
  and the topology options (``--switches``, ``--segment``, Corral's
  ``--topology-level``): the step runs as its job does. Corral says so once, unless
  the value is the job's own.

Plain ``--exclusive`` is a step's default here as in Slurm (its CPUs are its own
unless ``--overlap``) and honoured; the options that shape a step's layout, time
and name reach the controller's ``StepCreate`` (cli/srun/launch.py ``step_request``).
"""

from __future__ import annotations

from cli.halt import Halt

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping

PROG = "srun"
MEMORY = ("mem", "mem-per-cpu", "mem-per-gpu")
#: GPU options whose ``type:`` a step cannot honour (the job's GPUs are the step's).
GPUS = ("gpus", "gpus-per-node", "gpus-per-task", "gres")
#: Job-level options a step runs without, and the allocation's variable holding the job's.
JOB_LEVEL = (
    ("account", "SLURM_JOB_ACCOUNT"),
    ("licenses", ""),  # no variable holds the job's: always said
    ("partition", "SLURM_JOB_PARTITION"),
    ("prefer", ""),  # no variable holds the job's: always said
    ("qos", "SLURM_JOB_QOS"),
)
#: Where the job's nodes are on the network: nothing to a step, which runs on them.
TOPOLOGY = ("switches", "segment", "topology-level")
#: Options that shape the job's allocation alone (which GPUs and CPUs go together).
ALLOCATION = (
    "gres-flags", "sockets-per-node", "cores-per-socket", "extra-node-info", "mail-type",
    "mail-user", "threads-per-core",
)  # fmt: skip
#: ``--exclusive`` values that share or keep the job's nodes: nothing to a step.
JOB_SHARING = ("user", "mcs", "topo", "oversubscribe")
GRES_NOTE = "only GPUs are divided among a job's steps"


def check(options: Mapping[str, str | None], job_id: int, env: Mapping[str, str]) -> list[str]:
    """srun's warnings for ``options`` given to a step of ``job_id``; Halt, in Slurm's
    words, for one that would change what the step does and cannot be honoured.

    ``env`` is srun's environment: the allocation's own when its SLURM_JOB_ID is
    ``job_id``, which tells the job's account, partition and QOS."""
    for key in MEMORY:
        if key in options:
            memory(key, options[key] or "")
    if "gres" in options:
        _gres(options["gres"] or "")
    if "mail-type" in options:
        from corral.mailtype import parse

        try:
            parse(options["mail-type"] or "")
        except ValueError:
            raise Halt(1, f"{PROG}: error: Invalid --mail-type specification") from None
    if "gpus-per-socket" in options:
        raise Halt(1, f"{PROG}: error: --gpus-per-socket is not supported in a job step")
    warnings = [
        f"{PROG}: warning: --{key}={options[key]} has no effect in a job step: it applies "
        "to the job's allocation"
        for key in ALLOCATION
        if key in options
    ]
    warnings += [
        f"{PROG}: warning: the GPU type of --{key}={options[key]} has no effect in a job step: "
        "it takes the job's GPUs, whatever their type"
        for key in GPUS
        if _gpu_typed(key, options.get(key))
    ]
    exclusive = options.get("exclusive")
    if exclusive is not None and exclusive.lower() != "exclusive":
        if exclusive.lower() not in JOB_SHARING:
            raise Halt(1, f"{PROG}: error: Invalid --exclusive specification")
        warnings.append(
            f"{PROG}: warning: --exclusive={exclusive} has no effect in a job step: it applies "
            "to the job's nodes (the step's CPUs are its own unless --overlap)"
        )
    warnings += [
        f"{PROG}: warning: --{key}={options[key]} has no effect in a job step: "
        f"job {job_id}'s nodes are placed"
        for key in TOPOLOGY
        if key in options
    ]
    ours = env.get("SLURM_JOB_ID", env.get("SLURM_JOBID", "")).split("_")[0] == str(job_id)
    for key, variable in JOB_LEVEL:
        value = options.get(key)
        if value is None:
            continue
        job_value = env.get(variable, "") if ours else ""
        if job_value and job_value in value.split(","):
            continue  # the job's own: what the step runs with
        of_job = f" ({job_value})" if job_value else ""
        warnings.append(
            f"{PROG}: warning: --{key}={value} has no effect in a job step: "
            f"job {job_id}'s {key}{of_job} applies"
        )
    return warnings


def _gpu_typed(key: str, value: str | None) -> bool:
    """Whether a GPU option names a type: ``--gpus=a100:2``, ``--gres=gpu:a100:2``."""
    if not value:
        return False
    if key != "gres":
        return ":" in value
    for item in value.split(","):
        kind, *given = item.removeprefix("gres/").split(":")
        if kind == "gpu" and (len(given) > 1 or (given and not given[-1].isdigit())):
            return True
    return False


def memory(key: str, value: str) -> int:
    """MiB of a memory option (0: the job's memory); Halt when it is not a size."""
    from corral.units import parse_memory

    try:
        return parse_memory(value)
    except ValueError:
        raise Halt(1, f"{PROG}: error: Invalid --{key} specification") from None


def _gres(value: str) -> None:
    """Refuse a non-GPU generic resource with a count (``name[:type][:count]``)."""
    if value.lower() == "none":
        return
    for item in value.split(","):
        parts = item.removeprefix("gres/").split(":")
        count = parts[-1] if len(parts) > 1 and parts[-1].isdigit() else "1"
        if parts[0] != "gpu" and int(count):
            raise Halt(
                1, f"{PROG}: error: --gres={value} is not supported in a job step: {GRES_NOTE}"
            )
