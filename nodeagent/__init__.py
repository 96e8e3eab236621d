"""corral-nodeagent: the node daemon (slurmd's role) and the per-job supervisor.

``main`` parses the command line, ``agent`` wires one agent process together,
``link`` keeps the AgentLink stream to the controller, ``jobs`` is the table
of jobs on this host, ``spool`` their directories on disk, ``process`` starts
supervisors, ``zygote`` forks them ready-made, ``supervisor`` is the per-job
process (slurmstepd's role) and ``probe`` reads the host's hardware. The
supervisor imports only ``spool`` and the standard library (plus
``corral.filepattern``), so that starting one per job stays cheap even when
the zygote is down.
"""
