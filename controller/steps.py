"""Job steps: where an ``srun`` inside an allocation runs its tasks, and how it ends.

Pure functions over a running ``Job``; the store applies what they return
and the service sends the launches. Slurm's rules:

* A step uses the job's nodes (``-w``, ``-x`` and ``-r`` narrow them), ``-N`` of
  them or, as srun takes its allocation's node count, as many as it has tasks.
  Without ``-n`` it starts one task per task slot of the job (the job's ``-n``,
  laid out as the job's), or one per node with ``-N``, or ``--ntasks-per-node``
  on each.
* Tasks go to nodes by ``--distribution`` (``controller/tasklayout.py``): by
  default Slurm's block, dealt a round at a time over the nodes with room and
  numbered node by node (``-N2 -n3`` -> 2, 1; CPUs 4,2,2 and ``-n5`` -> 2, 2, 1).
  ``--ntasks-per-core``/``--ntasks-per-socket`` cap a node's tasks.
* Without ``--exact`` (which ``-c`` and ``--exclusive`` imply) a step has all of
  the job's CPUs on each of its nodes that other steps leave, as Slurm 21.08 and
  later give it ("all non-GRES resources on each node in the step allocation"),
  so steps run side by side only with ``--exact`` or ``--overlap``; a step that asks
  for GPUs, only those of them near its GPUs (``controller/stepcpus.py``). Its memory is
  the job's unless it asks (below), as in Slurm.
* A step holds its CPUs against other steps unless it or they ``--overlap``;
  the batch script holds none. A step larger than the whole allocation is
  refused ("More processors requested than permitted"); one that fits the
  allocation but not what other steps leave waits ("Requested nodes are
  busy": srun retries).
* A step's own memory (``--mem``, ``--mem-per-cpu`` times its CPUs,
  ``--mem-per-gpu`` times its GPUs, on each node) is its cgroup's limit within
  the job's, and is held against other steps as CPUs are: more than the job
  has on a node is refused ("Memory required by task is not available"), more
  than other steps leave waits. A step that asks for none has all of the job's
  memory and holds none, as in Slurm.
* A step's GPUs are the job's it asks for on each node (``--gpus`` over its nodes,
  ``--gpus-per-node``, ``--gpus-per-task``; none asked: all of the job's there),
  with its CPUs at least ``--cpus-per-gpu`` times them (no more per GPU than the
  job's: "Invalid generic resource (gres) specification"). Which of them each task
  sees is ``controller/gpubind.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from controller import cpubind, stepcpus, tasklayout
from controller.core.gpulinks import best_linked
from controller.jobenv import run_length, tasks_per_node
from controller.model import Job, Step
from controller.tasklayout import Layout
from corral import cpubind as cpubind_syntax
from corral import distribution, errors, hostlist
from corral.errors import SlurmError

Gpus = tuple[int, ...]
DEFAULT = distribution.Distribution()

#: A node's NVLink counts between its GPUs (GPU -> linked GPU -> count).
NodeLinks = Callable[[str], Mapping[int, Mapping[int, int]]]


def _no_links(node: str) -> Mapping[int, Mapping[int, int]]:
    """No links known: a step takes its job's lowest free GPUs."""
    return {}


#: A node's cores per socket and threads per core (slurm.conf's).
NodeShape = Callable[[str], cpubind.Shape]


#: A node's GPUs with known near CPUs -> those CPUs (gres.conf's Cores=, else probed).
NodeNear = Callable[[str], Mapping[int, Sequence[int]]]


def _none_near(node: str) -> Mapping[int, Sequence[int]]:
    """No near CPUs known: a step asking GPUs has all of the job's CPUs."""
    return {}


def _one_core_each(node: str) -> cpubind.Shape:
    """No shape known: each CPU a core of one socket."""
    return cpubind.Shape(cores_per_socket=1 << 30)


@dataclass(frozen=True, slots=True)
class StepRequest:
    """What srun asks for (StepCreateRequest's layout fields)."""

    ntasks: int = 0
    min_nodes: int = 0
    cpus_per_task: int = 1
    ntasks_per_node: int = 0
    nodelist: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    overlap: bool = False
    exact: bool = False  # --exact: only the CPUs its tasks ask for, not all it can have
    overcommit: bool = False  # -O: more tasks than CPUs
    gpus: int = 0  # in all, spread over the nodes
    gpus_per_node: int = 0
    gpus_per_task: int = 0
    mem_per_node: int = 0  # MiB: --mem
    mem_per_cpu: int = 0  # MiB: --mem-per-cpu
    mem_per_gpu: int = 0  # MiB: --mem-per-gpu
    cpus_per_gpu: int = 0  # --cpus-per-gpu: CPUs per GPU of the step on each node
    distribution: str = ""  # -m, as srun read it ("": block)
    task_nodes: tuple[str, ...] = ()  # -m arbitrary: each task's node, task by task
    relative: int = 0  # -r: the step's nodes start at this one of the job's
    cpu_bind: str = ""  # --cpu-bind, as srun read it
    ntasks_per_core: int = 0  # at most this many tasks on each of the job's cores
    ntasks_per_socket: int = 0  # ... on each socket of the job's cores


def held_cpus(job: Job) -> dict[str, int]:
    """CPUs running steps hold on each node (``--overlap`` steps hold none)."""
    held: dict[str, int] = {}
    for step in job.steps:
        if step.running and not step.overlap:
            for node, cpus in zip(step.nodes, step.cpus, strict=True):
                held[node] = held.get(node, 0) + cpus
    return held


def layout(
    job: Job, req: StepRequest, shape: NodeShape = _one_core_each
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(nodes, tasks on each) for ``req`` in ``job``'s allocation, or SlurmError."""
    nodes, ids = placement(job, req, shape)
    return nodes, tuple(len(node_ids) for node_ids in ids)


def placement(
    job: Job, req: StepRequest, shape: NodeShape = _one_core_each
) -> tuple[tuple[str, ...], Layout]:
    """(nodes, the global task ids on each) for ``req`` in ``job``'s allocation, by
    its ``--distribution`` (``controller/tasklayout.py``), or SlurmError. Each node
    holds at most its CPUs over ``-c`` tasks, and ``--ntasks-per-core`` times the
    job's cores there (``--ntasks-per-socket`` times their sockets)."""
    try:
        dist = distribution.parse(req.distribution) if req.distribution else DEFAULT
    except ValueError:
        raise SlurmError(errors.ESLURM_BAD_DIST) from None
    cpt = max(req.cpus_per_task, 1)
    allocated = dict(zip(job.nodes, job.usable_cpus, strict=True))
    if any(n not in allocated for n in (*req.nodelist, *req.task_nodes)):
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    if req.relative >= len(job.nodes):
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    names = list(job.nodes[req.relative :])
    names = [n for n in names if (not req.nodelist or n in req.nodelist)]
    names = [n for n in names if n not in req.exclude]
    wanted_nodes = max(req.min_nodes, len(req.nodelist))
    if wanted_nodes > len(names) or not names:
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    if dist.method == "arbitrary" and req.task_nodes:
        return _arbitrary(job, req, names, cpt)
    ntasks = req.ntasks
    if not ntasks:
        if req.ntasks_per_node:
            ntasks = req.ntasks_per_node * (wanted_nodes or len(names))
        elif wanted_nodes:
            ntasks = wanted_nodes
        else:  # the job's own task slots, on every node it names
            slots = dict(zip(job.nodes, tasks_per_node(job), strict=True))
            ntasks = sum(slots[n] for n in names) or len(names)
            wanted_nodes = sum(1 for n in names if slots[n])
    if req.overcommit:  # -O: tasks share the CPUs; the node count still holds
        capacity = dict.fromkeys(names, ntasks)
    else:
        capacity = {n: allocated[n] // cpt for n in names}
    limit = _unit_limits(job, req, names, shape)
    capacity = {n: min(c, limit.get(n, c)) for n, c in capacity.items()}
    form = (ntasks, wanted_nodes, req.ntasks_per_node, dist)
    whole = _spread(names, *form, capacity)
    if whole is None:
        raise SlurmError(errors.ESLURM_TOO_MANY_REQUESTED_CPUS)
    if not req.overlap and not req.overcommit:
        held = held_cpus(job)
        free = {n: min((allocated[n] - held.get(n, 0)) // cpt, capacity[n]) for n in names}
        now = _spread(names, *form, free)
        if now is None:
            raise SlurmError(errors.ESLURM_NODES_BUSY)
        return now
    return whole


def _unit_limits(
    job: Job, req: StepRequest, names: Sequence[str], shape: NodeShape
) -> dict[str, int]:
    """The most tasks ``--ntasks-per-core``/``--ntasks-per-socket`` let each node hold:
    that many on each core (socket) among the job's CPUs there; {} for neither."""
    if not (req.ntasks_per_core or req.ntasks_per_socket):
        return {}
    limits = {}
    for name in names:
        index = job.nodes.index(name)
        cpus = job.cpu_ids[index] if job.cpu_ids else tuple(range(job.cpus[index]))
        form = shape(name)
        if req.ntasks_per_core:
            limits[name] = len({form.core(c) for c in cpus}) * req.ntasks_per_core
        if req.ntasks_per_socket:
            sockets = len({form.socket(c) for c in cpus}) * req.ntasks_per_socket
            limits[name] = min(limits.get(name, sockets), sockets)
    return limits


def _arbitrary(
    job: Job, req: StepRequest, names: Sequence[str], cpt: int
) -> tuple[tuple[str, ...], Layout]:
    """``-m arbitrary``: task i on the i-th node srun's SLURM_HOSTFILE names."""
    if any(n not in names for n in req.task_nodes):
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    chosen = tuple(n for n in names if n in req.task_nodes)
    ids = tasklayout.arbitrary(chosen, req.task_nodes)
    if req.overcommit:
        return chosen, ids
    allocated = dict(zip(job.nodes, job.usable_cpus, strict=True))
    held = {} if req.overlap else held_cpus(job)
    for name, node_ids in zip(chosen, ids, strict=True):
        if len(node_ids) * cpt > allocated[name]:
            raise SlurmError(errors.ESLURM_TOO_MANY_REQUESTED_CPUS)
        if len(node_ids) * cpt > allocated[name] - held.get(name, 0):
            raise SlurmError(errors.ESLURM_NODES_BUSY)
    return chosen, ids


def _spread(
    names: Sequence[str],
    ntasks: int,
    node_count: int,
    per_node: int,
    dist: distribution.Distribution,
    capacity: Mapping[str, int],
) -> tuple[tuple[str, ...], Layout] | None:
    """Tasks over nodes within ``capacity`` (tasks per node) by ``dist``; None if
    they do not fit. Without a node count a step spreads over as many of the
    nodes as it has tasks (srun's node count is its allocation's), as Slurm's."""
    usable = [n for n in names if capacity[n] > 0]
    if per_node:
        count = node_count or -(-ntasks // per_node)
        chosen = [n for n in usable if capacity[n] >= per_node][:count]
        if len(chosen) < count or per_node * count < ntasks:
            return None
        room = [min(per_node, capacity[n]) for n in chosen]
    else:
        count = node_count or min(len(usable), ntasks)
        chosen = usable[:count]
        if len(chosen) < count or ntasks < count:
            return None
        room = [capacity[n] for n in chosen]
    if sum(room) < ntasks:
        return None
    ids = tasklayout.layout(room, ntasks, dist.method, dist.plane, bool(dist.pack))
    return tuple(chosen), ids


def step_gpus(
    job: Job,
    req: StepRequest,
    nodes: Sequence[str],
    tasks: Sequence[int],
    links: NodeLinks = _no_links,
) -> tuple[tuple[int, ...], ...]:
    """The GPUs of the job a step asks for on each of its nodes, not held by other
    running steps (unless it or they ``--overlap``); () for none asked. Of the free
    ones, those with the most NVLink between them (``links``: a node's GPU -> linked
    GPU -> count, as a job's start picks its GPUs, ``core/gpulinks.py``), else the
    lowest."""
    if not (req.gpus or req.gpus_per_node or req.gpus_per_task) or not job.gpus:
        return ()
    if req.gpus and req.gpus < len(nodes):  # a total leaves a node none: refused, as
        # Slurm 22.05's steps are (a plain srun in ``sbatch --gpus=1 -n10``, whose
        # SLURM_GPUS=1 it reads, on that job's two nodes)
        raise SlurmError(
            errors.ESLURM_INVALID_GRES,
            detail=f"Step requested gres=gpu:{req.gpus} is less than the requested min "
            f"nodes={len(nodes)}",
        )
    held: dict[str, set[int]] = {}
    if not req.overlap:
        for step in job.steps:
            if step.running and not step.overlap and step.gpus:
                for node, ids in zip(step.nodes, step.gpus, strict=True):
                    held.setdefault(node, set()).update(ids)
    chosen = []
    left = req.gpus
    for i, (node, count) in enumerate(zip(nodes, tasks, strict=True)):
        if req.gpus_per_node:
            want = req.gpus_per_node
        elif req.gpus_per_task:
            want = req.gpus_per_task * count
        else:
            want = -(-left // (len(nodes) - i))
            left -= want
        mine = job.gpus[job.nodes.index(node)]
        if want > len(mine):
            raise SlurmError(errors.ESLURM_INVALID_GRES)
        free = [g for g in mine if g not in held.get(node, set())]
        if want > len(free):
            raise SlurmError(errors.ESLURM_NODES_BUSY)
        chosen.append(tuple(best_linked(free, want, links(node)) or free[:want]))
    return tuple(chosen)


def held_memory(job: Job) -> dict[str, int]:
    """Memory (MiB) running steps that asked for their own hold on each node
    (``--overlap`` steps hold none)."""
    held: dict[str, int] = {}
    for step in job.steps:
        if step.running and not step.overlap and step.mem:
            for node, mib in zip(step.nodes, step.mem, strict=True):
                held[node] = held.get(node, 0) + mib
    return held


def step_memory(
    job: Job,
    req: StepRequest,
    nodes: Sequence[str],
    cpus: Sequence[int],
    gpus: Sequence[Sequence[int]],
) -> tuple[int, ...]:
    """The step's own memory on each of its nodes (MiB; () when it asks for none):
    SlurmError when a node's is more than the job has there, or than other steps
    leave (srun retries that)."""
    if req.mem_per_node:
        mem = [req.mem_per_node] * len(nodes)
    elif req.mem_per_cpu:
        mem = [req.mem_per_cpu * count for count in cpus]
    elif req.mem_per_gpu:
        given = gpus or [job.gpus[job.nodes.index(n)] if job.gpus else () for n in nodes]
        mem = [req.mem_per_gpu * len(ids) for ids in given]
        if not all(mem):  # no GPU on a node: no memory to give, and 0 would be the job's
            raise SlurmError(errors.ESLURM_INVALID_TASK_MEMORY)
    else:
        return ()
    job_mem = dict(zip(job.nodes, job.alloc_mem, strict=True)) if job.alloc_mem else {}
    held = {} if req.overlap else held_memory(job)
    for node, mib in zip(nodes, mem, strict=True):
        has = job_mem.get(node, 0)
        if not has:  # the job has no memory of its own here: only the limit applies
            continue
        if mib > has:
            raise SlurmError(errors.ESLURM_INVALID_TASK_MEMORY)
        if mib > has - held.get(node, 0):
            raise SlurmError(errors.ESLURM_NODES_BUSY)
    return tuple(mem)


def step_cpus(
    job: Job,
    req: StepRequest,
    nodes: Sequence[str],
    tasks: Sequence[int],
    gpus: Sequence[Gpus],
    near: NodeNear = _none_near,
) -> tuple[int, ...]:
    """The step's CPUs on each node: its tasks', or ``--cpus-per-gpu`` times its GPUs
    there if more, within the job's; without ``--exact``, all the job's CPUs there
    that other steps do not hold (all of them for an ``--overlap`` step), or with
    GPUs asked only the job's near them (``controller/stepcpus.py``). SlurmError
    for more CPUs per GPU than the job's (Slurm's "Step requested cpus_per_gres=N is
    more than the job's")."""
    if req.cpus_per_gpu and job.cpus_per_gpu and req.cpus_per_gpu > job.cpus_per_gpu:
        raise SlurmError(errors.ESLURM_INVALID_GRES)
    cpt = max(req.cpus_per_task, 1)
    allocated = dict(zip(job.nodes, job.usable_cpus, strict=True))
    given = gpus or [job.gpus[job.nodes.index(n)] if job.gpus else () for n in nodes]
    asked = [
        min(max(t * cpt, len(g) * req.cpus_per_gpu), allocated[n])
        for n, t, g in zip(nodes, tasks, given, strict=True)
    ]
    if req.exact:
        return tuple(asked)
    held = {} if req.overlap else held_cpus(job)
    out = []
    for i, (n, c) in enumerate(zip(nodes, asked, strict=True)):
        free = allocated[n] - held.get(n, 0)
        if gpus and job.cpu_ids:
            index = job.nodes.index(n)
            close = stepcpus.near_cpus(job.cpu_ids[index], gpus[i], near(n))
            free = min(len(close), free) if close else free
        out.append(max(c, free))
    return tuple(out)


def next_step_id(job: Job) -> int:
    """The id a new step of ``job`` gets: one past its highest (steps are never dropped
    within a run, but a step spanning heterogeneous job components takes the highest
    next id of them all, so a component's ids may skip some)."""
    return 1 + max((step.step_id for step in job.steps), default=-1)


def new_step(
    job: Job,
    req: StepRequest,
    name: str,
    now: int,
    time_limit: int,
    line: str,
    links: NodeLinks = _no_links,
    shape: NodeShape = _one_core_each,
    near: NodeNear = _none_near,
) -> Step:
    nodes, ids = placement(job, req, shape)
    tasks = tuple(len(node_ids) for node_ids in ids)
    _check_binding(job, req, nodes, tasks)
    gpus = step_gpus(job, req, nodes, tasks, links)
    cpus = step_cpus(job, req, nodes, tasks, gpus, near)
    return Step(
        step_id=next_step_id(job),
        name=name,
        nodes=nodes,
        tasks=tasks,
        cpus=cpus,
        start_time=now,
        time_limit=time_limit,
        overlap=req.overlap,
        submit_line=line,
        gpus=gpus,
        mem=step_memory(job, req, nodes, cpus, gpus),
        task_ids=() if ids == tasklayout.by_block(tasks) else ids,
    )


def _check_binding(job: Job, req: StepRequest, nodes: Sequence[str], tasks: Sequence[int]) -> None:
    """``--cpu-bind=map_cpu:``/``mask_cpu:`` may name only the job's CPUs on each node
    (Slurm's "Unable to satisfy cpu bind request")."""
    if not req.cpu_bind or not job.cpu_ids:
        return
    try:
        bind = cpubind_syntax.parse(req.cpu_bind)
    except ValueError:
        raise SlurmError(errors.ESLURMD_CPU_BIND_ERROR) from None
    for node, count in zip(nodes, tasks, strict=True):
        if not cpubind.fits(bind, job.cpu_ids[job.nodes.index(node)], count):
            raise SlurmError(errors.ESLURMD_CPU_BIND_ERROR)


def step_environment(
    job: Job, step: Step, base: Mapping[str, str], dist: str = ""
) -> dict[str, str]:
    """Every task's environment but its own and its node's variables (the runner adds
    them); ``dist``: srun's ``--distribution``, "" for the default."""
    env = dict(base)
    nodelist = hostlist.compress(step.nodes)
    env.update(
        {
            "SLURM_JOB_ID": str(job.job_id),
            "SLURM_JOBID": str(job.job_id),
            "SLURM_STEP_ID": str(step.step_id),
            "SLURM_STEPID": str(step.step_id),
            "SLURM_STEP_NODELIST": nodelist,
            "SLURM_STEP_NUM_NODES": str(len(step.nodes)),
            "SLURM_STEP_NUM_TASKS": str(step.ntasks),
            "SLURM_STEP_TASKS_PER_NODE": run_length(list(step.tasks)),
            "SLURM_NODELIST": nodelist,
            "SLURM_NNODES": str(len(step.nodes)),
            "SLURM_NTASKS": str(step.ntasks),
            "SLURM_NPROCS": str(step.ntasks),
            "SLURM_TASKS_PER_NODE": run_length(list(step.tasks)),
            "SLURM_JOB_NODELIST": hostlist.compress(job.nodes),
            "SLURM_JOB_NUM_NODES": str(len(job.nodes)),
            "SLURM_JOB_CPUS_PER_NODE": run_length(list(job.usable_cpus)),
            "SLURM_JOB_NAME": job.name,
            "SLURM_JOB_PARTITION": job.partition,
            "SLURM_JOB_USER": job.user,
            "SLURM_JOB_UID": str(job.uid),
            "SLURM_RESTART_COUNT": str(job.restarts),
            "SLURM_DISTRIBUTION": distribution.parse(dist).text() if dist else "block",
            "SLURM_UMASK": base.get("SLURM_UMASK", "0022"),
        }
    )
    if job.array_task_id is not None:
        env["SLURM_ARRAY_JOB_ID"] = str(job.array_job_id)
        env["SLURM_ARRAY_TASK_ID"] = str(job.array_task_id)
    return env


def cpu_bind_environment(text: str, bound: Sequence[tuple[int, ...]]) -> dict[str, str]:
    """SLURM_CPU_BIND and its parts on one node, as Slurm's task/affinity sets them:
    the type ``mask_cpu:`` and every local task's mask when tasks are bound, else
    ``none``; ``quiet`` or ``verbose`` as srun's --cpu-bind said."""
    verbose = "verbose" if text and cpubind_syntax.parse(text).verbose else "quiet"
    if not bound:
        kind, masks = "none", ""
    else:
        kind, masks = "mask_cpu:", cpubind.masks_text(bound)
    return {
        "SLURM_CPU_BIND": f"{verbose},{kind}{masks}",
        "SLURM_CPU_BIND_VERBOSE": verbose,
        "SLURM_CPU_BIND_TYPE": kind,
        "SLURM_CPU_BIND_LIST": masks,
    }


def severity(status: int) -> tuple[int, int]:
    """How a task's wait status ranks for its step's, as Slurm picks it (and srun):
    a task killed by a signal over any exit code (the highest signal), else the
    highest exit code; a task that never ran (negative) lowest."""
    if status < 0:
        return (-1, 0)
    if status & 0x7F:
        return (1, status & 0x7F)
    return (0, (status >> 8) & 0xFF)


def node_done(
    step: Step,
    node: str,
    statuses: Sequence[int],
    usage: tuple[int, int, int],
    end: int,
    sum_rss: int = 0,
    oom_kills: int = 0,
) -> Step:
    """``step`` once ``node`` reported its tasks' wait statuses; ended when all have.

    A report may come after the job ended, which ended the step as the job did:
    tasks that exited on their own then give the step its real state; killed
    ones leave the job's. A step some of whose processes the OOM killer killed
    (``oom_kills``, on any node) ends OUT_OF_MEMORY, as with Slurm's task/cgroup.
    """
    if node in step.done:
        return step
    worst = max([step.exit_status, *statuses], key=severity)
    rss, user, system = step.usage
    total = (max(rss, usage[0]), user + usage[1], system + usage[2])
    ended_by_job = not step.running
    step = replace(
        step,
        done=(*step.done, node),
        exit_status=max(worst, 0),
        usage=total,
        sum_rss=step.sum_rss + sum_rss,
        oom_kills=step.oom_kills + oom_kills,
    )
    if len(step.done) < len(step.nodes):
        return step
    if step.oom_kills and not ended_by_job:
        return replace(step, state="OUT_OF_MEMORY", end_time=end)
    if any(s < 0 for s in statuses) and not any(s > 0 for s in statuses):
        state = "FAILED"
    elif step.exit_status & 0x7F:
        if ended_by_job:
            return step
        state = "CANCELLED" if step.exit_status & 0x7F == 9 else "FAILED"
    else:
        state = "FAILED" if step.exit_status else "COMPLETED"
    return replace(step, state=state, end_time=end if not ended_by_job else step.end_time)


def ended_with_job(job: Job, end: int) -> tuple[Step, ...]:
    """The job's steps once it ended: the running ones end as the job did."""
    state = {"COMPLETED": "CANCELLED", "FAILED": "CANCELLED"}.get(job.state.name, job.state.name)
    return tuple(replace(s, state=state, end_time=end) if s.running else s for s in job.steps)
