"""srun inside a heterogeneous job: which components a step runs in.

The batch script of a heterogeneous job has its leader's SLURM_JOB_ID, so a plain
srun runs in component 0, as Slurm's does; ``--het-group=N`` runs the step in
component N, whose job id the script was given as SLURM_JOB_ID_HET_GROUP_N. A step
may also span components, as Slurm 22.05's may: ``--het-group=0,1 prog`` runs the
same program and options in each named component, ``srun [opts] a : [opts] b``
runs each group of options and its program in the next component (the options
Slurm propagates carry from one group to the next). It is one step
(``controller/hetsteps.py``): one step id in every component, its tasks numbered
across them. Outside any job srun makes the heterogeneous job first, one component
per group; in an ordinary job, each group takes the next of the job's nodes
(``node_spans``) and the step is one step of that job (``controller/mpmdsteps.py``).
"""

from __future__ import annotations

from cli.halt import Halt

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping

PROG = "srun"

#: srun's options that carry from one ``:`` group to the next unless given again: the
#: job options Slurm propagates between components and srun's own from that list.
PROPAGATED = frozenset(
    {"account", "chdir", "distribution", "epilog", "error", "export", "exclude", "input",
     "job-name", "kill-on-bad-exit", "label", "mem", "msg-timeout", "open-mode", "output",
     "partition", "prolog", "qos", "reservation", "time", "unbuffered"}
)  # fmt: skip
#: Slurm 22.05's srun when the ``:`` groups of a step in an ordinary job ask for more
#: nodes than the job has (each group takes the next of its nodes).
NODES_USED = (
    "Allocation failure of {count} nodes: job size of {total}, already allocated {used} nodes "
    "to previous components."
)
#: Slurm's answer to --het-group outside a heterogeneous job.
NO_COMPONENT = "No directives to start application on any available hetjob components"


def groups(text: str) -> list[int]:
    """``--het-group``'s indexes: ``1``, ``0,2``, ``0-2``; Slurm's errors otherwise."""
    found: list[int] = []
    for part in text.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise Halt(
                1,
                f"{PROG}: error: _parse_single_range: Invalid range: `{part}'",
                f"{PROG}: error: Invalid --het-group value: {text}",
            )
        found += range(int(low), int(high if dash else low) + 1)
    return found


def split(argv: list[str]) -> list[list[str]]:
    """srun's command line cut at each lone ``:`` into its groups (one: no ``:``)."""
    out: list[list[str]] = [[]]
    for word in argv:
        if word == ":":
            out.append([])
        else:
            out[-1].append(word)
    return out


def inherited(options: Mapping[str, str | None]) -> dict[str, str | None]:
    """What a ``:`` group takes from the group before it unless it says otherwise."""
    return {key: value for key, value in options.items() if key in PROPAGATED}


def job_ids(indexes: list[int], job_text: str, env: Mapping[str, str]) -> list[str]:
    """The job ids of components ``indexes`` inside the allocation ``job_text`` whose
    environment is ``env`` (Slurm 22.05's errors, all exit 1)."""
    size = int(env.get("SLURM_HET_SIZE", "0") or "0")
    if max(indexes) >= max(size, 1):
        raise Halt(
            1,
            f"{PROG}: error: Requested het-group offset exceeds highest hetjob index "
            f"({max(indexes)} > {max(size - 1, 0)})",
        )
    if not size:  # not a heterogeneous job: srun finds no component to start on
        raise Halt(1, f"{PROG}: error: {NO_COMPONENT}")
    if len(set(indexes)) != len(indexes):
        raise Halt(1, f"{PROG}: error: Duplicate het groups in single srun not supported")
    return [env.get(f"SLURM_JOB_ID_HET_GROUP_{index}", job_text) for index in indexes]


def job_of(text: str, job_text: str, env: Mapping[str, str]) -> list[str]:
    """The job ids the step of ``--het-group=text`` runs in (see ``job_ids``)."""
    return job_ids(groups(text), job_text, env)


def node_spans(counts: list[int], total: int) -> list[range]:
    """The job's nodes (by index, of ``total``) each ``:`` group of a step in an ordinary
    job runs on: ``counts`` of them each, in order, as Slurm 22.05's srun deals them."""
    spans: list[range] = []
    used = 0
    for count in counts:
        if used + count > total:
            raise Halt(
                1, f"{PROG}: error: " + NODES_USED.format(count=count, total=total, used=used)
            )
        spans.append(range(used, used + count))
        used += count
    return spans
