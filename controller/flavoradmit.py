"""Admission of a job's flavors: ``--gres`` alternatives and ``--prefer``, checked as
Slurm checks the one request it knows (controller/core/flavors.py schedules them).

Why a module of its own: admission is shared by every kind of request, and the rules
for alternatives are few and self-contained. ``admit`` splits ``--gres=a|b`` into its
alternatives (the first becomes ``Job.gres``, the one in effect until the job starts)
and refuses, in Slurm's words, what could never run:

* an alternative that is empty or malformed, or names a GRES (or type) that none of
  the job's partitions has: ``Invalid generic resource (gres) specification``, as
  one ``--gres`` would be;
* an alternative that no empty partition of the job could hold: ``Requested node
  configuration is not available``: each alternative is a request the user accepts,
  so one that can never start is a mistake, not a fallback;
* ``--prefer`` as Slurm 22.05's ``job_allocate`` checks it: malformed, or naming a
  feature no node has, is ``Invalid feature specification``; a preference no node of
  the job's partitions could satisfy (with any alternative) is ``Requested node
  configuration is not available``. ``SchedulerParameters=ignore_prefer_validation``
  waives both of the latter, as in Slurm ("nodes with features come and go").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from controller.core import features
from controller.core.plan import Start
from controller.core.snapshot import NodeView, PartitionView
from controller.model import Job
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError

#: ``--gres``'s separator between alternatives (lowest precedence: ``a:1,b:1|c:2``
#: is ``a:1,b:1`` or ``c:2``).
SEPARATOR = "|"

Place = Callable[[Job, PartitionView], object]


def alternatives(gres: str) -> tuple[str, ...]:
    """The alternatives of a ``--gres`` value in order, repeats dropped; () when it
    names one request. SlurmError (invalid gres) for an empty alternative."""
    if SEPARATOR not in gres:
        return ()
    given = [item.strip() for item in gres.split(SEPARATOR)]
    if not all(given):
        raise SlurmError(errors.ESLURM_INVALID_GRES)
    return tuple(dict.fromkeys(given))


def admit(
    job: Job,
    conf: SlurmConfig,
    nodes: Mapping[str, NodeView],
    parts: list[PartitionView],
    check_gres: Callable[[str], None],
    place: Place,
) -> Job:
    """``job`` (its ``gres`` as submitted, ``prefer`` set) with its alternatives split
    out, or SlurmError as the module says. ``check_gres`` is admission's own check of
    one ``--gres``; ``place`` its placement on an empty partition."""
    options = alternatives(job.gres)
    if options:
        job = replace(job, gres=options[0], gres_alternatives=options)
    for option in options:
        check_gres(option)
        flavor = replace(job, gres=option, gres_alternatives=())
        if not _fits(flavor, parts, place):
            raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    if job.prefer:
        _check_prefer(job, conf, nodes, parts, place)
    return job


def _fits(job: Job, parts: list[PartitionView], place: Place) -> bool:
    return any(isinstance(place(job, part), Start) for part in parts)


def _check_prefer(
    job: Job,
    conf: SlurmConfig,
    nodes: Mapping[str, NodeView],
    parts: list[PartitionView],
    place: Place,
) -> None:
    """``--prefer`` as Slurm validates it at submission (see the module)."""
    try:
        parsed = features.parse(job.prefer)
    except ValueError:
        raise SlurmError(errors.ESLURM_INVALID_FEATURE) from None
    if conf.scheduler_param("ignore_prefer_validation") is not None:
        return
    known = frozenset[str]().union(*(n.features for n in nodes.values()))
    if not parsed.names <= known:
        raise SlurmError(errors.ESLURM_INVALID_FEATURE)
    # Slurm tries the preference in place of --constraint (features_use = prefer).
    flavors = [
        replace(job, gres=option, constraint=job.prefer, gres_alternatives=())
        for option in job.gres_alternatives or (job.gres,)
    ]
    if not any(_fits(flavor, parts, place) for flavor in flavors):
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
