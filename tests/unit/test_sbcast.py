"""sbcast's pieces without daemons: its options, the controller's checks of a block,
the wait for the agents' answers, and the writer of one block."""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli import sbcast, sharedobjects
from cli.halt import Halt
from controller import broadcast
from controller.broadcast import FileBroadcasts
from controller.jobstate import JobState
from controller.model import Job, Step
from controller.principal import Principal
from corral import errors
from corral.clientconf import ClientSettings, client_settings
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from nodeagent import bcastwrite, filebcast
from tests.unit.scenario import UID, job, running, slurm_conf

# ------------------------------------------------------------ options


def _parse(*argv: str, **environ: str) -> sbcast.Params:
    return sbcast.parse(list(argv), environ)


def test_options_and_their_values() -> None:
    params = _parse("-f", "-p", "--compress=zlib", "-s", "2k", "-t", "30", "-j", "7.2", "a", "/b")
    assert (params.force, params.preserve, params.compress) == (True, True, "zlib")
    assert (params.size, params.timeout, params.job_id, params.step) == (2048, 30, 7, "2")
    assert (params.source, params.dest) == ("a", "/b")


def test_job_from_the_environment_and_a_relative_dest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/tmp")
    params = _parse("src", "copy", SLURM_JOB_ID="12")
    assert (params.job_id, params.step, params.dest) == (12, "", "/tmp/copy")


def test_environment_stands_for_options_and_the_command_line_wins() -> None:
    params = _parse("-Cnone", "-j", "3", "a", "/b", SBCAST_COMPRESS="zlib", SBCAST_FORCE="1")
    assert (params.compress, params.force) == ("", True)


def test_no_job_and_wrong_file_counts_in_slurms_words(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Halt) as halt:
        _parse("a", "/b")
    assert halt.value.lines == (f"sbcast: error: {sbcast.NO_JOB}",)
    with pytest.raises(Halt) as halt:
        _parse("-j", "1", "-C", "zlib", "a", "/b")  # -C's argument is optional: zlib is a name
    assert halt.value.lines[0] == "Need two file names, have 3 names"


def test_lz4_is_the_default_and_an_unknown_library_sends_uncompressed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _parse("-C", "-j", "1", "a", "/b").compress == "lz4"
    assert _parse("--compress=none", "-j", "1", "a", "/b").compress == ""
    assert _parse("--compress=foo", "-j", "1", "a", "/b").compress == ""
    assert "Compression type 'foo' unknown, disabling compression support." in (
        capsys.readouterr().err
    )


def test_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert sbcast.block_size("100") == 100
    assert sbcast.block_size("3m") == 3 << 20
    assert sbcast.block_size("1g") == 0
    assert sbcast.block_size("999m") == sbcast.MAX_BLOCK
    assert capsys.readouterr().err == "size specification is invalid, ignored\n"


def test_bad_job_ids() -> None:
    with pytest.raises(Halt) as halt:
        sbcast.job_and_step("5.x")
    assert halt.value.lines == ("sbcast: fatal: Bad step specified: 5",)
    with pytest.raises(Halt):
        sbcast.job_and_step("5+1")
    with pytest.raises(Halt):
        sbcast.job_and_step("5.0+x")


def test_a_part_of_a_step() -> None:
    assert sbcast.job_and_step("5.03+1") == (5, "3+1")
    assert sbcast.job_and_step("5.3") == (5, "3")


def test_send_libs_and_exclude_from_the_command_line_and_environment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    params = _parse("--send-libs", "--exclude=/opt/a,/b", "-j", "1", "a", "/b")
    assert (params.send_libs, params.exclude) == (True, ("/opt/a", "/b"))
    params = _parse("-j", "1", "a", "/b", SBCAST_SEND_LIBS="yes", SBCAST_EXCLUDE="NONE")
    assert (params.send_libs, params.exclude) == (True, ())
    assert not _parse("-j", "1", "a", "/b").send_libs
    assert _parse("-j", "1", "a", "/b").exclude == ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
    assert not _parse("--send-libs=maybe", "-j", "1", "a", "/b").send_libs
    assert "sbcast: error: Ignoring unrecognized --send-libs value 'maybe'" in (
        capsys.readouterr().err
    )
    with pytest.raises(Halt) as halt:
        _parse("--exclude=lib", "-j", "1", "a", "/b")
    assert halt.value.lines == ("sbcast: error: Invalid --exclude: lib",)
    _parse("-F", "4", "-j", "1", "a", "/b")
    assert "sbcast: warning: --fanout has no effect" in capsys.readouterr().err


def _conf(tmp_path: Path, *lines: str) -> Callable[[], ClientSettings]:
    path = tmp_path / "slurm.conf"
    path.write_text("\n".join(["ClusterName=c", "SlurmctldHost=h", *lines, ""]))
    return lambda: client_settings(str(path))


def test_bcast_parameters_are_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    conf = _conf(
        tmp_path,
        "BcastParameters=DestDir=/scratch/bc,Compression=lz4,send_libs",
        "BcastExclude=/opt/sys",
    )
    params = sbcast.parse(["-j", "1", "a", "rel/b"], {}, conf)
    assert (params.dest, params.compress) == ("/scratch/bc/rel/b", "lz4")
    assert (params.send_libs, params.exclude) == (True, ("/opt/sys",))
    params = sbcast.parse(["-Cnone", "--send-libs=no", "-j", "1", "a", "/abs"], {}, conf)
    assert (params.dest, params.compress, params.send_libs) == ("/abs", "", False)
    params = sbcast.parse(["-C", "-j", "1", "a", "b"], {}, _conf(tmp_path))
    assert (params.dest, params.compress) == (str(tmp_path / "b"), "lz4")
    assert sbcast.parse(["-j", "1", "a", "b"], {}, _conf(tmp_path)).compress == ""


def test_help_needs_no_slurm_conf(capsys: pytest.CaptureFixture[str]) -> None:
    def unreadable() -> ClientSettings:
        raise AssertionError("slurm.conf read for --help")

    with pytest.raises(Halt):
        sbcast.parse(["--help"], {}, unreadable)


def test_the_shared_objects_ldd_names() -> None:
    text = (
        "\tlinux-vdso.so.1 (0x00007ffc)\n"
        "\tlibm.so.6 => /opt/x/libm.so.6 (0x00007f12)\n"
        "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f12)\n"
        "\tlibgone.so => not found\n"
        "\t/lib64/ld-linux-x86-64.so.2 (0x00007f12)\n"
    )
    assert sharedobjects.parse_ldd(text) == [
        "/opt/x/libm.so.6",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
    ]
    assert sharedobjects.excluded("/lib/x86_64-linux-gnu/libc.so.6", ("/lib",))
    assert not sharedobjects.excluded("/lib64/ld.so", ("/lib",))
    assert not sharedobjects.excluded("/opt/x/libm.so.6", ())


def test_a_real_program_and_a_file_that_is_none(tmp_path: Path) -> None:
    found = sharedobjects.shared_objects("/bin/ls", ())
    assert any(os.path.basename(p).startswith("libc.so") for p in found)
    assert sharedobjects.shared_objects("/bin/ls", ("/",)) == []
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\n")
    assert sharedobjects.shared_objects(str(script), ()) == []


def test_a_missing_source_in_slurms_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "slurm.conf").write_text("ClusterName=c\nSlurmctldHost=h\n")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    assert sbcast.sbcast(["-j", "1", "/nonexistent", "/b"]) == 1
    assert capsys.readouterr().err == (
        "sbcast: error: Can't open `/nonexistent`: No such file or directory\n"
    )


# ------------------------------------------------------------ the controller's checks

OWNER = Principal(UID, UID, "alice", frozenset())
OTHER = Principal(UID + 1, UID + 1, "bob", frozenset())
CONF = slurm_conf()


def _job(state: JobState = JobState.RUNNING, **fields: Any) -> Job:
    if state is JobState.RUNNING:
        return running(5, ("n1", "n2"), **fields)
    return job(5, state=state, **fields)


def _block(**fields: Any) -> pb.BroadcastRequest:
    return pb.BroadcastRequest(**{"job_id": 5, "dest": "/tmp/x", **fields})


def _code(of: Job, who: Principal, req: pb.BroadcastRequest) -> int:
    with pytest.raises(SlurmError) as refused:
        broadcast.target({5: of}, CONF, req, who)
    return refused.value.code


def test_the_owner_reaches_every_node_of_the_job() -> None:
    assert broadcast.target({5: _job()}, CONF, _block(), OWNER)[1] == ["n1", "n2"]


def test_another_user_is_refused() -> None:
    assert _code(_job(), OTHER, _block()) == errors.ESLURM_ACCESS_DENIED


def test_jobs_not_running_and_unknown_ones() -> None:
    assert _code(_job(JobState.PENDING), OWNER, _block()) == errors.ESLURM_JOB_PENDING
    assert _code(_job(JobState.COMPLETED), OWNER, _block()) == errors.ESLURM_ALREADY_DONE
    assert _code(_job(), OWNER, _block(job_id=6)) == errors.ESLURM_INVALID_JOB_ID
    assert _code(_job(), OWNER, _block(dest="relative")) == errors.EINVAL
    assert _code(_job(), OWNER, _block(dest="/a\0b")) == errors.EINVAL


def test_a_step_gives_its_own_nodes() -> None:
    step = Step(step_id=0, name="s", nodes=("n2",), tasks=(1,), cpus=(1,), start_time=1)
    with_step = _job(steps=(step,))
    assert broadcast.target({5: with_step}, CONF, _block(step="0"), OWNER)[1] == ["n2"]
    assert _code(with_step, OWNER, _block(step="1")) == errors.ESLURM_INVALID_JOB_ID


def test_a_step_of_parts_by_its_id_is_its_first_part() -> None:
    """srun a : b in one job: -j 5.0 reaches part 0's nodes only, -j 5.0+1 part 1's, as
    measured on Slurm 22.05; a part that is not there is no job."""
    parts = tuple(
        Step(step_id=0, name="s", nodes=(node,), tasks=(1,), cpus=(1,), start_time=1, het_comp=i)
        for i, node in enumerate(("n1", "n2"))
    )
    with_parts = _job(steps=tuple(reversed(parts)))  # whatever order the job keeps them in
    assert broadcast.target({5: with_parts}, CONF, _block(step="0"), OWNER)[1] == ["n1"]
    assert broadcast.target({5: with_parts}, CONF, _block(step="0+1"), OWNER)[1] == ["n2"]
    assert broadcast.target({5: with_parts}, CONF, _block(step="0+0"), OWNER)[1] == ["n1"]
    assert _code(with_parts, OWNER, _block(step="0+2")) == errors.ESLURM_INVALID_JOB_ID
    assert _code(with_parts, OWNER, _block(step="0+")) == errors.ESLURM_INVALID_JOB_ID


def test_srun_bcast_copy_paths() -> None:
    """Where each node's copy of srun --bcast is (Slurm 22.05's default name)."""
    default = pb.StepCreateRequest(bcast_dir="/d/")
    assert broadcast.step_copy(default, 5, 2, "n1") == "/d/slurm_bcast_5.2_n1"
    named = pb.StepCreateRequest(bcast_dir="/d", bcast_dest="/x/copy.%n")
    assert broadcast.step_copy(named, 5, 2, "n2") == "/x/copy.n2"
    assert broadcast.step_copy(pb.StepCreateRequest(), 5, 2, "n1") == ""


# ------------------------------------------------------------ waiting for agents


class Agent:
    """A session that queues what it is sent."""

    def __init__(self) -> None:
        self.sent: list[pb.ControllerMessage] = []

    def send(self, message: pb.ControllerMessage) -> None:
        self.sent.append(message)


def test_each_agent_answers_for_its_own_transfer_only() -> None:
    async def scenario() -> pb.BroadcastReply:
        files = FileBroadcasts()
        one, two = Agent(), Agent()
        sessions = {"n1": one, "n2": two}
        sending = asyncio.create_task(
            files.send(_job(), ["n1", "n2", "n3"], _block(timeout=1), sessions)
        )
        await asyncio.sleep(0)
        first = one.sent[0].file_block
        assert list(first.nodes) == ["n1"] and first.uid == UID and not first.block.cred.nonce
        # the second agent cannot answer for the first's transfer
        files.answered(pb.FileBlockDone(transfer=first.transfer, nodes=["n1"]), two)
        files.answered(pb.FileBlockDone(transfer=first.transfer, nodes=["n1", "n2"]), one)
        return await sending

    reply = asyncio.run(scenario())
    assert list(reply.nodes) == ["n1"]  # n2's agent never answered: timed out
    failures = {f.node: f.code for f in reply.failures}
    assert failures == {"n3": broadcast.UNREACHABLE, "n2": broadcast.TIMED_OUT}


# ------------------------------------------------------------ the writer


def test_first_block_creates_exclusively_unless_forced(tmp_path: Path) -> None:
    path = str(tmp_path / "f")
    bcastwrite.write_block(path, 0, b"ab", first=True, force=False, last=False, mode=0, times=None)
    bcastwrite.write_block(
        path, 2, b"cd", first=False, force=False, last=True, mode=0o4751, times=(5, 6)
    )
    info = os.stat(path)
    assert (info.st_mode & 0o7777, int(info.st_atime), int(info.st_mtime)) == (0o751, 5, 6)
    assert Path(path).read_bytes() == b"abcd"
    with pytest.raises(FileExistsError):
        bcastwrite.write_block(
            path, 0, b"x", first=True, force=False, last=True, mode=0, times=None
        )
    bcastwrite.write_block(path, 0, b"x", first=True, force=True, last=True, mode=0o600, times=None)
    assert Path(path).read_bytes() == b"x"


def test_a_library_block_makes_its_directory(tmp_path: Path) -> None:
    path = str(tmp_path / "prog_libs" / "libx.so")
    bcastwrite.write_block(
        path, 0, b"so", first=True, force=False, mkdir=True, last=True, mode=0o755, times=None
    )
    assert Path(path).read_bytes() == b"so"
    assert os.stat(tmp_path / "prog_libs").st_mode & 0o777 == 0o700
    other = str(tmp_path / "prog_libs" / "liby.so")  # the directory is there already
    bcastwrite.write_block(
        other, 0, b"y", first=True, force=False, mkdir=True, last=True, mode=0o755, times=None
    )
    block = pb.BroadcastRequest(offset=0, size=1, library=True)
    assert filebcast.writer_argv(block, [other], 1, 1, "u")[10] == "1"  # MKDIR
    block.offset = 5
    assert filebcast.writer_argv(block, [other], 1, 1, "u")[10] == "0"


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError):
        bcastwrite.write_block(
            str(tmp_path / "link"), 0, b"x", first=True, force=True, last=True, mode=0, times=None
        )
    assert target.read_bytes() == b"keep"


def test_unpack() -> None:
    assert bcastwrite.unpack(zlib.compress(b"data"), "zlib", 4) == b"data"
    with pytest.raises(ValueError):
        bcastwrite.unpack(b"data", "", 5)
    assert bcastwrite.unpack(sbcast.pack(b"data" * 100, "lz4"), "lz4", 400) == b"data" * 100
    with pytest.raises(ValueError):
        bcastwrite.unpack(b"data", "lz4", 4)  # not an LZ4 frame
    with pytest.raises(ValueError):
        bcastwrite.unpack(b"data", "bz2", 4)


def test_the_agent_writes_each_nodes_path_through_the_child(tmp_path: Path) -> None:
    block = _block(dest=str(tmp_path / "f.%n"), data=b"hi", size=2, last=True, mode=0o640)
    message = pb.FileBlock(
        transfer=3, job_id=5, nodes=["n1", "n2"], uid=os.getuid(), gid=os.getgid(), user="me"
    )
    message.block.CopyFrom(block)
    (tmp_path / "f.n2").write_bytes(b"there already")
    answers: list[pb.AgentMessage] = []

    async def scenario() -> None:
        blocks = filebcast.FileBlocks()
        blocks.receive(message, answers.append)
        while not answers:
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    done = answers[0].file_block_done
    assert done.transfer == 3 and list(done.nodes) == ["n1"]
    assert [(f.node, f.message) for f in done.failures] == [("n2", "File exists")]
    assert (tmp_path / "f.n1").read_bytes() == b"hi"
    assert os.stat(tmp_path / "f.n1").st_mode & 0o777 == 0o640
