"""Every slurm.conf, slurmdbd.conf and cgroup.conf key Slurm knows, and what Corral does with it.

queues.conf, Corral's own file, has its table here too (every key honoured).

Administrators bring their Slurm files, so every key Slurm's slurm.conf(5) and
slurmdbd.conf(5) document is accepted (a key Slurm does not know is a warning,
never a failure). But a key Corral does not implement must not be ignored in
silence where that could change what happens: each row below says, next to
the key, whether it is

* ``honoured``: the daemons do what Slurm documents;
* ``warned``: not implemented, and it cannot change an outcome (logging,
  mail, power saving without programs, plugins of Slurm's own): the daemon
  starts and says once that the key has no effect;
* ``refused``: not implemented, and ignoring it could change an outcome
  (site scripts, security plugins, limits): a daemon will not start with the
  key set, unless to a value that asks for nothing, given in brackets
  (``refused(no,0)``), or empty.

A row is ``Key  use  note``; the note says why, for the message and for
docs/compatibility.md, which is generated from these tables
(``python -m cli.compat``).
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.confsyntax import ConfigError, Where

HONOURED = "honoured"
WARNED = "warned"
REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class KeyUse:
    """One key's row: what Corral does with it, and the values that ask for nothing."""

    key: str
    use: str
    harmless: frozenset[str]  # lowercase; the empty value always is
    note: str


def _rows(text: str) -> dict[str, KeyUse]:
    """A table's rows by lowercase key."""
    rows: dict[str, KeyUse] = {}
    for line in text.strip().splitlines():
        key, use, *note = line.split(maxsplit=2)
        use, _, values = use.partition("(")
        harmless = frozenset(v.lower() for v in values.rstrip(")").split(",") if v)
        rows[key.lower()] = KeyUse(key, use, harmless, note[0] if note else "")
    return rows


def check(row: KeyUse, value: str, where: Where, warnings: list[str]) -> None:
    """Refuse (``ConfigError``) or note in ``warnings`` a key set to ``value``."""
    if row.use == HONOURED or not value or value.lower() in row.harmless:
        return
    if row.use == REFUSED:
        raise ConfigError(*where, f"{row.key}={value} is not supported: {row.note}")
    warnings.append(f"{where[0]}:{where[1]}: {row.key} has no effect: {row.note}")


#: slurm.conf's top-level keys.
TOP = _rows(
    """
AccountingStorageBackupHost     warned              one corral-dbd, no backup
AccountingStorageEnforce        honoured
AccountingStorageExternalHost   warned              no external accounting databases
AccountingStorageHost           honoured
AccountingStorageLoc            warned              records go to corral-dbd
AccountingStorageParameters     warned              no parameters are read
AccountingStoragePass           warned              corral-dbd trusts the cluster key
AccountingStoragePort           honoured
AccountingStorageTRES           honoured
AccountingStorageType           honoured
AccountingStorageUser           warned              corral-dbd trusts the cluster key
AccountingStoreFlags            warned              job scripts and environments are not stored
AccountingStoreJobComment       warned              comments are always stored
AcctGatherEnergyType            warned              no energy accounting
AcctGatherFilesystemType        warned              no file system accounting
AcctGatherInfinibandType        warned              no interconnect accounting
AcctGatherInterconnectType      warned              no interconnect accounting
AcctGatherNodeFreq              warned              no node sampling
AcctGatherProfileType           warned              no profiling
AllowSpecResourcesUsage         warned              core specialization is not implemented
AuthAltParameters               honoured            jwt_key, max_token_lifespan, disable_token_*
AuthAltTypes                    warned              corral-restd is configured on its command line
AuthInfo                        honoured            ttl (credential lifetime), socket
AuthType                        honoured            auth/munge: munged; else the cluster key
BackupAddr                      honoured
BackupController                honoured
BatchStartTimeout               warned              a Prolog runs within PrologEpilogTimeout
BcastExclude                    honoured            sbcast and srun --bcast leave these out
BcastParameters                 honoured            DestDir, Compression, send_libs (sbcast, srun)
BurstBufferParameters           warned              burst buffers are not implemented
BurstBufferType                 warned              burst buffers are not implemented
CacheGroups                     warned              retired by Slurm
CertgenParameters               warned              not read
CertgenType                     warned              not read
CertmgrParameters               warned              not read
CertmgrType                     warned              not read
CheckpointType                  warned              retired by Slurm
CliFilterParameters             warned              no cli_filter plugins
CliFilterPlugins                refused             cli_filter plugins are not run
ClusterName                     honoured
CommunicationParameters         warned              not read
CompleteWait                    warned              jobs are scheduled as soon as nodes are free
ControlAddr                     honoured
ControlMachine                  honoured
CoreSpecPlugin                  warned              core specialization is not implemented
CpuFreqDef                      warned              CPU frequencies are left as they are
CpuFreqGovernors                warned              CPU frequencies are left as they are
CredType                        warned              launches are signed with the cluster key
CryptoType                      warned              launches are signed with the cluster key
DataParserParameters            warned              not read
DebugFlags                      warned              log levels are set with the daemons' -v
DefCpuPerGPU                    honoured            GPU jobs without -c or --cpus-per-gpu
DefMemPerCPU                    honoured
DefMemPerGPU                    honoured            GPU jobs without --mem* options
DefMemPerNode                   honoured
DefRuntimePlugin                warned              no container runtimes
DependencyParameters            refused             dependencies follow SchedulerParameters
DisableRootJobs                 refused(no,0,false) root's jobs are not refused
EioTimeout                      warned              not read
EnforcePartLimits               honoured
Epilog                          honoured            on every node of a job when it ends
EpilogMsgTime                   honoured
EpilogSlurmctld                 honoured
EpilogTimeout                   warned              see PrologEpilogTimeout
ExtSensorsFreq                  warned              no external sensors
ExtSensorsType                  warned              no external sensors
FairShareDampeningFactor        honoured
FastSchedule                    warned              retired by Slurm
FederationParameters            warned              no federation
FirstJobId                      honoured
GetEnvTimeout                   warned              not read
GpuFreqDef                      warned              GPU frequencies are left as they are
GresTypes                       honoured
GroupUpdateForce                warned              groups are read when needed
GroupUpdateTime                 warned              groups are read when needed
HashPlugin                      warned              not read
HealthCheckInterval             honoured
HealthCheckNodeState            honoured            IDLE, ALLOC, MIXED: whether a job runs
HealthCheckProgram              honoured            a failure also drains the node
HealthCheckTimeout              honoured
HttpParserType                  warned              not read
InactiveLimit                   refused(0)          allocations outlive their srun or salloc
InteractiveStepOptions          warned              salloc runs its command on the submit host
JobAcctGatherFrequency          honoured
JobAcctGatherParams             warned              steps are sampled as JobAcctGatherType says
JobAcctGatherType               honoured
JobCheckpointDir                warned              retired by Slurm
JobCompHost                     warned              jobcomp/filetxt only
JobCompLoc                      honoured
JobCompParams                   warned              jobcomp/filetxt only
JobCompPass                     warned              jobcomp/filetxt only
JobCompPassScript               warned              jobcomp/filetxt only
JobCompPort                     warned              jobcomp/filetxt only
JobCompType                     honoured
JobCompUser                     warned              jobcomp/filetxt only
JobContainerType                refused(job_container/none) private /tmp is not made
JobCredentialPrivateKey         warned              launches are signed with the cluster key
JobCredentialPublicCertificate  warned              launches are signed with the cluster key
JobFileAppend                   honoured
JobRequeue                      honoured
JobSubmitPlugins                refused             job_submit plugins are not run
KeepAliveTime                   warned              not read
KillOnBadExit                   honoured
KillWait                        honoured
LaunchParameters                warned              not read
LaunchType                      warned              not read
LicenseParameters               warned              none of its options is implemented
Licenses                        honoured            cluster-wide counts jobs ask for with -L
LogTimeFormat                   warned              logs use ISO 8601 times
MailDomain                      honoured
MailProg                        honoured
MaxArraySize                    honoured
MaxBatchRequeue                 refused(5)          requeues are not counted against a limit
MaxDBDMsgs                      warned              the outbox is on disk, not in memory
MaxJobCount                     honoured
MaxJobId                        warned              job ids do not wrap
MaxMemPerCPU                    honoured
MaxMemPerNode                   honoured
MaxNodeCount                    warned              no dynamic nodes
MaxStepCount                    refused(40000)      steps per job are not limited
MaxTasksPerNode                 refused(512)        tasks per node are not limited
MCSParameters                   warned              no MCS labels
MCSPlugin                       refused(mcs/none)   MCS labels are not implemented
MessageTimeout                  honoured            socket read and gRPC handshake timeout
MetricsAuthUsers                warned              not read
MetricsParameters               honoured
MetricsType                     honoured
MinJobAge                       honoured
MpiDefault                      honoured            none or pmi2 (PMI-1 and PMI-2); others refused
MpiParams                       warned              ports= (OpenMPI's reserved ports) is not read
NamespaceType                   refused             job namespaces are not made
NodeFeaturesPlugins             refused             changeable node features are not implemented
OverTimeLimit                   refused(0)          jobs end at their time limit
PluginDir                       warned              no plugins are loaded
PlugStackConfig                 refused             SPANK plugins are not loaded
PowerParameters                 warned              no power management
PowerPlugin                     warned              no power management
PreemptExemptTime               honoured
PreemptMode                     honoured
PreemptParameters               honoured            youngest_first, reordering and licenses refused
PreemptType                     honoured
PrEpParameters                  warned              no prolog and epilog plugins
PrEpPlugins                     refused(prep/script) prolog and epilog plugins are not run
PriorityCalcPeriod              honoured
PriorityDecayHalfLife           honoured
PriorityFavorSmall              honoured
PriorityFlags                   honoured
PriorityMaxAge                  honoured
PriorityParameters              warned              not read
PrioritySiteFactorParameters    warned              no site factor
PrioritySiteFactorPlugin        refused(site_factor/none) site factors are not added to priorities
PriorityType                    honoured
PriorityUsageResetPeriod        honoured
PriorityWeightAge               honoured
PriorityWeightAssoc             honoured
PriorityWeightFairshare         honoured
PriorityWeightJobSize           honoured
PriorityWeightPartition         honoured
PriorityWeightQOS               honoured
PriorityWeightTRES              honoured
PrivateData                     honoured
ProctrackType                   honoured            proctrack/cgroup; others: process groups
Prolog                          honoured            at a job's first step on a node, or at Alloc
PrologEpilogTimeout             honoured
PrologFlags                     honoured            Alloc Contain NoHold Serial; others refused
PrologSlurmctld                 honoured
PrologTimeout                   warned              see PrologEpilogTimeout
PropagatePrioProcess            warned              jobs run at the node's default nice value
PropagateResourceLimits         refused(none)       submitters' limits are not propagated
PropagateResourceLimitsExcept   warned              no resource limits are propagated
RebootProgram                   honoured
ReconfigFlags                   warned              not read
RequeueExit                     refused             jobs are not requeued by exit code
RequeueExitHold                 refused             jobs are not requeued by exit code
ResumeFailProgram               honoured            run for nodes not back within ResumeTimeout
ResumeProgram                   honoured
ResumeRate                      honoured
ResumeTimeout                   honoured            how long a rebooted or resumed node may take
ResvEpilog                      refused             reservation epilog scripts are not run
ResvOverRun                     refused(0)          jobs in a reservation end with it
ResvProlog                      refused             reservation prolog scripts are not run
ReturnToService                 honoured
RoutePlugin                     warned              not read
SallocDefaultCommand            refused             salloc runs its command or the shell
SbcastParameters                warned              a typo of sbcast(1): BcastParameters
SchedulerParameters             honoured            + corral_move_* (docs/federation.md)
SchedulerPort                   warned              retired by Slurm
SchedulerTimeSlice              honoured
SchedulerType                   honoured
ScronParameters                 honoured            enable: scrontab (docs/scrontab.md)
SelectType                      refused(select/cons_tres,select/cons_res) never whole nodes
SelectTypeParameters            honoured
SerializerParameters            warned              not read
SerializerPlugins               warned              not read
SlurmctldAddr                   honoured            agents and restd reach the serving one there
SlurmctldDebug                  warned              log levels are set with the daemons' -v
SlurmctldHost                   honoured
SlurmctldHttpAuthParameters     warned              not read
SlurmctldLogFile                warned              logs go to standard error
SlurmctldParameters             honoured            rl_* rate limits, conmgr_max_connections
SlurmctldPidFile                warned              no pid files
SlurmctldPort                   honoured
SlurmctldPrimaryOffProg         honoured            when a controller stops serving (docs/ha.md)
SlurmctldPrimaryOnProg          honoured            when a controller starts serving (docs/ha.md)
SlurmctldSyslogDebug            warned              logs go to the log files
SlurmctldTimeout                honoured            the leader lease (docs/ha.md); 10 s unless set
SlurmdDebug                     warned              log levels are set with the daemons' -v
SlurmdHttpAuthParameters        warned              not read
SlurmdLogFile                   warned              logs go to standard error
SlurmdParameters                warned              not read
SlurmdPidFile                   warned              no pid files
SlurmdPort                      honoured
SlurmdSpoolDir                  honoured
SlurmdSyslogDebug               warned              logs go to the log files
SlurmdTimeout                   honoured
SlurmdUser                      warned              the node agent runs as root
SlurmrestdHttpAuthParameters    warned              corral-restd is configured on its command line
SlurmrestdParameters            warned              corral-restd is configured on its command line
SlurmSchedLogFile               warned              scheduling is logged in the controller's log
SlurmSchedLogLevel              warned              scheduling is logged in the controller's log
SlurmstepdParameters            warned              not read
SlurmUser                       honoured
SrunEpilog                      honoured
SrunPortRange                   warned              srun listens on an ephemeral port
SrunProlog                      honoured
StateSaveLocation               honoured
StateStorageHost                honoured            Corral's own (docs/ha.md): the database server
StateStorageLoc                 honoured            Corral's own (docs/ha.md): the database
StateStoragePass                honoured            Corral's own (docs/ha.md): the user's password
StateStoragePort                honoured            Corral's own (docs/ha.md): the server's port
StateStorageType                honoured            Corral's own: where the state is (docs/ha.md)
StateStorageUser                honoured            Corral's own (docs/ha.md): the database user
SuspendExcNodes                 honoured
SuspendExcParts                 honoured
SuspendExcStates                honoured            DOWN, DRAIN and NOT_RESPONDING
SuspendProgram                  honoured
SuspendRate                     honoured
SuspendTime                     honoured
SuspendTimeout                  honoured
SwitchParameters                warned              no switch plugins
SwitchType                      warned              no switch plugins
TaskEpilog                      honoured
TaskPlugin                      honoured            task/cgroup; task/affinity: bind to cores
TaskPluginParam                 warned              tasks keep the default binding
TaskProlog                      honoured
TCPTimeout                      warned              not read
TLSParameters                   honoured            ca_cert_file and the daemons' cert and key files
TLSType                         honoured            tls/s2n (the default here) or tls/none
TmpFS                           warned              temporary disk is not tracked
TopologyParam                   honoured            TopoOptional; routing warned; others refused
TopologyPlugin                  honoured            tree and block (topology.conf), or flat
TrackWCKey                      refused(no,0,false) WCKeys are not tracked
TreeWidth                       warned              the controller talks to every agent directly
UnkillableStepProgram           warned              not run
UnkillableStepTimeout           honoured            then the node is drained "Kill task failed"
UrlParserType                   warned              not read
UsePAM                          refused(0,no)       PAM sessions are not opened for jobs
VSizeFactor                     refused(0)          virtual memory is not limited
WaitTime                        refused(0)          srun never ends tasks after a first exit
X11Parameters                   warned              no X11 forwarding
"""
)
#: NodeName= lines.
NODE = _rows(
    """
NodeName                        honoured
BcastAddr                       warned              sbcast's blocks go through the controller
Boards                          honoured
CoreSpecCount                   refused(0)          core specialization is not implemented
CoresPerSocket                  honoured
CpuBind                         warned              tasks keep the default binding
CPUs                            honoured
CPUSpecList                     refused             core specialization is not implemented
Feature                         honoured
Features                        honoured
Gres                            honoured
GresConf                        warned              gres.conf is read beside slurm.conf
MemSpecLimit                    refused(0)          memory specialization is not implemented
NodeAddr                        honoured
NodeHostname                    honoured
Parameters                      warned              not read
Port                            honoured
Procs                           honoured
RealMemory                      honoured
Reason                          honoured
RestrictedCoresPerGPU           refused(0)          cores are not kept for GPU jobs
Sockets                         honoured
SocketsPerBoard                 honoured
State                           honoured
SuspendTime                     refused             set SuspendTime on its partition
ThreadsPerCore                  honoured
TmpDisk                         honoured
Topology                        refused             topology.yaml topologies are not implemented
TRESWeights                     warned              node TRES weights are not read
Weight                          honoured
"""
)
#: PartitionName= lines.
PARTITION = _rows(
    """
PartitionName                   honoured
AllocNodes                      refused(all)        jobs are not limited to submit hosts
AllowAccounts                   honoured
AllowGroups                     honoured
AllowQos                        honoured
Alternate                       warned              no alternate partitions
CpuBind                         warned              tasks keep the default binding
DefCpuPerGPU                    honoured            GPU jobs without -c or --cpus-per-gpu
DefMemPerCPU                    honoured
DefMemPerGPU                    honoured            GPU jobs without --mem* options
DefMemPerNode                   honoured
Default                         honoured
DefaultTime                     honoured
DenyAccounts                    honoured
DenyQos                         honoured
DisableRootJobs                 refused(no,0,false) root's jobs are not refused
Exclusive                       honoured
ExclusiveTopo                   refused(no)         jobs are not kept alone in a topology segment
ExclusiveUser                   refused(no)         nodes are not kept to one user
GraceTime                       honoured
Hidden                          honoured
LLN                             refused(no)         least-loaded placement is not implemented
MaxCPUsPerNode                  honoured
MaxCPUsPerSocket                refused(unlimited)  CPUs per socket are not limited
MaxMemPerCPU                    honoured
MaxMemPerNode                   honoured
MaxNodes                        honoured
MaxTime                         honoured
MinNodes                        honoured
Nodes                           honoured
OverSubscribe                   honoured
OverTimeLimit                   refused(0)          jobs end at their time limit
PowerDownOnIdle                 refused(no)         idle nodes wait for SuspendTime
PreemptMode                     honoured
Priority                        honoured
PriorityJobFactor               honoured
PriorityTier                    honoured
QOS                             refused             partition QOS are not applied
ReqResv                         refused(no)         jobs are not required to name a reservation
ResumeTimeout                   honoured
RootOnly                        honoured
SelectTypeParameters            honoured
Shared                          honoured
State                           honoured
SuspendTime                     honoured
SuspendTimeout                  honoured
Topology                        refused             topology.yaml topologies are not implemented
TRESBillingWeights              honoured
"""
)
#: DownNodes= lines.
DOWNNODES = _rows(
    """
DownNodes                       honoured
Reason                          honoured
State                           honoured
"""
)
#: NodeSet= lines.
NODESET = _rows(
    """
NodeSet                         honoured
Nodes                           honoured
Feature                         honoured
"""
)
#: PowerAction= lines.
POWERACTION = _rows(
    """
PowerAction                     warned              no power management
Location                        warned              no power management
Program                         warned              no power management
"""
)
#: slurmdbd.conf.
DBD = _rows(
    """
AllowNoDefAcct                  refused(no,0)       users always need a default account
AllResourcesAbsolute            warned              not read
ArchiveDir                      warned              nothing is archived
ArchiveEvents                   refused(no,0)       purged records are not archived
ArchiveJobs                     refused(no,0)       purged records are not archived
ArchiveResvs                    refused(no,0)       purged records are not archived
ArchiveScript                   refused             purged records are not archived
ArchiveSteps                    refused(no,0)       purged records are not archived
ArchiveSuspend                  refused(no,0)       purged records are not archived
ArchiveTXN                      refused(no,0)       purged records are not archived
ArchiveUsage                    refused(no,0)       purged records are not archived
AuthAltTypes                    warned              the cluster key is used
AuthAltParameters               warned              the cluster key is used
AuthInfo                        honoured            ttl (credential lifetime), socket
AuthType                        honoured            auth/munge: munged; else the cluster key
CommitDelay                     warned              every record is committed
CommunicationParameters         warned              not read
DbdAddr                         honoured
DbdBackupHost                   warned              one corral-dbd, no backup
DbdHost                         honoured
DbdPort                         honoured
DebugFlags                      warned              log levels are set with corral-dbd's -v
DebugLevel                      warned              log levels are set with corral-dbd's -v
DebugLevelSyslog                warned              logs go to the log file
DefaultQOS                      refused             new associations get the QOS normal
LogFile                         warned              logs go to standard error
LogTimeFormat                   warned              logs use ISO 8601 times
MaxQueryTimeRange               warned              not read
MessageTimeout                  warned              not read
Parameters                      warned              not read
PidFile                         warned              no pid file
PluginDir                       warned              no plugins are loaded
PrivateData                     honoured
PurgeEventAfter                 honoured
PurgeJobAfter                   honoured
PurgeResvAfter                  warned              reservation records are kept
PurgeStepAfter                  warned              step records are kept with their job's
PurgeSuspendAfter               warned              suspend records are kept
PurgeTXNAfter                   warned              transaction records are kept
PurgeUsageAfter                 warned              usage records are kept
SlurmUser                       honoured
StorageBackupHost               warned              one database host
StorageHost                     honoured
StorageLoc                      honoured
StorageParameters               refused             SSL and other connection settings are unused
StoragePass                     honoured
StoragePort                     honoured
StorageType                     honoured
StorageUser                     honoured
TCPTimeout                      warned              not read
TLSParameters                   honoured            ca_cert_file, dbd_cert_file, dbd_cert_key_file
TLSType                         honoured            tls/s2n (the default here) or tls/none
TrackSlurmctldDown              warned              not read
TrackWCKey                      refused(no,0)       WCKeys are not tracked
"""
)

#: cgroup.conf's keys (cgroup.conf(5)) and what Corral does with each.
CGROUP = _rows(
    """
AllowedDevicesFile              warned              obsolete; devices come from gres.conf
AllowedKmemSpace                warned              kernel memory is not limited apart
AllowedRAMSpace                 honoured
AllowedSwapSpace                honoured
CgroupAutomount                 warned              cgroup file systems are never mounted
CgroupMountpoint                refused(/sys/fs/cgroup) cgroups are found in /proc/self/mounts
CgroupPlugin                    honoured            autodetect, cgroup/v1 or cgroup/v2
CgroupReleaseAgentDir           warned              obsolete
ConstrainCores                  honoured
ConstrainDevices                honoured            no: warned, GPUs are fenced all the same
ConstrainKmemSpace              refused(no)         kernel memory is not limited apart
ConstrainRAMSpace               honoured
ConstrainSwapSpace              honoured
IgnoreSystemd                   warned              the agent's cgroup is used as delegated
IgnoreSystemdOnFailure          warned              the agent's cgroup is used as delegated
MaxKmemPercent                  warned              kernel memory is not limited apart
MaxRAMPercent                   refused(100)        a job without allocated memory is not limited
MaxSwapPercent                  refused(100)        a job without allocated memory is not limited
MemorySwappiness                honoured            cgroup v1 only (v2 has no per-cgroup swappiness)
MinKmemSpace                    warned              kernel memory is not limited apart
MinRAMSpace                     honoured
PidsMax                         honoured            Corral's own: pids.max of each run
"""
)

#: oci.conf's keys (oci.conf(5)) and what Corral does with each; an unknown key is refused.
OCI = _rows(
    """
ContainerPath                   refused             bundles are written in the run's spool directory
CreateEnvFile                   honoured            null, newline or disabled (true, false)
DebugFlags                      warned              the agent logs at its own level
DisableCleanup                  refused(no,false)   the bundles go with the run's spool directory
DisableHooks                    honoured            OCI hook types left out of config.json
EnvExclude                      honoured            regex: variables kept out of the container
FileDebug                       warned              the agent logs at its own level
IgnoreFileConfigJson            honoured            a default config.json, the bundle's unread
MountSpoolDir                   honoured            where the run's spool directory is mounted
RunTimeCreate                   honoured
RunTimeDelete                   honoured
RunTimeEnvExclude               honoured            regex: variables kept from the runtime
RunTimeKill                     honoured
RunTimeQuery                    honoured
RunTimeRun                      honoured
RunTimeStart                    honoured
SrunArgs                        warned              scrun is not provided
SrunPath                        warned              scrun is not provided
StdIODebug                      warned              the agent logs at its own level
SyslogDebug                     warned              the agent logs at its own level
"""
)

#: queues.conf's keys: Corral's own file (issue 17, docs/queues.md), so every key is
#: honoured and any other is refused with its line.
QUEUES = _rows(
    """
QueueName                       honoured            a queue; root is the top, the cluster
Parent                          honoured            the queue above; root by default
Accounts                        honoured            jobs of these accounts land in the queue
QOS                             honoured            else jobs of these QOS
Partitions                      honoured            else jobs of these partitions
Guarantee                       honoured            TRES list: KAI's deserved, Kueue's nominalQuota
Limit                           honoured            TRES list: a hard cap; -1 is none
BorrowLimit                     honoured            TRES list: most borrowed beyond the guarantee
LendLimit                       honoured            TRES list: most of the unused guarantee lent
OverQuotaWeight                 honoured            share of the surplus within a priority
Priority                        honoured            higher priorities take the surplus first
Preemptible                     honoured            whether the queue's jobs may be preempted
WhenCanBorrow                   honoured            MayStopSearch or TryNextFlavor; inherited
WhenCanPreempt                  honoured            TryNextFlavor or MayStopSearch; inherited
ReclaimMinRuntime               honoured            run time protected from reclaim; inherited
PreemptMinRuntime               honoured            run time protected from preemption; inherited
PreemptionDelay                 honoured            wait before a pending job evicts; inherited
WithinQueue                     honoured            Never, LowerPriority, LowerOrNewerEqualPriority
ReclaimWithinCohort             honoured            Never, LowerPriority, Any
BorrowWithinCohort              honoured            Never or LowerPriority[:threshold]
QueueingStrategy                honoured            BestEffortFIFO or StrictFIFO; inherited
"""
)
