"""scontrol: show and change jobs, nodes and partitions the way Slurm's scontrol does.

Command words are case-insensitive and may be abbreviated as far as Slurm
allows (``sho job``, ``upd``); messages go where Slurm sends them (``Job 5
not found`` on stdout, ``Invalid job id specified for job x`` on stderr)
with Slurm's exit status, because scripts test both. Records are rendered by
``cli.jobs.record`` and ``cli.nodes.record``.
"""

from __future__ import annotations

import os
import sys

from cli import boundary, scontrolassoc, scontroljobs, scontrolreboot
from cli.command import Command
from cli.halt import Halt
from cli.jobs.ids import job_id_list
from cli.jobs.record import record as job_record
from cli.nodes.record import node_record, partition_record
from cli.options import REFUSED, REQUIRED, WARNED, Option, OptionTable
from corral.errors import SlurmError
from corral.hostlist import compress, expand
from corral.timefmt import format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TextIO

PROG = "scontrol"
EINVAL = 22
RESERVATION_INVALID = 2053  # ESLURM_RESERVATION_INVALID

USAGE = """\
scontrol [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -a or --all: equivalent to "all" command
     -d or --details: equivalent to "details" command
     -h or --help: equivalent to "help" command
     -o or --oneliner: equivalent to "oneliner" command
     -Q or --quiet: equivalent to "quiet" command
     -v or --verbose: equivalent to "verbose" command
     -V or --version: equivalent to "version" command

    Valid <COMMAND> values are:
     hold <job_list>          prevent the jobs from starting (admin hold)
     uhold <job_list>         hold the jobs as their user would
     release <job_list>       let held jobs start again
     listpids [<job_id>[.<step_id>]] [<NodeName>]
                              list the processes of jobs on this host
     notify <job_id> <msg>    print a message on the stderr of a job's salloc or srun
     requeue <job_list>       requeue batch jobs
     requeuehold <job_list>   requeue batch jobs and hold them
     resume <job_list>        let suspended jobs continue (operators only)
     suspend <job_list>       stop running jobs where they are (operators only)
     ping                     report whether each controller responds
     reboot [ASAP] [nextstate=RESUME|DOWN] [reason=<text>] ALL|<nodelist>
                              run RebootProgram on the nodes once idle
     cancel_reboot <nodelist> cancel a reboot not yet issued
     reconfigure              make the controller re-read its configuration
     show <ENTITY> [<ID>]     show config, hostlist, hostlistsorted, hostnames,
                              job, licenses, node, partition or topology
     show assoc_mgr [users=<list>] [accounts=<list>] [qos=<list>]
                    [flags=users|assoc|qos]
                              show the controller's cached associations, users
                              and QOS with their current usage
     shutdown slurmctld       stop the controller (it saves its state)
     takeover [<INDEX>]       ask backup controller INDEX (1 unless given) to
                              take over from the serving one
     token [lifespan=<secs>] [username=<user>]
                              get a JWT for the REST gateway
     top <job_list>           put the jobs first among their user's pending jobs
     update <SPECIFICATIONS>  change a job (JobId=...), node (NodeName=...: State,
                              Reason, Features, ActiveFeatures) or partition's
                              State (PartitionName=...)
     version                  print the version
     write batch_script <job_id> [<file>|-]
                              write a batch job's script (default slurm-<job_id>.sh)
"""

TABLE = OptionTable(
    [
        Option("all", "a", "all"),
        Option("cluster", "M", "cluster", REQUIRED),
        Option("cluster", "", "clusters", REQUIRED),
        Option("details", "d", "details"),
        Option("future", "F", "future", use=WARNED, note="FUTURE nodes are not shown apart"),
        Option("help", "h", "help"),
        Option("help", "", "usage"),
        Option("hide", "", "hide"),
        Option("local", "", "local", note="one cluster: always local"),
        Option("oneliner", "o", "oneliner"),
        Option("quiet", "Q", "quiet"),
        Option("uid", "u", "uid", REQUIRED, REFUSED, "acting as another user is not implemented"),
        Option("verbose", "v", "verbose", use=WARNED, note="scontrol prints no progress"),
        Option("version", "V", "version"),
    ],
    prog="scontrol",
)
COMMAND = Command(PROG, TABLE, USAGE)

#: Node states ``update NodeName=`` accepts, with the shortest abbreviation Slurm allows.
NODE_STATES = (
    ("NoResp", 3),
    ("CANCEL_REBOOT", 3),
    ("DRAIN", 3),
    ("FAIL", 3),
    ("FUTURE", 3),
    ("RESUME", 3),
    ("UNDRAIN", 3),
    ("DOWN", 3),
    ("IDLE", 3),
    ("POWER_DOWN", 7),
    ("POWER_DOWN_ASAP", 12),
    ("POWER_DOWN_FORCE", 12),
    ("POWER_UP", 7),
)
_NEEDS_REASON = ("DOWN", "DRAIN", "FAIL")
_REQUEUE_FLAGS = ("incomplete", "state=specialexit")


def word_is(tag: str, name: str, minimum: int) -> bool:
    """Slurm's abbreviation rule: ``tag`` is a prefix of ``name``, at least ``minimum`` long."""
    return len(tag) >= minimum and name.lower().startswith(tag.lower())


def split_tag(text: str) -> tuple[str, str | None]:
    """``Key=Value`` as (key, value); value None without ``=``."""
    key, eq, value = text.partition("=")
    return key, (value if eq else None)


class Session:
    """One scontrol run: its global flags, its exit status and where output goes."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.oneliner = False
        self.details = False
        self.quiet = False
        self.all_partitions = False  # -a/all: hidden partitions (and their jobs) too
        self.exit_code = 0
        self.done = False
        self._client: Any = None

    # ------------------------------------------------------------- plumbing

    def client(self) -> Any:
        if self._client is None:
            self._client = boundary.connect()
        return self._client

    def use(self, client: Any) -> None:
        """Talk to ``client``'s controller (``-M``) rather than this cluster's."""
        self._client = client

    def call(self, method: str, request: dict[str, Any]) -> Any:
        return self.client().call(method, request)

    def fail(self, text: str, *, quiet_ok: bool = True) -> None:
        """Print ``text`` on stderr (unless ``-Q`` and quiet_ok) and mark the run failed."""
        self.exit_code = 1
        if not (quiet_ok and self.quiet):
            print(text, file=self.err)

    def print(self, text: str = "", end: str = "\n") -> None:
        self.out.write(text + end)

    # ------------------------------------------------------------- dispatch

    def run(self, words: Sequence[str]) -> None:
        """Execute one command line (already split into words)."""
        tag = words[0]
        handlers: list[tuple[str, int, Callable[[Sequence[str]], None]]] = [
            ("all", 2, self._all),
            ("cancel_reboot", 3, lambda w: scontrolreboot.cancel_reboot(self, w)),
            ("create", 2, self._create),
            ("delete", 3, self._delete),
            ("details", 1, self._details),
            ("exit", 2, self._quit),
            ("help", 2, self._help),
            ("hold", 4, self._hold),
            ("holdu", 5, self._hold),
            ("uhold", 5, self._hold),
            ("oneliner", 1, self._oneliner),
            ("ping", 3, self._ping),
            ("quiet", 4, self._quiet),
            ("quit", 4, self._quit),
            ("reboot_nodes", 3, lambda w: scontrolreboot.reboot(self, w)),
            ("reconfigure", 3, self._reconfigure),
            ("listpids", 1, lambda w: scontroljobs.listpids(self, w)),
            ("notify", 1, lambda w: scontroljobs.notify(self, w)),
            ("requeue", 3, self._requeue),
            ("requeuehold", 11, self._requeue),
            ("release", 3, self._hold),
            ("resume", 3, self._suspend),
            ("show", 3, self._show),
            ("shutdown", 8, self._shutdown),
            ("suspend", 2, self._suspend),
            ("takeover", 8, self._takeover),
            ("token", 3, self._token),
            ("top", 3, lambda w: scontroljobs.top(self, w)),
            ("update", 1, self._update),
            ("verbose", 4, self._ignore),
            ("version", 4, self._version),
            ("write", 5, self._write),
        ]
        for name, minimum, handler in handlers:
            if word_is(tag, name, minimum) or (name == "hold" and tag.lower().startswith("hold")):
                handler(words)
                return
        self.fail(f"invalid keyword: {tag}", quiet_ok=False)

    def _ignore(self, words: Sequence[str]) -> None:
        """Settings Corral has no use for."""

    def _all(self, words: Sequence[str]) -> None:
        """``all``: show hidden partitions and those one may not use, and their jobs."""
        self.all_partitions = True

    def _help(self, words: Sequence[str]) -> None:
        self.out.write(USAGE)

    def _quit(self, words: Sequence[str]) -> None:
        self.done = True

    def _oneliner(self, words: Sequence[str]) -> None:
        self.oneliner = True

    def _quiet(self, words: Sequence[str]) -> None:
        self.quiet = True

    def _details(self, words: Sequence[str]) -> None:
        self.details = True

    def _version(self, words: Sequence[str]) -> None:
        if len(words) > 1:
            self.fail(f"too many arguments for {words[0]} keyword", quiet_ok=False)
        self.print(boundary.version_line())

    # ------------------------------------------------------------- controller

    def _ping(self, words: Sequence[str]) -> None:
        if len(words) > 1:
            self.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
            return
        self.print_ping()

    def print_ping(self) -> None:
        """``Slurmctld(primary) at <host> is UP|DOWN``, then each backup's line
        (``backup``, or ``backupN`` beyond one); exit status 1 when one is down."""
        from corral.clientconf import client_settings

        hosts = [name for name, _ in client_settings().controller_hosts]
        try:
            reply = self.call("Ping", {"all": True})
        except SlurmError:
            up = [False] * len(hosts)
        else:
            found = {c["host"]: bool(c["up"]) for c in reply["controllers"]}
            up = [found.get(host, False) for host in hosts]
        for index, host in enumerate(hosts):
            role = "primary" if index == 0 else "backup" if len(hosts) == 2 else f"backup{index}"
            self.print(f"Slurmctld({role}) at {host} is {'UP' if up[index] else 'DOWN'}")
        if not all(up):
            self.exit_code = 1
            if os.getuid() == 0:
                self.print("*****************************************")
                self.print("** RESTORE SLURMCTLD DAEMON TO SERVICE **")
                self.print("*****************************************")

    def _takeover(self, words: Sequence[str]) -> None:
        """``takeover [INDEX]``: the serving controller hands control to backup INDEX
        (SuperUser only; docs/ha.md)."""
        from corral.clientconf import client_settings

        if len(words) > 2:
            self.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
            return
        count = len(client_settings().controller_hosts)
        if len(words) == 2:
            index = int(words[1]) if words[1].isdigit() else 0
            if not 1 <= index < count:
                self.fail(f"scontrol: invalid backup controller index ({index})", quiet_ok=False)
                return
        elif count < 2:
            self.fail("scontrol: no backup controller defined", quiet_ok=False)
            return
        else:
            index = 1
        try:
            self.call("Takeover", {"index": index})
        except SlurmError as exc:
            self.fail(f"slurm_takeover error: {exc}")

    def _reconfigure(self, words: Sequence[str]) -> None:
        if len(words) > 2:
            self.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
        try:
            self.call("Reconfigure", {})
        except SlurmError as exc:
            self.fail(f"slurm_reconfigure error: {exc}")

    def _shutdown(self, words: Sequence[str]) -> None:
        """``shutdown slurmctld|controller``: the controller saves its state and ends
        (root and SlurmUser, or AdminLevel Administrator). Plain ``shutdown`` also ends
        every slurmd in Slurm; the node agents have no such request, so it is refused
        rather than half done."""
        if len(words) > 2:
            self.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
            return
        option = words[1] if len(words) == 2 else ""
        if option.lower() not in ("", "slurmctld", "controller"):
            self.fail(f"invalid shutdown argument:{option}", quiet_ok=False)
            return
        if not option:
            self.fail(
                "slurm_shutdown error: shutting down the node agents is not supported: "
                'use "scontrol shutdown slurmctld", or "corral down" for the whole cluster'
            )
            return
        try:
            self.call("Shutdown", {})
        except SlurmError as exc:
            self.fail(f"slurm_shutdown error: {exc}")

    def _write(self, words: Sequence[str]) -> None:
        """``write batch_script JOBID [FILE|-]``: the script into FILE (default
        slurm-JOBID.sh), or to stdout for ``-``."""
        if len(words) < 3:
            self.fail(f"too few arguments for keyword:{words[0]}", quiet_ok=False)
            return
        if len(words) > 4:
            self.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
            return
        if not word_is(words[1], "batch_script", 5):
            self.fail(f"invalid write argument:{words[1]}", quiet_ok=False)
            return
        job_id = words[2]
        try:
            script = self.call("BatchScript", {"job_id": job_id})["script"]
        except SlurmError as exc:
            self.fail(f"job script retrieval failed: {exc}")
            return
        target = words[3] if len(words) == 4 else f"slurm-{job_id}.sh"
        if target == "-":
            self.out.write(script)
            return
        try:
            with open(target, "w", encoding="utf-8") as file:
                file.write(script)
        except OSError as exc:
            self.fail(f"failed to open file `{target}`: {exc.strerror}", quiet_ok=False)
            return
        self.print(f"batch script for job {job_id} written to {target}")

    def _token(self, words: Sequence[str]) -> None:
        """``SLURM_JWT=...``: a token for the REST gateway (``corral.tokens``)."""
        asked: dict[str, object] = {}
        for word in words[1:]:
            key, _, value = word.partition("=")
            if word_is(key, "lifespan", 1) and value.isdigit() and int(value) > 0:
                asked["lifespan"] = int(value)
            elif word_is(key, "lifespan", 1):
                self.fail(f"Invalid lifespan value: {value}", quiet_ok=False)
                return
            elif word_is(key, "username", 1) and value:
                asked["username"] = value
            else:
                self.fail(f"Invalid parameter: {word}", quiet_ok=False)
                return
        try:
            reply = self.call("Token", asked)
        except SlurmError as exc:
            self.fail(f"Unable to create token: {exc}", quiet_ok=False)
            return
        self.print(f"SLURM_JWT={reply['token']}")

    # ------------------------------------------------------------- show

    def _show(self, words: Sequence[str]) -> None:
        if len(words) > 1 and word_is(words[1], "assoc_mgr", 2):  # takes several options
            scontrolassoc.show(self, words[2:])
            return
        if len(words) < 2:
            self.fail(f"too few arguments for keyword:{words[0]}")
            return
        if len(words) > 3:
            self.fail(f"too many arguments for keyword:{words[0]}")
            return
        tag, value = split_tag(words[1])
        if value is None and len(words) == 3:
            value = words[2]
        entities: list[tuple[tuple[str, ...], int, Callable[[str | None], None]]] = [
            (("config",), 1, self.show_config),
            (("hostnames",), 5, self.show_hostnames),
            (("hostlist",), 5, lambda text: self.show_hostlist(text, sort=False)),
            (("hostlistsorted",), 9, lambda text: self.show_hostlist(text, sort=True)),
            (("jobs", "jobid"), 1, self.show_job),
            (("licenses",), 2, self.show_licenses),
            (("nodes",), 1, self.show_node),
            (("partitions", "partitionname"), 2, self.show_partition),
            (("reservations", "reservationname"), 3, self.show_reservation),
            (("steps",), 2, self.show_step),
            (("topology",), 1, self.show_topology),
        ]
        for names, minimum, handler in entities:
            if any(word_is(tag, name, minimum) for name in names):
                handler(value)
                return
        self.fail(f"invalid entity:{tag} for keyword:{words[0]} ")

    def show_config(self, value: str | None) -> None:
        try:
            reply = self.call("Config", {})
        except SlurmError as exc:
            self.fail(f"slurm_load_ctl_conf error: {exc}")
            return
        stamp = format_timestamp(int(reply["last_update"] or reply["now"]))
        self.print(f"Configuration data as of {stamp}")
        for entry in reply["entries"]:
            self.print(f"{entry['key']:<23} = {entry['value']}")
        self.print()
        self.print_ping()

    def show_licenses(self, value: str | None) -> None:
        """Each license of Licenses= with its total and use; with a name, that one."""
        try:
            records = self.call("Licenses", {})["licenses"]
        except SlurmError as exc:
            self.fail(f"slurm_load_licenses error: {exc}")
            return
        if not records:
            self.print("No licenses configured in Slurm.")
            return
        if value:  # a name none has: nothing, as Slurm's scontrol prints
            records = [r for r in records if r["name"] == value]
        gap = " " if self.oneliner else "\n    "
        for r in records:
            total, used = int(r["total"]), int(r["used"])
            # Free is what jobs do not hold: Slurm 22.05 does not take Reserved off it
            # (measured: Total=4 Used=1 Free=3 Reserved=1).
            self.print(
                f"LicenseName={r['name']}{gap}Total={total} Used={used} "
                f"Free={max(total - used, 0)} Reserved={int(r['reserved'])} "
                f"Remote={'yes' if r['remote'] else 'no'}"
            )

    def show_topology(self, value: str | None) -> None:
        """The switches (blocks) of topology.conf; with a name, that switch, or those
        above the named nodes (Slurm's ``scontrol_print_topo``)."""
        try:
            records = self.call("Config", {})["topology"]
        except SlurmError as exc:
            self.fail(f"slurm_load_topo error: {exc}")
            return
        if not records:
            print(f"{PROG}: error: No topology information available", file=self.err)
            return
        if not value:
            for record in records:
                self.print(record["line"])
            return
        named = [r for r in records if r["name"] == value]
        if named:
            self.print(named[0]["line"])
            return
        try:
            wanted = set(expand(value))
        except ValueError:
            wanted = {value}
        above = [r for r in records if wanted <= set(expand(r["nodes"]))]
        for record in above:
            self.print(record["line"])
        if not above:
            kind = "block" if records[0]["block"] else "switch"
            print(
                f"{PROG}: error: Topology information contains no {kind} or node named {value}",
                file=self.err,
            )

    def show_hostnames(self, value: str | None) -> None:
        text = value if value is not None else os.environ.get("SLURM_JOB_NODELIST")
        if text is None:
            text = os.environ.get("SLURM_NODELIST")
        if text is None:
            print(f"{PROG}: error: host list is empty", file=self.err)
            return
        try:
            names = expand(text)
        except ValueError:
            print(f"Invalid hostlist: {text}", file=self.err)
            return
        for name in names:
            self.print(name)

    def show_hostlist(self, value: str | None, *, sort: bool) -> None:
        if value is None:
            self.fail("invalid encode argument", quiet_ok=False)
            self.out.write(USAGE)
            return
        text = value
        if text.startswith("/"):
            try:
                with open(text, encoding="utf-8", errors="replace") as handle:
                    text = handle.read().replace("\n", ",")
            except OSError:
                self.fail(f"Can not open {value}", quiet_ok=False)
                return
            while ",," in text:
                text = text.replace(",,", ",")
        try:
            names = expand(text)
        except ValueError:
            self.fail(f"Invalid hostlist: {text}", quiet_ok=False)
            return
        if sort:
            names.sort(key=_host_order)
        self.print(compress(names, sort=False))

    def show_job(self, value: str | None) -> None:
        task = None
        if value is not None:
            if not value or any(not (char.isdigit() or char in "_+") for char in value):
                self.fail("scontrol_print_job error: Invalid job id specified")
                return
            rest = value.partition("_")[2]
            task = int(rest) if rest.isdigit() else None
        request = {
            "filter": {"job_ids": [value] if value else [], "states": ["ALL"]},
            "expand_arrays": False,
            "detail": self.details,
            "all_partitions": self.all_partitions,
        }
        try:
            reply = self.call("Jobs", request)
        except SlurmError as exc:
            self.fail(f"slurm_load_jobs error: {exc}")
            return
        jobs = sorted(reply["jobs"], key=lambda job: (job["job_id"], job["array_task_id"] or 0))
        for job in jobs:
            shown = job
            if task is not None and job["array_task_str"]:
                shown = {**job, "array_task_str": "", "array_task_id": task}
            self.out.write(
                job_record(shown, reply["now"], oneliner=self.oneliner, details=self.details)
            )
        if jobs:
            return
        if value is not None:
            self.exit_code = 1
            if not self.quiet:
                self.print(f"Job {value} not found")
        elif not self.quiet:
            self.print("No jobs in the system")

    def show_node(self, value: str | None) -> None:
        try:
            nodes = self.call("Nodes", {"names": []})["nodes"]
        except SlurmError as exc:
            self.fail(f"slurm_load_node error: {exc}")
            return
        from corral.clientconf import client_settings

        port = client_settings().slurmd_port
        if value is None:
            for node in nodes:
                self.out.write(node_record(node, oneliner=self.oneliner, slurmd_port=port))
            if not nodes and not self.quiet:
                self.print("No nodes in the system")
            return
        try:
            names = expand(value)
        except ValueError:
            self.fail(f"unable to parse node list {value}")
            return
        by_name = {node["name"]: node for node in nodes}
        for name in names:
            node = by_name.get(name)
            if node is None:
                self.exit_code = 1
                if not self.quiet:
                    self.print(f"Node {name} not found")
                continue
            self.out.write(node_record(node, oneliner=self.oneliner, slurmd_port=port))

    def show_partition(self, value: str | None) -> None:
        try:
            request = {"names": [], "all_partitions": self.all_partitions}
            parts = self.call("Partitions", request)["partitions"]
        except SlurmError as exc:
            self.fail(f"slurm_load_partitions error: {exc}")
            return
        chosen = [part for part in parts if value is None or part["name"] == value]
        for part in chosen:
            self.out.write(partition_record(part, oneliner=self.oneliner))
        if chosen or self.quiet:
            if not chosen:
                self.exit_code = 1
            return
        if value is not None:
            self.exit_code = 1
            self.print(f"Partition {value} not found")
        else:
            self.print("No partitions in the system")

    # ------------------------------------------------------------- jobs

    def _job_results(self, action: str, ids: list[str], job_name: str = "", **extra: Any) -> str:
        """Send one JobControl request; print per-job failures; return the last failure text."""
        request = {"action": action, "job_ids": ids, "updates": {}, "job_name": job_name, **extra}
        try:
            results = self.call("JobControl", request)["results"]
        except SlurmError as exc:
            for job_id in ids or [job_name]:
                self.fail(f"{exc} for job {job_id}")
            return str(exc)
        failure = ""
        for result in results:
            if result["code"]:
                failure = result["message"] or str(SlurmError(result["code"]))
                self.fail(f"{failure} for job {result['job_id']}")
        return failure

    def _hold(self, words: Sequence[str]) -> None:
        tag = words[0].lower()
        if len(words) < 2:
            self.fail(f"too few arguments for keyword:{words[0]}")
            return
        if tag.startswith(("holdu", "uhold")):
            action = "uhold"
        elif tag.startswith("hold"):
            action = "hold"
        else:
            action = "release"
        for word in words[1:]:
            text = _strip_prefix(word, ("jobid=", "job="))
            ids = job_id_list(text)
            if ids is not None:
                failure = self._job_results(action, ids)
            elif text.lower().startswith(("name=", "jobname=")):
                failure = self._job_results(action, [], job_name=text.partition("=")[2])
            else:
                failure = str(SlurmError(2017))
                self.fail(f"{failure} for job {text}")
            if failure:
                self.fail(f"slurm_suspend error: {failure}")

    def _suspend(self, words: Sequence[str]) -> None:
        """``suspend|resume <job_list>``: an operator's (the controller decides)."""
        action = "suspend" if word_is(words[0], "suspend", 2) else "resume"
        if len(words) < 2:
            self.fail(f"too few arguments for keyword:{words[0]}")
            return
        for word in words[1:]:
            text = _strip_prefix(word, ("jobid=", "job="))
            ids = job_id_list(text)
            if ids is None:
                failure = str(SlurmError(2017))
                self.fail(f"{failure} for job {text}")
            else:
                failure = self._job_results(action, ids)
            if failure:
                self.fail(f"slurm_suspend error: {failure}")

    def _requeue(self, words: Sequence[str]) -> None:
        action = "requeuehold" if words[0].lower() == "requeuehold" else "requeue"
        if len(words) < 2:
            self.fail(f"too few arguments for keyword:{words[0]}")
            return
        targets = list(words[1:])
        while targets and targets[0].lower() in _REQUEUE_FLAGS:
            targets.pop(0)
        for word in targets:
            text = _strip_prefix(word, ("jobid=", "job="))
            ids = job_id_list(text)
            if ids is None:
                self.fail(f"{SlurmError(2017)} for job {text}")
            else:
                self._job_results(action, ids)

    # ------------------------------------------------------------- update

    def _update(self, words: Sequence[str]) -> None:
        if len(words) < 2:
            self.fail(f"too few arguments for {words[0]} keyword", quiet_ok=False)
            return
        args = list(words[1:])
        entity = ""
        index = 0
        while index < len(args):
            tag, value = split_tag(args[index])
            if value is None:
                index += 1
            if word_is(tag, "NodeName", 3):
                entity = entity or "node"
            elif word_is(tag, "PartitionName", 3):
                entity = entity or "partition"
            elif word_is(tag, "JobId", 3) or word_is(tag, "JobName", 3):
                entity = "job"
            elif word_is(tag, "ReservationName", 3):
                entity = "reservation"
            index += 1
        if entity == "job":
            self.update_job(args)
        elif entity == "node":
            self.update_node(args)
        elif entity == "partition":
            self.update_partition(args)
        elif entity == "reservation":
            self._reservation("update", args)
        else:
            self.fail("No valid entity in update command", quiet_ok=False)
            self.fail(
                'Input line must include "NodeName", "PartitionName", "Reservation", '
                '"JobId", or "SlurmctldDebug"',
                quiet_ok=False,
            )

    # ------------------------------------------------------------- reservations

    def _create(self, words: Sequence[str]) -> None:
        if len(words) < 2 or not words[1].lower().startswith("res"):
            self.fail(
                f"invalid entity: {words[1] if len(words) > 1 else ''} for keyword:{words[0]}"
            )
            return
        self._reservation("create", words[1:])

    def _delete(self, words: Sequence[str]) -> None:
        if len(words) != 2 and len(words) != 3:
            self.fail(f"too {'few' if len(words) < 2 else 'many'} arguments for keyword:{words[0]}")
            return
        tag, value = split_tag(words[1])
        if value is None and len(words) == 3:
            value = words[2]
        if not word_is(tag, "ReservationName", 3) or not value:
            self.fail(f"Invalid deletion entity: {words[1]}", quiet_ok=False)
            return
        try:
            self.call(
                "ReservationControl", {"action": "delete", "settings": {"reservationname": value}}
            )
        except SlurmError as exc:
            self.fail(f"delete_reservation {words[1]}: {exc}", quiet_ok=False)

    def _reservation(self, action: str, words: Sequence[str]) -> None:
        """create or update: Slurm's keywords checked here, the rules by the controller."""
        from cli.reservations import parse_settings

        try:
            settings = parse_settings(words, action)
        except ValueError as exc:
            self.fail(f"{PROG}: error: {exc}", quiet_ok=False)
            return
        if action == "update" and "reservationname" not in settings:
            self.fail(f"{PROG}: error: Reservation must be given.  No reservation update.")
            return
        try:
            reply = self.call("ReservationControl", {"action": action, "settings": settings})
        except SlurmError as exc:
            if exc.code == EINVAL:
                self.fail(f"{PROG}: error: {exc}", quiet_ok=False)
            elif action == "create":
                self.fail(f"Error creating the reservation: {exc}", quiet_ok=False)
            else:
                self.fail(f"slurm_update error: {exc}", quiet_ok=False)
            return
        self.print(
            f"Reservation created: {reply['name']}"
            if action == "create"
            else "Reservation updated."
        )

    def show_step(self, value: str | None) -> None:
        from cli.jobs import steps

        job_ids = [value.split(".")[0]] if value else []
        try:
            reply = self.call("Jobs", {"filter": {"job_ids": job_ids, "states": ["RUNNING"]}})
        except SlurmError as exc:
            self.fail(f"slurm_get_job_steps error: {exc}")
            return
        rows = [
            r
            for r in steps.rows(reply["jobs"], int(reply["now"]), [value] if value else [])
            if r.step is not None
        ]
        if value and "." in value:
            rows = steps.first_parts(rows)
        if not rows and value:
            # Slurm's words for a job (pending, say) or step without it: "Job step 7. not
            # found" for a job named alone, "Job step 7.1 not found" for 7.1+1; on
            # stdout, and the command fails.
            named = steps.without_part(value)
            self.print(f"Job step {named}{'' if '.' in named else '.'} not found")
            self.exit_code = 1
            return
        if not rows:
            self.print("No job steps in the system")
            return
        for row in rows:
            self.out.write(steps.show(row, self.oneliner))

    def show_reservation(self, value: str | None) -> None:
        from cli.reservations import show

        try:
            reply = self.call("Reservations", {"name": value or ""})
        except SlurmError as exc:
            if exc.code == RESERVATION_INVALID and value:
                self.print(f"Reservation {value} not found")
            else:
                self.fail(f"slurm_load_reservations error: {exc}")
            return
        if not reply["reservations"]:
            self.print("No reservations in the system")
        for resv in reply["reservations"]:
            self.out.write(show(resv, self.oneliner))

    def update_job(self, args: Sequence[str]) -> None:
        """``update JobId=<list> Key=Value...``: the controller validates the values."""
        pairs: list[tuple[str, str]] = []
        index = 0
        while index < len(args):
            tag, value = split_tag(args[index])
            if value is None:
                if word_is(tag, "Nice", 2) or word_is(tag, "ResetAccrueTime", 3):
                    pairs.append((tag, ""))
                    index += 1
                    continue
                if index + 1 >= len(args):
                    self.fail(f"Invalid input: {tag}", quiet_ok=False)
                    self.fail("Request aborted", quiet_ok=False)
                    return
                index += 1
                value = args[index]
            pairs.append((tag, value))
            index += 1
        job_ids = [value for tag, value in pairs if word_is(tag, "JobId", 3)]
        updates = {tag: value for tag, value in pairs if not word_is(tag, "JobId", 3)}
        job_name = ""
        if not job_ids:
            names = [key for key in updates if word_is(key, "JobName", 3)]
            if names:
                job_name = updates.pop(names[-1])
        if not updates:
            self.fail("No changes specified", quiet_ok=False)
            return
        if not job_ids and not job_name:
            self.fail(f"{PROG}: error: No job ID specified", quiet_ok=False)
            return
        ids = job_id_list(job_ids[-1]) if job_ids else []
        if ids is None:
            self.fail(f"{SlurmError(2017)} for job {job_ids[-1]}")
            return
        request = {"action": "update", "job_ids": ids, "updates": updates, "job_name": job_name}
        try:
            results = self.call("JobControl", request)["results"]
        except SlurmError as exc:
            for job_id in ids or [job_name]:
                self.fail(f"{exc} for job {job_id}")
            return
        failed = False
        for result in results:
            if result["code"]:
                failed = True
                message = result["message"] or str(SlurmError(result["code"]))
                self.fail(f"{message} for job {result['job_id']}")
        sized = any(word_is(key, "NumNodes", 8) or word_is(key, "ReqNodes", 8) for key in updates)
        if sized and not failed and len(ids) == 1 and "SLURM_JOBID" in os.environ:
            self._resize_scripts(ids[0])

    def _resize_scripts(self, job_id: str) -> None:
        """Inside a job, after a change of a job's node count: the scripts that bring
        the job's SLURM_* variables up to date (``cli/resizescript.py``)."""
        from cli import resizescript

        try:
            jobs = self.call("Jobs", {"filter": {"job_ids": [job_id]}})["jobs"]
        except SlurmError:
            jobs = []
        if not jobs:
            self.fail(f"Could not get allocation information for job {job_id}")
            return
        try:
            told = resizescript.write(int(jobs[0]["job_id"]), jobs[0], os.environ)
        except OSError as exc:
            self.fail(f"Could not create file {exc.filename}: {exc.strerror}")
            return
        for line in told:
            self.print(line)

    def update_node(self, args: Sequence[str]) -> None:
        """``update NodeName=<list> [State=<state>] [Reason=<text>] [Features=<list>]
        [AvailableFeatures=<list>] [ActiveFeatures=<list>]``."""
        nodes = state = ""
        reason: str | None = None
        features: dict[str, object] = {}
        for arg in args:
            tag, value = split_tag(arg)
            if value is None:
                self.fail(f"{PROG}: error: Invalid input: {arg}  Request aborted", quiet_ok=False)
                return
            if word_is(tag, "NodeName", 1):
                nodes = value
            elif word_is(tag, "Reason", 1):
                reason = value
            elif word_is(tag, "Features", 1) or word_is(tag, "AvailableFeatures", 3):
                features.update(available_features=value, set_available=True)
            elif word_is(tag, "ActiveFeatures", 3):
                features.update(active_features=value, set_active=True)
            elif word_is(tag, "State", 1):
                state = _node_state(value)
                if not state:
                    for text in (
                        f"Invalid input: {arg}",
                        "Request aborted",
                        "Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN "
                        "POWER_UP UNDRAIN",
                        "Not all states are valid given a node's prior state",
                    ):
                        self.fail(text, quiet_ok=False)
                    return
            else:
                self.fail(f"Update of this parameter is not supported: {arg}", quiet_ok=False)
                self.fail("Request aborted", quiet_ok=False)
                return
        if state in _NEEDS_REASON and not reason:
            self.fail(
                "You must specify a reason when DOWNING or DRAINING a node. Request denied",
                quiet_ok=False,
            )
            return
        if not state and reason is None and not features:
            self.fail("No changes specified", quiet_ok=False)
            return
        request = {"nodes": nodes, "state": state, "reason": reason or "", **features}
        try:
            self.call("NodeUpdate", request)
        except SlurmError as exc:
            self.fail(f"slurm_update error: {exc}", quiet_ok=False)

    def update_partition(self, args: Sequence[str]) -> None:
        """``update PartitionName=<name> State=UP|DOWN|DRAIN|INACTIVE``. The partition's
        other settings come from slurm.conf (edit it and ``scontrol reconfigure``)."""
        name = state = ""
        for arg in args:
            tag, value = split_tag(arg)
            if value is None:
                self.fail(f"{PROG}: error: Invalid input: {arg}  Request aborted", quiet_ok=False)
                return
            if word_is(tag, "PartitionName", 3):
                name = value
            elif word_is(tag, "State", 2):
                state = value.upper()
                if state not in ("UP", "DOWN", "DRAIN", "INACTIVE"):
                    self.fail(f"{PROG}: error: Invalid input: {arg}", quiet_ok=False)
                    self.fail(
                        f"{PROG}: error: Acceptable State values are UP, DOWN, DRAIN and INACTIVE",
                        quiet_ok=False,
                    )
                    return
            else:
                self.fail(
                    f"{PROG}: error: {tag}= of a partition is not updated by scontrol: "
                    'change slurm.conf and run "scontrol reconfigure"',
                    quiet_ok=False,
                )
                return
        if name.upper() == "DEFAULT":
            self.fail(f'{PROG}: error: PartitionName cannot be "DEFAULT".', quiet_ok=False)
            return
        if not state:
            self.fail("No changes specified", quiet_ok=False)
            return
        try:
            self.call("PartitionUpdate", {"name": name, "state": state})
        except SlurmError as exc:
            self.fail(f"slurm_update error: {exc}", quiet_ok=False)


def _node_state(value: str) -> str:
    """The canonical State= value for ``value`` (Slurm's abbreviations), "" if unknown."""
    for name, minimum in NODE_STATES:
        if len(value) >= minimum and name.lower().startswith(value.lower()):
            return name.upper()
    return ""


def _strip_prefix(word: str, prefixes: tuple[str, ...]) -> str:
    for prefix in prefixes:
        if word.lower().startswith(prefix):
            return word[len(prefix) :]
    return word


def _host_order(name: str) -> tuple[str, int, int]:
    """Slurm's hostlist order: prefix, then number, then width."""
    end = len(name)
    while end and name[end - 1].isdigit():
        end -= 1
    digits = name[end:]
    return name[:end], int(digits) if digits else -1, len(digits)


def _interactive(session: Session) -> None:
    """Read commands from stdin until EOF or ``quit``."""
    import shlex

    prompt = sys.stdin.isatty()
    while not session.done:
        if prompt:
            session.out.write(f"{PROG}: ")
            session.out.flush()
        text = sys.stdin.readline()
        if not text:
            if prompt:
                session.print()
            return
        try:
            words = shlex.split(text)
        except ValueError:
            words = text.split()
        if words:
            session.run(words)


def scontrol(argv: list[str]) -> int:
    """Run scontrol with ``argv``; return the exit status."""
    try:
        found, words = COMMAND.parse(argv)
        for opt, _ in found:
            COMMAND.answer(opt.key)
        session = Session()
        for opt, value in found:
            if opt.key == "cluster":
                from cli import clusters

                session.use(clusters.one(PROG, value or ""))
    except Halt as halt:
        return halt.report()
    for opt, _ in found:
        key = opt.key
        if key == "oneliner":
            session.oneliner = True
        elif key == "details":
            session.details = True
        elif key == "quiet":
            session.quiet = True
        elif key == "hide":
            session.details = session.all_partitions = False
        elif key == "all":
            session.all_partitions = True
    if words:
        session.run(words)
    else:
        _interactive(session)
    return session.exit_code


def main() -> None:
    boundary.run(PROG, scontrol)
