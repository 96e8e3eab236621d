"""``scontrol reboot`` and ``cancel_reboot``: nodes rebooted by RebootProgram once idle.

As slurmctld does it (``_slurm_rpc_reboot_nodes``, ``_queue_reboot_msg``):

  requested   ``scontrol reboot``: the node shows REBOOT_REQUESTED (sinfo ``boot``);
              ASAP also drains it (reason ``Reboot ASAP`` unless one is given), so
              nothing new starts there; without ASAP jobs still start on it
  issued      once it runs no job, its agent is told to run RebootProgram; the
              node is DOWN+REBOOT_ISSUED (sinfo ``boot^``, reason ``reboot issued``
              unless it had one) until its agent registers a newer boot time (an
              emulated node: its agent says RebootProgram ended well)
  back        nextstate=DOWN leaves it DOWN; otherwise it is up again; ASAP and
              either nextstate clear its drain (and, up again, its reason)
  timed out   not back within ResumeTimeout (60 s by default): DOWN,
              ``reboot timed out``

``cancel_reboot`` forgets a reboot not yet issued (and ASAP's drain). The rules
are pure functions of a node's ``NodeRuntime``; ``advance`` applies them to the
store each scheduling cycle, and ``effects.RebootNode`` is what tells the agent.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from controller.effects import RebootNode
from controller.model import NodeRuntime
from controller.principal import Principal
from controller.store import JobStore
from corral import errors
from corral.errors import SlurmError

log = logging.getLogger(__name__)

REQUESTED = "requested"
ISSUED = "issued"

#: slurm.conf's ResumeTimeout default: how long a rebooting node may stay away.
RESUME_TIMEOUT = 60

#: The states ``nextstate=`` may name.
NEXT_STATES = ("RESUME", "DOWN")


def request(
    node: NodeRuntime, *, asap: bool, next_state: str, reason: str, who: Principal, now: int
) -> NodeRuntime:
    """``node`` with a reboot requested (a second request replaces the first's options)."""
    if node.reboot == ISSUED:
        return node
    changed = replace(node, reboot=REQUESTED, reboot_asap=asap, reboot_next=next_state)
    if asap:
        changed = replace(changed, drain=True, reason=node.reason or "Reboot ASAP")
    if reason:
        changed = replace(changed, reason=reason)
    if changed.reason != node.reason or (asap and not node.drain):
        changed = replace(changed, reason_user=who.user, reason_uid=who.uid, reason_time=now)
    return changed


def cancel(node: NodeRuntime) -> NodeRuntime:
    """``node`` without its pending reboot; one already issued cannot be called back."""
    if node.reboot == ISSUED:
        raise SlurmError(errors.EINVAL, f"Reboot of node {node.name} has already been issued")
    if node.reboot != REQUESTED:
        return node
    cleared = replace(node, reboot="", reboot_asap=False, reboot_next="")
    if node.reboot_asap:
        cleared = replace(cleared, drain=False, reason="" if node.state == "UP" else node.reason)
    return cleared


def due(node: NodeRuntime, busy: bool) -> bool:
    """Whether ``node``'s requested reboot is issued now: it runs no job and answers."""
    return node.reboot == REQUESTED and not busy and node.responding and node.state == "UP"


def issued(node: NodeRuntime, now: int) -> NodeRuntime:
    return replace(
        node,
        reboot=ISSUED,
        reboot_time=now,
        state="DOWN",
        reason=node.reason or "reboot issued",
        reason_time=node.reason_time or now,
    )


def back(node: NodeRuntime) -> NodeRuntime:
    """``node`` once it booted after the reboot was issued."""
    done = replace(node, reboot="", reboot_asap=False, reboot_next="", reboot_time=0)
    # Slurm's man page: "The node's DRAIN state flag will be cleared if the reboot
    # was ASAP, nextstate=resume or down."
    drain = node.drain and not (node.reboot_asap or node.reboot_next)
    if node.reboot_next == "DOWN":
        return replace(done, drain=False)
    return replace(done, state="UP", drain=drain, reason=node.reason if drain else "")


def booted_since_issue(node: NodeRuntime, boot_time: int) -> bool:
    """Whether a registration's ``boot_time`` is the reboot's (not the boot before it)."""
    return node.reboot == ISSUED and boot_time >= node.reboot_time


def timed_out(node: NodeRuntime, now: int, timeout: int) -> bool:
    return node.reboot == ISSUED and now - node.reboot_time > timeout


def resume_timeout(settings: dict[str, str]) -> int:
    text = settings.get("ResumeTimeout", "")
    return int(text) if text.isdigit() else RESUME_TIMEOUT


def advance(store: JobStore, now: int) -> bool:
    """Issue the reboots whose nodes are idle and give up on those gone too long;
    whether any node changed."""
    changed = False
    rebooting = [(name, node) for name, node in store.nodes.items() if node.reboot]
    if not rebooting:  # every cycle: the common case costs one look at each node
        return False
    timeout = resume_timeout(dict(store.conf.settings))
    for name, node in rebooting:
        if due(node, bool(store.jobs_on(name))):
            log.info("node %s: RebootProgram issued", name)
            store.change_node(issued(node, now), now)
            store.emit(RebootNode(name))
            changed = True
        elif timed_out(node, now, timeout):
            log.warning("node %s not back within ResumeTimeout=%d s of its reboot", name, timeout)
            down = replace(node, reboot="", reboot_time=0, reason="reboot timed out")
            down = replace(down, reason_time=now, reason_user="slurm", reason_uid=0)
            store.change_node(down, now)
            changed = True
    return changed


def registered(store: JobStore, name: str, boot_time: int, now: int) -> bool:
    """``name``'s agent reports a boot at ``boot_time`` (its hello, or an emulated
    node's NodeRebooted): the node is back if that is the reboot's; whether it was."""
    node = store.nodes.get(name)
    if node is None or not booted_since_issue(node, boot_time):
        return False
    log.info("node %s rebooted", name)
    store.change_node(back(node), now)
    return True


def ask(
    store: JobStore,
    names: list[str],
    who: Principal,
    now: int,
    *,
    asap: bool = False,
    next_state: str = "",
    reason: str = "",
    cancel_it: bool = False,
) -> None:
    """``scontrol reboot`` (or ``cancel_reboot``) of ``names``, asked by one of Slurm's
    super users (the service checks): only where slurm.conf names a RebootProgram
    for the agents to run."""
    if cancel_it:
        for name in names:
            store.change_node(cancel(store.nodes[name]), now)
        return
    if not dict(store.conf.settings).get("RebootProgram"):
        raise SlurmError(errors.ESLURM_DISABLED, "RebootProgram isn't defined")
    if next_state and next_state not in NEXT_STATES:
        raise SlurmError(errors.EINVAL, f"Invalid state: {next_state}")
    for name in names:
        node = store.nodes[name]
        changed = request(node, asap=asap, next_state=next_state, reason=reason, who=who, now=now)
        store.change_node(changed, now)
