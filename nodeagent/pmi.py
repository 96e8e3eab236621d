"""PMI-1 and PMI-2 served to one node's tasks of a step (``srun --mpi=pmi2``).

This is the part of Slurm's mpi/pmi2 plugin that lives in slurmstepd: each task
gets one end of a socketpair (``PMI_FD``, with ``PMI_RANK``, ``PMI_SIZE``,
``PMI_JOBID`` and ``PMI_SPAWNED=0``) and speaks one of two wire protocols on it,
told apart by its first line, ``cmd=init pmi_version=N pmi_subversion=M``:

* PMI-1 ("simple", MPICH's default client): newline-ended lines of
  space-separated ``key=value`` words (``get_maxes``, ``get_appnum``,
  ``get_my_kvsname``, ``get_universe_size``, ``put``, ``get``, ``barrier_in``,
  ``finalize``, ``abort``);
* PMI-2: after that first line, commands of a 6-character decimal length and
  ``key=value;`` pairs, ``;`` in a value doubled (``fullinit``, ``job-getid``,
  ``kvs-put``, ``kvs-fence``, ``kvs-get``, ``info-getjobattr``,
  ``info-putnodeattr``, ``info-getnodeattr``, ``finalize``, ``abort``).

A fence (PMI-1's barrier, PMI-2's kvs-fence) waits for every task of the node;
then the node's puts since the last fence go out (``NodePmi.on_fence``: the
runner sends them to srun) and the tasks wait for the union of every node's
(``fence_done``), after which a ``get`` of any task's key is answered here.
``PMI_process_mapping`` is Slurm's vector of the step's block layout,
``(vector,(first node,node count,tasks per node),...)``, which MPICH reads to
find the ranks that share its node.

Pure protocol and state: the runner (``nodeagent/steprunner.py``) owns the
sockets and moves bytes in and out (``TaskLink.feed``, ``TaskLink.outbuf``).
Values are kept as latin-1 text so that every byte comes back as it went in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

#: The bounds told to PMI-1 clients (``get_maxes``); what a put may carry.
KVSNAME_MAX = 256
KEYLEN_MAX = 64
VALLEN_MAX = 1024
#: The longest PMI-1 line or PMI-2 command accepted (MPICH's client sends at most 64 KiB).
MAX_COMMAND = 64 * 1024
PMI2_LENGTH = 6
#: PMI-2 commands served nowhere in Corral (spawn, name service, job connection).
UNSERVED = frozenset(
    {"spawn", "name-publish", "name-unpublish", "name-lookup", "job-connect", "job-disconnect"}
)


class PmiError(Exception):
    """A task sent something that is not PMI: its connection is closed."""


def process_mapping(node_tasks: Sequence[int]) -> str:
    """PMI_process_mapping of a block layout (``node_tasks``: tasks on each node, in
    node order): runs of nodes with the same count, Slurm's vector format."""
    parts, first = [], 0
    while first < len(node_tasks):
        last = first
        while last + 1 < len(node_tasks) and node_tasks[last + 1] == node_tasks[first]:
            last += 1
        parts.append(f"({first},{last - first + 1},{node_tasks[first]})")
        first = last + 1
    return "(vector," + ",".join(parts) + ")"


def parse_line(line: str) -> dict[str, str]:
    """A PMI-1 line's ``key=value`` words (a value is the text after the first ``=``)."""
    fields = {}
    for word in line.split():
        key, _, value = word.partition("=")
        fields[key] = value
    return fields


def parse_pmi2(body: str) -> dict[str, str]:
    """A PMI-2 command's ``key=value;`` pairs (``;;`` is a ``;`` in a value)."""
    fields: dict[str, str] = {}
    at, end = 0, len(body)
    while at < end:
        equals = body.find("=", at)
        if equals < 0:
            raise PmiError(f"PMI-2 command without '=': {body[at : at + 40]!r}")
        key, value, at = body[at:equals], [], equals + 1
        while at < end:
            char = body[at]
            if char == ";":
                if body.startswith(";;", at):
                    value.append(";")
                    at += 2
                    continue
                break
            value.append(char)
            at += 1
        fields[key] = "".join(value)
        at += 1
    return fields


def pmi2_message(fields: Sequence[tuple[str, str]]) -> bytes:
    """A PMI-2 command or response: its length, then ``key=value;`` with ``;`` doubled."""
    body = "".join(f"{key}={value.replace(';', ';;')};" for key, value in fields).encode("latin-1")
    return f"{len(body):<{PMI2_LENGTH}}".encode() + body


@dataclass(frozen=True)
class PmiJob:
    """What every task is told: the step's name (``J.S``: PMI_JOBID, PMI-1's kvsname,
    PMI-2's job id), its task count and its layout."""

    kvsname: str
    size: int
    mapping: str

    def attribute(self, key: str) -> str | None:
        """A job attribute (PMI-2 info-getjobattr; PMI-1 gets of these keys too)."""
        if key == "PMI_process_mapping":
            return self.mapping
        if key == "universeSize":
            return str(self.size)
        return None


@dataclass
class NodePmi:
    """This node's tasks' PMI state: the key-value space as it stands after the last
    fence, the puts since, who is in the fence, the node's attributes.

    ``on_fence(puts)``: every live task entered the fence (send ``puts`` on);
    ``on_abort(rank, code, message)``: a task asked for the step's end.
    """

    job: PmiJob
    on_fence: Callable[[dict[str, str]], None]
    on_abort: Callable[[int, int, str], None]
    kvs: dict[str, str] = field(default_factory=dict)
    puts: dict[str, str] = field(default_factory=dict)
    links: list[TaskLink] = field(default_factory=list)
    fencing: list[TaskLink] = field(default_factory=list)
    sent: bool = False  # this fence's puts are out: waiting for every node's
    node_attrs: dict[str, str] = field(default_factory=dict)
    attr_waiters: dict[str, list[tuple[TaskLink, str]]] = field(default_factory=dict)

    def link(self, rank: int) -> TaskLink:
        """The PMI end of task ``rank`` (one per local task, made before it starts)."""
        made = TaskLink(rank, self)
        self.links.append(made)
        return made

    def lookup(self, key: str) -> str | None:
        """A key's value: the fenced space, this node's puts since, the job's attributes."""
        value = self.kvs.get(key)
        if value is None:
            value = self.puts.get(key)
        return self.job.attribute(key) if value is None else value

    def put(self, key: str, value: str) -> str:
        """Store a put; a refusal's reason, or ""."""
        if not key or len(key) > KEYLEN_MAX:
            return "invalid key"
        if len(value) > VALLEN_MAX:
            return "value too long"
        self.puts[key] = value
        return ""

    def enter_fence(self, link: TaskLink) -> None:
        self.fencing.append(link)
        self._fence_due()

    def closed(self, link: TaskLink) -> None:
        """A task's connection closed: a fence no longer waits for it."""
        link.closed = True
        if link in self.fencing:
            self.fencing.remove(link)
        self._fence_due()

    def _fence_due(self) -> None:
        live = [link for link in self.links if not link.closed]
        if self.sent or not self.fencing or len(self.fencing) < len(live):
            return
        self.sent = True
        puts, self.puts = self.puts, {}
        self.kvs.update(puts)
        self.on_fence(puts)

    def fence_done(self, pairs: dict[str, str]) -> None:
        """Every node's puts of this fence are here: the waiting tasks go on."""
        self.kvs.update(pairs)
        waiting, self.fencing, self.sent = self.fencing, [], False
        for link in waiting:
            link.fenced()

    def put_node_attr(self, key: str, value: str) -> None:
        self.node_attrs[key] = value
        for link, thrid in self.attr_waiters.pop(key, []):
            link.node_attr_reply(value, thrid)


class TaskLink:
    """One task's PMI connection: bytes in (``feed``), replies out (``outbuf``)."""

    def __init__(self, rank: int, node: NodePmi) -> None:
        self.rank = rank
        self.node = node
        self.version = 0  # 0 until init: then 1 (lines) or 2 (length-prefixed)
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.closed = False
        self.finalized = False
        self.fence_thrid: str | None = None  # PMI-2: the thread id the fence answers
        self.spawn_lines = False  # inside PMI-1's multi-line spawn (mcmd=spawn ... endcmd)

    def feed(self, data: bytes) -> None:
        """Act on every complete command in ``data`` (``PmiError``: not PMI)."""
        self.inbuf += data
        while not self.closed:
            if self.version == 2:
                message = self._pmi2_command()
                if message is None:
                    break
                self._pmi2(parse_pmi2(message))
                continue
            end = self.inbuf.find(b"\n")
            if end < 0:
                if len(self.inbuf) > MAX_COMMAND:
                    raise PmiError("PMI-1 line too long")
                break
            line = self.inbuf[:end].decode("latin-1")
            del self.inbuf[: end + 1]
            self._pmi1(line)

    def _pmi2_command(self) -> str | None:
        if len(self.inbuf) < PMI2_LENGTH:
            return None
        try:
            length = int(self.inbuf[:PMI2_LENGTH].decode("ascii").strip())
        except ValueError:
            raise PmiError("PMI-2 command without a length") from None
        if not 0 < length <= MAX_COMMAND:
            raise PmiError(f"PMI-2 command of {length} bytes")
        if len(self.inbuf) < PMI2_LENGTH + length:
            return None
        body = self.inbuf[PMI2_LENGTH : PMI2_LENGTH + length].decode("latin-1")
        del self.inbuf[: PMI2_LENGTH + length]
        return body

    # ------------------------------------------------------------ PMI-1

    def _line(self, text: str) -> None:
        self.outbuf += text.encode("latin-1") + b"\n"

    def _pmi1(self, line: str) -> None:
        if self.spawn_lines:  # a spawn's lines end at endcmd: it is then refused
            if line.strip() == "endcmd":
                self.spawn_lines = False
                self._line("cmd=spawn_result rc=-1 errmsg=spawn_is_not_supported")
            return
        fields = parse_line(line)
        if fields.get("mcmd") == "spawn":
            self.spawn_lines = True
            return
        cmd = fields.get("cmd", "")
        node, job = self.node, self.node.job
        if cmd == "init":
            self._init(fields)
        elif cmd == "get_maxes":
            self._line(
                f"cmd=maxes rc=0 kvsname_max={KVSNAME_MAX} keylen_max={KEYLEN_MAX} "
                f"vallen_max={VALLEN_MAX}"
            )
        elif cmd == "get_appnum":
            self._line("cmd=appnum rc=0 appnum=0")
        elif cmd == "get_my_kvsname":
            self._line(f"cmd=my_kvsname rc=0 kvsname={job.kvsname}")
        elif cmd == "get_universe_size":
            self._line(f"cmd=universe_size rc=0 size={job.size}")
        elif cmd == "put":
            why = node.put(fields.get("key", ""), fields.get("value", ""))
            self._line("cmd=put_result rc=0" if not why else f"cmd=put_result rc=-1 msg={why}")
        elif cmd == "get":
            value = node.lookup(fields.get("key", ""))
            if value is None:
                self._line("cmd=get_result rc=-1 msg=key_not_found")
            else:
                self._line(f"cmd=get_result rc=0 value={value}")
        elif cmd == "barrier_in":
            node.enter_fence(self)
        elif cmd == "finalize":
            self.finalized = True
            self._line("cmd=finalize_ack rc=0")
        elif cmd == "abort":
            node.on_abort(self.rank, _number(fields.get("exitcode", "1")), "")
        else:
            log.warning("task %d: PMI-1 command %r is not served", self.rank, cmd)
            self._line(f"cmd={cmd or 'unknown'}_result rc=-1 msg=unknown_command")

    def _init(self, fields: dict[str, str]) -> None:
        version = fields.get("pmi_version", "")
        if version == "1":
            self.version = 1
            self._line("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
        elif version == "2":
            self.version = 2
            self._line("cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0")
        else:
            self._line(f"cmd=response_to_init pmi_version={version} pmi_subversion=0 rc=-1")

    # ------------------------------------------------------------ PMI-2

    def _reply(self, cmd: str, fields: dict[str, str], *pairs: tuple[str, str]) -> None:
        thrid = fields.get("thrid")
        extra = (("thrid", thrid),) if thrid is not None else ()
        self.outbuf += pmi2_message((("cmd", f"{cmd}-response"), ("rc", "0"), *pairs, *extra))

    def _refuse(self, cmd: str, fields: dict[str, str], why: str) -> None:
        thrid = fields.get("thrid")
        extra = (("thrid", thrid),) if thrid is not None else ()
        self.outbuf += pmi2_message(
            (("cmd", f"{cmd}-response"), ("rc", "-1"), ("errmsg", why), *extra)
        )

    def _pmi2(self, fields: dict[str, str]) -> None:
        cmd = fields.get("cmd", "")
        node, job = self.node, self.node.job
        if cmd == "fullinit":
            self._reply(
                cmd,
                fields,
                ("pmi-version", "2"),
                ("pmi-subversion", "0"),
                ("rank", str(self.rank)),
                ("size", str(job.size)),
                ("appnum", "0"),
                ("debugged", "FALSE"),
                ("pmiverbose", "FALSE"),
            )
        elif cmd == "job-getid":
            self._reply(cmd, fields, ("jobid", job.kvsname))
        elif cmd == "kvs-put":
            why = node.put(fields.get("key", ""), fields.get("value", ""))
            if why:
                self._refuse(cmd, fields, why)
            else:
                self._reply(cmd, fields)
        elif cmd == "kvs-fence":
            self.fence_thrid = fields.get("thrid")
            node.enter_fence(self)
        elif cmd == "kvs-get":
            value = node.lookup(fields.get("key", ""))
            if fields.get("jobid", job.kvsname) not in ("", job.kvsname):
                value = None  # another job's space: none is served here
            self._found(cmd, fields, value)
        elif cmd == "info-getjobattr":
            self._found(cmd, fields, job.attribute(fields.get("key", "")))
        elif cmd == "info-putnodeattr":
            node.put_node_attr(fields.get("key", ""), fields.get("value", ""))
            self._reply(cmd, fields)
        elif cmd == "info-getnodeattr":
            key = fields.get("key", "")
            value = node.node_attrs.get(key)
            if value is None and fields.get("wait", "FALSE") == "TRUE":
                node.attr_waiters.setdefault(key, []).append((self, fields.get("thrid", "")))
                return
            self._found(cmd, fields, value)
        elif cmd == "finalize":
            self.finalized = True
            self._reply(cmd, fields)
        elif cmd == "abort":
            node.on_abort(self.rank, 1, fields.get("msg", ""))
        elif cmd in UNSERVED:
            self._refuse(cmd, fields, f"{cmd} is not supported")
        else:
            log.warning("task %d: PMI-2 command %r is not served", self.rank, cmd)
            self._refuse(cmd or "unknown", fields, "unknown command")

    def _found(self, cmd: str, fields: dict[str, str], value: str | None) -> None:
        if value is None:
            self._reply(cmd, fields, ("found", "FALSE"))
        else:
            self._reply(cmd, fields, ("found", "TRUE"), ("value", value))

    def node_attr_reply(self, value: str, thrid: str) -> None:
        """A node attribute this task waited for was put."""
        fields = {"thrid": thrid} if thrid else {}
        self._found("info-getnodeattr", fields, value)

    def fenced(self) -> None:
        """The fence this task waits in is over."""
        if self.closed:
            return
        if self.version == 2:
            fields = {} if self.fence_thrid is None else {"thrid": self.fence_thrid}
            self._reply("kvs-fence", fields)
        else:
            self._line("cmd=barrier_out rc=0")


def _number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 1


def task_environment(job: PmiJob, rank: int, fd: int) -> dict[str, str]:
    """What a task needs to find its PMI server: what MPICH's clients read (PMI_FD,
    PMI_RANK, PMI_SIZE, PMI_SPAWNED) and Slurm's PMI_JOBID."""
    return {
        "PMI_FD": str(fd),
        "PMI_RANK": str(rank),
        "PMI_SIZE": str(job.size),
        "PMI_JOBID": job.kvsname,
        "PMI_SPAWNED": "0",
    }
