"""Fuzzing the gRPC side: the AgentLink stream, the Controller service and corral-dbd.

One real cluster for the module (controller, corral-dbd on SQLite, an agent for
node1 and node2; node3 is left to an attacker), with a victim job running on
node1 throughout. It takes:

  * an authenticated rogue agent for node3 (it holds the cluster key) whose hello
    has random registrations and surviving runs, followed by random AgentMessages
    (reports for random, real and extreme job ids, exit codes, times and usage) and
    random bytes where a message should be;
  * AgentLink streams without a hello, made of random bytes;
  * every Controller method called with random bytes, and with random well-formed
    requests carrying a valid credential of an ordinary user;
  * every Accounting method of corral-dbd called with random well-formed requests
    carrying a daemon's credential, and with random bytes.

No call may hang past its deadline or end in an error our code did not mean
(grpc's UNKNOWN is an exception escaping a handler; INTERNAL is allowed only for
grpc's own failure to parse the bytes). Afterwards both daemons are alive, the
victim job still runs where it was placed, a new job starts, ends, and reaches
accounting. Example counts are bounded so the module runs in about a minute.
"""

from __future__ import annotations

import asyncio
import pwd
import shutil
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from corral import auth, credentials, grpctls
from corral.config import load
from corral.wire import codec
from corral.wire import corral_pb2 as pb
from dbd.config import load as load_dbd_config
from tests.integration.cluster import Cluster
from tests.security.rogue import (
    RogueAgent,
    controller_target,
    keys_of,
    stamp_for_controller,
)
from tests.security.test_fuzz import _message, _scalar

T = TypeVar("T")
#: No shrinking: each example costs real round trips, and the failing one is shown anyway.
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
TIMEOUT_S = 10.0
ROGUE_NODE = "node3"
REAL_NODES = ("node1", "node2")
#: The job id of a sentinel report: the controller acknowledges it once every report
#: before it on the stream has been handled.
SENTINEL = 2**32 - 1
#: What grpc itself says when a message on a stream does not parse and the stream is cut.
UNPARSED = "Internal error from Core"

CONTROLLER = pb.DESCRIPTOR.services_by_name["Controller"]
ACCOUNTING = pb.DESCRIPTOR.services_by_name["Accounting"]


@dataclass
class Fuzzed:
    cluster: Cluster
    victim: int  # a job running on node1, served by the real agent
    user: pwd.struct_passwd  # an ordinary user
    loop: asyncio.AbstractEventLoop  # one for the module: grpc.aio keeps state per loop

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)


@pytest.fixture(scope="module")
def fuzzed(users: tuple[str, ...]) -> Iterator[Fuzzed]:
    top = Path(tempfile.mkdtemp(prefix="corral-fuzz-grpc-", dir="/tmp"))
    c = Cluster(top / "cluster", nodes=3, settings=("KillWait=2",), accounting=True)
    try:
        c.start_dbd()
        c.start_controller()
        c.agent = c._spawn("nodeagent.main", "--nodes", "node[1-2]")
        c.wait_for(lambda: c.all_nodes_up() or _up(c, "node2"), 20, "agent did not attach")
        victim = c.sbatch("-w", "node1", "--wrap", "sleep 600")
        c.wait_state(victim, {"RUNNING"})
        loop = asyncio.new_event_loop()
        yield Fuzzed(c, victim, pwd.getpwnam(users[0]), loop)
        loop.close()
    finally:
        c.stop()
        shutil.rmtree(top, ignore_errors=True)


def _up(c: Cluster, node: str) -> bool:
    return str(c.client.call("Nodes", {"names": [node]})["nodes"][0]["state"]) == "IDLE"


def _alive(f: Fuzzed) -> None:
    c = f.cluster
    for name, proc in (("controller", c.controller), ("dbd", c.dbd)):
        assert proc is not None and proc.poll() is None, f"{name} died"
    began = time.perf_counter()
    c.client.call("Ping")
    assert time.perf_counter() - began < 2.0


def _outcome(error: grpc.aio.AioRpcError) -> None:
    """A refusal our code meant (bytes that do not parse: "1005: Protocol error"), or a
    stream cut by grpc: never an escaped error, never a hang."""
    code, details = error.code(), error.details() or ""
    assert code is not grpc.StatusCode.UNKNOWN, details
    assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, "no answer: a hang"
    assert code is not grpc.StatusCode.INTERNAL or details == UNPARSED, details


# ------------------------------------------------------------ the AgentLink stream

_U32 = st.one_of(st.sampled_from([0, 1, 2**31, 2**32 - 1]), st.integers(0, 2**32 - 1))
_I64 = st.one_of(st.sampled_from([-(2**63), -1, 0, 2**63 - 1]), st.integers(-(2**63), 2**63 - 1))
_I32 = st.one_of(
    st.sampled_from([-(2**31), -1, 0, 9, 256, 2**31 - 1]), st.integers(-(2**31), 2**31 - 1)
)
_U64 = st.one_of(st.sampled_from([0, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))
_TEXT = st.one_of(st.text(max_size=30), st.sampled_from(["node1", "node3", "exited", "timeout"]))
#: A job id: the victim's (placeholder -1), the rogue's own job's (-2), or anything.
_JOB = st.one_of(st.sampled_from([-1, -2]), _U32.filter(lambda i: i != SENTINEL))


def _usage() -> dict[str, st.SearchStrategy[Any]]:
    return {"max_rss_kb": _U64, "user_cpu_us": _U64, "sys_cpu_us": _U64, "message": _TEXT}


_REPORTS = st.one_of(
    st.fixed_dictionaries(
        {
            "done": st.fixed_dictionaries(
                {"job_id": _JOB, "restarts": st.sampled_from([0, 1])},
                optional={"exit_status": _I32, "outcome": _TEXT, "end_time": _I64, **_usage()},
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "running": st.fixed_dictionaries(
                {"job_id": _JOB},
                optional={"restarts": _U32, "start_time": _I64, "pid": _U32},
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "step_done": st.fixed_dictionaries(
                {"job_id": _JOB, "node": _TEXT},
                optional={
                    "step_id": _U32,
                    "tasks": st.lists(_U32, max_size=4),
                    "statuses": st.lists(_I32, max_size=4),
                    "start_time": _I64,
                    "end_time": _I64,
                    "sum_rss_kb": _U64,
                    **_usage(),
                },
            )
        }
    ),
    st.fixed_dictionaries({"heartbeat": st.fixed_dictionaries({}, optional={"time": _I64})}),
    _message("AgentMessage").map(lambda m: {"codec": m}),  # anything the schema allows
)
#: Bytes last on the stream, that need not be a message at all (grpc ends the stream).
_TRAILER = st.one_of(st.none(), st.none(), st.none(), st.binary(max_size=64))

_REGISTRATION = _message("NodeRegistration").map(lambda m: {**m, "name": ROGUE_NODE})
#: Further nodes in the hello: any name but the real agent's nodes (a hello naming
#: those is refused whole, which test_agent_identity checks) or none.
_NAMES = st.one_of(st.text(min_size=1, max_size=20), st.sampled_from([ROGUE_NODE, "node9"]))
_OTHER = st.tuples(_message("NodeRegistration"), _NAMES.filter(lambda n: n not in REAL_NODES))
_HELLO = st.fixed_dictionaries(
    {"nodes": st.lists(_OTHER.map(lambda pair: {**pair[0], "name": pair[1]}), max_size=2)},
    optional={
        "version": _TEXT,
        "agent_start_time": _I64,
        "running": st.lists(
            st.fixed_dictionaries(
                {"job_id": _JOB}, optional={"restarts": _U32, "start_time": _I64, "pid": _U32}
            ),
            max_size=3,
        ),
    },
)


def _job_ids(message: dict[str, Any], ids: dict[int, int]) -> dict[str, Any]:
    """``message`` with each placeholder job id (negative) replaced by the real one."""
    out: dict[str, Any] = {}
    for key, value in message.items():
        if isinstance(value, dict):
            out[key] = _job_ids(value, ids)
        elif isinstance(value, list):
            out[key] = [_job_ids(v, ids) if isinstance(v, dict) else v for v in value]
        elif key == "job_id" and value < 0:
            out[key] = ids[value]
        else:
            out[key] = value
    return out


def _hello(f: Fuzzed, body: dict[str, Any], registration: dict[str, Any]) -> pb.AgentHello:
    """The drawn hello, first naming the rogue's node, with a root credential made for it."""
    encoded = codec.encode("AgentHello", {**body, "nodes": [registration, *body["nodes"]]})
    hello = pb.AgentHello.FromString(encoded)
    stamped: pb.AgentHello = credentials.stamp(
        hello,
        keys_of(f.cluster).credential,
        uid=0,
        gid=0,
        method=credentials.ATTACH,
        receiver=auth.controller_receiver(load(f.cluster.conf).cluster_name),
    )
    return stamped


def _wire(report: dict[str, Any]) -> pb.AgentMessage:
    if "codec" in report:
        return pb.AgentMessage.FromString(codec.encode("AgentMessage", report["codec"]))
    return pb.AgentMessage(**report)


async def _welcomed(f: Fuzzed, hello: Any) -> RogueAgent:
    """A rogue session for node3; the previous example's session may take a moment to end."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        rogue = RogueAgent(controller_target(f.cluster), load(f.cluster.conf).tls)
        await rogue.attach(hello())
        outcome = await rogue.outcome()
        if outcome == "welcome":
            return rogue
        await rogue.close()
        assert "already has a live agent" in outcome and time.monotonic() < deadline, outcome
        await asyncio.sleep(0.1)


async def _acknowledged(rogue: RogueAgent, restarts: int) -> str:
    """ "acknowledged" once the sentinel report is; else why the stream ended first."""
    deadline = time.monotonic() + TIMEOUT_S
    sentinel = pb.AckDone(job_id=SENTINEL, restarts=restarts)
    while time.monotonic() < deadline:
        if any(reply.ack_done == sentinel for reply in rogue.replies):
            return "acknowledged"
        if rogue._reader is not None and rogue._reader.done():
            error = rogue.error
            return f"{error.code()}: {error.details()}" if error is not None else "closed"
        await asyncio.sleep(0.02)
    raise AssertionError("the controller neither acknowledged nor ended the stream: a hang")


@settings(FUZZ, max_examples=8)
@given(
    done=st.fixed_dictionaries(
        {},
        optional={"exit_status": _I32, "outcome": _TEXT, "end_time": _I64, **_usage()},
    )
)
def test_the_rogues_own_job_ends_whatever_values_it_reports(
    fuzzed: Fuzzed, done: dict[str, Any]
) -> None:
    """A job placed on the rogue's node is the rogue's to report: its JobDone is acted on,
    with any exit status, time and usage, and the end reaches the journal and dbd. The
    end it reports is held between the job's start and now."""
    c = fuzzed.cluster
    node = next(n for n in load(c.conf).nodes if n.name == ROGUE_NODE)
    # As configured: a node reporting less is drained and its job would never start.
    registration = {"name": node.name, "cpus": node.cpus, "real_memory": node.real_memory}

    async def report() -> None:
        rogue = await _welcomed(fuzzed, lambda: _hello(fuzzed, {"nodes": []}, registration))
        try:
            # An earlier example's short registration drained the node, as Slurm would;
            # this one registers as configured, so an administrator may resume it.
            resume = ("scontrol", "update", f"nodename={ROGUE_NODE}", "state=resume")
            await asyncio.to_thread(c.run, *resume, check=False)
            job = await asyncio.to_thread(c.sbatch, "-w", ROGUE_NODE, "--wrap", "sleep 600")
            jobs.append(job)
            launch = await _reply(rogue, lambda r: r.launch.job_id == job)
            rogue.send(done=pb.JobDone(job_id=job, restarts=launch.launch.restarts, **done))
            await _reply(rogue, lambda r: r.ack_done.job_id == job)
        finally:
            await rogue.close()

    jobs: list[int] = []
    fuzzed.run(report())
    ended = c.job(jobs[0])  # an end at time 0 once made it older than MinJobAge: purged
    assert ended["state"] not in ("PENDING", "RUNNING")
    assert int(ended["start_time"]) <= int(ended["end_time"]) <= time.time()
    _alive(fuzzed)


async def _reply(rogue: RogueAgent, wanted: Callable[[pb.ControllerMessage], bool]) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for reply in rogue.replies:
            if wanted(reply):
                return reply
        assert rogue._reader is None or not rogue._reader.done(), rogue.error
        await asyncio.sleep(0.02)
    raise AssertionError("no such message from the controller: a hang")


_OWN: dict[str, int] = {}  # the rogue's own job on node3, once it has one


def _own_job(f: Fuzzed) -> int:
    """A job placed on node3, whose reports the rogue may send (and the controller takes)."""
    job = _OWN.get("id")
    if job is None or f.cluster.job(job)["state"] not in ("PENDING", "RUNNING"):
        _OWN["id"] = job = f.cluster.sbatch("-w", ROGUE_NODE, "--wrap", "sleep 600")
    return job


@settings(FUZZ, max_examples=25)
@given(
    registration=_REGISTRATION,
    body=_HELLO,
    reports=st.lists(_REPORTS, max_size=6),
    trailer=_TRAILER,
)
def test_a_rogue_agent_sending_random_reports_changes_nothing_elsewhere(
    fuzzed: Fuzzed,
    registration: dict[str, Any],
    body: dict[str, Any],
    reports: list[dict[str, Any]],
    trailer: bytes | None,
) -> None:
    ids = {-1: fuzzed.victim, -2: _own_job(fuzzed)}
    restarts = int(time.monotonic() * 1000) % 2**31

    async def attack() -> str:
        rogue = await _welcomed(fuzzed, lambda: _hello(fuzzed, _job_ids(body, ids), registration))
        try:
            for report in reports:
                rogue.send_raw(_wire(_job_ids(report, ids)))
            if trailer is not None:
                rogue.send_raw(trailer)
            rogue.send(done=pb.JobDone(job_id=SENTINEL, restarts=restarts))
            return await _acknowledged(rogue, restarts)
        finally:
            await rogue.close()

    outcome = fuzzed.run(attack())
    # Only a second hello (refused) or bytes that are no message (grpc's refusal) end it.
    allowed = {"acknowledged"}
    if trailer is not None:
        allowed |= {"closed", f"StatusCode.INTERNAL: {UNPARSED}"}
    if any(_wire(_job_ids(r, ids)).WhichOneof("body") == "hello" for r in reports):
        # Refused; a client still writing may see the cut stream instead of the refusal.
        allowed |= {
            "StatusCode.UNAUTHENTICATED: a second hello on one stream",
            f"StatusCode.INTERNAL: {UNPARSED}",
        }
    assert outcome in allowed, (outcome, reports)
    victim = fuzzed.cluster.job(fuzzed.victim)
    assert (victim["state"], victim["nodes"]) == ("RUNNING", "node1")
    _alive(fuzzed)


@settings(FUZZ, max_examples=15)
@given(chunks=st.lists(st.binary(max_size=100), min_size=1, max_size=4))
def test_an_unauthenticated_stream_of_random_bytes_is_refused(
    fuzzed: Fuzzed, chunks: list[bytes]
) -> None:
    async def attack() -> list[str]:
        rogue = RogueAgent(controller_target(fuzzed.cluster), load(fuzzed.cluster.conf).tls)
        try:
            rogue.outbox.put_nowait(chunks[0])
            attach = rogue.channel.stream_stream(
                credentials.ATTACH, request_serializer=bytes, response_deserializer=bytes
            )
            for chunk in chunks[1:]:
                rogue.outbox.put_nowait(chunk)
            call = attach(rogue._outgoing())
            replies = []
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    async for reply in call:
                        replies.append(reply)
            except grpc.aio.AioRpcError as exc:
                _outcome(exc)
            return [pb.ControllerMessage.FromString(r).WhichOneof("body") or "" for r in replies]
        finally:
            await rogue.close()

    assert fuzzed.run(attack()) == []  # nothing is sent to a stream never let in
    _alive(fuzzed)


# ------------------------------------------------------------ the Controller service


async def _unary(target: str, tls: Any, method: str, data: bytes, role: str | None = None) -> None:
    """One call of ``method`` with ``data`` as its request bytes; fails on an unmeant error."""
    async with grpctls.channel(target, tls, role=role) as channel:
        call = channel.unary_unary(method, request_serializer=bytes, response_deserializer=bytes)
        try:
            await call(data, timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            _outcome(exc)


@FUZZ
@given(method=st.sampled_from([m.name for m in CONTROLLER.methods]), data=st.binary(max_size=200))
def test_random_bytes_to_every_controller_method(fuzzed: Fuzzed, method: str, data: bytes) -> None:
    conf = load(fuzzed.cluster.conf)
    path = credentials.controller_method(method)
    fuzzed.run(_unary(conf.controller_target, conf.tls, path, data))
    _alive(fuzzed)


@st.composite
def _controller_requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    method = draw(st.sampled_from(list(CONTROLLER.methods)))
    message = draw(_message(method.input_type.name))
    if method.name == "Submit":  # nothing random runs: the job waits held
        message.setdefault("spec", {})["hold"] = True
    return method.name, message


@FUZZ
@given(request=_controller_requests())
def test_random_requests_from_an_ordinary_user_are_answered(
    fuzzed: Fuzzed, request: tuple[str, dict[str, Any]]
) -> None:
    method, fields = request
    kind = getattr(pb, CONTROLLER.methods_by_name[method].input_type.name)
    message = kind.FromString(codec.encode(kind.DESCRIPTOR.name, fields))
    user = fuzzed.user
    stamped = message
    if "cred" in kind.DESCRIPTOR.fields_by_name:  # Ping asks for none
        stamped = stamp_for_controller(
            fuzzed.cluster, message, method, uid=user.pw_uid, gid=user.pw_gid
        )
    conf = load(fuzzed.cluster.conf)
    path = credentials.controller_method(method)
    fuzzed.run(_unary(conf.controller_target, conf.tls, path, stamped.SerializeToString()))
    _alive(fuzzed)


# ------------------------------------------------------------ corral-dbd


def _dbd_target(f: Fuzzed) -> str:
    dbd = load_dbd_config(str(f.cluster.dir / "slurmdbd.conf"))
    return f"{load(f.cluster.conf).accounting.host}:{dbd.dbd_port}"


@st.composite
def _accounting_requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    method = draw(st.sampled_from(list(ACCOUNTING.methods)))
    message = draw(_message(method.input_type.name))
    if method.name == "RecordJobs":  # as the controller sends them: its name, one seq a job
        message["cluster"] = draw(st.one_of(st.just("corral"), _scalar("string")))
        for records, seqs in (
            ("jobs", "seqs"),
            ("events", "event_seqs"),
            ("reservations", "resv_seqs"),
        ):
            count = len(message.get(records, []))
            message[seqs] = draw(st.lists(_U64, min_size=count, max_size=count))
    return method.name, message


@FUZZ
@given(request=_accounting_requests())
def test_random_requests_from_a_daemon_to_dbd_are_answered(
    fuzzed: Fuzzed, request: tuple[str, dict[str, Any]]
) -> None:
    method, fields = request
    kind = getattr(pb, ACCOUNTING.methods_by_name[method].input_type.name)
    message = kind.FromString(codec.encode(kind.DESCRIPTOR.name, fields))
    path = credentials.accounting_method(method)
    stamped = credentials.stamp(
        message,
        keys_of(fuzzed.cluster).credential,
        uid=0,
        gid=0,
        method=path,
        receiver=auth.DBD_RECEIVER,
    )
    tls = load(fuzzed.cluster.conf).tls
    fuzzed.run(_unary(_dbd_target(fuzzed), tls, path, stamped.SerializeToString(), "ctld"))
    _alive(fuzzed)


@FUZZ
@given(method=st.sampled_from([m.name for m in ACCOUNTING.methods]), data=st.binary(max_size=200))
def test_random_bytes_to_every_dbd_method(fuzzed: Fuzzed, method: str, data: bytes) -> None:
    tls = load(fuzzed.cluster.conf).tls
    path = credentials.accounting_method(method)
    fuzzed.run(_unary(_dbd_target(fuzzed), tls, path, data, "ctld"))
    _alive(fuzzed)


def test_bytes_that_do_not_parse_are_a_protocol_error(fuzzed: Fuzzed) -> None:
    """The control for the fuzzing above: what a request that does not parse is told."""
    conf = load(fuzzed.cluster.conf)

    async def call(target: str, method: str, role: str | None) -> tuple[Any, str]:
        async with grpctls.channel(target, conf.tls, role=role) as channel:
            unary = channel.unary_unary(method, request_serializer=bytes)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await unary(b"\xff\xff\xff", timeout=TIMEOUT_S)
            return refused.value.code(), refused.value.details() or ""

    expected = (grpc.StatusCode.INVALID_ARGUMENT, "1005: Protocol error")
    for target, method, role in (
        (conf.controller_target, credentials.controller_method("Submit"), None),
        (_dbd_target(fuzzed), credentials.accounting_method("RecordJobs"), "ctld"),
    ):
        assert fuzzed.run(call(target, method, role)) == expected


def test_a_record_sequence_past_the_database_is_refused(fuzzed: Fuzzed) -> None:
    """Found by the fuzzing above: a sequence of 2**63 or more overflowed dbd's BIGINT
    column and escaped the handler (UNKNOWN, a traceback); it is refused now."""
    request = pb.RecordJobsRequest(
        cluster="corral", jobs=[pb.JobInfo(job_id=424242, name="x")], seqs=[2**64 - 1]
    )
    path = credentials.accounting_method("RecordJobs")
    stamped = credentials.stamp(
        request,
        keys_of(fuzzed.cluster).credential,
        uid=0,
        gid=0,
        method=path,
        receiver=auth.DBD_RECEIVER,
    )

    async def call() -> tuple[Any, str]:
        tls = load(fuzzed.cluster.conf).tls
        async with grpctls.channel(_dbd_target(fuzzed), tls, role="ctld") as channel:
            unary = channel.unary_unary(path, request_serializer=bytes)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await unary(stamped.SerializeToString(), timeout=TIMEOUT_S)
            return refused.value.code(), refused.value.details() or ""

    assert fuzzed.run(call()) == (grpc.StatusCode.INVALID_ARGUMENT, "sequence out of range")


# ------------------------------------------------------------ afterwards


def test_after_the_fuzzing_the_cluster_still_works(fuzzed: Fuzzed) -> None:
    """Runs last (pytest keeps the file's order): what the attacks must not have broken."""
    c = fuzzed.cluster
    _alive(fuzzed)
    victim = c.job(fuzzed.victim)
    assert (victim["state"], victim["nodes"]) == ("RUNNING", "node1")
    job = c.sbatch("-w", "node2", "--wrap", "true")
    assert c.wait_done(job, 60)["state"] == "COMPLETED"

    def recorded() -> bool:
        sacct = c.run("sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", str(job))
        return f"{job}|COMPLETED" in sacct.stdout

    c.wait_for(recorded, 30, "the job never reached accounting")
    # Every end the rogue reported, extreme values and all, reached dbd too.
    c.wait_for(lambda: c.client.call("Diag").get("dbd_queue", 0) == 0, 30, "records stuck")
    for name in ("controller", "dbd"):  # bytes that did not parse: one line each, no trace
        assert "Traceback" not in c.log(name), c.log(name)[-3000:]
        assert "ERROR asyncio" not in c.log(name), c.log(name)[-3000:]  # e.g. a task left
        assert " did not parse: Error parsing message" in c.log(name)
