"""strigger's call (the Triggers RPC): set, list and clear triggers, with Slurm's rules.

Who may set a trigger is slurmctld's rule, read for Corral's controller: the
program runs as the trigger's owner, which only a controller running as root
can do. So a root controller takes triggers from anyone; one running as another
user (SlurmUser) only from that user, lest a program set by someone else run as
the controller's user. A trigger's program must be a regular file its owner
may execute. Anyone may list the triggers (as in Slurm); only root and a
trigger's owner may clear it.
"""

from __future__ import annotations

import logging
import os
import stat

from controller.principal import Principal
from controller.store import JobStore
from controller.triggers import TYPES, Trigger
from corral import errors
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)

#: strigger's --offset bounds (Slurm keeps it in 16 bits around 0x8000).
MOST_OFFSET = 32000


def may_set(who: Principal, controller_uid: int) -> bool:
    """Whether ``who`` may set triggers on a controller running as ``controller_uid``."""
    return controller_uid == 0 or who.uid == controller_uid


def executable_by(program: str, uid: int, gid: int) -> bool:
    """slurmctld's check of a trigger program: a regular file whose mode lets its
    owner (``uid``/``gid``) execute it."""
    try:
        info = os.stat(program.split()[0])
    except (OSError, IndexError):
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    if info.st_uid == uid:
        modes = info.st_mode >> 6
    elif info.st_gid == gid:
        modes = info.st_mode >> 3
    else:
        modes = info.st_mode
    return bool(modes & 1)


def handle(store: JobStore, req: pb.TriggersRequest, who: Principal) -> pb.TriggersReply:
    """One strigger request; the caller journals what changed (``store.keep_triggers``
    was called) before it answers."""
    if req.action == "get":
        return pb.TriggersReply(triggers=[info(t) for t in store.triggers.listed()])
    if req.action == "clear":
        owner = None if req.uid < 0 else req.uid
        if not (req.id or req.job_id or owner is not None):
            raise SlurmError(errors.EINVAL)
        gone = store.triggers.clear(who.uid, req.id, req.job_id, owner)
        store.keep_triggers()
        log.info("triggers %s cleared by uid=%d", ",".join(str(t.id) for t in gone), who.uid)
        return pb.TriggersReply()
    if req.action != "set":
        raise SlurmError(errors.EINVAL, f"Invalid trigger action: {req.action}")
    if not may_set(who, os.geteuid()):
        log.info("Attempt to set trigger by uid %d != SlurmUser", who.uid)
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)
    trigger = _requested(req.trigger, who)
    if not executable_by(trigger.program, who.uid, who.gid):
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)
    job = store.jobs.get(trigger.job_id) if trigger.res_type == "job" else None
    added = store.triggers.add(trigger, store.nodes, job)
    store.keep_triggers()
    log.info("trigger %d set by uid=%d: %s", added.id, who.uid, trigger.program)
    return pb.TriggersReply(id=added.id)


def _requested(asked: pb.TriggerInfo, who: Principal) -> Trigger:
    """The trigger a set request describes, owned by its caller; EINVAL if malformed."""
    allowed = TYPES.get(asked.res_type, ())
    types = tuple(dict.fromkeys(asked.types))
    if (
        not types
        or not set(types) <= set(allowed)
        or abs(asked.offset) > MOST_OFFSET
        or not asked.program.startswith("/")
    ):
        raise SlurmError(errors.EINVAL)
    if asked.res_type == "job" and not (asked.res_id.isascii() and asked.res_id.isdigit()):
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    return Trigger(
        id=0,
        res_type=asked.res_type,
        res_id=asked.res_id or ("*" if asked.res_type == "node" else ""),
        types=types,
        offset=asked.offset,
        uid=who.uid,
        gid=who.gid,
        user=who.user,
        program=asked.program,
        perm=asked.perm,
    )


def info(trigger: Trigger) -> pb.TriggerInfo:
    return pb.TriggerInfo(
        id=trigger.id,
        res_type=trigger.res_type,
        res_id=trigger.res_id,
        types=list(trigger.types),
        offset=trigger.offset,
        uid=trigger.uid,
        user=trigger.user,
        perm=trigger.perm,
        program=trigger.program,
    )
