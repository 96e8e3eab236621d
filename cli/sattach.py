"""sattach: attach to a running step's standard I/O, as Slurm's sattach does.

sattach listens on a TCP socket of its own with a fresh key, as srun does, and
asks the controller (``StepAttach``, ``controller/stepattach.py``: the job's
owner, root or SlurmUser) to have the step's runners connect there; each then
sends it every frame it sends srun (``nodeagent/attachers.py``): the tasks'
output from then on, their exits, and DONE when its node's tasks have all
ended, which is when sattach ends. Its standard input goes to every task of the
step (or of the part attached to) whose stdin srun feeds, as Slurm 22.05's does;
``--input-filter=N`` to task N alone. Detaching (Ctrl-C, or sattach's end) leaves the step running.

``--layout`` prints the step's layout in Slurm's words and attaches to nothing;
``--output-filter``/``--error-filter`` keep one task's stdout/stderr; ``-l``
prefixes each line with its task, as srun -l.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from cli import boundary
from cli.command import Command
from cli.halt import Halt
from cli.jobs.ids import leader_step
from cli.options import REQUIRED, Option, OptionTable
from cli.srun.inputroute import InputRoute
from cli.tasklines import TaskLines
from corral import hostlist, stepio

TYPE_CHECKING = False  # typing costs milliseconds of a client's start-up budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    Reply = Mapping[str, Any]

PROG = "sattach"
USAGE = "Usage: sattach [options] <jobid.stepid>\n"
HELP = """\
Usage: sattach [options] <jobid.stepid>
      --input-filter=taskid  send stdin to only the specified task
      --output-filter=taskid only print stdout from the specified task
      --error-filter=taskid  only print stderr from the specified task
  -l, --label        prepend task number to lines of stdout & stderr
      --layout       print task layout info and exit (does not attach to tasks)
  -Q, --quiet        quiet mode (suppress informational messages)
  -v, --verbose      verbose mode (multiple -v's increase verbosity)
  -V, --version      print the Slurm version and exit

Help options:
  -h, --help         print this help message
  -u, --usage        print a brief usage message
"""

TABLE = OptionTable(
    [
        Option(
            "input_filter",
            "",
            "input-filter",
            REQUIRED,
            note="that task alone gets sattach's input (default: every task srun feeds); "
            "its end of input closes their stdin, as Slurm 22.05's",
        ),
        Option("output_filter", "", "output-filter", REQUIRED),
        Option("error_filter", "", "error-filter", REQUIRED),
        Option("label", "l", "label"),
        Option("layout", "", "layout"),
        Option("quiet", "Q", "quiet"),
        Option("verbose", "v", "verbose"),
        Option("version", "V", "version"),
        Option("help", "h", "help"),
        Option("usage", "u", "usage"),
    ],
    prog=PROG,
)
COMMAND = Command(PROG, TABLE, USAGE, HELP)

#: Seconds the step's runners have to connect.
CONNECT_TIMEOUT = 20.0


class Params:
    """What the command line asked for."""

    def __init__(self) -> None:
        self.job_id = 0
        self.step_id = 0
        self.label = False
        self.layout = False
        self.quiet = False
        self.filters: dict[int, int] = {}  # stream kind -> the one task shown
        self.input_task = stepio.ALL_TASKS  # --input-filter: the one task fed


def _task(value: str, name: str) -> int:
    if not value.isdigit():
        raise Halt(1, f'{PROG}: error: Invalid numeric value "{value}" for {name}.')
    return int(value)


def parse(argv: list[str]) -> Params:
    """The parameters of a run; Halt(0) after --help, --usage, --version; Halt(1) if bad."""
    found, positional = COMMAND.parse(argv)
    params = Params()
    for opt, value in found:
        COMMAND.answer(opt.key)
        text = value or ""
        if opt.key == "input_filter":
            params.input_task = _task(text, "input-filter")
        elif opt.key == "output_filter":
            params.filters[stepio.OUT] = _task(text, "output-filter")
        elif opt.key == "error_filter":
            params.filters[stepio.ERR] = _task(text, "error-filter")
        elif opt.key in ("label", "layout", "quiet"):
            setattr(params, opt.key, True)
    if len(positional) != 1:  # Slurm's sattach says this for none as well
        raise Halt(1, f"{PROG}: error: too many parameters", USAGE.rstrip("\n"))
    job, dot, step = leader_step(positional[0]).partition(".")  # 123+1.0 is 123.0, as 22.05's
    step = step.partition("+")[0]  # 123.0+1, a part of srun a : b, is step 123.0 (its first)
    if not (job.isdigit() and dot and step.isdigit()):
        raise Halt(
            1, f"{PROG}: error: Failed to parse stepid from command line options", USAGE.rstrip()
        )
    params.job_id, params.step_id = int(job), int(step)
    return params


def layout_text(reply: Reply) -> str:
    """``--layout``: Slurm's lines for the step's nodes and tasks."""
    nodes = [str(n) for n in reply["nodes"]]
    tasks = [int(t) for t in reply["tasks"]]
    ids = [int(t) for t in reply["task_ids"]]
    lines = [
        "Job step layout:",
        f"\t{sum(tasks)} tasks, {len(nodes)} nodes ({hostlist.compress(nodes)})",
        "",
    ]
    first = 0
    for index, (node, count) in enumerate(zip(nodes, tasks, strict=True)):
        listed = "".join(f"{task} " for task in ids[first : first + count])
        lines.append(f"\tNode {index} ({node}), {count} task(s): {listed}")
        first += count
    return "\n".join(lines) + "\n"


class Attached:
    """The runners' connections to this sattach and what they bring."""

    def __init__(self, params: Params, listener: _socket.socket, key: bytes, reply: Reply) -> None:
        from corral.stepcipher import SrunEnd

        self.params = params
        self.listener = listener
        self.key = key
        self.new_end = SrunEnd
        self.nodes = [str(n) for n in reply["nodes"]]
        # A part of a step spanning heterogeneous job components: its runners number
        # nodes and tasks in the whole step; Slurm 22.05's sattach counts from the part's.
        self.first_node = int(reply["het_node_offset"])
        self.first_task = int(reply["het_task_offset"])
        tasks = [int(t) for t in reply["tasks"]]
        # Every runner gets the input; each feeds the tasks it names that it has (a
        # later part's tasks are numbered from the part's first, as its output is).
        task = params.input_task
        if task != stepio.ALL_TASKS:
            task += self.first_task
        self.input = InputRoute(task, set(range(len(self.nodes))))
        ntasks = sum(tasks)
        self.input_valid = params.input_task == stepio.ALL_TASKS or params.input_task < ntasks
        self.lines = TaskLines(params.label, sum(tasks))
        self.conns: dict[int, _socket.socket] = {}
        self.ends: dict[int, SrunEnd] = {}  # fd -> session
        self.socks: dict[int, _socket.socket] = {}  # fd -> connection
        self.node_of: dict[int, int] = {}  # fd -> node id, once its HELLO came
        self.done: set[int] = set()

    def run(self) -> int:
        import selectors

        # poll(2), not epoll: epoll refuses a regular file or /dev/null, which 22.05's
        # sattach reads like a pipe (measured: ``sattach J.S < file`` sends the file and
        # its end to the tasks, ``< /dev/null`` its end alone).
        sel = selectors.PollSelector()
        sel.register(self.listener, selectors.EVENT_READ, "accept")
        stdin_open = True
        try:
            sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
        except (ValueError, OSError):  # closed: nothing to forward
            stdin_open = False
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while len(self.done) < len(self.nodes):
            timeout = None if len(self.conns) == len(self.nodes) else 1.0
            for key, _ in sel.select(timeout):
                if key.data == "accept":
                    fd, _ = self.listener._accept()  # type: ignore[attr-defined]
                    conn = _socket.socket(fileno=fd)
                    self.socks[fd] = conn
                    self.ends[fd] = self.new_end(self.key)
                    sel.register(conn, selectors.EVENT_READ, "runner")
                elif key.data == "stdin":
                    data = os.read(sys.stdin.fileno(), 65536) if stdin_open else b""
                    if data:
                        self._stdin(data)
                    else:
                        sel.unregister(key.fileobj)
                        stdin_open = False
                        self._stdin(b"")
                elif not self._from_runner(self.socks[key.fd]):
                    sel.unregister(key.fileobj)
                    self._lost(self.socks[key.fd])
            if len(self.conns) < len(self.nodes) and time.monotonic() > deadline:
                missing = [n for i, n in enumerate(self.nodes) if i not in self.conns]
                print(
                    f"{PROG}: error: no response from node(s) {','.join(missing)}",
                    file=sys.stderr,
                )
                return 1
        self.lines.flush()
        return 0

    def _from_runner(self, conn: _socket.socket) -> bool:
        fd = conn.fileno()
        try:
            frames = stepio.recv_frames(conn, self.ends[fd])
        except (OSError, stepio.ProtocolError):
            frames = None
        if frames is None:
            return False
        for kind, number, payload in frames:
            node_id = self.node_of.get(fd)
            if node_id is None:
                if kind != stepio.HELLO:
                    return False
                node_id, _ = stepio.read_hello(payload)  # sealed: from a holder of the key
                node_id -= self.first_node
                if not 0 <= node_id < len(self.nodes) or node_id in self.conns:
                    return False
                self.node_of[fd] = node_id
                self.conns[node_id] = conn
                for data in self.input.connect(node_id):
                    self._send(conn, data)
            elif kind in (stepio.OUT, stepio.ERR):
                self._output(kind, number - self.first_task, payload)
            elif kind == stepio.DONE:
                self.done.add(node_id)
        return True

    def _lost(self, conn: _socket.socket) -> None:
        fd = conn.fileno()
        node_id = self.node_of.pop(fd, None)
        if node_id is not None:
            self.done.add(node_id)  # its node's tasks' output ends here
        self.ends.pop(fd, None)
        self.socks.pop(fd, None)
        conn.close()

    def _stdin(self, data: bytes) -> None:
        if not self.input_valid:  # 22.05 says so for each read and sends nothing
            print(
                f"{PROG}: error: A valid node id must be specified for SLURM_IO_STDIN",
                file=sys.stderr,
            )
            return
        nodes, frame = self.input.read(data)
        for node_id in nodes:
            self._send(self.conns[node_id], frame)

    def _send(self, conn: _socket.socket, frame: bytes) -> None:
        try:
            conn.sendall(self.ends[conn.fileno()].seal(frame))
        except (OSError, KeyError):
            return

    def _output(self, kind: int, task: int, data: bytes) -> None:
        shown = self.params.filters.get(kind)
        if shown is None or shown == task:
            self.lines.write(kind, task, data)


def sattach(argv: list[str]) -> int:
    """Run sattach with ``argv``; return the exit status."""
    try:
        params = parse(argv)
    except Halt as halt:
        return halt.report()
    client = boundary.connect()
    request: dict[str, object] = {
        "job_id": params.job_id,
        "step_id": params.step_id,
        "layout_only": params.layout,
    }
    if params.layout:
        sys.stdout.write(layout_text(client.call("StepAttach", request)))
        return 0
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        listener.bind(("", 0))
        listener.listen(64)
        key = os.urandom(stepio.KEY_BYTES)
        request.update(
            io_host=os.environ.get("SLURM_SRUN_COMM_HOST", "") or _socket.gethostname(),
            io_port=listener.getsockname()[1],
            io_key=key,
        )
        reply = client.call("StepAttach", request)
        try:
            return Attached(params, listener, key, reply).run()
        except KeyboardInterrupt:  # detach: the step goes on
            return 0
    finally:
        listener.close()


def main() -> None:
    boundary.run(PROG, sattach)
