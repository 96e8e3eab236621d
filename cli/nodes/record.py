"""``scontrol show node`` and ``show partition``: NodeInfo and PartitionInfo records.

The keys, their order and the optional lines follow Slurm's records, because
cluster tools read ``State=``, ``CPUTot=`` or ``MaxTime=`` from this output.
Settings Corral does not have (power capping, node sets, QOS limits) print
the values Slurm prints when they are unset.
"""

from __future__ import annotations

from cli.nodes import statenames
from cli.quantity import mebibytes
from cli.records import join, null
from corral.timefmt import format_hms, format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    Node = Mapping[str, Any]
    Partition = Mapping[str, Any]

#: Slurm's default SlurmdPort; scontrol shows Port= only when a node differs.
SLURMD_PORT = 6818


def _gres_tres(gres: str) -> str:
    """``,gres/gpu=4`` for each ``name[:type]:count`` item of a node's Gres (its
    sockets, ``(S:0-1)``, left out)."""
    out = []
    bare, depth = [], 0
    for char in gres:  # no ``re``: a client's start-up imports stay light
        depth += (char == "(") - (char == ")")
        if depth == 0 and char != ")":
            bare.append(char)
    for item in filter(None, "".join(bare).split(",")):
        parts = item.split(":")
        name = parts[0]
        count = parts[-1] if len(parts) > 1 and parts[-1].isdigit() else "1"
        out.append(f",gres/{name}={count}")
    return "".join(out)


def _address_line(node: Node, slurmd_port: int) -> str:
    text = ""
    if node["addr"]:
        text += f"NodeAddr={node['addr']} "
    if node["hostname"]:
        text += f"NodeHostName={node['hostname']} "
    if node["port"] and node["port"] != slurmd_port:
        text += f"Port={node['port']} "
    if node["version"]:
        text += f"Version={node['version']}"
    return text


def node_lines(node: Node, *, slurmd_port: int = SLURMD_PORT) -> list[str]:
    """The node record's lines, before joining."""
    arch = f"Arch={node['arch']} " if node["arch"] else ""
    cpus = int(node["cpus"])
    alloc = int(node["alloc_cpus"])
    out = [
        f"NodeName={node['name']} {arch}CoresPerSocket={node['cores_per_socket']} ",
        f"CPUAlloc={alloc} CPUEfctv={cpus} CPUTot={cpus} CPULoad={float(node['cpu_load']):.2f}",
        f"AvailableFeatures={null(node['available_features'] or node['features'])}",
        f"ActiveFeatures={null(node['features'])}",
        f"Gres={null(node['gres'])}",
    ]
    if node["gres_used"]:
        out.append(f"GresUsed={node['gres_used']}")
    address = _address_line(node, slurmd_port)
    if address:
        out.append(address)
    if node["os"]:
        out.append(f"OS={node['os']} ")
    out += [
        f"RealMemory={node['real_memory']} AllocMem={node['alloc_memory']} "
        f"FreeMem={node['free_memory']} Sockets={node['sockets']} Boards={node['boards'] or 1}",
        f"State={statenames.complete(statenames.value(node))} "
        f"ThreadsPerCore={node['threads_per_core']} TmpDisk={node['tmp_disk']} "
        f"Weight={node['weight']} Owner=N/A MCS_label=N/A",
    ]
    if node["partitions"]:
        out.append(f"Partitions={','.join(node['partitions'])} ")
    boot = format_timestamp(int(node["boot_time"])) if node["boot_time"] else "None"
    started = node["agent_start_time"]
    out += [
        f"BootTime={boot} SlurmdStartTime={format_timestamp(int(started)) if started else 'None'}",
        f"LastBusyTime={format_timestamp(int(node['last_busy']))}",
        f"CfgTRES=cpu={cpus},mem={mebibytes(int(node['real_memory']))},billing={cpus}"
        + _gres_tres(str(node["gres"])),
        "AllocTRES=" + _alloc_tres(node),
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    out += _reason_lines(node)
    return out


def _alloc_tres(node: Node) -> str:
    if not node["alloc_cpus"]:
        return ""
    text = f"cpu={node['alloc_cpus']}"
    if node["alloc_memory"]:
        text += f",mem={mebibytes(int(node['alloc_memory']))}"
    return text


def _reason_lines(node: Node) -> list[str]:
    """``Reason=text [user@time]``; further lines of a multi-line reason are indented."""
    reason = str(node["reason"])
    if not reason:
        return []
    out = []
    for index, text in enumerate(part for part in reason.split("\n") if part):
        if index:
            out.append("       " + text)
            continue
        stamp = ""
        if node["reason_time"]:
            user = node["reason_user"] or "root"
            stamp = f" [{user}@{format_timestamp(int(node['reason_time']))}]"
        out.append(f"Reason={text}{stamp}")
    return out


def node_record(node: Node, *, oneliner: bool = False, slurmd_port: int = SLURMD_PORT) -> str:
    """The whole node record, ready to print."""
    return join(node_lines(node, slurmd_port=slurmd_port), oneliner)


def _minutes(minutes: int, unset: str) -> str:
    if minutes == -1:
        return "UNLIMITED"
    if minutes == 0:
        return unset
    return format_hms(minutes * 60)


def _memory_limit(per_cpu: int, per_node: int, word: str) -> str:
    if per_cpu:
        return f"{word}MemPerCPU={per_cpu}"
    return f"{word}MemPerNode={per_node or 'UNLIMITED'}"


def partition_lines(part: Partition) -> list[str]:
    """The partition record's lines, before joining."""
    groups = part["allow_groups"] or "ALL"
    accounts = part["allow_accounts"] or "ALL"
    max_nodes = part["max_nodes"] or "UNLIMITED"
    max_time = "UNLIMITED" if part["max_time"] == -1 else format_hms(int(part["max_time"]) * 60)
    return [
        f"PartitionName={part['name']}",
        f"AllowGroups={groups} AllowAccounts={accounts} AllowQos=ALL",
        f"AllocNodes=ALL Default={'YES' if part['is_default'] else 'NO'} QoS=N/A",
        f"DefaultTime={_minutes(int(part['default_time']), 'NONE')} DisableRootJobs=NO "
        f"ExclusiveUser=NO GraceTime={part.get('grace_time') or 0} Hidden=NO",
        f"MaxNodes={max_nodes} MaxTime={max_time} MinNodes={part['min_nodes']} LLN=NO "
        "MaxCPUsPerNode=UNLIMITED",
        f"Nodes={null(part['nodes'])}",
        f"PriorityJobFactor={part['priority_job_factor']} PriorityTier={part['priority_tier']} "
        f"RootOnly=NO ReqResv=NO OverSubscribe={part['oversubscribe'] or 'NO'}",
        f"OverTimeLimit=NONE PreemptMode={part.get('preempt_mode') or 'OFF'}",
        f"State={part['state'] or 'UNKNOWN'} TotalCPUs={part['total_cpus']} "
        f"TotalNodes={part['total_nodes']} SelectTypeParameters=NONE",
        f"JobDefaults={part.get('job_defaults') or '(null)'}",
        _memory_limit(int(part["def_mem_per_cpu"]), int(part["def_mem_per_node"]), "Def")
        + " "
        + _memory_limit(int(part["max_mem_per_cpu"]), int(part["max_mem_per_node"]), "Max"),
        f"TRES={null(part['tres'])}",
    ]


def partition_record(part: Partition, *, oneliner: bool = False) -> str:
    """The whole partition record, ready to print."""
    return join(partition_lines(part), oneliner)
