"""Corral's shared library: config, hostlists, time formats, auth, the node
bitmap and the wire types. Every Corral program imports from here, and this
package imports nothing heavy at module level (clients must start in < 30 ms).
"""

__version__ = "0.1.0"

#: The Slurm release whose interface Corral follows; clients print it for --version.
SLURM_VERSION = "24.11.0"
#: Slurm 24.11's protocol version: a cluster's RPC in sacctmgr, the last field of
#: SLURM_WORKING_CLUSTER.
SLURM_PROTOCOL_VERSION = "10752"

#: What the other packages may import from here (tests/unit/test_public_surface.py
#: holds every import across packages to these lists).
__all__ = [
    "SLURM_PROTOCOL_VERSION",
    "SLURM_VERSION",
    "__version__",
    "_onecpu",  # the core's pass on one-CPU nodes in C (csrc/onecpu.c), for corral sim
    "_spawn",  # the C task start (csrc/spawn.c), for the node agent's step runner
    "arrayspec",
    "auth",
    "authalt",
    "bcastparams",
    "certs",
    "cgroupconf",
    "client",
    "clientconf",
    "clusterroute",
    "config",
    "configless",
    "confkeys",
    "confsyntax",
    "cpubind",
    "credentials",
    "crontab",
    "dirsync",
    "distribution",
    "errors",
    "filepattern",
    "framedserver",
    "gpunumbers",
    "gres",
    "gresconf",
    "grpcservice",
    "grpctls",
    "hooks",
    "hostlist",
    "jobinfo",
    "licenses",
    "mailtype",
    "mpitypes",
    "multiprog",
    "munge",
    "nodeset",
    "ociconf",
    "oomscore",
    "preemptconf",
    "pynodeset",
    "queueconf",
    "queuedoc",
    "queuewords",
    "ratelimit",
    "rpcerror",
    "sdnotify",
    "statestorage",
    "stepcipher",
    "stepinput",
    "stepio",
    "timefmt",
    "tlsconf",
    "tokens",
    "topologyconf",
    "units",
    "whydoc",
    "wire",
]
