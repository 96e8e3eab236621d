"""Node-drain rules: when a node is up, drained or down, and why.

Pure functions from a node's runtime state and what happened (an agent
attached, an administrator's ``scontrol update node``, a node gone silent) to
its next state, with Slurm's reasons. The store applies what they return and
records it; keeping the rules apart lets them be read as one list and
changed without reading the store's bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from controller.model import NodeRuntime
from controller.principal import Principal
from corral import gres as gres_syntax
from corral import gresconf
from corral.config import NodeConfig


@dataclass(frozen=True, slots=True)
class Registration:
    """What a node agent reported about one node when it attached."""

    name: str
    cpus: int
    real_memory: int
    hostname: str = ""
    arch: str = ""
    os: str = ""
    version: str = ""
    boot_time: int = 0
    agent_start_time: int = 0
    gres_found: str | None = None  # the GPUs the agent probed (None: not probed)
    mps: bool = False  # it can run MPS servers, so GPU shares can be fenced
    gpu_cpus: tuple[tuple[int, tuple[int, ...]], ...] = ()  # probed: CPUs near each GPU
    gpu_links: tuple[tuple[int, int, int], ...] = ()  # probed: (GPU a, GPU b, NVLinks)


def usable(node: NodeRuntime) -> bool:
    """Whether jobs may start on ``node``: up, answering (or powered down, to be
    resumed for them: ``controller/powersave.py``), not drained, not on its way
    to power saving."""
    if node.state != "UP" or node.drain:
        return False
    if node.power in ("powered_down", "powering_up"):
        return True
    return node.responding and not node.power


def shortfall(cpus: int, memory: int, gres: str, reg: Registration) -> str:
    """Slurm's drain reason when a node has less than its configuration promises."""
    if reg.cpus < cpus:
        return f"Low socket*core*thread count, Low CPUs ({reg.cpus} < {cpus})"
    if reg.real_memory < memory:
        return f"Low RealMemory (reported:{reg.real_memory} < 100.00% of configured:{memory})"
    if reg.gres_found is not None:
        return gres_shortfall(gres, reg.gres_found)
    return ""


def gres_shortfall(configured: str, found: str) -> str:
    """slurmctld's reason when a node's probed GPUs fall short of its ``Gres=``."""
    try:
        items, got = gres_syntax.parse_node(configured), gres_syntax.parse_node(found)
    except ValueError:
        return ""
    devices = [
        gresconf.GresDevice(name, kind, (), count, None, None, frozenset(), i, ("probe", 0))
        for i, (name, kind, count) in enumerate(got)
    ]
    if not any(name == "gpu" for name, _, _ in got):  # the probe found none: 0, not unknown
        devices.append(
            gresconf.GresDevice("gpu", "", (), 0, None, None, frozenset(), 0, ("probe", 0))
        )
    configured_gpus = [item for item in items if item[0] == "gpu"]
    return gresconf.cross_check(configured_gpus, devices).reason or ""


def returns_to_service(node: NodeRuntime, return_to_service: int) -> bool:
    """Whether a DOWN node comes back UP as its agent attaches (``ReturnToService``):
    never (0), only if it went down for not responding (1), always (2)."""
    if return_to_service >= 2:
        return True
    return return_to_service == 1 and node.reason == "Not responding"


def back_from_silence(node: NodeRuntime, return_to_service: int) -> bool:
    """Whether a node the controller set DOWN for not responding returns to service
    now that its agent is heard again on its open stream: slurmctld asks silent
    nodes to register anew, and ReturnToService 1 or 2 then brings them back; an
    administrator's DOWN stays."""
    return (
        node.state == "DOWN"
        and node.reason == "Not responding"
        and node.reason_user == "slurm"
        and return_to_service >= 1
    )


def registered(
    node: NodeRuntime,
    conf: NodeConfig,
    reg: Registration,
    return_to_service: int,
    monotonic: float,
    now: int,
) -> tuple[NodeRuntime, bool, str]:
    """``node`` once its agent attached with ``reg``: (the node, whether its state or
    drain changed, the reason it is drained now: it reports less than ``conf`` promises).

    It is up (unless an administrator said otherwise). Like slurmd, a node whose
    probed CPUs or memory fall short of its configuration is drained, so jobs
    are never placed on resources that are not there.
    """
    state = node.state
    if state == "UNKNOWN" or (state == "DOWN" and returns_to_service(node, return_to_service)):
        state = "UP"
    changed = state != node.state
    drain, reason = node.drain, ("" if changed and not node.drain else node.reason)
    short = shortfall(conf.cpus, conf.real_memory, conf.gres, reg)
    newly = short if short and not node.drain else ""
    if newly:
        drain, reason, changed = True, short, True
    node = replace(
        node,
        state=state,
        drain=drain,
        reason=reason,
        responding=True,
        last_seen=monotonic,
        ever_registered=True,
        hostname=reg.hostname,
        arch=reg.arch,
        os=reg.os,
        version=reg.version,
        boot_time=reg.boot_time,
        agent_start_time=reg.agent_start_time,
        mps=reg.mps,
        gres_found=reg.gres_found or "",
        gpu_cpus=reg.gpu_cpus,
        gpu_links=reg.gpu_links,
        reason_user="slurm" if short else node.reason_user,
        reason_time=now if short else node.reason_time,
    )
    return node, changed, newly


def down(node: NodeRuntime, reason: str, user: str, uid: int, now: int) -> NodeRuntime:
    """``node`` taken DOWN (by the controller, ``user`` "slurm", or an administrator)."""
    return replace(
        node, state="DOWN", reason=reason, reason_user=user, reason_uid=uid, reason_time=now
    )


def failed_check(node: NodeRuntime, reason: str, user: str, now: int) -> NodeRuntime:
    """``node`` drained by the controller because a site program failed there (its
    Prolog or Epilog: "Prolog error", "Epilog error"; its HealthCheckProgram: the
    program's words). A node drained already keeps the reason it has."""
    if node.drain:
        return node
    return replace(node, drain=True, reason=reason, reason_user=user, reason_uid=0, reason_time=now)


def admin_state(
    node: NodeRuntime, state: str, reason: str, who: Principal, now: int
) -> NodeRuntime:
    """``node`` after ``scontrol update node=... state=STATE``."""
    if state == "DRAIN":
        return replace(
            node,
            drain=True,
            reason=reason,
            reason_user=who.user,
            reason_uid=who.uid,
            reason_time=now,
        )
    if state in ("DOWN", "FAIL"):
        return down(node, reason, who.user, who.uid, now)
    if state in ("RESUME", "IDLE", "UNDRAIN"):
        up = "UP" if node.ever_registered and node.responding else "UNKNOWN"
        power = node.power
        if node.power == "powered_down":  # idle~ again: a job may have it (powersave.py)
            up = "UP"
        elif state == "RESUME" and node.power in ("power_down", "powering_down"):
            power = ""  # scontrol(1): RESUME "will also clear the POWERING_DOWN state"
        return replace(
            node,
            drain=False,
            reason="",
            reason_time=0,
            state=node.state if state == "UNDRAIN" else up,
            power=power,
        )
    return node
