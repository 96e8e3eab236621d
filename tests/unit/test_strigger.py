"""strigger's command line: Slurm 22.05's checks and words, the request it sends,
and the table ``--get`` prints."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.strigger import HEADER, NO_TRIGGER, Params, parse_args, render, set_request


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(Halt) as halt:
        parse_args(argv)
    assert halt.value.report() == 1
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "You must use exactly one of the following options: --set, --get or --clear"),
        (["--get", "--set"], "You must use exactly one of the following options"),
        (["--clear"], "You must specify a --id, --jobid, or --user to clear"),
        (["--set", "--program=/bin/true"], NO_TRIGGER),
        (["--set", "--down"], "You must specify a --program value"),
        (["--set", "--fini", "-p", "/bin/true"], "You must specify a --jobid value"),
        (["--set", "--down", "-p", "true"], 'The --program value must start with "/"'),
        (["--set", "--down", "-p", "/nonexistent"], "Invalid --program value, file not found"),
        (["--set", "--down", "-p", "/tmp"], "Invalid --program value, not regular file"),
        (
            ["--set", "-d", "-p", "/bin/true", "-o", "40000"],
            "The --offset parameter must be between +/-32000",
        ),
        (["--set", "-d", "-p", "/bin/true", "--flags=FOO"], "Invalid flags FOO"),
        (["--set", "--jobid=abc", "-f", "-p", "/bin/true"], "Invalid jobid abc"),
        (["--get", "--user=no-such-user-here"], "Invalid user no-such-user-here"),
    ],
    ids=[
        "no mode",
        "two modes",
        "clear what",
        "no event",
        "no program",
        "fini without job",
        "relative program",
        "missing program",
        "directory program",
        "offset range",
        "bad flags",
        "bad job id",
        "unknown user",
    ],
)
def test_bad_command_lines_get_slurms_words(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert refusal(argv, capsys).startswith(f"strigger: error: {said}")


def test_events_corral_does_not_have_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = refusal(["--set", "--primary_slurmctld_failure", "-p", "/bin/true"], capsys)
    assert "--primary_slurmctld_failure is not supported" in err


def test_a_node_trigger_request() -> None:
    p = parse_args(["--set", "-nn[1-2]", "--down", "--up", "-o", "30", "--flags=perm",
                    "-p", "/bin/true now"])  # fmt: skip
    assert set_request(p) == {
        "action": "set",
        "trigger": {
            "types": ["down", "up"],
            "offset": 30,
            "program": "/bin/true now",
            "perm": True,
            "res_type": "node",
            "res_id": "n[1-2]",
        },
    }
    every = set_request(parse_args(["--set", "--node", "--idle", "-p", "/bin/true"]))
    assert every["trigger"]["res_id"] == "*"


def test_a_job_trigger_request() -> None:
    p = parse_args(["--set", "-j", "42", "--time", "-o", "-600", "-p", "/bin/true"])
    trig = set_request(p)["trigger"]
    assert (trig["res_type"], trig["res_id"], trig["types"], trig["offset"]) == (
        "job",
        "42",
        ["time"],
        -600,
    )


@pytest.mark.parametrize(
    "extra",
    [["-n"], ["--user=root"], ["--id=3"]],
    ids=["node with job", "user", "id"],
)
def test_set_refuses_what_slurm_would_pass_over(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refusal(["--set", "-j", "42", "--fini", "-p", "/bin/true", *extra], capsys)
    assert err.startswith("strigger: error: ")


def test_a_dbd_trigger_request() -> None:
    trig = set_request(parse_args(["--set", "-g", "-p", "/bin/true"]))["trigger"]
    assert (trig["res_type"], trig["res_id"], trig["types"]) == (
        "slurmdbd",
        "",
        ["primary_slurmdbd_failure"],
    )


ROWS = [
    {"id": 1, "res_type": "node", "res_id": "*", "types": ["down"], "offset": 0, "uid": 0,
     "perm": True, "program": "/usr/sbin/notify"},
    {"id": 2, "res_type": "job", "res_id": "1235", "types": ["time"], "offset": -600, "uid": 0,
     "perm": False, "program": "/home/joe/clean_up"},
    {"id": 3, "res_type": "node", "res_id": "n1", "types": ["down", "up"], "offset": 0,
     "uid": 4242424, "perm": False, "program": "/bin/true"},
    {"id": 4, "res_type": "slurmdbd", "res_id": "", "types": ["primary_slurmdbd_failure"],
     "offset": 0, "uid": 0, "perm": False, "program": "/bin/true"},
]  # fmt: skip


def test_get_prints_slurms_table() -> None:
    assert render(ROWS, Params()).splitlines() == [
        HEADER,
        "      1 node            * down                                     0 root     PERM "
        " /usr/sbin/notify",
        "      2 job          1235 time                                  -600 root           "
        "/home/joe/clean_up",
        "      3 node           n1 unknown                                  0 unknown        "
        "/bin/true",
        "      4 slurmdbd   (null) primary_slurmdbd_failure                 0 root           "
        "/bin/true",
    ]


@pytest.mark.parametrize(
    ("argv", "ids"),
    [
        (["--get"], [1, 2, 3, 4]),
        (["--get", "--down"], [1]),
        (["--get", "-j", "1235"], [2]),
        (["--get", "-n"], [1, 3]),
        (["--get", "--id=3"], [3]),
        (["--get", "--user=root"], [1, 2, 4]),
        (["--get", "-g"], [4]),
        (["--get", "--time", "-j", "1235"], [2]),
    ],
    ids=["all", "down", "job", "nodes", "id", "user", "dbd", "time"],
)
def test_get_filters_as_strigger_does(argv: list[str], ids: list[int]) -> None:
    shown = render(ROWS, parse_args([*argv, "-N"])).splitlines()
    assert [int(line.split()[0]) for line in shown] == ids
