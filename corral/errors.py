"""Errors that cross process boundaries, with Slurm's numbers and wording.

Hierarchy::

    CorralError
    └── SlurmError(code, message)     a Slurm errno; str() is Slurm's text
        └── ControllerUnreachable     "Unable to contact slurm controller (connect failure)"

The controller raises ``SlurmError`` for anything a client did wrong; the
service layer puts ``code`` and the message on the wire, and the CLI prints
them as ``<prog>: error: <message>``. Clients and tools match on ``code``,
never on the text.
"""

from __future__ import annotations

# Slurm's errno values (slurm/slurm_errno.h) and messages (slurm_errno.c).
ESLURM_INVALID_PARTITION_NAME = 2000
ESLURM_DEFAULT_PARTITION_NOT_SET = 2001
ESLURM_ACCESS_DENIED = 2002
ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP = 2003
ESLURM_REQUESTED_NODES_NOT_IN_PARTITION = 2004
ESLURM_TOO_MANY_REQUESTED_CPUS = 2005
ESLURM_INVALID_NODE_COUNT = 2006
ESLURM_JOB_SCRIPT_MISSING = 2009
ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE = 2014
ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE = 2015
ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE = 2178  # Slurm 24.11
ESLURM_ALREADY_DONE = 2021
ESLURM_IN_STANDBY_MODE = 2027  # a backup controller: ask the next SlurmctldHost
ESLURM_BAD_DIST = 2023
ESLURM_INVALID_JOB_ID = 2017
ESLURM_INVALID_NODE_NAME = 2018
ESLURM_WRITING_TO_FILE = 2019
ESLURM_JOB_PENDING = 2024
ESLURM_JOB_NOT_PENDING = 2073
ESLURM_JOB_NOT_RUNNING = 2085
ESLURM_JOB_NOT_SUSPENDED = 2087
ESLURM_JOB_SUSPENDED = 2077
ESLURMD_STEP_EXISTS = 4026
ESLURM_DEPENDENCY = 2038
ESLURM_INVALID_ACCOUNT = 2045
ESLURM_INVALID_TIME_LIMIT = 2051
ESLURM_INVALID_QOS = 2066
ESLURM_INVALID_ARRAY = 2081
ESLURM_REST_INVALID_JOBS_DESC = 9002
ESLURM_INVALID_GRES = 2072
ESLURM_INVALID_LICENSES = 2048
ESLURM_PARTITION_DOWN = 2101
ESLURM_ENVIRONMENT_MISSING = 2127
ESLURM_BATCH_ONLY = 2039
ESLURM_DISABLED = 2037
ESLURM_NOT_WHOLE_HET_JOB = 2108
ESLURM_NOT_SUPPORTED = 2036
ESLURM_INVALID_FEATURE = 2029
ESLURM_USER_ID_MISSING = 2010
ESLURM_JOB_HELD = 2042
ESLURM_INVALID_TASK_MEMORY = 2044
ESLURM_INVALID_JOB_STATE = 2181
ESLURM_PROTOCOL_ERROR = 1005
SLURM_UNEXPECTED_MSG_ERROR = 1000
ESLURM_DB_CONNECTION = 7000
ESLURM_NODES_BUSY = 2016
ESLURM_RESERVATION_ACCESS = 2052
ESLURM_RESERVATION_INVALID = 2053
ESLURM_RESERVATION_BUSY = 2055
ESLURM_RESERVATION_OVERLAP = 2058
ESLURM_RESERVATION_EMPTY = 2080
ESLURM_RESERVATION_NAME_DUP = 2082
EINVAL = 22
EAGAIN = 11
ESLURM_PATHNAME_TOO_LONG = 2012
SLURMCTLD_COMMUNICATIONS_BACKOFF = 1804
SLURM_PROTOCOL_INSANE_MSG_LENGTH = 1008
ESLURMD_CPU_BIND_ERROR = 4032
SLURM_COMMUNICATIONS_CONNECTION_ERROR = 1001
SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT = 5004
ESLURM_INVALID_CLUSTER_NAME = 7104

MESSAGES: dict[int, str] = {
    ESLURM_INVALID_PARTITION_NAME: "Invalid partition name specified",
    ESLURM_DEFAULT_PARTITION_NOT_SET: "No partition specified or system default partition",
    ESLURM_ACCESS_DENIED: "Access/permission denied",
    ESLURM_IN_STANDBY_MODE: "Slurm backup controller in standby mode",
    ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP: "User's group not permitted to use this partition",
    ESLURM_REQUESTED_NODES_NOT_IN_PARTITION: "Requested nodes not in this partition",
    ESLURM_TOO_MANY_REQUESTED_CPUS: "More processors requested than permitted",
    ESLURM_BAD_DIST: "Task distribution specification invalid",
    ESLURMD_CPU_BIND_ERROR: "Unable to satisfy cpu bind request",
    ESLURM_INVALID_NODE_COUNT: "Node count specification invalid",
    ESLURM_INVALID_FEATURE: "Invalid feature specification",
    ESLURM_JOB_SCRIPT_MISSING: "Job script not specified",
    ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE: "Requested node configuration is not available",
    ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE: "Requested partition configuration not available now",
    ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE: "Requested topology configuration is not available",
    ESLURM_INVALID_JOB_ID: "Invalid job id specified",
    ESLURM_INVALID_NODE_NAME: "Invalid node name specified",
    ESLURM_WRITING_TO_FILE: "I/O error writing script/environment to file",
    ESLURM_NODES_BUSY: "Requested nodes are busy",
    ESLURM_RESERVATION_ACCESS: "Access denied to requested reservation",
    ESLURM_RESERVATION_INVALID: "Requested reservation is invalid",
    ESLURM_RESERVATION_BUSY: "Requested reservation is in use",
    ESLURM_RESERVATION_OVERLAP: "Requested reservation overlaps with another reservation",
    ESLURM_RESERVATION_EMPTY: "Reservation request lacks users, groups or accounts",
    ESLURM_RESERVATION_NAME_DUP: "Duplicate reservation name",
    ESLURM_ALREADY_DONE: "Job/step already completing or completed",
    ESLURM_USER_ID_MISSING: "Invalid user id",
    ESLURM_JOB_PENDING: "Job is pending execution",
    ESLURM_JOB_NOT_PENDING: "Job is no longer pending execution",
    ESLURM_JOB_NOT_RUNNING: "Job is not running",
    ESLURM_JOB_NOT_SUSPENDED: "Job is not suspended",
    ESLURM_JOB_SUSPENDED: "Job is current suspended, requested operation disabled",
    ESLURMD_STEP_EXISTS: "Job step already exists",
    ESLURM_JOB_HELD: "Job is in held state, pending scheduler release",
    ESLURM_INVALID_TASK_MEMORY: "Memory required by task is not available",
    ESLURM_DEPENDENCY: "Job dependency problem",
    ESLURM_INVALID_ACCOUNT: "Invalid account or account/partition combination specified",
    ESLURM_INVALID_TIME_LIMIT: "Requested time limit is invalid (missing or exceeds some limit)",
    ESLURM_DISABLED: "Requested operation is presently disabled",
    ESLURM_NOT_WHOLE_HET_JOB: (
        "Operation not permitted on individual component of heterogeneous job"
    ),
    ESLURM_BATCH_ONLY: "Only batch jobs are accepted or processed",
    ESLURM_REST_INVALID_JOBS_DESC: (
        "Jobs description entry not found, empty or not dictionary or list"
    ),
    ESLURM_INVALID_JOB_STATE: "Invalid job state specified",
    ESLURM_INVALID_QOS: "Invalid qos specification",
    ESLURM_NOT_SUPPORTED: "Requested operation not supported on this system",
    ESLURM_INVALID_ARRAY: "Invalid job array specification",
    ESLURM_INVALID_GRES: "Invalid generic resource (gres) specification",
    ESLURM_INVALID_LICENSES: "Invalid license specification",
    ESLURM_PARTITION_DOWN: "Partition in DOWN state",
    ESLURM_ENVIRONMENT_MISSING: "Environment is missing in job",
    ESLURM_PROTOCOL_ERROR: "Protocol error",
    SLURM_UNEXPECTED_MSG_ERROR: "Unexpected message received",
    ESLURM_DB_CONNECTION: "Unable to connect to database",
    EINVAL: "Invalid argument",
    EAGAIN: "Resource temporarily unavailable",
    ESLURM_PATHNAME_TOO_LONG: "Pathname of a file, directory or other parameter too long",
    SLURMCTLD_COMMUNICATIONS_BACKOFF: "Rate limit exceeded, please retry momentarily",
    SLURM_PROTOCOL_INSANE_MSG_LENGTH: "Insane message length",
    SLURM_COMMUNICATIONS_CONNECTION_ERROR: "Communication connection failure",
    SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT: "Socket timed out on send/recv operation",
    ESLURM_INVALID_CLUSTER_NAME: "Invalid cluster name",
}


class CorralError(Exception):
    """Base of every Corral error."""


class AuthError(CorralError):
    """A missing or insecure key, or a credential that does not verify (here, not in
    corral.auth, so that corral.munge can raise it without importing auth)."""


class SlurmError(CorralError):
    """A failure with a Slurm errno; ``str()`` is what a client prints."""

    def __init__(self, code: int, message: str | None = None, detail: str = "") -> None:
        self.code = code
        self.message = message or MESSAGES.get(code, f"Unknown error {code}")
        # What Slurm's controller says of the refusal besides its errno (err_msg: a
        # line its clients print before the errno's message); "" none.
        self.detail = detail
        super().__init__(self.message)


class ControllerUnreachable(SlurmError):
    """No controller answered at the configured address."""

    def __init__(self) -> None:
        super().__init__(
            SLURM_UNEXPECTED_MSG_ERROR, "Unable to contact slurm controller (connect failure)"
        )
