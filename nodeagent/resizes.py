"""What a job's runs learn when its allocation changes (docs/design.md, "Elastic jobs").

Every run, the batch script and each step's tasks on every node, has
``CORRAL_RESIZE_FILE`` in its environment: the file ``resize`` in the run's own
``checkpoint/`` directory (the job user's, :meth:`nodeagent.spool.RunDir.write_resize`).
When the controller sends ``ResizeJob`` the agent writes there, in the words of the
script Slurm's ``scontrol update ... NumNodes=`` leaves (``slurm_job_<id>_resize.sh``),
the variables that changed, so that ``. "$CORRAL_RESIZE_FILE"`` in a shell, or a
few lines of Python, bring the job's environment up to date::

    # job 12 resized at 1767225600
    export SLURM_NODELIST="n[1-2]"
    export SLURM_JOB_NODELIST="n[1-2]"
    export SLURM_NNODES=2
    export SLURM_JOB_NUM_NODES=2
    export SLURM_JOB_CPUS_PER_NODE="4(x2)"
    unset SLURM_TASKS_PER_NODE

SLURM_TASKS_PER_NODE is unset as Slurm's script unsets it: the tasks of the steps to
come are the new steps' own. The file is absent until the first change. The first
line, a comment to a shell, names the change, so that the same message sent again
(to an agent that reconnected) finds the file unchanged and sends no second signal.
"""

from __future__ import annotations

from corral.wire import corral_pb2 as pb

RESIZE_ENV = "CORRAL_RESIZE_FILE"

#: What a host list or a CPU count list may hold: nothing a shell would expand.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-[],()")


def script(msg: pb.ResizeJob) -> str:
    """The resize file's text for ``msg``; ValueError if a value is not plain (a
    shell sources the file)."""
    if not set(msg.nodelist) <= _PLAIN or not set(msg.cpus_per_node) <= _PLAIN:
        raise ValueError(f"job {msg.job_id}: a node list or CPU count a shell would expand")
    count = len(msg.nodes)
    return (
        f"# job {msg.job_id} resized at {msg.resize_time}\n"
        f'export SLURM_NODELIST="{msg.nodelist}"\n'
        f'export SLURM_JOB_NODELIST="{msg.nodelist}"\n'
        f"export SLURM_NNODES={count}\n"
        f"export SLURM_JOB_NUM_NODES={count}\n"
        f'export SLURM_JOB_CPUS_PER_NODE="{msg.cpus_per_node}"\n'
        "unset SLURM_TASKS_PER_NODE\n"
    )
