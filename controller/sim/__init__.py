"""``corral sim``: replay a workload trace through the real scheduling core.

swf.py reads Standard Workload Format traces, replay.py drives the core on a
simulated clock, policy.py is the one place a replay calls the core (and
where policies are chosen by name), report.py turns a replay into figures,
CSV rows and a plot. With ``--queues``, queues.py puts queues.conf's queues in
the replay's snapshots (the controller's QueueView), queuemap.py gives trace
jobs their accounts, and queuereport.py the per-queue figures.
"""

from controller.sim.errors import SimError, TraceError
from controller.sim.replay import JobResult, Replay, cluster_shape, replay
from controller.sim.swf import Header, Record, Trace, read

__all__ = [
    "Header",
    "JobResult",
    "Record",
    "Replay",
    "SimError",
    "Trace",
    "TraceError",
    "cluster_shape",
    "read",
    "replay",
]
