"""What scancel and scontrol do to jobs: signal, cancel, hold, release, requeue,
suspend, resume, update, and salloc's giving back of its allocation.

``JobControl`` decides, for each job a request names, whether the caller may act on
it and which state-machine event or update follows; the store applies them and
``controller/effects.py`` says what the agents hear. The service (``Handlers``)
only decodes, calls, commits and replies.
"""

from __future__ import annotations

import logging
import signal as signals
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from controller import (
    associations,
    crontabs,
    effects,
    elastic,
    expansion,
    hetjobs,
    hetsteps,
    jobstate,
    jobupdate,
    licenseadmit,
    partitionaccess,
    queries,
)
from controller.admission import switch_request
from controller.core.placement import place
from controller.core.plan import Start
from controller.jobstate import COMPLETING, InvalidTransition, JobState
from controller.jobupdate import JobUpdate
from controller.model import Job
from controller.principal import Principal, principal_for
from controller.store import JobStore
from corral import errors
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)


def to_dict(message: Any) -> dict[str, Any]:
    """The fields a sender set, by name (maps as dicts, repeated as lists)."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if hasattr(value, "items"):
            out[field.name] = dict(value.items())
        elif field.is_repeated:
            out[field.name] = list(value)
        else:
            out[field.name] = value
    return out


def owned(job: Job, who: Principal) -> None:
    """Only the job's owner, an operator or its account's coordinator acts on it."""
    if not who.may_manage(job.uid, job.account):
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)


def _result(job_id: str, code: int) -> pb.JobResult:
    return pb.JobResult(
        job_id=job_id, code=code, message=errors.MESSAGES.get(code, "") if code else ""
    )


#: JobControl's actions that only an operator may ask for (scontrol suspend, resume).
SUSPENSION = ("suspend", "resume")


def _signal_number(value: int) -> int:
    return value if 0 < value < 65 else 0


class JobControl:
    def __init__(self, store: JobStore) -> None:
        self.store = store

    def targets(self, ids: list[str], flt: Mapping[str, Any]) -> list[tuple[str, list[Job]]]:
        """Per requested id the jobs it names (all states), or one group for a filter."""
        if not ids:
            return [("", queries.select(self.store.jobs, flt))]
        out: list[tuple[str, list[Job]]] = []
        for text in ids:
            one = {**flt, "job_ids": [text], "states": flt.get("states") or ["ALL"]}
            try:
                jobs = queries.select(self.store.jobs, one)
            except SlurmError:
                out.append((text, []))
                continue
            out.append((text, [task for job in jobs for task in self._split(job, one)]))
        return out

    def _split(self, job: Job, flt: Mapping[str, Any]) -> list[Job]:
        """``job``, or the tasks an id names of an array's record, split off to act on alone."""
        tasks = queries.named_tasks(job, flt) if job.array_pending else None
        if tasks is None:
            return [job]
        return [self.store.split_task(self.store.jobs[job.job_id], task) for task in tasks]

    def signal(self, req: pb.SignalRequest, who: Principal, now: int) -> pb.SignalReply:
        """scancel: each named job or step, or every job the filter selects."""
        flt = to_dict(req.filter)
        ids = flt.pop("job_ids", [])
        results = [self._signal_step(t, req, who) for t in ids if "." in t]
        named = [t for t in ids if "." not in t]
        for text, jobs in self.targets(named, flt) if named or not ids else []:
            if text and not jobs:
                results.append(_result(text, errors.ESLURM_INVALID_JOB_ID))
                continue
            codes = [self._signal_one(job, req, who, now) for job in jobs]
            if text:
                # An id naming a whole array succeeds if any task took the signal.
                code = 0 if 0 in codes else codes[0]
                results.append(_result(text, code))
            else:
                results += [
                    _result(j.display_id, 0) for j, c in zip(jobs, codes, strict=True) if c == 0
                ]
        return pb.SignalReply(results=results)

    def _signal_step(self, text: str, req: pb.SignalRequest, who: Principal) -> pb.JobResult:
        """``scancel N.S``: the step's tasks get the signal (SIGKILL to cancel);
        ``N.batch`` names the batch shell."""
        job_text, _, step_text = text.partition(".")
        found = self.targets([job_text], {})
        jobs = found[0][1] if found else []
        if len({job.het_job_id for job in jobs} - {0}) == 1 < len(jobs):
            # 123 names every component of a heterogeneous job; 123.0 the leader's step
            jobs = [job for job in jobs if job.job_id == job.het_job_id]
        if len(jobs) != 1:
            return _result(text, errors.ESLURM_INVALID_JOB_ID)
        job = jobs[0]
        if not who.may_manage(job.uid, job.account):
            return _result(text, errors.ESLURM_ACCESS_DENIED)
        sig = _signal_number(req.signal) or signals.SIGKILL
        if step_text == "batch" and job.state is JobState.RUNNING:
            self.store.emit(effects.Signal(job, sig, batch_only=True))
            return _result(text, 0)
        # A step of parts (``srun a : b``: 123.1+0, 123.1+1) is named by its id alone,
        # and signalled whole: its agents signal it by id.
        named = [s for s in job.steps if str(s.step_id) == step_text]
        step = next((s for s in named if s.running), named[0] if named else None)
        if step is None or job.state is not JobState.RUNNING:
            return _result(text, errors.ESLURM_INVALID_JOB_ID)
        if not step.running:
            return _result(text, errors.ESLURM_ALREADY_DONE)
        # A cancel (no -s) is told apart from -s KILL: srun says "Job step aborted" for
        # one and "Force Terminated" for the other, as Slurm 22.05's does.
        reason = "" if req.signal else "cancel"
        self.store.emit(effects.Signal(job, sig, step_id=step.step_id, reason=reason))
        if not req.signal:  # a cancel, not -s: a spanning step's leader takes all its parts
            for other in hetsteps.cancelled_with(self.store.jobs, job, step):
                if who.may_manage(other.uid, other.account):
                    self.store.emit(effects.Signal(other, sig, step_id=step.step_id, reason=reason))
        return _result(text, 0)

    def _signal_one(self, job: Job, req: pb.SignalRequest, who: Principal, now: int) -> int:
        if not who.may_manage(job.uid, job.account):
            return errors.ESLURM_ACCESS_DENIED
        sig = _signal_number(req.signal)
        job = self.store.jobs.get(job.job_id, job)  # its leader's cancel may have ended it
        if job.state.finished or COMPLETING in job.flags:
            return errors.ESLURM_ALREADY_DONE
        if job.het_job_offset and job.state is JobState.PENDING:
            return errors.ESLURM_NOT_WHOLE_HET_JOB  # scancel(1): only the whole job
        if sig in (0, signals.SIGKILL) and not req.batch_only:
            if job.cron_spec:  # Slurm: a cancelled cron job's entry is disabled, not rerun
                crontabs.disable(self.store, job)
            self.store.post(job.job_id, jobstate.Cancel(now, who.uid))
            if job.interactive and job.state in (JobState.RUNNING, JobState.SUSPENDED):
                self.store.end_interactive(self.store.jobs[job.job_id], now, 0x9, "cancelled")
            if job.het_job_id == job.job_id:  # a leader: its components end with it
                hetjobs.end_with_leader(self.store, self.store.jobs[job.job_id], now, who.uid)
            log.info("job_id=%d cancelled by uid=%d", job.job_id, who.uid)
            return 0
        if job.state is JobState.PENDING:
            return errors.ESLURM_JOB_PENDING
        self.store.emit(effects.Signal(job, sig, batch_only=req.batch_only, full=req.full))
        return 0

    def control(self, req: pb.JobControlRequest, who: Principal, now: int) -> pb.JobControlReply:
        """scontrol hold, release, requeue, update and salloc's complete, per job."""
        ids = list(req.job_ids)
        flt: dict[str, Any] = {"names": [req.job_name]} if req.job_name else {}
        results = []
        updates = dict(req.updates)
        update: JobUpdate | SlurmError = JobUpdate()
        if req.action == "update":
            try:
                update = jobupdate.parse(updates, now)
            except SlurmError as exc:  # each job's answer, once its owner is checked
                update = exc
        if req.action in SUSPENSION and not who.is_operator:
            # Slurm's validate_operator comes before the job is even looked up.
            denied = [_result(t, errors.ESLURM_ACCESS_DENIED) for t in ids or [req.job_name]]
            return pb.JobControlReply(results=denied)
        for text, jobs in self.targets(ids, flt):
            if not jobs:
                results.append(_result(text, errors.ESLURM_INVALID_JOB_ID))
                continue
            failures: list[pb.JobResult] = []
            for job in jobs:
                try:
                    self._control_one(req.action, job, updates, update, who, now)
                except SlurmError as exc:
                    failures.append(
                        pb.JobResult(
                            job_id=text or job.display_id, code=exc.code, message=exc.message
                        )
                    )
                except InvalidTransition:
                    done = job.state.finished
                    code = errors.ESLURM_ALREADY_DONE if done else errors.ESLURM_INVALID_JOB_STATE
                    failures.append(_result(text or job.display_id, code))
            # An id naming a whole array succeeds if any of its tasks did.
            if failures and len(failures) == len(jobs):
                results.append(failures[0])
        return pb.JobControlReply(results=results)

    def _control_one(
        self,
        action: str,
        job: Job,
        updates: Mapping[str, str],
        update: JobUpdate | SlurmError,
        who: Principal,
        now: int,
    ) -> None:
        owned(job, who)
        privileged = who.privileged_over(job.account)
        if action in ("hold", "uhold"):
            if job.state is not JobState.PENDING:
                raise SlurmError(
                    errors.ESLURM_ALREADY_DONE
                    if job.state.finished
                    else errors.ESLURM_JOB_NOT_PENDING
                )
            admin = action == "hold" and privileged
            self.store.post(job.job_id, jobstate.Hold(admin=admin))
        elif action == "release":
            if job.held == "admin" and not privileged:
                raise SlurmError(errors.ESLURM_ACCESS_DENIED)
            if job.held:
                self.store.post(job.job_id, jobstate.Release())
        elif action in ("requeue", "requeuehold"):
            if job.state is JobState.PENDING:
                if action == "requeuehold" and not job.held:
                    self.store.post(job.job_id, jobstate.Hold(admin=privileged))
                    return
                raise SlurmError(errors.ESLURM_JOB_PENDING)
            if not job.requeue:
                raise SlurmError(errors.ESLURM_DISABLED)
            hold = ("admin" if privileged else "user") if action == "requeuehold" else ""
            self.store.post(job.job_id, jobstate.Requeue(now, hold=hold))
        elif action in SUSPENSION:
            self._suspension(action, job, now)
        elif action == "complete":  # salloc or srun gives its allocation back
            if not job.interactive or job.state is not JobState.RUNNING:
                raise SlurmError(errors.ESLURM_ALREADY_DONE)
            status = int(updates.get("exit_status", "0"))
            self.store.end_interactive(job, now, status, "exited")
            if job.het_job_id == job.job_id:  # salloc's heterogeneous job ends whole
                hetjobs.end_with_leader(self.store, self.store.jobs[job.job_id], now)
        elif action == "update":
            if isinstance(update, SlurmError):
                raise update
            self._update(job, update, who, now)
        else:
            raise SlurmError(errors.EINVAL, f"unknown action {action!r}")

    def _suspension(self, action: str, job: Job, now: int) -> None:
        """scontrol suspend or resume (an operator's; checked by ``control``), with
        Slurm's answers for a job in another state; a resume whose CPUs another job
        took meanwhile is refused rather than oversubscribe them."""
        if job.state is JobState.PENDING:
            raise SlurmError(errors.ESLURM_JOB_PENDING)
        if job.state.finished or COMPLETING in job.flags:
            raise SlurmError(errors.ESLURM_ALREADY_DONE)
        if action == "suspend":
            if job.state is not JobState.RUNNING:
                raise SlurmError(errors.ESLURM_JOB_NOT_RUNNING)
            self.store.post(job.job_id, jobstate.Suspend(now))
            log.info("job_id=%d suspended", job.job_id)
            return
        if job.state is not JobState.SUSPENDED:
            raise SlurmError(errors.ESLURM_JOB_NOT_SUSPENDED)
        if not self.store.cpus_free_for(job):
            raise SlurmError(errors.ESLURM_NODES_BUSY)
        self.store.post(job.job_id, jobstate.Resume(now))
        log.info("job_id=%d resumed", job.job_id)

    def _update(self, job: Job, update: JobUpdate, who: Principal, now: int) -> None:
        if update.nodes is not None and update.nodes.least == 0:  # Slurm's job expansion
            job = expansion.merge(self.store, job, now)
            update = replace(update, nodes=None)
        changes = jobupdate.changes(job, update, who.privileged_over(job.account))
        if any(self.store.conf.partition(p) is None for p in update.partitions or ()):
            raise SlurmError(errors.ESLURM_INVALID_PARTITION_NAME)
        count = jobupdate.shrinks_to(job, update)
        shrink = count is not None and count < len(job.nodes)
        if shrink and self.store.conf.scheduler_param("disable_job_shrink") is not None:
            raise SlurmError(errors.ESLURM_NOT_SUPPORTED)  # Slurm's permit_job_shrink
        if update.switches is not None and job.state is JobState.PENDING:
            switches, wait = switch_request(*update.switches, self.store.conf)
            changes.update(switches=switches, switch_wait=wait, switch_wait_start=0)
        if update.licenses is not None:
            changes["licenses"] = licenseadmit.checked(update.licenses, self.store.conf)
        updated = replace(job, **changes)
        if "dependency" in changes:  # expand:N is checked as at submission
            updated = expansion.admitted(self.store, updated, now)
        if changes.keys() & (jobupdate.RESHAPING | {"account", "qos", "time_limit"}):
            updated = self._recheck(job, updated, who)
        if shrink and count is not None:  # all checked: only now does it give nodes back
            updated = elastic.with_allocation(updated, elastic.shrink(self.store, job, count, now))
        self.store.update(updated)

    def _recheck(self, job: Job, updated: Job, who: Principal) -> Job:
        """An update that changes what the job asks of its partitions passes the
        rules submission applies (``controller.partitionaccess``), as the job's owner:
        access again when partition, account or QOS change; the limits unless an
        operator or the account's coordinator makes the change (as Slurm lets them
        exceed them); and a job reshaped so that no partition of it could ever run
        it is refused, as at submission."""
        conf = self.store.conf
        parts = [p for p in conf.partitions if p.name in updated.partitions]
        if (updated.partitions, updated.account, updated.qos) != (
            job.partitions,
            job.account,
            job.qos,
        ):
            owner = principal_for(job.uid, job.gid)
            for part in parts:
                refused = partitionaccess.access_refusal(
                    part, owner, updated.account, updated.qos, owner.group_names()
                )
                if refused:
                    raise SlurmError(refused)
            if "associations" in self.store.enforce:
                if self.store.associations is None:
                    raise SlurmError(errors.ESLURM_INVALID_ACCOUNT)
                updated = associations.admit(
                    updated, self.store.associations, self.store.enforce, ()
                )
        if updated.mem_per_cpu is not None and updated.mem_per_cpu != job.mem_per_cpu and parts:
            cpus, mem = partitionaccess.fit_mem_per_cpu(
                updated.cpus_per_task, updated.mem_per_cpu, parts[0].max_mem_per_cpu
            )
            updated = replace(updated, cpus_per_task=cpus, mem_per_cpu=mem)
        if not who.privileged_over(job.account):
            mode = partitionaccess.enforce_mode(conf.settings)
            refused = partitionaccess.limit_refusal(updated, parts, mode)
            if refused:
                raise SlurmError(refused)
        capacity = self.store.capacity
        if {k for k in jobupdate.RESHAPING if getattr(job, k) != getattr(updated, k)} and not any(
            isinstance(place(updated, capacity.partitions[p.name], capacity.nodes), Start)
            for p in parts
        ):  # as at submission: a job no partition could ever run is refused
            raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
        return updated
