"""``corral why``'s answer (the Why RPC): the core's explanation as a wire message.

Part of the service layer, like ``priorityviews.py``. A pending job is
explained from the loop's last backfill pass (``JobStore.backfill_pass``),
whose plan is also where the store took every expected start from, so
``corral why`` and ``squeue --start`` give the same time and nodes. A job
submitted since that pass (or any job when backfill is off) is explained from
a fresh snapshot, as ``sbatch --test-only`` plans. The what-ifs run on a
worker thread: the snapshot and plan are immutable and the core is pure, so
the controller keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio

from controller import flavornote, queuereply
from controller.core import BackfillParams
from controller.core.why import Why, explain
from controller.jobstate import JobState
from controller.model import Job
from controller.partitionaccess import access_refusal
from controller.principal import Principal, principal_for
from controller.schedparams import scheduler_settings
from controller.store import JobStore
from corral import errors, hostlist
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb


def private(store: JobStore, who: Principal) -> bool:
    """PrivateData=jobs hides other users' jobs from ``who`` (operators see all)."""
    return not who.sees_all("jobs" in store.conf.accounting.private_data)


async def why(store: JobStore, job_id: int, who: Principal, now: int) -> pb.WhyReply:
    """The Why reply for ``job_id`` as ``who`` may see it."""
    job = store.jobs.get(job_id)
    hidden = private(store, who)
    if job is None or not who.may_see(job.uid, job.account, hidden):
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    if job.state is not JobState.PENDING or job.moved_to:
        return pb.WhyReply(
            job_id=job.job_id,
            user=job.user,
            state=job.state.name,
            reason=job.reason.value,
            partition=job.partition,
            nodes=hostlist.compress(job.nodes) if job.nodes else "",
            queue=queuereply.job_queue(store, job),
            flavor=job.flavor,
            moved_to=job.moved_to,
        )
    last = store.backfill_pass
    if last is not None and any(j.job_id == job_id for j in last[0].pending):
        snap, plan, params = last
        at = plan.now
    else:
        snap, plan, at = store.snapshot(), None, now
        params = scheduler_settings(store.conf).backfill or BackfillParams()
    others = _partitions_for(store, job)
    answer = await asyncio.to_thread(explain, snap, at, job_id, params, plan, others)
    reply = _reply(answer, hidden)
    reply.preempting.extend(_preempting(store, job, hidden))
    if snap.queues is not None:
        entry = snap.queues.entries.get(job_id)
        reply.queue = entry.queue if entry is not None else queuereply.job_queue(store, job)
        reply.queue_resources.extend(queuereply.why_queue(snap.queues, job_id))
    return reply


def _preempting(store: JobStore, job: Job, hide_others: bool) -> list[pb.WhyPreemption]:
    """The jobs preempted to make room for ``job``, and how far each has got."""
    out = []
    for victim in store.jobs.values():
        if victim.preempted_by != job.job_id or not victim.system_comment:
            continue
        hide = hide_others and victim.uid != job.uid
        out.append(
            pb.WhyPreemption(
                job_id=0 if hide else victim.job_id,
                user="" if hide else victim.user,
                nodes=hostlist.compress(victim.nodes) if victim.nodes else "",
                state=victim.state.name,
                grace_end=victim.end_time if victim.preempt_time else 0,
                why=victim.system_comment,
            )
        )
    return out


def _partitions_for(store: JobStore, job: Job) -> list[str]:
    """The partitions the job's owner may submit it to (``controller.partitionaccess``)."""
    owner = principal_for(job.uid, job.gid)
    groups = owner.group_names()
    return [
        part.name
        for part in store.conf.partitions
        if not access_refusal(part, owner, job.account, job.qos, groups)
    ]


def _reply(answer: Why, hide_others: bool) -> pb.WhyReply:
    """``answer`` on the wire; with ``hide_others`` (PrivateData=jobs) the jobs of
    other users are shown without their id and user."""
    needs = answer.needs
    return pb.WhyReply(
        job_id=answer.job_id,
        user=answer.user,
        state=JobState.PENDING.name,
        reason=answer.reason.value,
        partition=answer.partition,
        position=answer.position,
        queued=answer.queued,
        need_nodes=needs.nodes,
        need_cpus_per_node=needs.cpus_per_node,
        need_memory_per_node=needs.memory_per_node,
        need_gres=needs.gres,
        need_minutes=needs.minutes,
        need_exclusive=needs.exclusive,
        max_time=answer.max_time,
        max_nodes=answer.max_nodes,
        free_nodes=hostlist.compress(answer.free_nodes) if answer.free_nodes else "",
        free_count=len(answer.free_nodes),
        blockers=[
            pb.WhyBlocker(
                job_id=0 if hide_others and b.user != answer.user else b.job_id,
                user="" if hide_others and b.user != answer.user else b.user,
                priority=b.priority,
                nodes=hostlist.compress(b.nodes),
                start=b.start,
                end=b.end,
                running=b.running,
            )
            for b in answer.blockers
        ],
        reservations=[
            pb.WhyReservation(
                name=r.name, nodes=hostlist.compress(r.nodes), start=r.start, end=r.end
            )
            for r in answer.reservations
        ],
        expected_start=answer.expected_start,
        expected_nodes=hostlist.compress(answer.expected_nodes) if answer.expected_nodes else "",
        suggestions=[
            pb.WhySuggestion(
                option=s.option, start=s.start, nodes=hostlist.compress(s.nodes) if s.nodes else ""
            )
            for s in answer.suggestions
        ],
        now=answer.now,
        queue_head=_head(answer, hide_others),
        topology=_topology(answer),
        flavors=_flavors(answer),
        flavor=flavornote.describe(answer.flavors) if answer.flavors else "",
        licenses=[
            pb.WhyLicense(name=x.name, asked=x.asked, total=x.total, free=x.free)
            for x in answer.licenses
        ],
    )


def _head(answer: Why, hide_others: bool) -> pb.WhyQueueHead | None:
    """The StrictFIFO head the job waits behind, its id and user hidden as a blocker's."""
    head = answer.queue_head
    if head is None:
        return None
    hide = hide_others and head.user != answer.user
    return pb.WhyQueueHead(
        job_id=0 if hide else head.job_id, user="" if hide else head.user, reason=head.reason.value
    )


def _topology(answer: Why) -> pb.WhyTopology | None:
    asked = answer.topology
    if asked is None:
        return None
    return pb.WhyTopology(
        switches=asked.switches,
        switch_wait_end=asked.wait_end,
        required_level=asked.required,
        preferred_level=asked.preferred,
        segment=asked.segment,
        held=asked.held,
    )


def _flavors(answer: Why) -> list[pb.WhyFlavor]:
    """The job's alternatives in its order, each with what the pass found for it."""
    choice = answer.flavors
    if choice is None:
        return []
    return [
        pb.WhyFlavor(
            label=a.label,
            gres=a.gres,
            outcome=a.outcome,
            start=a.start,
            chosen=i == choice.chosen,
        )
        for i, a in enumerate(choice.alternatives)
    ]
