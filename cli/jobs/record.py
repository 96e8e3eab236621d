"""``scontrol show job``: one JobInfo dict as scontrol's ``Key=Value`` record.

Keys, their order, which lines are optional and how each value is written
(``(null)``, ``Unknown``, ``00:02:00``, ``ExitCode=0:0``) follow Slurm's
job record, so scripts that scrape it (and people who read it) get what they
expect. Rendering is pure: the controller's clock comes in as ``now``.
"""

from __future__ import annotations

from cli.jobs import statenames
from cli.jobs.fields import node_list, run_seconds
from cli.quantity import mebibytes
from cli.records import join, null
from corral.timefmt import format_hms, format_limit_hms, format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    Job = Mapping[str, Any]


def exit_code(status: int) -> str:
    """``exit:signal`` of a raw wait status, as Slurm prints ExitCode."""
    signal = status & 0x7F
    if signal and signal != 0x7F:
        return f"0:{signal}"
    if signal == 0:
        return f"{(status >> 8) & 0xFF}:0"
    return "0:0"


def _output_path(job: Job, pattern: str) -> str:
    """A stdio file name with scontrol's substitutions, relative names under WorkDir."""
    task = job["array_task_id"]
    array_id = job["array_job_id"] if task is not None else job["job_id"]
    text = pattern.replace("%A", str(array_id))
    text = text.replace("%a", str(task if task is not None else 4294967294))
    text = text.replace("%j", str(job["job_id"])).replace("%u", str(job["user"]))
    text = text.replace("%x", str(job["name"]))
    return text if text.startswith("/") else f"{job['work_dir']}/{text}"


def _default_output(job: Job) -> str:
    if job["array_job_id"] and job["array_task_id"] is not None:
        return f"{job['work_dir']}/slurm-{job['array_job_id']}_{job['array_task_id']}.out"
    return f"{job['work_dir']}/slurm-{job['job_id']}.out"


def std_out(job: Job) -> str:
    return _output_path(job, job["std_out"]) if job["std_out"] else _default_output(job)


def std_err(job: Job) -> str:
    return _output_path(job, job["std_err"]) if job["std_err"] else std_out(job)


def std_in(job: Job) -> str:
    return _output_path(job, job["std_in"]) if job["std_in"] else "/dev/null"


def _num_nodes(job: Job) -> str:
    low, high = int(job["num_nodes"]), 0
    if job["state"] == "PENDING":
        high = int(job["max_nodes"])
        if high and high < low:
            low = high
    return f"{low}-{high}" if high else str(low)


def _end_time(job: Job, now: int) -> str:
    if job["time_limit"] == -1 and job["end_time"] > now:
        return "Unknown"
    return format_timestamp(int(job["end_time"]))


def _reason(job: Job) -> str:
    """The reason text, spaces as ``_`` ("launch failed requeued held" is one)."""
    text = str(job["state_desc"] or job["reason"])
    return "".join("_" if char.isspace() else char for char in text)


def _preemption(job: Job) -> list[str]:
    """Slurm's line after EndTime where the job may be preempted: when it may first be
    (PreemptEligibleTime) and when it was (PreemptTime); Corral's Checkpointed= after."""
    eligible = int(job.get("preempt_eligible_time") or 0)
    preempted = int(job.get("preempt_time") or 0)
    checkpointed = int(job.get("checkpointed") or 0)
    words = []
    if eligible or preempted:
        when = format_timestamp(preempted) if preempted else "None"
        words.append(f"PreemptEligibleTime={format_timestamp(eligible)} PreemptTime={when}")
    if checkpointed:
        words.append(f"Checkpointed={format_timestamp(checkpointed)}")
    return [" ".join(words)] if words else []


def _memory(job: Job) -> str:
    if job["min_mem_cpu"]:
        return f"MinMemoryCPU={mebibytes(int(job['min_mem_cpu']))}"
    return f"MinMemoryNode={mebibytes(int(job['min_mem_node']))}"


def _resize_time(job: Job) -> list[str]:
    """Slurm's ``ResizeTime=`` line, for a job whose allocation changed while it ran."""
    when = int(job.get("resize_time") or 0)
    return [f"ResizeTime={format_timestamp(when)}"] if when else []


def _elastic(job: Job) -> list[str]:
    """An elastic job's line (Corral's, docs/design.md "Elastic jobs"): the node range
    it grows and shrinks in, and the signal that tells it of a resize."""
    number = int(job.get("elastic_signal") or 0)
    if not number:
        return []
    import signal  # here: only an elastic job's record names a signal

    try:
        name = signal.Signals(number).name
    except ValueError:
        name = str(number)
    return [f"Elastic={job['min_nodes']}-{job['max_nodes']} ResizeSignal={name}"]


def _array_tokens(job: Job) -> str:
    if not job["array_job_id"]:
        if job.get("het_job_id"):
            return f"HetJobId={job['het_job_id']} HetJobOffset={job['het_job_offset']} "
        return ""
    task = job["array_task_str"] or job["array_task_id"]
    text = f"ArrayJobId={job['array_job_id']} ArrayTaskId={task} "
    if job["array_max_tasks"]:
        text += f"ArrayTaskThrottle={job['array_max_tasks']} "
    return text


def lines(job: Job, now: int, *, details: bool = False) -> list[str]:
    """The record's lines, before joining."""
    out = [
        f"JobId={job['job_id']} {_array_tokens(job)}JobName={job['name']}",
        *([f"HetJobIdSet={job['het_job_id_set']}"] if job.get("het_job_id_set") else []),
        f"UserId={job['user'] or job['uid']}({job['uid']}) "
        f"GroupId={job['group'] or job['gid']}({job['gid']}) MCS_label=N/A",
        f"Priority={job['priority']} Nice={job['nice']} "
        f"Account={null(job['account'])} QOS={null(job['qos'])}",
        *([f"Queue={job['queue']}"] if job.get("queue") else []),
        f"JobState={statenames.long_name(job)} Reason={_reason(job)} "
        f"Dependency={null(job['dependency'])}",
        f"Requeue={int(job['requeue'])} Restarts={job['restarts']} "
        f"BatchFlag={int(job['batch_flag'])} Reboot=0 ExitCode={exit_code(job['exit_status'])}",
    ]
    if details:
        out.append(f"DerivedExitCode={exit_code(job['derived_exit_status'])}")
    time_min = format_limit_hms(int(job["time_min"])) if job["time_min"] else "N/A"
    deadline = format_timestamp(int(job["deadline"])) if job["deadline"] else "N/A"
    suspended = format_timestamp(int(job["suspend_time"])) if job["suspend_time"] else "None"
    sched_nodes = f" SchedNodeList={job['sched_nodes']}" if job["sched_nodes"] else ""
    out += [
        f"RunTime={format_hms(run_seconds(job, now))} "
        f"TimeLimit={format_limit_hms(int(job['time_limit']))} TimeMin={time_min}",
        f"SubmitTime={format_timestamp(int(job['submit_time']))} "
        f"EligibleTime={format_timestamp(int(job['eligible_time']))}",
        f"AccrueTime={format_timestamp(int(job['accrue_time']))}",
        f"StartTime={format_timestamp(int(job['start_time']))} "
        f"EndTime={_end_time(job, now)} Deadline={deadline}",
        *([f'CronJob=Yes CrontabSpec="{job["cron_spec"]}"'] if job.get("cron_spec") else []),
        *_resize_time(job),
        *_preemption(job),
        f"SuspendTime={suspended} SecsPreSuspend={job['pre_suspend_secs']} "
        f"LastSchedEval={format_timestamp(int(job['last_sched_eval']))} Scheduler=Main",
        f"Partition={job['partition']} AllocNode:Sid={null(job['alloc_node'])}:0",
        f"ReqNodeList={null(job['req_nodes'])} ExcNodeList={null(job['exc_nodes'])}",
        f"NodeList={node_list(job['nodes'])}{sched_nodes}",
    ]
    if job["batch_host"]:
        out.append(f"BatchHost={job['batch_host']}")
    out += [
        f"NumNodes={_num_nodes(job)} NumCPUs={job['num_cpus']} NumTasks={job['num_tasks']} "
        f"CPUs/Task={job['cpus_per_task'] or 1} ReqB:S:C:T=0:0:{_cores(job)}:{_threads(job)}",
        *_elastic(job),
        f"TRES={null(job['alloc_tres'] or job['req_tres'])}",
        f"Socks/Node={_count(job, 'sockets_per_node')} "
        f"NtasksPerN:B:S:C={job['ntasks_per_node']}:0:{job.get('ntasks_per_socket') or '*'}:* "
        "CoreSpec=*",
        *(_held(job) if details else ()),
        f"MinCPUsNode={job['min_cpus_node']} {_memory(job)} MinTmpDiskNode=0",
        f"Features={null(job['features'])} DelayBoot=00:00:00",
        *([f"Prefer={job['prefer']}"] if job.get("prefer") else []),
        *([f"Reservation={job['reservation']}"] if job["reservation"] else []),
        f"OverSubscribe={job['oversubscribe'] or 'OK'} Contiguous=0 "
        f"Licenses={null(job.get('licenses') or '')} Network=(null)",
        f"Command={null(job['command'])}",
        f"WorkDir={null(job['work_dir'])}",
    ]
    if job["comment"]:
        out.append(f"Comment={job['comment']} ")
    if job["system_comment"]:
        out.append(f"SystemComment={job['system_comment']} ")
    if job["batch_flag"]:
        out += [f"StdErr={std_err(job)}", f"StdIn={std_in(job)}", f"StdOut={std_out(job)}"]
    if job.get("moved_to"):  # Corral's own (docs/federation.md): where it moved
        out.append(f"MovedTo={job['moved_to']}")
    if job.get("moved_from"):
        out.append(f"MovedFrom={job['moved_from']}")
    if job.get("container") or job.get("container_id"):  # OCI: only when asked for
        out.append(f"Container={null(job.get('container', ''))}")
        if job.get("container_id"):
            out[-1] += f" ContainerID={job['container_id']}"
    if job.get("switches"):
        out.append(f"Switches={job['switches']}@{format_hms(int(job['switch_wait']))}")
    if job.get("topology_level"):  # Corral's own
        out.append(f"TopologyLevel={job['topology_level']}")
    out.append("Power=")
    if job.get("gres_enforce_bind"):
        out.append(f"GresEnforceBind={job['gres_enforce_bind']}")
    out += _tres_lines(job)
    return out


def _held(job: Job) -> list[str]:
    """``-d``: what a job with nodes holds, in all (JOB_GRES) and on each node, nodes
    whose lines are the same together (``Nodes=n[1,3] CPU_IDs=0 Mem=16000
    GRES=gpu:a100:1(IDX:0)``), as Slurm's detail lines."""
    cpu_ids = job.get("node_cpu_ids") or ()
    if not cpu_ids:
        return []
    from corral.hostlist import compress, expand

    rows = list(zip(cpu_ids, job["node_mem"], job["node_gres"], strict=True))
    names = expand(job["nodes"])
    out = [f"JOB_GRES={null(job['job_gres'])}"]
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i] != rows[start]:
            ids, mem, gres = rows[start]
            nodes = compress(names[start:i])
            out.append(f"  Nodes={nodes} CPU_IDs={ids} Mem={mem} GRES={gres}")
            start = i
    return out


def _tres_lines(job: Job) -> list[str]:
    """Slurm's optional TRES lines after Power=, in its order (api/job_info.c)."""
    out = []
    for key, field in (
        ("CpusPerTres", "cpus_per_tres"),
        ("MemPerTres", "mem_per_tres"),
        ("TresBind", "tres_bind"),
        ("TresPerJob", "tres_per_job"),
    ):
        if job.get(field):
            out.append(f"{key}={job[field]}")
    if job["gres"]:
        gres = str(job["gres"])
        out.append(f"TresPerNode={gres if gres.startswith('gres') else 'gres/' + gres}")
    for key, field in (("TresPerSocket", "tres_per_socket"), ("TresPerTask", "tres_per_task")):
        if job.get(field):
            out.append(f"{key}={job[field]}")
    if job.get("ntasks_per_tres"):
        out.append(f"NtasksPerTRES={job['ntasks_per_tres']}")
    if job.get("mail_user"):
        out.append(f"MailUser={job['mail_user']} MailType={job.get('mail_type') or 'NONE'}")
    if job.get("flavor"):  # Corral's: which alternative it got or awaits, and why
        out.append(f"Flavor={job['flavor']}")
    return out


def record(job: Job, now: int, *, oneliner: bool = False, details: bool = False) -> str:
    """The whole record, ready to print."""
    return join(lines(job, now, details=details), oneliner, trailing=True)


def _cores(job: Job) -> str:
    """ReqB:S:C:T's C: the cores of each socket the job asks for (1 under
    --hint=memory_bound), ``*`` for any."""
    return _count(job, "cores_per_socket")


def _count(job: Job, field: str) -> str:
    """A socket or core count as Slurm shows it: ``*`` for any, 0 where ``-B`` gave
    0 (``node_info_zeros``: Slurm 22.05 showed ``-B 0`` as Socks/Node=0 and ``-B
    1:0`` as ReqB:S:C:T=0:0:0:*)."""
    if field in (job.get("node_info_zeros") or ()):
        return "0"
    return str(job.get(field) or "*")


def _threads(job: Job) -> str:
    """ReqB:S:C:T's T: the threads of each core the job's tasks use (--hint,
    --threads-per-core), ``*`` for all."""
    return str(job.get("threads_per_core") or "*")
