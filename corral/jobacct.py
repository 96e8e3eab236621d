"""JobAcctGatherType and JobAcctGatherFrequency: what the agents sample, and how often.

Slurm's forms are accepted as written: the type is ``jobacct_gather/linux``
(each step's processes, read from /proc), ``jobacct_gather/cgroup`` (the
step's cgroup where it has one, /proc where not) or ``jobacct_gather/none``
(Slurm's default: nothing is sampled, so ``sstat`` has nothing to show; sacct
still has what each step's processes used, from wait4, when it ends). The
frequency is a comma-separated list of ``kind=seconds`` (``task=30,energy=0``)
or, as older Slurm wrote it, one number for ``task``; ``task=0`` turns the
sampling off. Corral samples tasks only: an ``energy``, ``network`` or
``filesystem`` interval other than 0 asks for accounting plugins it does not
have, so it is refused rather than ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.confsyntax import NOWHERE, ConfigError, Where

#: JobAcctGatherType's values, by the name used below.
GATHER_TYPES = {
    "jobacct_gather/none": "none",
    "jobacct_gather/linux": "linux",
    "jobacct_gather/cgroup": "cgroup",
}
#: Slurm's default task sampling interval (seconds).
DEFAULT_TASK_FREQUENCY = 30
_OTHER_KINDS = ("energy", "network", "filesystem")


@dataclass(frozen=True, slots=True)
class JobAcctGather:
    """How the agents sample running steps: ``kind`` is ``none``, ``linux`` or
    ``cgroup``; every ``task_frequency`` seconds (0: never)."""

    kind: str = "none"
    task_frequency: int = DEFAULT_TASK_FREQUENCY

    @property
    def sampling(self) -> bool:
        """Whether agents sample at all."""
        return self.kind != "none" and self.task_frequency > 0

    @property
    def type_name(self) -> str:
        return f"jobacct_gather/{self.kind}"

    @property
    def frequency_text(self) -> str:
        """JobAcctGatherFrequency as ``scontrol show config`` prints it."""
        return f"task={self.task_frequency}"


def parse_gather(
    gather_type: tuple[str, Where] | None, frequency: tuple[str, Where] | None
) -> JobAcctGather:
    """The two keys' values (None: not written), or ConfigError with the line at fault."""
    kind = "none"
    if gather_type is not None and gather_type[0]:
        value, where = gather_type
        found = GATHER_TYPES.get(value.strip().lower())
        if found is None:
            choices = ", ".join(GATHER_TYPES)
            raise ConfigError(*where, f"bad JobAcctGatherType value '{value}': use {choices}")
        kind = found
    text, where = frequency if frequency is not None else ("", NOWHERE)
    return JobAcctGather(kind=kind, task_frequency=_task_frequency(text, where))


def _task_frequency(text: str, where: Where) -> int:
    task = DEFAULT_TASK_FREQUENCY
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        kind, equals, seconds = item.partition("=")
        if not equals:
            kind, seconds = "task", item
        kind = kind.strip().lower()
        if kind not in ("task", *_OTHER_KINDS):
            raise ConfigError(*where, f"JobAcctGatherFrequency: unknown data type '{kind}'")
        if not seconds.strip().isdigit():
            raise ConfigError(
                *where, f"JobAcctGatherFrequency: bad interval '{seconds}' for {kind}"
            )
        value = int(seconds)
        if kind == "task":
            task = value
        elif value:
            raise ConfigError(
                *where,
                f"JobAcctGatherFrequency={text} is not supported: "
                f"only task usage is sampled ({kind}=0 or leave it out)",
            )
    return task
