"""``corral ray``: a Ray cluster on the nodes of an allocation, for one driver command.

Inside an sbatch script (or under salloc) ``corral ray [options] -- DRIVER ...``
starts a Ray head on the allocation's first node and Ray workers on the
others, each through srun (so they are job steps, contained and accounted as
any step is), waits until every node has joined, runs the driver with
``RAY_ADDRESS`` set, ends the steps and exits with the driver's status.

``plan`` is the pure part: the allocation read from ``SLURM_*`` variables
and every command line. ``node`` is what each step runs on its node: it gives
that node's Ray the CPUs and GPUs the allocation gives the node and becomes
``ray start``. ``cluster`` starts, watches and ends the steps; ``command`` is
the subcommand. Nothing is imported here, so the launcher each node runs
pays only for ``node``. docs/ray.md describes the pattern for users.
"""
