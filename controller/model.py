"""The controller's records: jobs and nodes as immutable values.

A ``Job`` holds what the scheduler and the clients need. The bulky, rarely
read parts of a submission (script, arguments, environment) live only in the
journal and are read back at launch, which keeps 10,000 pending jobs small.
Jobs change only through ``jobstate.apply`` (state) or ``dataclasses.replace``
in ``JobStore`` (attributes users may update).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.depspec import Deps, resolve

if TYPE_CHECKING:
    from controller.jobstate import JobState, Reason


@dataclass(frozen=True, slots=True)
class Job:
    job_id: int
    name: str
    uid: int
    gid: int
    user: str
    group: str
    state: JobState
    reason: Reason
    submit_time: int
    partitions: tuple[str, ...]
    account: str = ""
    qos: str = "normal"
    flags: frozenset[str] = frozenset()
    held: str = ""  # "", "user", "admin", "resv" or "prolog" (its Prolog failed)
    admin_priority: int | None = None
    nice: int = 0
    begin_time: int = 0
    eligible_time: int = 0
    start_time: int = 0
    end_time: int = 0
    time_limit: int = -1  # minutes, -1 UNLIMITED
    time_min: int = 0
    min_nodes: int = 1
    max_nodes: int = 0  # 0 = same as min_nodes
    num_tasks: int = 1
    cpus_per_task: int = 1
    ntasks_per_node: int = 0
    ntasks_per_socket: int = 0  # --ntasks-per-socket: a cap on each socket (core/taskspersocket.py)
    min_cpus: int = 0
    tasks_given: bool = False
    cpus_per_task_given: bool = False  # -c was given (even -c 1): sets SLURM_CPUS_PER_TASK
    nodes_given: bool = False  # -N, -w or --ntasks-per-node fixed the node count
    mem_per_node: int | None = None  # MiB; 0 = all of the node's memory
    mem_per_cpu: int | None = None
    req_nodes: tuple[str, ...] = ()
    exc_nodes: tuple[str, ...] = ()
    constraint: str = ""
    exclusive: bool = False
    dependency: str = ""
    # ``dependency`` resolved into job references (see controller/depspec.py): made
    # in __post_init__ whenever the text is new, so no pass ever re-reads the text.
    deps: Deps | None = None
    array_job_id: int = 0
    array_task_id: int | None = None
    array_max_tasks: int = 0
    array_spec: str = ""
    # The array's tasks not started yet (``1-3,5``): set only on the array's
    # own record (job_id == array_job_id), which stands for all of them until
    # the scheduler splits tasks off as they start, as Slurm does.
    array_pending: str = ""
    work_dir: str = "/"
    std_out: str = ""
    std_err: str = ""
    std_in: str = "/dev/null"
    open_mode: str = ""
    command: str = ""
    comment: str = ""
    system_comment: str = ""  # why the system ended it (a launch failure's reason)
    submit_line: str = ""
    submit_host: str = ""
    submit_dir: str = ""
    export_env: str = ""
    requeue: bool = True
    requeue_hold: str = ""  # who asked for requeuehold: "", "user" or "admin"
    requeue_delay: int = 0
    restarts: int = 0
    signal_num: int = 0
    signal_time: int = 0
    signal_batch_only: bool = False
    signal_sent: bool = False  # --signal (to the steps) went out in this run
    deadline: int = 0
    # scrontab: its entry's times (corral/crontab.py's canonical text); "" not a cron job.
    # A cron job is requeued for its next time when it ends (controller/crontabs.py).
    cron_spec: str = ""
    kill_on_invalid_dep: bool = False
    cancelled_by: int = -1  # the uid that cancelled it (-1: not cancelled, or unknown)
    # What its batch script used: max RSS (KiB), user and system CPU (microseconds).
    usage: tuple[int, int, int] = (0, 0, 0)
    partition: str = ""  # where it runs (or ran)
    nodes: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()  # CPUs allocated on each of ``nodes``
    alloc_mem: tuple[int, ...] = ()  # MiB allocated on each of ``nodes``
    # Suspension (scontrol suspend/resume), as Slurm keeps it: when it was last
    # suspended or resumed (0: never), its run seconds before the last suspension,
    # and its seconds suspended in all in this run.
    suspend_time: int = 0
    pre_suspend_secs: int = 0
    suspended_secs: int = 0
    # Its CPUs are lent to other jobs (suspended; still so while a job cancelled
    # suspended completes): the ledger counts its memory and GRES, not its CPUs.
    cpus_released: bool = False
    # Who suspended it: 0 an operator (scontrol suspend), a job id the job it was
    # preempted for (PreemptMode=SUSPEND; resumed when its CPUs are free again),
    # ``jobstate.GANG`` the gang scheduler (time-slicing). Cleared on resume.
    suspended_by: int = 0
    exit_status: int = 0
    # The priority recorded on the job: worked out at submission, and the ranked one
    # it started with. While it waits the snapshot's ranking (core/priority.Ranking.of) is
    # its priority; no job record is rewritten when priorities are recalculated.
    calc_priority: int = 1
    # --gres: generic resources on each node; of a request naming alternatives
    # (``gpu:h100:8|gpu:a100:8``) the one in effect: the first while pending, the one it
    # got while it runs.
    gres: str = ""
    # Slurm's GPU request beyond --gres (controller/core/gpus.py): --gpus in all over the
    # job's nodes, --gpus-per-socket (on ``sockets_per_node`` sockets) and --gpus-per-task,
    # each of ``gpu_type`` ("" any); --cpus-per-gpu and --mem-per-gpu (MiB; None: not
    # given, the partition's DefCpuPerGPU/DefMemPerGPU may apply); --ntasks-per-gpu;
    # --gpu-bind as given (steps bind their tasks by it) and --gres-flags. ``gpus_also``:
    # --gpus's totals of other types, "type:count,..." (controller/gpuspec.py).
    gpus_per_job: int = 0
    gpus_per_socket: int = 0
    gpus_per_task: int = 0
    gpu_type: str = ""
    gpus_also: str = ""
    # --gpus and --gpus-per-node as given where a list, shown as given
    # (controller/gpulists.py): TresPerJob, TresPerNode.
    gpus_listed: str = ""
    gpus_per_node_listed: str = ""
    sockets_per_node: int = 0
    cpus_per_gpu: int = 0
    mem_per_gpu: int | None = None
    ntasks_per_gpu: int = 0
    gpu_bind: str = ""
    gres_flags: str = ""
    # sbatch -m as given ("": Slurm's default, block:cyclic): how its CPUs are taken
    # (core/cpupick.py; the client told the job in SLURM_DISTRIBUTION).
    distribution: str = ""
    # Threads of each core its tasks use (--hint=nomultithread, compute_bound and
    # memory_bound: 1; --threads-per-core=N: N; 0: all), and so the CPUs of ``cpus`` it
    # may use on each node (core/threads.py; (): all of them). It holds whole cores.
    threads_per_core: int = 0
    cpus_used: tuple[int, ...] = ()
    # --hint=memory_bound's cores of each socket (1; 0: any): a minimum every node
    # meets, shown as scontrol's ReqB:S:C:T C, as Slurm 22.05 shows it.
    cores_per_socket: int = 0
    # Which of ``sockets_per_node`` and ``cores_per_socket`` -B gave as 0: shown as 0
    # (Socks/Node=0, a ReqB:S:C:T C of 0) where a 0 is otherwise "any", as in Slurm.
    node_info_zeros: tuple[str, ...] = ()
    oversubscribe: bool = False  # -s/--oversubscribe: may share CPUs where the partition allows
    reservation: str = ""  # --reservation: runs on its nodes, within its time
    interactive: bool = False  # salloc/srun's allocation: no batch script; its client ends it
    steps: tuple[Step, ...] = ()  # srun's steps of the current run, numbered from 0
    # (name, type, count) generic resources allocated on each of ``nodes``.
    gres_alloc: tuple[tuple[tuple[str, str, int], ...], ...] = ()
    gpus: tuple[tuple[int, ...], ...] = ()  # GPU indices given on each of ``nodes``
    # The CPU ids given on each node (core/devices.py): its cpuset and affinity there;
    # (): none named (a job started before every job was given CPU ids).
    cpu_ids: tuple[tuple[int, ...], ...] = ()
    # Preemption (controller/preemption.py): when this run was preempted (Slurm's
    # PreemptTime; its GraceTime runs from then), for which waiting job, whether it is
    # requeued (else cancelled) when the GraceTime ends, and when the job last reported a
    # checkpoint (``scontrol update job N Checkpointed=now``; victims lose the least work).
    preempt_time: int = 0
    preempted_by: int = 0
    preempt_requeue: bool = False
    checkpointed: int = 0
    # Network topology (controller/core/topology.py): --switches=N@max-time, the wait in
    # seconds (capped by max_switch_wait at submission) and when it began (the scheduler's
    # first look at the job; 0: not yet); --segment; --topology-level's required and
    # preferred levels (-1: none).
    switches: int = 0
    switch_wait: int = 0
    switch_wait_start: int = 0
    segment: int = 0
    topology_required: int = -1
    topology_preferred: int = -1
    # Where backfill expects a pending job to start (derived each pass, like the reason).
    expected_start: int = 0
    expected_nodes: tuple[str, ...] = ()
    # Flavors (controller/core/flavors.py): --prefer's features, tried first; the
    # --gres alternatives in order of preference (() when it names one request); and
    # which alternative it got, or awaits, and why, in words (scontrol's Flavor=).
    prefer: str = ""
    gres_alternatives: tuple[str, ...] = ()
    flavor: str = ""
    # -L/--licenses: cluster-wide licenses it holds from its start to its end, as
    # ``name:count[,name:count...]`` (corral/licenses.py; "" none).
    licenses: str = ""
    # Elastic (sbatch --elastic, docs/design.md "Elastic jobs"): the signal that tells
    # the job its allocation changed (0: not elastic; it keeps the nodes it started
    # on). Between ``min_nodes`` and ``max_nodes`` it grows as nodes free and shrinks
    # under pressure.
    elastic_signal: int = 0
    # When its allocation last changed while it ran (Slurm's resize_time; 0: never):
    # accounting keeps one record per size, the newest keyed by this time.
    resize_time: int = 0
    # OCI containers (docs/containers.md): the bundle its batch script runs in ("":
    # none) and --container-id, both as submitted.
    container: str = ""
    container_id: str = ""
    # --mail-type (corral/mailtype.py's canonical list; "": none), --mail-user ("": the
    # job's user), and the time-limit warnings already mailed in this run (comma list).
    mail_type: str = ""
    mail_user: str = ""
    mail_sent: str = ""
    # When it was last requeued (0: never): Slurm's SubmitTime from then on, and the
    # key of its run since then, a record of its own in accounting, as slurmdbd keeps
    # each run of a requeued job (``sacct -D`` lists them all). ``submit_time`` stays
    # the first submission's, which the scheduler's order and ``corral sim`` count from.
    requeue_time: int = 0
    # Heterogeneous jobs (docs/design.md "Heterogeneous jobs"): the leader's id, the
    # component's offset and all their ids (``123-124``); 0 and "" for other jobs. A
    # component after the first has no script: it is an allocation (``interactive``)
    # that ends with its leader.
    het_job_id: int = 0
    het_job_offset: int = 0
    het_job_id_set: str = ""
    # Moving to another cluster (docs/federation.md, "A pending job moves"): the -M list
    # when it named several clusters ("" otherwise, and for a job moved here); where it
    # went, "cluster:job_id" (the cluster alone while it is being sent there: it does not
    # start here meanwhile); the "cluster:job_id" it came from (it never moves again).
    clusters: str = ""
    moved_to: str = ""
    moved_from: str = ""

    @property
    def run_key(self) -> int:
        """The submit time accounting files this job's current record under: its
        submission's, else its last requeue's, else (a resize) the size's start."""
        return self.resize_time or self.requeue_time or self.submit_time

    def __post_init__(self) -> None:
        if self.dependency:
            if self.deps is None or self.deps.text != self.dependency:
                object.__setattr__(self, "deps", resolve(self.dependency))
        elif self.deps is not None:
            object.__setattr__(self, "deps", None)

    @property
    def cpus_needed(self) -> int:
        """CPUs the job needs in all (tasks x CPUs per task, at least --mincpus)."""
        return max(self.num_tasks * self.cpus_per_task, self.min_cpus)

    @property
    def usable_cpus(self) -> tuple[int, ...]:
        """The CPUs it may use on each of ``nodes``: SLURM_JOB_CPUS_PER_NODE, its tasks'
        layout and its steps' room (``cpus`` is what it holds, and is billed for)."""
        return self.cpus_used if len(self.cpus_used) == len(self.cpus) else self.cpus

    @property
    def display_id(self) -> str:
        if self.het_job_id:
            return f"{self.het_job_id}+{self.het_job_offset}"
        if self.array_pending:
            return f"{self.array_job_id}_[{self.array_pending}]"
        if self.array_task_id is None:
            return str(self.job_id)
        return f"{self.array_job_id}_{self.array_task_id}"


@dataclass(frozen=True, slots=True)
class Step:
    """A job step (``srun`` inside the job): tasks on some of the job's nodes.

    ``cpus`` are held on each node against other steps unless ``overlap``;
    ``done`` are the nodes that reported their part ended.
    """

    step_id: int
    name: str
    nodes: tuple[str, ...]
    tasks: tuple[int, ...]  # tasks on each of ``nodes``
    cpus: tuple[int, ...]  # CPUs on each of ``nodes``
    start_time: int
    time_limit: int = -1  # minutes, -1: the job's
    overlap: bool = False
    state: str = "RUNNING"  # Slurm's step state names: RUNNING, COMPLETED, FAILED, ...
    exit_status: int = 0  # the worst task's wait status
    end_time: int = 0
    done: tuple[str, ...] = ()
    usage: tuple[int, int, int] = (0, 0, 0)  # max RSS KiB, user CPU us, system CPU us
    submit_line: str = ""
    sum_rss: int = 0  # every task's max RSS, summed (KiB): AveRSS is this over the tasks
    gpus: tuple[tuple[int, ...], ...] = ()  # GPU indices on each node (): the job's
    oom_kills: int = 0  # its processes the OOM killer killed, on all its nodes
    mem: tuple[int, ...] = ()  # its own memory (MiB, srun --mem) on each node; (): the job's
    task_ids: tuple[tuple[int, ...], ...] = ()  # global task ids on each node; (): block order
    #: A step spanning heterogeneous job components: every part's job id in the order
    #: its tasks are numbered (the same in each part), so that cancelling the leader's
    #: part reaches them all; () for any other step.
    het_jobs: tuple[int, ...] = ()
    #: Where this part's nodes and tasks fall in such a step: its first node id and
    #: task id (its runners number theirs from there; sattach of a part counts from 0).
    het_offset: tuple[int, int] = (0, 0)
    #: A part of a heterogeneous step in an ordinary job (``srun a : b``,
    #: ``controller/mpmdsteps.py``): its index, shown as ``123.1+N`` as Slurm records
    #: each part as a step of its own; -1 for any other step.
    het_comp: int = -1

    @property
    def ntasks(self) -> int:
        return sum(self.tasks)

    @property
    def ids(self) -> tuple[tuple[int, ...], ...]:
        """The global task ids on each node (SLURM_GTIDS), by its distribution."""
        if self.task_ids:
            return self.task_ids
        firsts = [sum(self.tasks[:i]) for i in range(len(self.tasks))]
        return tuple(tuple(range(f, f + n)) for f, n in zip(firsts, self.tasks, strict=True))

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


@dataclass(frozen=True, slots=True)
class Payload:
    """The parts of a submission only the node agent needs; and of a job that may move
    to another cluster, the rest of its wire ``JobSpec`` (serialized, without script,
    arguments and environment) to submit there."""

    script: str
    argv: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    spec: bytes = b""


@dataclass(frozen=True, slots=True)
class NodeRuntime:
    """What the controller knows about a node beyond its configuration."""

    name: str
    responding: bool = False
    last_seen: float = 0.0  # monotonic seconds
    state: str = "UNKNOWN"  # UNKNOWN until its agent registers, then UP or DOWN
    drain: bool = False
    reason: str = "Not responding"
    reason_user: str = "slurm"
    reason_uid: int = 0
    reason_time: int = 0
    boot_time: int = 0
    agent_start_time: int = 0
    hostname: str = ""
    arch: str = ""
    os: str = ""
    version: str = ""
    probed_cpus: int = 0
    probed_memory: int = 0
    ever_registered: bool = False
    mps: bool = False  # its agent can run MPS servers: GPU shares there are fenced
    gres_found: str = ""  # the GPUs its agent probed, in Gres= form ("" when not probed)
    gpu_cpus: tuple[tuple[int, tuple[int, ...]], ...] = ()  # probed: CPUs near each GPU
    gpu_links: tuple[tuple[int, int, int], ...] = ()  # probed: (GPU a, GPU b, NVLinks)
    jobs: frozenset[int] = field(default_factory=frozenset)
    # scontrol reboot (controller/reboots.py): "", "requested" or "issued"; ASAP's
    # drain, the state after it (nextstate=), when it was issued.
    reboot: str = ""
    reboot_asap: bool = False
    reboot_next: str = ""
    reboot_time: int = 0
    # power saving (controller/powersave.py): "", "power_down", "powering_down",
    # "powered_down" or "powering_up", and when it entered the last two moves.
    power: str = ""
    power_time: int = 0
    # When it went idle (None: busy, or not yet seen idle), journaled so that
    # SuspendTime goes on counting across a controller restart; kept only with power
    # saving (controller/powersave.py).
    idle_since: int | None = None
    # scontrol update NodeName=.. Features= (controller/nodefeatures.py): the node's
    # AvailableFeatures and ActiveFeatures, comma-separated; None: slurm.conf's.
    available_features: str | None = None
    active_features: str | None = None
