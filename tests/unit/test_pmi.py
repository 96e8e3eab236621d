"""PMI-1 and PMI-2 as a node's tasks speak them (nodeagent/pmi.py), fences through srun's
gather and broadcast (cli/srun/pmifence.py, the KVS and FENCE frames of corral/stepio.py),
and which MPI types srun serves (corral/mpitypes.py, cli/srun/launch.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.halt import Halt
from cli.srun.launch import mpi_type, parse
from cli.srun.pmifence import Fence
from controller.model import Step as ControllerStep
from corral import mpitypes, stepio
from corral.wire import corral_pb2 as pb
from nodeagent import pmi
from nodeagent.runkinds import step_spec
from tests.unit.test_gpu_grants import Link, gpu_job

JOB = pmi.PmiJob(kvsname="7.0", size=4, mapping=pmi.process_mapping([2, 2]))


class Step:
    """Two nodes' PMI servers (ranks 0-1 and 2-3) and srun's fence between them, over
    the frames the runners and srun exchange."""

    def __init__(self) -> None:
        self.fence = Fence(2)
        self.aborts: list[tuple[int, int, str]] = []
        self.nodes = [
            pmi.NodePmi(JOB, self._out(node_id), lambda *abort: self.aborts.append(abort))
            for node_id in range(2)
        ]
        self.links = [self.nodes[rank // 2].link(rank) for rank in range(4)]
        self.union: list[bytes] = []

    def _out(self, node_id: int) -> Callable[[dict[str, str]], None]:
        def fence_out(puts: dict[str, str]) -> None:
            pairs = {k.encode("latin-1"): v.encode("latin-1") for k, v in puts.items()}
            for data in stepio.kvs_frames(node_id, pairs):
                kind, _, payload = stepio.Reader().feed(data)[0]
                assert kind == stepio.KVS
                self.fence.add(payload)
            for data in self.fence.enter(node_id):  # the last node in: srun's broadcast
                self.union.append(data)
            if self.union and stepio.Reader().feed(self.union[-1])[0][0] == stepio.FENCE:
                self._broadcast()

        return fence_out

    def _broadcast(self) -> None:
        pairs: dict[str, str] = {}
        for data in self.union:
            kind, _, payload = stepio.Reader().feed(data)[0]
            if kind == stepio.KVS:
                got = stepio.read_pairs(payload)
                pairs.update((k.decode("latin-1"), v.decode("latin-1")) for k, v in got.items())
        self.union = []
        for node in self.nodes:
            node.fence_done(dict(pairs))

    def say(self, rank: int, text: str) -> str:
        """Send PMI-1 ``text`` (a line) as task ``rank``; what it got back."""
        link = self.links[rank]
        link.feed(text.encode() + b"\n")
        out = bytes(link.outbuf).decode()
        link.outbuf.clear()
        return out

    def say2(self, rank: int, *pairs: tuple[str, str]) -> dict[str, str]:
        """Send a PMI-2 command as task ``rank``; its response's fields ({}: none yet)."""
        link = self.links[rank]
        link.feed(pmi.pmi2_message(pairs))
        return self.reply2(rank)

    def reply2(self, rank: int) -> dict[str, str]:
        link = self.links[rank]
        if not link.outbuf:
            return {}
        length = int(link.outbuf[:6].decode())
        assert len(link.outbuf) == 6 + length
        fields = pmi.parse_pmi2(link.outbuf[6:].decode("latin-1"))
        link.outbuf.clear()
        return fields


@pytest.mark.parametrize(
    ("tasks", "mapping"),
    [
        ([2, 2, 2, 2], "(vector,(0,4,2))"),
        ([3, 3, 2], "(vector,(0,2,3),(2,1,2))"),
        ([1], "(vector,(0,1,1))"),
        ([4, 1, 4], "(vector,(0,1,4),(1,1,1),(2,1,4))"),
    ],
)
def test_process_mapping_is_slurms_vector_of_the_block_layout(
    tasks: list[int], mapping: str
) -> None:
    assert pmi.process_mapping(tasks) == mapping


def test_pmi1_init_maxes_names_and_a_fence_across_two_nodes() -> None:
    step = Step()
    for rank in range(4):
        assert step.say(rank, "cmd=init pmi_version=1 pmi_subversion=1") == (
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
        )
    assert step.say(0, "cmd=get_maxes") == (
        "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n"
    )
    assert step.say(3, "cmd=get_my_kvsname") == "cmd=my_kvsname rc=0 kvsname=7.0\n"
    assert step.say(3, "cmd=get_universe_size") == "cmd=universe_size rc=0 size=4\n"
    assert step.say(1, "cmd=get_appnum") == "cmd=appnum rc=0 appnum=0\n"
    for rank in range(4):
        put = f"cmd=put kvsname=7.0 key=card{rank} value=addr-{rank}=x"
        assert step.say(rank, put) == "cmd=put_result rc=0\n"
    # Another node's key is not there before the fence; one's own node's is.
    missing = step.say(0, "cmd=get kvsname=7.0 key=card2")
    assert missing == "cmd=get_result rc=-1 msg=key_not_found\n"
    assert step.say(0, "cmd=get kvsname=7.0 key=card1") == "cmd=get_result rc=0 value=addr-1=x\n"
    for rank in (0, 1, 2):
        assert step.say(rank, "cmd=barrier_in") == ""  # waits for every task of the step
    assert step.say(3, "cmd=barrier_in") == "cmd=barrier_out rc=0\n"
    for rank in (0, 1, 2):
        assert bytes(step.links[rank].outbuf) == b"cmd=barrier_out rc=0\n"
        step.links[rank].outbuf.clear()
    assert step.fence.completed == 1
    assert step.say(0, "cmd=get kvsname=7.0 key=card3") == "cmd=get_result rc=0 value=addr-3=x\n"
    assert step.say(2, "cmd=get kvsname=7.0 key=PMI_process_mapping") == (
        "cmd=get_result rc=0 value=(vector,(0,2,2))\n"
    )
    assert step.say(2, "cmd=finalize") == "cmd=finalize_ack rc=0\n"


def test_pmi1_refusals() -> None:
    step = Step()
    step.say(0, "cmd=init pmi_version=1 pmi_subversion=1")
    assert step.say(0, f"cmd=put kvsname=7.0 key={'k' * 65} value=v") == (
        "cmd=put_result rc=-1 msg=invalid key\n"
    )
    assert step.say(0, f"cmd=put kvsname=7.0 key=k value={'v' * 1025}") == (
        "cmd=put_result rc=-1 msg=value too long\n"
    )
    assert step.say(0, "cmd=publish_name service=s port=p") == (
        "cmd=publish_name_result rc=-1 msg=unknown_command\n"
    )
    assert step.say(0, "mcmd=spawn\nnprocs=2\nexecname=a.out\nendcmd") == (
        "cmd=spawn_result rc=-1 errmsg=spawn_is_not_supported\n"
    )
    assert step.say(1, "cmd=init pmi_version=3 pmi_subversion=0") == (
        "cmd=response_to_init pmi_version=3 pmi_subversion=0 rc=-1\n"
    )
    with pytest.raises(pmi.PmiError):
        step.links[2].feed(b"x" * (pmi.MAX_COMMAND + 1))
    step.say(3, "cmd=init pmi_version=1 pmi_subversion=1")
    step.say(3, "cmd=abort exitcode=7")
    assert step.aborts == [(3, 7, "")]


def test_pmi2_conversation_with_a_fence_and_node_attributes() -> None:
    step = Step()
    for rank in range(4):
        assert step.say(rank, "cmd=init pmi_version=2 pmi_subversion=0") == (
            "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n"
        )
    init = step.say2(2, ("cmd", "fullinit"), ("pmirank", "2"), ("threaded", "FALSE"))
    assert init == {
        "cmd": "fullinit-response",
        "rc": "0",
        "pmi-version": "2",
        "pmi-subversion": "0",
        "rank": "2",
        "size": "4",
        "appnum": "0",
        "debugged": "FALSE",
        "pmiverbose": "FALSE",
    }
    assert step.say2(0, ("cmd", "job-getid"), ("thrid", "9")) == {
        "cmd": "job-getid-response",
        "rc": "0",
        "jobid": "7.0",
        "thrid": "9",
    }
    for rank in range(4):
        put = step.say2(rank, ("cmd", "kvs-put"), ("key", f"k{rank}"), ("value", f"a;b;;{rank}"))
        assert put == {"cmd": "kvs-put-response", "rc": "0"}
    for rank in (3, 1, 0):
        assert step.say2(rank, ("cmd", "kvs-fence")) == {}
    assert step.say2(2, ("cmd", "kvs-fence")) == {"cmd": "kvs-fence-response", "rc": "0"}
    for rank in (0, 1, 3):
        assert step.reply2(rank) == {"cmd": "kvs-fence-response", "rc": "0"}
    got = step.say2(1, ("cmd", "kvs-get"), ("jobid", "7.0"), ("srcid", "-1"), ("key", "k3"))
    assert got == {"cmd": "kvs-get-response", "rc": "0", "found": "TRUE", "value": "a;b;;3"}
    missing = step.say2(1, ("cmd", "kvs-get"), ("key", "nope"))
    assert missing == {"cmd": "kvs-get-response", "rc": "0", "found": "FALSE"}
    mapping = step.say2(3, ("cmd", "info-getjobattr"), ("key", "PMI_process_mapping"))
    assert mapping["found"] == "TRUE" and mapping["value"] == "(vector,(0,2,2))"
    # A node attribute waited for is answered when a task of the node puts it.
    assert step.say2(0, ("cmd", "info-getnodeattr"), ("key", "shm"), ("wait", "TRUE")) == {}
    assert step.say2(1, ("cmd", "info-putnodeattr"), ("key", "shm"), ("value", "/dev/shm/x")) == {
        "cmd": "info-putnodeattr-response",
        "rc": "0",
    }
    assert step.reply2(0)["value"] == "/dev/shm/x"
    other = step.say2(2, ("cmd", "info-getnodeattr"), ("key", "shm"), ("wait", "FALSE"))
    assert other["found"] == "FALSE"  # another node's attributes are its own
    spawn = step.say2(3, ("cmd", "spawn"), ("ncmds", "1"))
    assert (spawn["rc"], spawn["errmsg"]) == ("-1", "spawn is not supported")
    assert step.say2(3, ("cmd", "finalize")) == {"cmd": "finalize-response", "rc": "0"}
    assert step.say2(2, ("cmd", "abort"), ("isworld", "TRUE"), ("msg", "bad; input")) == {}
    assert step.aborts == [(2, 1, "bad; input")]


def test_a_task_that_closed_does_not_hold_the_fence() -> None:
    step = Step()
    step.say(0, "cmd=init pmi_version=1 pmi_subversion=1")
    step.say(0, "cmd=barrier_in")
    step.nodes[0].closed(step.links[1])
    step.say(2, "cmd=init pmi_version=1 pmi_subversion=1")
    step.say(2, "cmd=barrier_in")
    assert step.say(3, "cmd=init pmi_version=1 pmi_subversion=1\ncmd=barrier_in").endswith(
        "cmd=barrier_out rc=0\n"
    )
    assert bytes(step.links[0].outbuf) == b"cmd=barrier_out rc=0\n"


def test_pmi2_framing_errors() -> None:
    link = pmi.NodePmi(JOB, lambda puts: None, lambda *a: None).link(0)
    link.feed(b"cmd=init pmi_version=2 pmi_subversion=0\n")
    with pytest.raises(pmi.PmiError):
        link.feed(b"abcdefcmd=x;")
    link = pmi.NodePmi(JOB, lambda puts: None, lambda *a: None).link(0)
    link.feed(b"cmd=init pmi_version=2 pmi_subversion=0\n")
    with pytest.raises(pmi.PmiError):
        link.feed(b"999999")


_KEY = st.text(
    st.characters(min_codepoint=33, max_codepoint=255, exclude_characters="=;"), min_size=1
)
_VALUE = st.text(st.characters(min_codepoint=1, max_codepoint=255))


@given(st.lists(st.tuples(_KEY, _VALUE), min_size=1, max_size=6, unique_by=lambda p: p[0]))
def test_pmi2_messages_round_trip(pairs: list[tuple[str, str]]) -> None:
    message = pmi.pmi2_message(pairs)
    assert int(message[:6]) == len(message) - 6
    assert pmi.parse_pmi2(message[6:].decode("latin-1")) == dict(pairs)


@given(st.dictionaries(st.binary(min_size=1, max_size=300), st.binary(max_size=5000), max_size=400))
def test_kvs_frames_carry_every_pair_in_bounded_frames(pairs: dict[bytes, bytes]) -> None:
    got: dict[bytes, bytes] = {}
    for data in stepio.kvs_frames(3, pairs):
        [(kind, node, payload)] = stepio.Reader().feed(data)
        assert (kind, node) == (stepio.KVS, 3) and len(payload) <= stepio.MAX_PAYLOAD
        got.update(stepio.read_pairs(payload))
    assert got == pairs


def test_abort_frames_and_bad_pairs() -> None:
    [(kind, rank, payload)] = stepio.Reader().feed(stepio.abort_frame(5, 3, "oops"))
    assert (kind, rank, stepio.read_abort(payload)) == (stepio.ABORT, 5, (3, "oops"))
    with pytest.raises(stepio.ProtocolError):
        stepio.read_pairs(b"\x00\x00\x00\x09\x00\x00\x00\x01ab")


def test_srun_lists_the_types_it_serves() -> None:
    with pytest.raises(Halt) as listed:
        parse(["--mpi=list"])
    assert listed.value.status == 0
    assert listed.value.lines == ("MPI plugin types are...\n\tnone\n\tpmi2",)


@pytest.mark.parametrize(
    ("options", "env", "configured", "expected"),
    [
        ((), {}, "", "none"),
        ((), {}, "pmi2", "pmi2"),  # MpiDefault
        ((), {"SLURM_MPI_TYPE": "pmi2"}, "none", "pmi2"),
        (("--mpi=none",), {"SLURM_MPI_TYPE": "pmi2"}, "pmi2", "none"),  # the option wins
    ],
)
def test_the_type_is_the_option_else_the_environment_else_mpidefault(
    options: tuple[str, ...], env: dict[str, str], configured: str, expected: str
) -> None:
    assert mpi_type(parse([*options, "true"]), env, configured) == expected


@pytest.mark.parametrize(
    ("options", "env", "configured", "name"),
    [
        (("--mpi=pmix",), {}, "", "pmix"),
        ((), {"SLURM_MPI_TYPE": "cray_shasta"}, "", "cray_shasta"),
        ((), {}, "openmpi", "openmpi"),
    ],
)
def test_a_type_corral_does_not_serve_is_refused_in_slurms_words(
    options: tuple[str, ...], env: dict[str, str], configured: str, name: str
) -> None:
    with pytest.raises(Halt) as refused:
        mpi_type(parse([*options, "true"]), env, configured)
    assert refused.value.status == 1
    assert refused.value.lines == tuple(mpitypes.refusal("srun", name))
    assert refused.value.lines[-1] == (
        f"srun: error: Invalid MPI type '{name}', --mpi=list for acceptable types"
    )


def test_each_nodes_launch_carries_the_type_and_the_steps_layout(tmp_path: Path) -> None:
    """What the runner needs to serve PMI: the type, and every node's task count (for
    PMI_process_mapping), from the controller's LaunchStep to the runner's spec."""
    link = Link(tmp_path, {})
    step = ControllerStep(1, "s", ("n1", "n2"), (3, 1), (3, 1), 0)
    request = pb.StepCreateRequest(job_id=5, argv=["prog"], mpi="pmi2")
    link.link.launch_step(gpu_job(), step, request)
    for node, tasks in (("n1", [0, 1, 2]), ("n2", [3])):
        spec = step_spec(link.sent[node][0].launch_step)
        assert (spec.mpi, spec.node_tasks, list(spec.tasks), spec.ntasks) == (
            "pmi2",
            [3, 1],
            tasks,
            4,
        )
        assert pmi.process_mapping(spec.node_tasks) == "(vector,(0,1,3),(1,1,1))"
