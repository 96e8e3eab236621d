"""Every field of the wire ``JobInfo``: where the controller takes it from, and
what slurmrestd calls it.

Why: a job's fields were restated by hand in two places, ``controller.views``
(the controller's ``Job`` -> ``JobInfo``) and ``restd.jobs`` (``JobInfo`` ->
slurmrestd's JOB_INFO record), and a field added to the message could be
forgotten in either without any test noticing. These tables say it once:
``views.job_info`` copies the ``COPIED`` fields from them, ``restd.jobs``
builds its records from ``REST`` (what it computes are converters named there,
not another list of fields), and ``tests/unit/test_jobinfo.py`` holds both
modules and the message to them, so a new ``JobInfo`` field fails that test
until it is placed in each table.

Only names live here (no wire, controller or restd imports), so the CLI, the
controller and restd can all read it.
"""

from __future__ import annotations

from typing import Final

#: JobInfo fields the controller copies unchanged from a ``Job`` attribute (JobInfo -> Job).
COPIED: Final[dict[str, str]] = {
    "job_id": "job_id",
    "array_job_id": "array_job_id",
    "array_max_tasks": "array_max_tasks",
    "name": "name",
    "uid": "uid",
    "gid": "gid",
    "user": "user",
    "group": "group",
    "account": "account",
    "qos": "qos",
    "nice": "nice",
    "dependency": "dependency",
    "requeue": "requeue",
    "restarts": "restarts",
    "exit_status": "exit_status",
    "derived_exit_status": "exit_status",
    "time_limit": "time_limit",
    "time_min": "time_min",
    "submit_time": "submit_time",
    "end_time": "end_time",
    "deadline": "deadline",
    "max_nodes": "max_nodes",
    "num_tasks": "num_tasks",
    "cpus_per_task": "cpus_per_task",
    "ntasks_per_node": "ntasks_per_node",
    "features": "constraint",
    "exclusive": "exclusive",
    "command": "command",
    "work_dir": "work_dir",
    "std_in": "std_in",
    "comment": "comment",
    "system_comment": "system_comment",
    "preempt_time": "preempt_time",
    "checkpointed": "checkpointed",
    "reservation": "reservation",
    "submit_line": "submit_line",
    "alloc_node": "submit_host",
    "open_mode": "open_mode",
    "suspend_time": "suspend_time",
    "pre_suspend_secs": "pre_suspend_secs",
    "suspended_secs": "suspended_secs",
    "elastic_signal": "elastic_signal",
    "min_nodes": "min_nodes",
    "resize_time": "resize_time",
}

#: JobInfo fields ``views.job_info`` works out from the job (and the configuration).
DERIVED: Final[frozenset[str]] = frozenset(
    {
        "array_task_id",
        "array_task_str",
        "priority",
        "partition",
        "state",
        "state_flags",
        "reason",
        "batch_flag",
        "eligible_time",
        "accrue_time",
        "start_time",
        "last_sched_eval",
        "nodes",
        "sched_nodes",
        "batch_host",
        "req_nodes",
        "exc_nodes",
        "num_nodes",
        "num_cpus",
        "min_cpus_node",
        "min_mem_node",
        "min_mem_cpu",
        "mem_all",
        "oversubscribe",
        "std_out",
        "std_err",
        "req_tres",
        "alloc_tres",
        "cluster",
        "cpus_per_node",
        "signal",
        "gres",
        "held",
        "cancelled_by",
        "max_rss_kb",
        "user_cpu_us",
        "sys_cpu_us",
        "steps",
        "extern_step",
        "preempt_eligible_time",
        "queue",
    }
)

#: JobInfo fields the controller leaves at their default, and why.
NOT_SET: Final[dict[str, str]] = {
    "state_desc": "no reason text overrides the reason's name",
    "sched_partition": "a pending job's partitions are all in partition",
    "run_start": "set by controller.accounting in a resized job's records alone",
}

#: JobInfo fields restd shows, and the JOB_INFO key each appears under, in the
#: record's key order (``restd.jobs.job_info`` builds the record from this table).
REST: Final[dict[str, str]] = {
    "account": "account",
    "accrue_time": "accrue_time",
    "array_job_id": "array_job_id",
    "array_task_id": "array_task_id",
    "array_max_tasks": "array_max_tasks",
    "array_task_str": "array_task_string",
    "batch_flag": "batch_flag",
    "batch_host": "batch_host",
    "cluster": "cluster",
    "command": "command",
    "comment": "comment",
    "num_cpus": "cpus",
    "cpus_per_task": "cpus_per_task",
    "work_dir": "current_working_directory",
    "dependency": "dependency",
    "derived_exit_status": "derived_exit_code",
    "eligible_time": "eligible_time",
    "end_time": "end_time",
    "exc_nodes": "excluded_nodes",
    "exit_status": "exit_code",
    "features": "features",
    "gres": "gres_detail",
    "gid": "group_id",
    "group": "group_name",
    "held": "hold",
    "job_id": "job_id",
    "state": "job_state",
    "state_flags": "job_state",
    "last_sched_eval": "last_sched_evaluation",
    "max_nodes": "maximum_nodes",
    "min_mem_cpu": "memory_per_cpu",
    "min_mem_node": "memory_per_node",
    "name": "name",
    "nice": "nice",
    "num_nodes": "node_count",
    "nodes": "nodes",
    "partition": "partition",
    "priority": "priority",
    "qos": "qos",
    "requeue": "requeue",
    "req_nodes": "required_nodes",
    "reservation": "reservation",
    "restarts": "restart_cnt",
    "sched_nodes": "scheduled_nodes",
    "std_err": "standard_error",
    "std_in": "standard_input",
    "std_out": "standard_output",
    "start_time": "start_time",
    "state_desc": "state_description",
    "reason": "state_reason",
    "submit_time": "submit_time",
    "num_tasks": "tasks",
    "ntasks_per_node": "tasks_per_node",
    "time_limit": "time_limit",
    "time_min": "time_minimum",
    "alloc_tres": "tres_alloc_str",
    "req_tres": "tres_req_str",
    "uid": "user_id",
    "user": "user_name",
}

#: JobInfo fields restd leaves out of its JOB_INFO records.
NOT_IN_REST: Final[frozenset[str]] = frozenset(
    {
        "deadline",
        "suspend_time",
        "pre_suspend_secs",
        "suspended_secs",
        "min_cpus_node",
        "mem_all",
        "oversubscribe",
        "exclusive",
        "submit_line",
        "alloc_node",
        "cpus_per_node",
        "signal",
        "open_mode",
        "sched_partition",
        "cancelled_by",
        "queue",
        "max_rss_kb",
        "user_cpu_us",
        "sys_cpu_us",
        "steps",
        "extern_step",
        "system_comment",
        "preempt_eligible_time",
        "preempt_time",
        "checkpointed",
        "elastic_signal",
        "min_nodes",
        "resize_time",
        "run_start",
    }
)
