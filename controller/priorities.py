"""The controller's fair-share usage and its pending jobs' priorities.

``PriorityKeeper`` is the one owner of usage (decayed CPU-seconds per
association, persisted in the journal's meta table) and of the share tree
and priority inputs derived from it. ``JobStore`` holds one and asks it for
a new job's priority at submission, tells it when a job stops holding its
nodes (so that the job is charged even if MinJobAge purges it before the
next calculation), and every PriorityCalcPeriod, as Slurm's priority thread
does, has it rank the pending jobs: ``recalculate`` returns a ``Ranking``
value that the store keeps and gives to each snapshot, and no job record is
rewritten. The arithmetic is the pure core's (``core/priority.py``,
``core/fairshare.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from controller import jobtres
from controller.associations import AssocSet
from controller.core import fairshare, priority
from controller.core.fairshare import Account, Charge, ShareTree, Usage
from controller.core.priority import Cluster, PriorityJob, Ranking, account_of
from controller.model import Job
from corral.config import SlurmConfig

log = logging.getLogger(__name__)

#: The journal meta key that holds the usage.
USAGE_KEY = "fairshare_usage"


def held_tres(job: Job) -> tuple[tuple[str, float], ...]:
    """What ``job`` holds of each TRES but billing (fair share charges that one)."""
    return tuple(
        (name, float(count))
        for name, count in jobtres.of_job(job).total.items()
        if name != "billing" and count
    )


class PriorityKeeper:
    def __init__(self, conf: SlurmConfig) -> None:
        self.conf = conf
        self.usage = Usage()
        self.tree: ShareTree = fairshare.share_tree(self.usage)
        self.cluster = Cluster.from_config(conf)
        self.last_calc = 0
        self._ended: list[Charge] = []
        self._lowest_basic: int | None = None
        # dbd's associations once known: the share tree's accounts, users and shares.
        self.associations: AssocSet | None = None

    # ------------------------------------------------------------ state

    def restore(self, saved: str | None) -> None:
        if saved:
            try:
                self.usage = Usage.from_json(saved)
            except ValueError as exc:
                log.error("fair-share usage not restored (%s): starting from none", exc)

    def saved(self) -> str:
        return self.usage.to_json()

    def apply_config(self, conf: SlurmConfig, active_nodes: int) -> None:
        self.conf = conf
        self.cluster = Cluster.from_config(
            conf, self.tree.factors, active_nodes=active_nodes, qos_priority=self._qos_priority()
        )
        self.last_calc = 0  # recompute with the new weights at the next cycle

    # ------------------------------------------------------------ events

    def initial(self, job: Job, now: int) -> int:
        """A new job's priority (``calc_priority``)."""
        if not self.conf.priority.multifactor:
            value = priority.basic_priority(self._lowest_basic, job.nice)
            if not job.nice and job.admin_priority is None:
                self._lowest_basic = value
            return value
        return priority.job_priority(PriorityJob.from_job(job), now, self.cluster)

    def billing(self, job: Job) -> int:
        """What ``job`` bills a second: its partition's TRESBillingWeights applied."""
        part = self.conf.partition(job.partition)
        return jobtres.billing(job, part.billing_weights if part is not None else ())

    def charged(self, job: Job) -> float:
        """What fair share charges ``job`` a second: its billing times its QOS's
        UsageFactor (0 makes a QOS free, 2 twice as dear)."""
        qos = self.associations.qos.get(job.qos) if self.associations is not None else None
        return self.billing(job) * (qos.usage_factor if qos is not None else 1.0)

    def _qos_priority(self) -> dict[str, int]:
        if self.associations is None:
            return {}
        return {name: q.priority for name, q in self.associations.qos.items() if q.priority}

    def ended(self, job: Job, end: int) -> None:
        """``job`` stopped holding its nodes at ``end``: charge it at the next calculation."""
        if job.start_time:
            self._ended.append(
                Charge(
                    account_of(job),
                    job.user,
                    self.charged(job),
                    job.start_time,
                    end,
                    job.qos,
                    held_tres(job),
                )
            )

    # ------------------------------------------------------------ the calculation

    def _associations(self) -> tuple[list[Account], dict[tuple[str, str], int]]:
        """dbd's account tree and user shares (Fairshare=parent counts as 1 share)."""
        if self.associations is None:
            return [], {}
        accounts = [
            Account(a.account, a.parent or fairshare.ROOT, max(a.shares, 1))
            for a in self.associations.assocs
            if not a.user and a.account != fairshare.ROOT and not a.partition
        ]
        users = {
            (a.account, a.user): max(a.shares, 1)
            for a in self.associations.assocs
            if a.user and not a.partition
        }
        return accounts, users

    def due(self, now: int) -> bool:
        return now - self.last_calc >= max(self.conf.priority.calc_period, 1)

    def recalculate(
        self, now: int, running: Iterable[Job], pending: Iterable[Job], active_nodes: int
    ) -> Ranking:
        """Advance usage to ``now`` and rank every pending job (priority/basic: none;
        each keeps the number it got at submission)."""
        config = self.conf.priority
        charges = [
            Charge(account_of(j), j.user, self.charged(j), j.start_time, 0, j.qos, held_tres(j))
            for j in running
        ] + self._ended
        self._ended = []
        self.usage = fairshare.advance(
            self.usage,
            now,
            charges,
            half_life=config.decay_half_life,
            reset_period=config.usage_reset_period,
        )
        pending = list(pending)
        users = {(account_of(j), j.user) for j in pending}
        users.update((c.account, c.user) for c in charges)
        accounts, user_shares = self._associations()
        users.update(user_shares)
        self.tree = fairshare.share_tree(
            self.usage,
            users,
            accounts,
            user_shares=user_shares,
            fair_tree=config.fair_tree,
            damping=config.fs_dampening_factor,
        )
        self.cluster = Cluster.from_config(
            self.conf,
            self.tree.factors,
            active_nodes=active_nodes,
            qos_priority=self._qos_priority(),
        )
        self.last_calc = now
        if not config.multifactor:
            return Ranking(now)
        return priority.rank(pending, now, self.cluster)
