"""The SLURM_* environment of a batch job, as Slurm sets it.

Built by the controller at launch because only it knows the allocation; the
node agent adds what only the node knows (SLURMD_NODENAME, SLURM_TASK_PID,
HOSTNAME, SLURM_CONF). See docs/reference in slurm-interfaces.md section 2.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from controller.gpuspec import tasks_held
from controller.model import Job, Payload
from controller.tasklayout import block_counts
from corral import arrayspec, hostlist


def run_length(values: list[int]) -> str:
    """``[2, 2, 1]`` -> ``2(x2),1``: Slurm's per-node list form."""
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        count = j - i
        out.append(f"{values[i]}(x{count})" if count > 1 else str(values[i]))
        i = j
    return ",".join(out)


def _room(job: Job) -> list[int]:
    """The tasks each node holds: its CPUs over ``--cpus-per-task`` (at least one), at
    most ``--ntasks-per-node``; the CPUs it may use, one thread of each core under
    ``--hint=nomultithread`` (core/threads.py)."""
    cpt = max(job.cpus_per_task, 1)
    room = [max(cpus // cpt, 1) for cpus in job.usable_cpus]
    if job.ntasks_per_node:
        room = [min(r, job.ntasks_per_node) for r in room]
    return room


def tasks_per_node(job: Job) -> list[int]:
    """The job's ``num_tasks`` over its nodes by Slurm's block layout over the CPUs
    each holds (``controller/tasklayout.py``): a step's task slots."""
    return list(block_counts(_room(job), job.num_tasks))


def batch_tasks_per_node(job: Job) -> list[int]:
    """SLURM_TASKS_PER_NODE as Slurm 22.05 gives a job: with ``-n``, the tasks
    ``scontrol show job`` counts (NumTasks, which GPUs per task may raise above
    SLURM_NTASKS: ``--gres=gpu:2 --gpus-per-task=1 -n3 -N2`` gives ``2(x2)``) laid
    out by block; without ``-n``, as many tasks as each node holds (``--exclusive``
    alone on 8 CPUs: ``8``), as measured."""
    if not job.tasks_given:
        return _room(job)
    return list(block_counts(_room(job), tasks_held(job)))


#: What tells a job's programs which GPUs (or shares of one) it was granted: only
#: the controller sets these, never the submitter, so that they are true. The node
#: agent fences by the launch's typed grant (``GpuGrant``), not by these.
GRANTS = (
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    "SLURM_SHARDS_ON_NODE",
)


def without_grants(env: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """``env`` less the GPU grants a submitter may have carried in (``sbatch`` run
    inside a GPU job, or a forged variable): the controller sets its own."""
    return {k: v for k, v in dict(env).items() if k not in GRANTS}


def batch_environment(job: Job, payload: Payload, cluster: str) -> dict[str, str]:
    """The environment the batch script starts with (before node additions)."""
    env = without_grants(payload.environment)
    nodelist = hostlist.compress(job.nodes)
    values = {
        "SLURM_JOB_ID": job.job_id,
        "SLURM_JOBID": job.job_id,
        "SLURM_JOB_NAME": job.name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": len(job.nodes),
        "SLURM_NNODES": len(job.nodes),
        "SLURM_NTASKS": job.num_tasks,
        "SLURM_NPROCS": job.num_tasks,
        "SLURM_JOB_CPUS_PER_NODE": run_length(list(job.usable_cpus)),
        "SLURM_TASKS_PER_NODE": run_length(batch_tasks_per_node(job)),
        "SLURM_CPUS_ON_NODE": job.usable_cpus[0],
        "SLURM_SUBMIT_DIR": job.submit_dir or job.work_dir,
        "SLURM_SUBMIT_HOST": job.submit_host,
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_QOS": job.qos,
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_UID": job.uid,
        "SLURM_JOB_GID": job.gid,
        "SLURM_JOB_GROUP": job.group,
        "SLURM_JOB_START_TIME": job.start_time,
        "SLURM_JOB_END_TIME": job.end_time,
        "SLURM_PROCID": 0,
        "SLURM_LOCALID": 0,
        "SLURM_NODEID": 0,
        "SLURM_GTIDS": 0,
        "SLURM_PRIO_PROCESS": job.nice,
        "SLURM_RESTART_COUNT": job.restarts,
        "SLURM_NODE_ALIASES": "(null)",
        "ENVIRONMENT": "BATCH",
        "OMPI_MCA_plm_slurm_args": "--external-launcher",
        "PRTE_MCA_plm_slurm_args": "--external-launcher",
    }
    optional = {
        "SLURM_JOB_ACCOUNT": job.account,
        "SLURM_JOB_DEPENDENCY": job.dependency,
        "SLURM_EXPORT_ENV": job.export_env,
        "SLURM_OPEN_MODE": {"append": "a", "truncate": "t"}.get(job.open_mode, ""),
        "SLURM_CONTAINER": job.container,  # sbatch(1), salloc(1): only with --container
        "SLURM_CONTAINER_ID": job.container_id,  # Slurm 24.11: only with --container-id
    }
    values.update({k: v for k, v in optional.items() if v})
    if job.cpus_per_task_given or job.cpus_per_task > 1:
        values["SLURM_CPUS_PER_TASK"] = job.cpus_per_task
    if job.ntasks_per_node:
        values["SLURM_NTASKS_PER_NODE"] = job.ntasks_per_node
    if job.ntasks_per_socket:
        values["SLURM_NTASKS_PER_SOCKET"] = job.ntasks_per_socket
    if job.mem_per_node is not None:
        values["SLURM_MEM_PER_NODE"] = job.alloc_mem[0]
    elif job.mem_per_cpu is not None:
        values["SLURM_MEM_PER_CPU"] = job.mem_per_cpu
    if job.array_task_id is not None:
        values.update(_array_values(job))
    if job.gpus and job.gpus[0]:  # a first node dealt none of a total sets none
        values.update(gpu_environment(job.gpus[0]))
        values["SLURM_JOB_GPUS"] = ",".join(map(str, job.gpus[0]))
    env.update({k: str(v) for k, v in values.items()})
    return env


def gpu_environment(ids: tuple[int, ...]) -> dict[str, str]:
    """What binds a process to its GPUs on one node, as Slurm sets it without device
    cgroups: the devices' own indices for CUDA, ROCm and oneAPI alike."""
    text = ",".join(map(str, ids))
    return {
        "CUDA_VISIBLE_DEVICES": text,
        "GPU_DEVICE_ORDINAL": text,
        "ROCR_VISIBLE_DEVICES": text,
        "ZE_AFFINITY_MASK": text,
        "SLURM_GPUS_ON_NODE": str(len(ids)),
    }


def _array_values(job: Job) -> dict[str, object]:
    indices, _ = arrayspec.parse(job.array_spec)
    steps = {b - a for a, b in itertools.pairwise(indices)}
    return {
        "SLURM_ARRAY_JOB_ID": job.array_job_id,
        "SLURM_ARRAY_TASK_ID": job.array_task_id,
        "SLURM_ARRAY_TASK_COUNT": len(indices),
        "SLURM_ARRAY_TASK_MIN": indices[0],
        "SLURM_ARRAY_TASK_MAX": indices[-1],
        "SLURM_ARRAY_TASK_STEP": steps.pop() if len(steps) == 1 else 1,
    }


#: What only the batch script's environment has (salloc's command runs in no task).
_BATCH_ONLY = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_GTIDS", "ENVIRONMENT")


def allocation_environment(job: Job, cluster: str) -> dict[str, str]:
    """The SLURM_* variables salloc gives its command (and srun its allocation)."""
    env = batch_environment(job, Payload(script=""), cluster)
    for name in _BATCH_ONLY:
        env.pop(name, None)
    return env
