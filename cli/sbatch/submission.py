"""sbatch: submit a batch script, with Slurm's options, output and exit statuses.

The steps follow Slurm's sbatch so that errors come out in the same order:
parse the command line (getopt errors exit 255 at once), handle --help,
--usage and --version, read and check the script, then apply #SBATCH
directives, SBATCH_* variables and the remaining command-line options in
that order, build the ``JobSpec`` and submit it. ``-W`` then waits for the
job to end and exits with its exit code.

Start-up time matters (scripts call sbatch in loops): the controller client
and the time/hostlist parsers are imported only when they are needed.
"""

from __future__ import annotations

import os
import sys
import time

from cli import boundary
from cli.failure import Failure, report
from cli.options import Option, OptionError, parse, print_error
from cli.sbatch import hintopts
from cli.sbatch.options import COMMAND_LINE_ONLY, PROPAGATED, TABLE
from cli.sbatch.script import check, directives, read, resolve, wrap
from cli.sbatch.settings import CLI, SCRIPT, Settings
from cli.sbatch.spec import Script, build
from corral.errors import EAGAIN, ESLURM_INVALID_JOB_ID, ESLURM_INVALID_PARTITION_NAME, SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from typing import Any

#: Job states after which a job will not run again (Slurm's IS_JOB_FINISHED).
FINISHED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
     "DEADLINE", "OUT_OF_MEMORY"}
)  # fmt: skip

#: How often -W asks about the job: quickly at first, then every 2 s.
FIRST_POLL, LAST_POLL = 0.1, 2.0

USAGE = """\
Usage: sbatch [-J name] [-p partition] [-N min[-max]] [-n ntasks] [-c ncpus]
              [--mem=size | --mem-per-cpu=size] [-t time] [-o file] [-e file]
              [-a array] [-d dependency] [--wrap=command] [OPTIONS...]
              [script [arguments...]]"""

HELP = """\
Usage: sbatch [OPTIONS...] [script [arguments...]]

Submit a batch script, read from the named file or from standard input.
Options may also be given in #SBATCH lines at the top of the script and in
SBATCH_* environment variables; the command line overrides both. A heterogeneous
job's components are separated by ":" on the command line (sbatch OPTIONS : OPTIONS
script) and by "#SBATCH hetjob" lines in the script.

Job:
  -J, --job-name=NAME          job name (default: the script's file name)
  -p, --partition=LIST         partitions to run in, comma separated
  -A, --account=NAME           account to charge
  -q, --qos=NAME               quality of service
      --comment=TEXT           free-form comment
      --container=PATH         run the script in this OCI bundle (oci.conf)
      --container-id=ID        the container's ID (SLURM_CONTAINER_ID)
  -a, --array=INDEXES          job array, e.g. 0-15, 1,3,5, 0-15:4, 1-9%2
  -d, --dependency=LIST        e.g. afterok:12:13, afterany:12?afternotok:14
      --kill-on-invalid-dep=yes|no  cancel the job if its dependency can never hold
  -H, --hold                   submit held (release with scontrol release)
  -b, --begin=TIME             start no earlier than TIME
      --deadline=TIME          remove the job if it cannot end by TIME
      --nice[=ADJ]             lower the job's priority by ADJ (default 100)
      --priority=N             set the priority (operators only)
      --requeue, --no-requeue  whether the job may be requeued

Resources:
  -N, --nodes=MIN[-MAX]        number of nodes
      --elastic[=SIG]          with -N MIN-MAX: grow and shrink while running, told
                               by SIG (default WINCH) and $CORRAL_RESIZE_FILE
  -n, --ntasks=N               number of tasks
  -c, --cpus-per-task=N        CPUs per task
      --ntasks-per-node=N      tasks per node
      --ntasks-per-socket=N    at most N tasks on each socket
      --mincpus=N              minimum CPUs per node
      --mem=SIZE               memory per node (K, M, G, T; default M)
      --mem-per-cpu=SIZE       memory per allocated CPU
  -t, --time=TIME              time limit: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
      --time-min=TIME          shortest acceptable time limit
  -w, --nodelist=HOSTS         nodes to use (a hostlist, or a file with a /)
  -x, --exclude=HOSTS          nodes not to use
  -C, --constraint=FEATURES    required node features
      --exclusive              whole nodes only
  -s, --oversubscribe          share CPUs with other jobs where the partition allows
      --gres=LIST              generic resources per node, e.g. gpu:2
  -L, --licenses=LIST          licenses held while it runs, e.g. fluent:2,ansys
      --switches=N[@TIME]      at most N leaf switches, waiting up to TIME (topology/tree)
      --segment=N              N nodes per base block (topology/block)
      --topology-level=R[:P]   under one switch of level R, trying level P first (Corral's)

Input, output and environment:
  -D, --chdir=DIR              working directory of the job
  -o, --output=PATTERN         standard output file (default slurm-%j.out)
  -e, --error=PATTERN          standard error file (default: with output)
  -i, --input=PATTERN          standard input file (default /dev/null)
      --open-mode=append|truncate  how to open the output files
      --export=ALL|NONE|LIST   environment variables passed to the job
      --export-file=FILE|FD    NUL-separated NAME=value environment
      --signal=[B:]SIG[@SECS]  send SIG SECS seconds before the time limit
      --wrap=COMMAND           submit COMMAND wrapped in a /bin/sh script

Command:
      --parsable               print only the job id
  -Q, --quiet                  print nothing on success
  -W, --wait                   wait for the job and exit with its exit code
      --test-only              report when the job would start; submit nothing
  -v, --verbose                list the options in effect
  -V, --version                print the version
  -h, --help                   print this help
      --usage                  print a short usage line

Other Slurm sbatch options are refused, or warned about where they cannot change
the outcome (docs/compatibility.md lists them)."""


def sbatch(argv: list[str]) -> int:
    """Run sbatch with ``argv`` (without the program name); return the exit status."""
    try:
        return _submit(argv)
    except OptionError as exc:
        print_error("sbatch", exc)
        return 255
    except Failure as exc:
        return report("sbatch", exc)


def _submit(argv: list[str]) -> int:
    given, positional = parse(TABLE, argv)
    for opt, _ in given:
        if opt.key == "help":
            print(HELP)
            return 0
        if opt.key == "usage":
            print(USAGE)
            return 0
        if opt.key == "version":
            print(boundary.version_line())
            return 0
    verbose = _verbosity(given)
    quiet = any(opt.key == "quiet" for opt, _ in given)
    try:
        cwd = os.getcwd()
    except OSError as exc:
        raise Failure(f"getcwd failed: {exc.strerror}") from None
    groups = [given]
    while positional[:1] == [":"]:  # the next component of a heterogeneous job
        more, positional = parse(TABLE, positional[1:])
        groups.append(more)
    script = _script([pair for group in groups for pair in group], positional, cwd)
    components = _settings(script, groups)
    settings = components[0]
    if quiet and verbose:
        raise Failure("don't specify both --verbose (-v) and --quiet (-Q)")
    if verbose:
        for each in components:
            if hintopts.dropped(each.fields):
                print(f"sbatch: {hintopts.DROPPED}", file=sys.stderr)
            _list_options(each)

    spec = build(settings, script, cwd=cwd, environ=os.environ, command_line=argv)
    het = [
        {
            **build(each, script, cwd=cwd, environ=os.environ, command_line=argv),
            "script": "",
            "argv": [],
        }
        for each in components[1:]
    ]
    fields = settings.fields
    client: Any = _cluster_client(fields.get("clusters", ""), spec, het)
    if fields.get("test_only"):
        return _test_only(client, spec, het)
    try:
        reply = _submit_retrying(client, spec, het)
    except SlurmError as exc:
        failed = f"Batch job submission failed: {exc.message}"
        if exc.code == ESLURM_INVALID_PARTITION_NAME and spec.get("partitions"):
            named = ",".join(spec["partitions"])
            raise Failure(f"invalid partition specified: {named}", failed) from None
        raise Failure(*([exc.detail] if exc.detail else []), failed) from None
    if not quiet:
        print(_submitted(reply, fields))
    if fields.get("wait"):
        sys.stdout.flush()
        return _wait(client, reply["job_id"])
    return 0


#: How often sbatch asks again while the controller is full (MaxJobCount), as Slurm's
#: does: after 1 s, then 2 s, ... (two minutes in all) before giving up.
SUBMIT_RETRIES = 15


def _submit_retrying(
    client: Any, spec: dict[str, Any], het: list[dict[str, Any]]
) -> dict[str, Any]:
    """Submit (with a heterogeneous job's further components, ``het``); while the
    controller answers EAGAIN (its MaxJobCount reached) say so once and ask again
    with a growing pause, as Slurm's sbatch does."""
    retries = 0
    request = {"spec": spec, "test_only": False, "het_components": het}
    while True:
        try:
            reply: dict[str, Any] = client.call("Submit", request)
            return reply
        except SlurmError as exc:
            if exc.code != EAGAIN or retries >= SUBMIT_RETRIES:
                raise
            if not retries:
                print(
                    "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying",
                    file=sys.stderr,
                    flush=True,
                )
            retries += 1
            time.sleep(retries)


def _verbosity(given: list[tuple[Option, str | None]]) -> int:
    """``-v`` count, else ``$SBATCH_DEBUG`` (a number), as Slurm combines them."""
    count = sum(1 for opt, _ in given if opt.key == "verbose")
    debug = os.environ.get("SBATCH_DEBUG")
    if count or debug is None:
        return count
    digits = debug.strip(" \t\n\v\f\r").removeprefix("+")
    if digits and not (digits.isascii() and digits.isdigit()):
        raise Failure(f'Invalid numeric value "{debug}" for --verbose.', status=1)
    if len(digits) > 9:
        raise Failure(f"Numeric argument ({digits}) too large for --verbose.", status=1)
    return int(digits or "0")


def _script(given: list[tuple[Option, str | None]], positional: list[str], cwd: str) -> Script:
    """The script from --wrap, the file argument, or standard input, checked."""
    wrapped = [arg for opt, arg in given if opt.key == "wrap"]
    if wrapped:
        if positional:
            raise Failure("Script arguments not permitted with --wrap option")
        return Script(wrap(wrapped[-1] or ""), None, [], wrapped=True)
    path = resolve(positional[0], cwd, os.environ.get("PATH", "")) if positional else None
    return Script(check(read(path)), path, positional[1:], wrapped=False)


def _settings(script: Script, groups: list[list[tuple[Option, str | None]]]) -> list[Settings]:
    """Per component: #SBATCH directives, then SBATCH_* variables, then the command
    line, then the checks. A heterogeneous job's components come from ``#SBATCH
    hetjob`` in the script and ``:`` on the command line, matched by position."""
    file = os.path.basename(script.path) if script.path else "stdin"
    in_script = directives(script.text, file)
    carried: list[tuple[Option, str | None]] = []
    out = []
    for index in range(max(len(in_script), len(groups))):
        parsed, extra = parse(TABLE, in_script[index] if index < len(in_script) else [])
        if extra:
            raise Failure(f"Invalid directive found in batch script: {extra[0]}", status=255)
        given = groups[index] if index < len(groups) else []
        settings = Settings()
        _apply(settings, carried, SCRIPT)
        _apply(settings, parsed, SCRIPT)
        settings.apply_environment(os.environ)
        _apply(settings, given, CLI)
        settings.verify()
        carried = [(opt, arg) for opt, arg in [*carried, *parsed, *given] if opt.key in PROPAGATED]
        out.append(settings)
    return out


def _apply(settings: Settings, given: list[tuple[Option, str | None]], source: str) -> None:
    for opt, arg in given:
        if opt.key not in COMMAND_LINE_ONLY:
            settings.apply(opt.key, arg, source)


def _list_options(settings: Settings) -> None:
    """What -v prints: every option in effect and its value, as Slurm lists them."""
    rule = "-" * 20
    lines = ["defined options", f"{rule} {rule}"]
    lines += [
        f"{opt.long:<20}: {settings.texts[opt.key]}"
        for opt in TABLE.options
        if opt.key in settings.texts and opt.long == opt.key
    ]
    lines += [f"{rule} {rule}", "end of defined options"]
    for line in lines:
        print(f"sbatch: {line}", file=sys.stderr)


def _submitted(reply: dict[str, Any], fields: dict[str, Any]) -> str:
    """The line printed on success: the job id, and the cluster when -M chose one."""
    cluster = reply.get("cluster") or fields.get("clusters", "")
    job_id = reply["job_id"]
    if fields.get("parsable"):
        return f"{job_id};{cluster}" if "clusters" in fields else str(job_id)
    suffix = f" on cluster {cluster}" if "clusters" in fields else ""
    return f"Submitted batch job {job_id}{suffix}"


def _cluster_client(wanted: str, spec: dict[str, Any], het: list[dict[str, Any]]) -> Any:
    """The controller to submit to: this cluster's; with ``-M``, the cluster named, or
    of several the one expected to start the job first (each cluster's own plan,
    as ``--test-only`` shows it; the first named on a tie), as Slurm's sbatch picks."""
    if not wanted:
        return boundary.connect()
    from cli import clusters

    ask = {"spec": spec, "test_only": True, "het_components": het}
    try:
        name, client = clusters.soonest(clusters.clients(wanted), ask)
    except SlurmError as exc:
        raise Failure(f"Batch job submission failed: {exc.message}") from None
    if not clusters.local(name):  # another cluster's job: its sruns go there
        told = {clusters.WORKING_CLUSTER: clusters.working(name, wanted)}
        for each in (spec, *het):
            each["environment"].update(told)
    return client


def _test_only(client: Any, spec: dict[str, Any], het: list[dict[str, Any]]) -> int:
    """--test-only: ask when the job (every component of a heterogeneous one,
    planned together) would start; submit nothing. A heterogeneous job's line, as
    Slurm 22.05's, gives its processors summed and its nodes merged, and no
    partition."""
    from corral.timefmt import format_timestamp

    try:
        reply = client.call("Submit", {"spec": spec, "test_only": True, "het_components": het})
    except SlurmError as exc:
        if exc.code == ESLURM_INVALID_PARTITION_NAME and spec.get("partitions"):
            named = ",".join(spec["partitions"])  # as Slurm 22.05's, before its failure line
            print(f"sbatch: error: invalid partition specified: {named}", file=sys.stderr)
        print(f"allocation failure: {exc.message}", file=sys.stderr)
        return 1
    where = f"on {reply['nodes']}"
    if not het:
        where = f"on nodes {reply['nodes']} in partition {reply['partition']}"
    print(
        f"sbatch: Job {reply['job_id']} to start at {format_timestamp(reply['start_time'])} "
        f"using {reply['num_cpus']} processors {where}",
        file=sys.stderr,
    )
    return 0


def _wait(client: Any, job_id: int) -> int:
    """-W: poll until every record of the job has finished; return the exit code.

    A signal counts as exit code 1; an array job returns its largest code.
    A job the controller no longer knows ends the wait.
    """
    delay = FIRST_POLL
    request = {"filter": {"job_ids": [str(job_id)], "states": ["ALL"]}}
    while True:
        time.sleep(delay)
        delay = min(delay * 2, LAST_POLL)
        try:
            jobs = client.call("Jobs", request)["jobs"]
        except SlurmError as exc:
            if exc.code != ESLURM_INVALID_JOB_ID:
                print(
                    "sbatch: error: Currently unable to load job state information, "
                    f"retrying: {exc.message}",
                    file=sys.stderr,
                )
                continue
            jobs = []
        if not jobs:
            print(
                f"sbatch: error: Job {job_id} no longer found and exit code not found",
                file=sys.stderr,
            )
            return 0
        if all(job["state"] in FINISHED for job in jobs):
            return max(_exit_code(job["exit_status"]) for job in jobs)


def _exit_code(status: int) -> int:
    """A raw wait status as a shell exit code; death by a signal counts as 1."""
    return (status >> 8) & 0xFF if status & 0x7F == 0 else 1
