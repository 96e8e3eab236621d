"""corral-nodeagent: the node daemon (slurmd's role), the per-job supervisor and
the per-step runner.

``main`` parses the command line, ``agent`` wires one agent process together,
``link`` keeps the AgentLink stream to the controller, ``runs`` is the one
table of runs on this host (batch scripts and steps; ``runkinds`` what differs
between them), ``spool`` their directories on disk, ``signing`` signs the hello
and checks the controller's credential on its messages, ``process`` starts
supervisors and step runners, ``zygote`` forks them ready-made, ``supervisor``
is the per-job process and ``steprunner`` the per-step process (slurmstepd's
roles), ``runas`` the user switch they share, ``probe`` reads the host's
hardware and ``gpus`` its accelerators (NVML, nvidia-smi, sysfs, /dev/neuron*),
``clientproxy`` carries local clients' calls to the controller, ``oci`` runs a
task in an OCI container (``--container``, oci.conf), ``filebcast`` and
``bcastwrite`` write sbcast's blocks as the job's user, ``attachers`` are
sattach's connections to a step's runner. The supervisor
and step runner import only ``spool``, ``runas`` and the standard library (plus
``corral.filepattern`` and, for the runner, ``corral.stepio`` and ``attachers``), so that
starting one per job or step stays cheap even when the zygote is down.
"""

#: Nothing here is for other packages: they reach an agent through the controller.
__all__ = []
