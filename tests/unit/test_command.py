"""The pieces squeue, sinfo, scancel and scontrol share (cli.command)."""

from __future__ import annotations

import pytest

from cli import command
from cli.command import Command, known_user, repeat, split_list
from cli.halt import Halt
from cli.options import Option, OptionTable

TABLE = OptionTable([Option("help", "", "help"), Option("usage", "", "usage")])


def test_repeat_once_and_every_interval(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    statuses = iter([0, 1, 0])
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(command.time, "ctime", lambda: "NOW")
    monkeypatch.setattr(command.time, "sleep", sleep)
    assert repeat(lambda: 1, 0, stamp=False) == 1
    assert capsys.readouterr().out == ""
    with pytest.raises(KeyboardInterrupt):
        repeat(lambda: next(statuses), 5, stamp=True)
    assert sleeps == [5, 5, 5]
    assert capsys.readouterr().out == "NOW\n\nNOW\n\nNOW\n\n"


def test_parse_answer_and_checks(capsys: pytest.CaptureFixture[str]) -> None:
    cmd = Command("prog", TABLE, "USAGE\n", "HELP\n")
    with pytest.raises(Halt) as bad:
        cmd.parse(["--nope"])
    assert bad.value.status == 1
    assert capsys.readouterr().err == (
        "prog: unrecognized option '--nope'\nTry \"prog --help\" for more information\n"
    )
    with pytest.raises(Halt) as done:
        cmd.answer("usage")
    assert (done.value.status, capsys.readouterr().out) == (0, "USAGE\n")
    cmd.answer("other")
    with pytest.raises(Halt) as nodes:
        cmd.hostlist("n[1-", "nodes")
    assert nodes.value.lines == ("prog: error: 'n[1-' invalid entry for --nodes",)
    assert split_list(",a,,b,") == ["a", "b"]
    assert known_user("0") and known_user("root") and not known_user("no-such-user-xyz")
