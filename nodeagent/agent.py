"""One node agent process: which nodes it serves, what it registers, and its run.

An agent serves either its own host (one node whose NodeHostname is this
host) or several emulated nodes at once (one-machine clusters, scale tests).
A real node registers what the host probes to be; emulated nodes register
their slurm.conf topology and memory, with this host's name, arch, OS and
boot time, since that is where their jobs really run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from corral import auth, grpctls, ociconf, ratelimit
from corral import gres as gres_syntax
from corral.client import agent_socket_path
from corral.config import ConfigError, NodeConfig, SlurmConfig
from corral.gpunumbers import device_number, gpu_numbering
from corral.sdnotify import Notifier
from corral.wire import corral_pb2 as pb
from nodeagent import cgroups, checkpoints, containment, devcgroup, listpids
from nodeagent.acctgather import Sampler
from nodeagent.clientproxy import ClientProxy
from nodeagent.gpus import probe_gpus
from nodeagent.gpus.migbinding import mig_uuids, probed_cpus, probed_files, probed_links
from nodeagent.gpus.model import GpuDevice, format_gres
from nodeagent.gpus.neuron import NeuronBinding
from nodeagent.health import HealthCheck
from nodeagent.link import Link
from nodeagent.mps import MpsServers
from nodeagent.nodehooks import NodeHooks
from nodeagent.probe import CpuPlace, HostFacts, probe_host
from nodeagent.reboot import Rebooter
from nodeagent.runs import RunTable
from nodeagent.signing import AgentAuth
from nodeagent.spool import SiteHooks, Spool

log = logging.getLogger(__name__)


class AgentError(Exception):
    """A reason the agent cannot start (printed, exit status 1)."""


async def sample_forever(table: RunTable, sampler: Sampler, interval: int) -> None:
    """Sample the live runs every ``interval`` seconds (JobAcctGatherFrequency) and
    send what they use; the pass over /proc runs in a thread, off the event loop."""
    while True:
        await asyncio.sleep(interval)
        targets = table.targets()
        if targets:
            usage = await asyncio.to_thread(sampler.sample, targets, int(time.time()))
            table.report_usage(usage)


async def report_checkpoints_forever(
    table: RunTable, interval: float = checkpoints.INTERVAL
) -> None:
    """Look at the live runs' checkpoint files every ``interval`` seconds and send the
    ones touched since (:mod:`nodeagent.checkpoints`, which says why this cadence)."""
    while True:
        await asyncio.sleep(interval)
        table.report_checkpoints()


def select_nodes(
    conf: SlurmConfig, requested: Sequence[str] | None, hostname: str
) -> list[NodeConfig]:
    """The requested nodes, or the configured nodes that live on ``hostname``."""
    if requested:
        unknown = [name for name in requested if name not in {n.name for n in conf.nodes}]
        if unknown:
            raise AgentError(f"node {unknown[0]} is not in {conf.path}")
        return [conf.node(name) for name in dict.fromkeys(requested)]
    mine = [n for n in conf.nodes if hostname in (n.node_hostname, n.name)]
    if not mine:
        raise AgentError(f"no node in {conf.path} has NodeHostname or NodeName {hostname}")
    return mine


def is_emulated(nodes: Sequence[NodeConfig], hostname: str) -> bool:
    """True unless the agent serves exactly one node, and that node is this host."""
    return len(nodes) != 1 or (nodes[0].node_hostname or nodes[0].name) != hostname


def probed_gpus(conf: SlurmConfig, node: NodeConfig) -> list[GpuDevice] | None:
    """The node's GPUs as the probe finds them; None when there is nothing to check:
    no GPU in the node's Gres=, or no gres.conf ``AutoDetect`` (as in Slurm,
    slurm.conf's counts are then taken on trust)."""
    if not any(name == "gpu" for name, _, _ in _gres_items(node.gres)):
        return None
    autodetect = conf.gres_conf.autodetect_for(node.name) if conf.gres_conf else None
    if autodetect in (None, "off"):
        return None
    try:
        return probe_gpus(None if autodetect == "full" else autodetect)
    except (OSError, ValueError) as exc:
        log.warning("GPU probe failed: %s", exc)
        return []


def found_gpus(
    conf: SlurmConfig,
    node: NodeConfig,
    places: Sequence[CpuPlace],
    devices: list[GpuDevice] | None = None,
) -> str | None:
    """The node's GPUs (``devices``, else as ``probed_gpus`` finds them) in Gres= form
    with the configured type names (``gpu:h100:8(S:0-1)``); None when not probed."""
    devices = probed_gpus(conf, node) if devices is None else devices
    if devices is None:
        return None
    kinds = [kind for name, kind, _ in _gres_items(node.gres) if name == "gpu" and kind]
    return format_gres(devices, places, types=kinds)


def gpu_files(conf: SlurmConfig, node: str) -> list[tuple[int, tuple[str, ...]]]:
    """``node``'s GPUs that gres.conf gives device files (``File=``): (index, files)."""
    if conf.gres_conf is None:
        return []
    try:
        devices = conf.gres_conf.devices_for(node)
    except ConfigError as exc:
        log.warning("node %s: %s", node, exc)
        return []
    return [
        (device_number(d.files[0], d.index), d.files)
        for d in devices
        if d.name == "gpu" and d.files
    ]


def neuron_nodes(conf: SlurmConfig, nodes: Sequence[NodeConfig]) -> list[str]:
    """The served nodes whose GPUs are AWS Neuron devices: gres.conf says
    ``AutoDetect=nrt`` for them, or names ``neuronN`` device files."""
    found = []
    for node in nodes:
        files = [f for _, paths in gpu_files(conf, node.name) for f in paths]
        nrt = conf.gres_conf is not None and conf.gres_conf.autodetect_for(node.name) == "nrt"
        if nrt or any(os.path.basename(f).startswith("neuron") for f in files):
            found.append(node.name)
    return found


#: Where the device cgroups and the runs' cgroup v2 cgroups go instead of
#: ``<cgroup2 mount>/corral`` and ``<the agent's v2 cgroup>/corral`` (a cgroup of its
#: own for a test cluster, so that it fails there without touching others).
CGROUP_TOP_ENV = "CORRAL_CGROUP_TOP"


def device_guard(
    conf: SlurmConfig,
    nodes: Sequence[NodeConfig],
    top: str | None = None,
    probed: Mapping[str, list[tuple[int, tuple[str, ...]]]] | None = None,
    name: str = devcgroup.TOP,
) -> devcgroup.DeviceGuard | None:
    """GPU isolation for the served nodes whose GPUs' device files are known, as
    Slurm's ConstrainDevices=yes: from gres.conf's ``File=`` lines, else from the
    probe (``probed``, per node); None when no node has any (``top``: where the
    cgroups go, by default ``<cgroup2 mount>/<name>``).

    When this host cannot confine devices the guard still comes back, marked
    broken (logged once): launches that would have GPUs to refuse then fail
    rather than run with every GPU.
    """
    probed = probed or {}
    gpus = {
        node.name: files
        for node in nodes
        if (files := gpu_files(conf, node.name) or probed.get(node.name, []))
    }
    if not gpus:
        return None
    if top is None:
        top = devcgroup.default_top(name)
    reason = devcgroup.unavailable(top)
    if top is None or reason is not None:
        log.error(
            "GPU isolation unavailable (%s): launches on %s that must be fenced from "
            "GPUs will fail",
            reason,
            ",".join(gpus),
        )
        return devcgroup.DeviceGuard(top or "", gpus, broken=reason)
    log.info("GPU isolation on: device cgroups under %s", top)
    return devcgroup.DeviceGuard(top, gpus)


def site_hooks(conf: SlurmConfig, spool: Spool) -> SiteHooks:
    """The site programs each run gets (``PrologFlags=Serial``: one lock file for all)."""
    serial = "serial" in conf.prolog_flags
    return SiteHooks(
        prolog=conf.hooks.prolog,
        epilog=conf.hooks.epilog,
        task_prolog=conf.hooks.task_prolog,
        task_epilog=conf.hooks.task_epilog,
        timeout=conf.hooks.timeout,
        lock=os.path.join(spool.root(), "hooks.lock") if serial else "",
    )


def _gres_items(text: str) -> list[tuple[str, str, int]]:
    try:
        return list(gres_syntax.parse_node(text))
    except ValueError:
        return []


def registrations(
    nodes: Sequence[NodeConfig],
    facts: HostFacts,
    gpus: str | None = None,
    *,
    mps: bool = False,
    gpu_cpus: Sequence[tuple[int, tuple[int, ...]]] = (),
    gpu_links: Sequence[tuple[int, int, int]] = (),
) -> list[pb.NodeRegistration]:
    """What the hello says about each served node (``gpus``: the probe's, for a real node,
    ``gpu_cpus`` the CPUs near each of its GPUs and ``gpu_links`` the NVLinks between
    them; ``mps``: whether this host runs MPS servers for GPU shares)."""
    near = [pb.GpuCpus(index=index, cpus=cpus) for index, cpus in gpu_cpus]
    links = [pb.GpuLink(a=a, b=b, count=count) for a, b, count in gpu_links]
    if is_emulated(nodes, facts.hostname):
        shapes = [
            (
                n.name,
                n.cpus,
                n.boards,
                n.sockets,
                n.cores_per_socket,
                n.threads_per_core,
                n.real_memory,
                n.tmp_disk,
            )
            for n in nodes
        ]
    else:
        topo = facts.topology
        shapes = [
            (
                nodes[0].name,
                topo.cpus,
                1,
                topo.sockets,
                topo.cores_per_socket,
                topo.threads_per_core,
                facts.real_memory,
                facts.tmp_disk,
            )
        ]
    return [
        pb.NodeRegistration(
            name=name,
            cpus=cpus,
            boards=boards,
            sockets=sockets,
            cores_per_socket=cores,
            threads_per_core=threads,
            real_memory=memory,
            tmp_disk=tmp_disk,
            hostname=facts.hostname,
            arch=facts.arch,
            os=facts.os,
            boot_time=facts.boot_time,
            gres_found=gpus or "",
            gres_probed=gpus is not None,
            mps=mps,
            gpu_cpus=near,
            gpu_links=links,
        )
        for name, cpus, boards, sockets, cores, threads, memory, tmp_disk in shapes
    ]


async def serve(conf: SlurmConfig, requested: Sequence[str] | None, notifier: Notifier) -> None:
    """Run the agent until SIGTERM or SIGINT; running jobs are left running."""
    start_time = int(time.time())
    facts = probe_host()
    nodes = select_nodes(conf, requested, facts.hostname)
    try:
        keys, ttl = auth.settings_keys(conf.path, dict(conf.settings))
        if conf.tls.enabled:  # the CA, read now: a missing one stops the agent at start
            grpctls.channel_credentials(conf.tls)
    except (auth.AuthError, ValueError, grpctls.TlsError) as exc:
        raise AgentError(str(exc)) from None
    devices = None
    if not is_emulated(nodes, facts.hostname):  # emulated nodes share one host's devices
        devices = await asyncio.to_thread(probed_gpus, conf, nodes[0])
    numbering = gpu_numbering(conf, nodes[0].name) if devices else []
    top = os.environ.get(CGROUP_TOP_ENV) or None
    try:
        name = cgroups.top_name()
        contained = containment.setup(conf, top, name)
        oci = ociconf.load(os.path.join(os.path.dirname(os.path.abspath(conf.path)), ociconf.NAME))
    except (ConfigError, ValueError) as exc:
        raise AgentError(str(exc)) from None
    for warning in oci.warnings if oci is not None else ():
        log.warning("%s", warning)
    spool = Spool(conf.slurmd_spool_dir, facts.hostname)
    table = RunTable(
        spool=spool,
        hostnames={node.name: node.node_hostname or node.name for node in nodes},
        slurm_conf=os.path.abspath(conf.path),
        kill_wait=conf.kill_wait,
        python=sys.executable,
        containment=contained,
        devices=device_guard(
            conf,
            nodes,
            top=top,
            probed={nodes[0].name: probed_files(devices, numbering)} if devices else None,
            name=name,
        ),
        mps=MpsServers(Path(spool.root())) if MpsServers.available() else None,
        neuron=NeuronBinding(neuron_nodes(conf, nodes)),
        hooks=site_hooks(conf, spool),
        oci=oci,
    )
    table.recover()
    table.zygote.start()
    targets = conf.active_targets
    log.info(
        "serving %d node(s) %s%s, controller %s",
        len(nodes),
        ",".join(node.name for node in nodes[:8]),
        ",..." if len(nodes) > 8 else "",
        ", ".join(targets),
    )
    gpus = None
    if devices is not None:
        gpus = found_gpus(conf, nodes[0], facts.places, devices)
        log.info("GPUs found: %s", gpus or "none")
        table.mig[nodes[0].name] = mig_uuids(devices, numbering)
    link = Link(
        targets,
        registrations(
            nodes,
            facts,
            gpus,
            mps=table.mps is not None,
            gpu_cpus=probed_cpus(devices, numbering) if devices else (),
            gpu_links=probed_links(devices, numbering) if devices else (),
        ),
        table,
        start_time,
        AgentAuth(keys, conf.cluster_name, nodes[0].name, ttl, auth.daemon_uids(conf.slurm_user)),
        conf.tls,
        NodeHooks(spool.root(), table.hooks, table),
    )
    reboot_program = dict(conf.settings).get("RebootProgram", "")
    if reboot_program:
        emulated = is_emulated(nodes, facts.hostname)
        rebooter = Rebooter(reboot_program, emulated, table, os.path.abspath(conf.path))
        link.reboot = rebooter.reboot
    proxy = ClientProxy(
        agent_socket_path(conf.slurmd_spool_dir),
        targets,
        keys.signer,
        auth.controller_receiver(conf.cluster_name),
        ratelimit.from_config(conf),
        conf.tls,
        ttl,
        conf.cluster_name,
    )
    proxy.local["ListPids"] = lambda request, uid: listpids.answer(
        table.runs(), request, uid, uid in auth.daemon_uids(conf.slurm_user)
    )
    await proxy.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = [
        asyncio.create_task(link.run()),
        asyncio.create_task(table.poll_forever()),
        asyncio.create_task(report_checkpoints_forever(table)),
    ]
    if conf.job_acct.sampling:
        sampler = table.sampler = Sampler(conf.job_acct.kind)
        tasks.append(
            asyncio.create_task(sample_forever(table, sampler, conf.job_acct.task_frequency))
        )
    health = HealthCheck(conf.hooks, [n.name for n in nodes], table, os.path.abspath(conf.path))
    # Apart from ``tasks``: a check that ends (HealthCheckInterval=0) stops nothing.
    checking = asyncio.create_task(health.run_forever()) if health.enabled else None
    stopping = asyncio.create_task(stop.wait())
    # Ready once its runs are recovered and clients' socket listens; the controller
    # may still be away (the link keeps trying), as slurmd starts without slurmctld.
    notifier.ready(f"serving {len(nodes)} node(s)")
    done, _ = await asyncio.wait([*tasks, stopping], return_when=asyncio.FIRST_COMPLETED)
    notifier.stopping()
    for task in [*tasks, stopping]:
        task.cancel()
    if checking is not None:
        checking.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    table.close()
    await proxy.close()
    for task in done:
        if task is not stopping:
            task.result()
    log.info("stopped; jobs keep running under their supervisors")
