"""scancel's argument checks and what it reports for the controller's results.

Slurm 22.05 printed nothing and exited 0 for ``scancel 999999`` (golden
file): cancelling a job that is gone is not an error unless ``-v`` is given
or a signal other than the default was asked for.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from cli import boundary, scancel
from cli.halt import Halt
from cli.jobs.ids import InvalidJobId, cancel_ids
from corral.errors import SlurmError


@pytest.mark.parametrize(
    ("operands", "ids"),
    [
        (["123"], ["123"]),
        (["123", "124"], ["123", "124"]),
        (["123,124"], ["123", "124"]),
        (["123_4"], ["123_4"]),
        (["123_*"], ["123_*"]),
        (["123_[1-3,5]"], ["123_[1-3,5]"]),
        (["123.0"], ["123.0"]),
        (["12+1"], ["12+1"]),
        (["7,8_2,9_*"], ["7", "8_2", "9_*"]),
    ],
)
def test_cancel_ids(operands: list[str], ids: list[str]) -> None:
    assert cancel_ids(operands) == ids


def test_a_components_step_names_the_leaders_as_in_slurm_22_05() -> None:
    """Measured on a real 22.05: ``scancel -v -s USR1 123+1.0`` says ``Signal 10 to
    step 123.0`` and signals component 0's part; ``123+1`` stays the component."""
    settings = scancel.parse_settings(["123+1.0", "123+1", "124.0"], {})
    assert settings.job_ids == ["123.0", "123+1", "124.0"]


@pytest.mark.parametrize(
    ("operands", "bad"),
    [
        (["abc"], "abc"),
        (["0"], "0"),
        (["-5"], "-5"),
        (["12x"], "12x"),
        (["123_[1-3],5"], "123_[1-3],5"),
        (["123_[1-3"], "123_[1-3"),
        (["123_[a]"], "123_[a]"),
        (["5,abc"], "abc"),
    ],
)
def test_invalid_ids(operands: list[str], bad: str) -> None:
    with pytest.raises(InvalidJobId) as error:
        cancel_ids(operands)
    assert str(error.value) == bad


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("USR1", 10),
        ("SIGUSR1", 10),
        ("sigterm", 15),
        ("KILL", 9),
        ("10", 10),
        (" HUP", 1),
        ("CONT", 18),
        ("BOGUS", 0),
        ("12abc", 0),
    ],
)
def test_signal_number(text: str, number: int) -> None:
    assert scancel.signal_number(text) == number


def parse(*argv: str, **env: str) -> scancel.Settings:
    return scancel.parse_settings(list(argv), env)


def test_options_after_ids_and_filters() -> None:
    chosen = parse("12", "-s", "USR1", "--batch", "-p", "debug", "-t", "pd", "-n", "x", "-q", "Hi")
    request = scancel.request(chosen, chosen.job_ids)
    assert request == {
        "filter": {
            "job_ids": ["12"],
            "users": [],
            "partitions": ["debug"],
            "states": ["PENDING"],
            "names": ["x"],
            "nodes": [],
            "accounts": [],
            "qos": ["hi"],
            "reservations": [],
        },
        "signal": 10,
        "batch_only": True,
        "full": False,
    }


def test_nodelist_and_me() -> None:
    chosen = parse("--me", "-w", "n[1-2]")
    request = scancel.request(chosen, [])
    assert request["filter"]["users"] == [str(os.getuid())]
    assert request["filter"]["nodes"] == ["n1", "n2"]


def test_environment() -> None:
    chosen = parse("5", SCANCEL_PARTITION="p", SCANCEL_BATCH="true", SCANCEL_STATE="R")
    assert (chosen.partition, chosen.batch, chosen.state) == ("p", True, "RUNNING")
    assert parse("5", "-p", "q", SCANCEL_PARTITION="p").partition == "q"


@pytest.mark.parametrize(
    ("argv", "lines"),
    [
        ((), ("scancel: error: No job identification provided",)),
        (("abc",), ("scancel: error: Invalid job id abc",)),
        (("-s", "BOGUS", "5"), ("Unknown job signal: BOGUS",)),
        (
            ("-t", "weird", "5"),
            (
                "Invalid job state specified: weird",
                "Valid job states are PENDING, RUNNING, and SUSPENDED",
            ),
        ),
        (
            (
                "-u",
                "no_such_user_xyz",
            ),
            ("scancel: error: Invalid user name: no_such_user_xyz",),
        ),
    ],
)
def test_errors(argv: tuple[str, ...], lines: tuple[str, ...]) -> None:
    with pytest.raises(Halt) as stop:
        parse(*argv)
    assert (stop.value.status, stop.value.lines) == (1, lines)


def result(job_id: str, code: int = 0) -> dict[str, Any]:
    return {"job_id": job_id, "code": code, "message": str(SlurmError(code)) if code else ""}


@pytest.mark.parametrize(
    ("argv", "results", "lines", "status"),
    [
        (("999999",), [result("999999", 2017)], [], 0),
        (("5",), [result("5", 2021)], [], 0),
        (("5",), [result("5")], [], 0),
        (
            ("-v", "5", "6"),
            [result("5"), result("6", 2017)],
            [
                "scancel: Terminating job 5",
                "scancel: Terminating job 6",
                "scancel: error: Kill job error on job id 6: Invalid job id specified",
            ],
            0,
        ),
        (
            ("-s", "USR1", "-v", "--batch", "5"),
            [result("5")],
            ["scancel: Signal 10 to batch job 5"],
            0,
        ),
        (("-s", "USR1", "5"), [result("5", 2021)], [], 1),
        (("-s", "KILL", "5"), [result("5", 2017)], [], 0),
        (
            ("5",),
            [result("5", 2002)],
            ["scancel: error: Kill job error on job id 5: Access/permission denied"],
            210,  # Slurm 22.05: the error code, cut to a byte
        ),
        (
            ("-p", "debug", "77"),
            [result("77", 2017)],
            ["scancel: error: Kill job error on job id 77: Invalid job id specified"],
            1,
        ),
        (("-Q", "-p", "debug", "77"), [result("77", 2017)], [], 1),
        (
            ("-v", "-p", "debug", "-n", "x"),
            [],
            [
                "scancel: error: No active jobs match ALL job filters, including: "
                "job_name=x partition=debug "
            ],
            0,
        ),
        (("-p", "debug"), [], [], 0),
        (
            ("5.99",),
            [result("5.99", 2017)],
            ["scancel: error: Kill job error on job step id 5.99: Invalid job id specified"],
            1,
        ),
        (("5.0",), [result("5.0", 2021)], [], 0),
        (
            ("-v", "5.0"),
            [result("5.0", 2021)],
            [
                "scancel: Terminating step 5.0",
                "scancel: error: Kill job error on job step id 5.0: "
                "Job/step already completing or completed",
            ],
            0,
        ),
    ],
)
def test_outcome(
    argv: tuple[str, ...], results: list[dict[str, Any]], lines: list[str], status: int
) -> None:
    assert scancel.outcome(parse(*argv), results) == (lines, status)


class FakeClient:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.requests: list[tuple[str, Any]] = []

    def call(self, method: str, request: Any) -> Any:
        self.requests.append((method, request))
        return self.reply


def test_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient({"results": [result("999999", 2017)]})
    monkeypatch.setattr(boundary, "connect", lambda: client)
    for name in list(os.environ):
        if name.startswith("SCANCEL_"):
            monkeypatch.delenv(name)
    assert scancel.scancel(["999999"]) == 0
    assert capsys.readouterr() == ("", "")
    assert client.requests[0][0] == "Signal"
    assert client.requests[0][1]["filter"]["job_ids"] == ["999999"]
    assert client.requests[0][1]["signal"] == 0
