"""``corral sim`` with ``-f slurm.conf`` or several policies (``--policy fcfs,easy``).

``cli/corral.py`` parses the options and hands them here when either is
given. One policy on a configured cluster prints the usual summary and the
figures per partition and per account; several print one comparison table
(controller/sim/compare.py), replayed in parallel processes.
"""

from __future__ import annotations

import json
import os
import sys

from cli.boundary import UsageError

TYPE_CHECKING = False  # typing and the sim's modules cost a client's start
if TYPE_CHECKING:
    from controller.sim.swf import Trace


def _policies(text: str) -> list[str]:
    """``--policy``'s names, each known and given once."""
    from controller.sim.policy import choose

    names = [name.strip() for name in text.split(",")]
    for name in names:
        if not name:
            raise UsageError(f"--policy wants names separated by commas, got {text!r}")
        choose(name)  # a SimError names the policies there are
    if len(set(names)) != len(names):
        raise UsageError(f"--policy names a policy twice: {text!r}")
    return names


def warn(message: str) -> None:
    print(f"corral sim: warning: {message}", file=sys.stderr)


def read_trace(path: str, start: int, stop: int | None) -> Trace:
    """The trace's records ``start`` to ``stop - 1``, its malformed lines warned of."""
    from controller.sim import swf

    trace = swf.read(path, start, stop)
    if warning := trace.warning():
        warn(warning)
    return trace


def sim_site(
    trace_path: str,
    options: dict[str, str],
    flags: set[str],
    sets: tuple[str, ...],
    records: tuple[int, int | None],
) -> int:
    from controller.sim import compare, report, siterun
    from controller.sim.siterun import Setup

    conf = options.get("--config")
    if conf is None and (sets or "--accounts" in options or "--map" in options):
        raise UsageError("--set, --accounts and --map describe a slurm.conf's cluster: give it, -f")
    if conf is not None:
        for option in ("--nodes", "--cpus-per-node"):
            if option in options:
                raise UsageError(f"{option} and -f do not go together: slurm.conf has the nodes")
    if "--queues" in options:
        raise UsageError("--queues replays one policy on the trace's cluster: no -f, one --policy")
    png = options.get("--png")
    report.check_outputs(options.get("--csv"), png)
    setup = Setup(
        trace=trace_path,
        start=records[0],
        stop=records[1],
        nodes=int(options["--nodes"]) if "--nodes" in options else None,
        cpus_per_node=int(options["--cpus-per-node"]) if "--cpus-per-node" in options else None,
        conf=conf,
        sets=sets,
        accounts=options.get("--accounts"),
        sitemap=options.get("--map"),
        timeline=png is not None,
    )
    site = siterun.site_of(setup) if conf is not None else None
    for note in site.conf.warnings if site is not None else ():
        warn(note)
    policies = _policies(options["--policy"]) if "--policy" in options else None
    if policies is None:
        policies = [site.default_policy if site is not None else "fcfs"]
    if len(policies) > 1 and "--csv" in options:
        raise UsageError("--csv writes one policy's jobs: give one --policy with it")
    trace = read_trace(trace_path, *records)
    groups = None
    if site is not None:
        site.prepare(trace)  # the jobs' identities, for the per-group figures
        groups = siterun.groups(site, trace)
    shown = trace_path if "--jobs" not in options else f"{trace_path} (records {options['--jobs']})"
    if len(policies) > 1:
        if "--quiet" not in flags:
            print(f"corral sim: replaying {', '.join(policies)} in parallel", file=sys.stderr)
        results = compare.run_all(setup, policies)
        if png is not None:
            compare.draw(png, results, f"{os.path.basename(trace_path)}: {', '.join(policies)}")
        if "--json" in flags:
            print(json.dumps(compare.as_dict(shown, results, groups), indent=2))
        else:
            print(compare.text(results, groups))
        return 0
    assert site is not None  # one policy without -f stays in cli/corral.py
    result = siterun.replay_site(site, trace, policies[0], timeline=png is not None)
    summary = report.summarize(result)
    if "--csv" in options:
        report.write_csv(options["--csv"], result.jobs)
    if png is not None:
        report.draw(png, result, f"{os.path.basename(trace_path)}, {policies[0]}, {conf}")
    if "--json" in flags:
        figures = report.as_dict(shown, result, summary)
        del figures["cpus_per_node"]  # slurm.conf's nodes may differ: their sum instead
        figures["cpus"] = result.total_cpus
        figures.update(compare.group_dicts(result, groups))
        print(json.dumps(figures, indent=2))
    else:
        print(report.text(shown, result, summary))
        print()
        print(compare.group_text([result], groups))
    return 0
