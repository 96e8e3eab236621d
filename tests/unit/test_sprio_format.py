"""sprio's output for hand-built Priorities replies, compared with Slurm 24.11's layout.

The golden block (shared/reference/golden-slurm-22.05.txt, ``sprio``) is a
cluster with every weight 0; the others use PriorityWeightAge=1000,
PriorityWeightFairshare=10000, PriorityWeightJobSize=1000,
PriorityWeightPartition=1000 and PriorityWeightTRES=CPU=1000,Mem=2000.
Column widths are Slurm's (``%.15i %9r %.10Y ...``); values follow its
``print.c``: weighted factors ``%.0f``, normalised ``%.7f``, priority the
truncated sum of the weighted terms.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from cli import boundary, sprio
from corral.errors import SlurmError
from corral.wire import codec


def tres(name: str, factor: float, weight: float) -> dict[str, Any]:
    return {"name": name, "factor": factor, "weight": weight, "weighted": factor * weight}


def row(**fields: Any) -> dict[str, Any]:
    record = codec.decode("JobPriority", b"")
    record.update(user="root", account="bench", partition="debug", qos="normal", cluster="c")
    record.update(fields)
    record["display_id"] = record["display_id"] or str(record["job_id"])
    return record


def weights(**values: Any) -> dict[str, Any]:
    record = codec.decode("PriorityWeights", b"")
    record.update(values)
    return record


def reply(jobs: list[dict[str, Any]], weight: dict[str, Any] | None = None) -> dict[str, Any]:
    record = codec.decode("PrioritiesReply", b"")
    record.update(jobs=jobs, weights=weight or weights(), priority_type="priority/multifactor")
    return record


# The golden cluster: three jobs, all weights 0.
GOLDEN = reply([row(job_id=2), row(job_id=4), row(job_id=5)])
GOLDEN_DEFAULT = """\
          JOBID PARTITION   PRIORITY       SITE
              2 debug              1          0
              4 debug              1          0
              5 debug              1          0
"""
# 24.11's -l adds ACCOUNT (%.8o) and QOSNAME (%.10n) to what 22.05 printed.
GOLDEN_LONG = (
    "          JOBID PARTITION     USER  ACCOUNT   PRIORITY       SITE        AGE      ASSOC"
    "  FAIRSHARE    JOBSIZE  PARTITION    QOSNAME        QOS        NICE                 TRES\n"
    + "".join(
        f"              {job} debug         root    bench          1          0          0"
        "          0          0          0          0     normal          0           0"
        "                     \n"
        for job in (2, 4, 5)
    )
)

WEIGHTS = weights(
    age=1000, fairshare=10000, job_size=1000, partition=1000, tres="CPU=1000,Mem=2000"
)


def factors(age: float, fs: float, js: float, part: float, **fields: Any) -> dict[str, Any]:
    return {
        "age": age,
        "age_weighted": age * 1000,
        "fairshare": fs,
        "fairshare_weighted": fs * 10000,
        "job_size": js,
        "job_size_weighted": js * 1000,
        "partition_factor": part,
        "partition_weighted": part * 1000,
        **fields,
    }


JOBS = [
    # 500 + 7500 + 250 + 250 + cpu 250 + mem 500 = 9250
    row(
        job_id=12, uid=1000, user="alice", account="physics",
        tres=[tres("cpu", 0.25, 1000), tres("mem", 0.25, 2000)],
        **factors(0.5, 0.75, 0.25, 0.25),
    ),
    # 500 + 7500 + 250 + 1000 + cpu 125 + mem 250 = 9625
    row(
        job_id=12, uid=1000, user="alice", account="physics", partition="big",
        tres=[tres("cpu", 0.125, 1000), tres("mem", 0.125, 2000)],
        **factors(0.5, 0.75, 0.25, 1.0),
    ),
    # 100 + 3333.33 + 500 + 250 + cpu 500 - nice 100 = 4583.33 -> 4583
    row(
        job_id=13, uid=1001, user="bob", account="chem", nice=100,
        tres=[tres("cpu", 0.5, 1000), tres("mem", 0.0, 2000)],
        **factors(0.1, 1 / 3, 0.5, 0.25),
    ),
    # An administrator's priority: every factor shows 0.
    row(job_id=14, uid=1000, user="alice", partition="big", direct_priority=1000000),
]  # fmt: skip
WEIGHTED = reply(JOBS, WEIGHTS)

DEFAULT = """\
          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION                 TRES
             12 debug           9250          0        500       7500        250        250      cpu=250,mem=500
             12 big             9625          0        500       7500        250       1000      cpu=125,mem=250
             13 debug           4583          0        100       3333        500        250              cpu=500
             14 big          1000000          0          0          0          0          0                     
"""  # noqa: E501, W291

NORMALIZED = """\
          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  JOBSIZE    PARTITION  TRES                
             12 debug     0.00000215 0.5000000  0.7500000  0.2500000  0.2500000  cpu=0.25,mem=0.25   
             12 big       0.00000224 0.5000000  0.7500000  0.2500000  1.0000000  cpu=0.12,mem=0.12   
             13 debug     0.00000106 0.1000000  0.3333333  0.5000000  0.2500000  cpu=0.50            
             14 big       1000000.00 0          0          0          0                              
"""  # noqa: E501, W291

WEIGHTS_LINE = """\
          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION                 TRES
        Weights                               1       1000      10000       1000       1000    CPU=1000,Mem=2000
"""  # noqa: E501


class FakeClient:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[tuple[str, Any]] = []

    def call(self, method: str, request: Any) -> Any:
        self.requests.append((method, request))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def run(monkeypatch: pytest.MonkeyPatch, answer: Any, *argv: str) -> tuple[FakeClient, int]:
    client = FakeClient(answer)
    monkeypatch.setattr(boundary, "connect", lambda: client)
    for name in list(os.environ):
        if name.startswith("SPRIO_"):
            monkeypatch.delenv(name)
    return client, sprio.sprio(list(argv))


def output(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: Any,
    *argv: str,
) -> tuple[int, str, str]:
    _, status = run(monkeypatch, answer, *argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# ---------------------------------------------------------------- layouts
@pytest.mark.parametrize(
    ("answer", "argv", "expected"),
    [
        pytest.param(GOLDEN, (), GOLDEN_DEFAULT, id="golden default"),
        pytest.param(GOLDEN, ("-l",), GOLDEN_LONG, id="golden long"),
        pytest.param(WEIGHTED, (), DEFAULT, id="weighted default"),
        pytest.param(WEIGHTED, ("-n",), NORMALIZED, id="normalized"),
        pytest.param(WEIGHTED, ("-w",), WEIGHTS_LINE, id="weights"),
        pytest.param(WEIGHTED, ("-h", "-j", "13"), DEFAULT.splitlines(True)[3], id="one job"),
    ],
)
def test_reports(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: dict[str, Any],
    argv: tuple[str, ...],
    expected: str,
) -> None:
    status, out, err = output(monkeypatch, capsys, answer, *argv)
    assert (status, err) == (0, "")
    assert out == expected


def test_request_is_just_the_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client, status = run(monkeypatch, GOLDEN)
    assert (status, client.requests) == (0, [("Priorities", {})])
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "job_ids"),
    [
        pytest.param(("-j", "13"), ["13"], id="one id"),
        pytest.param(("-j", "12,14"), ["12", "12", "14"], id="a list (both partitions of 12)"),
        pytest.param(("-j12",), ["12", "12"], id="attached"),
        pytest.param(("-j", "99"), [], id="none of them"),
        pytest.param(("-p", "big"), ["12", "14"], id="partition"),
        pytest.param(("-u", "1001"), ["13"], id="user by uid"),
        pytest.param(("-u", "1001", "-p", "big"), [], id="filters combine"),
        pytest.param(("-S", "-y"), ["14", "12", "12", "13"], id="priority descending"),
        pytest.param(("-S", "r,i"), ["12", "14", "12", "13"], id="partition then id"),
        pytest.param(("-S", "-F"), ["12", "12", "13", "14"], id="fairshare descending"),
        pytest.param(("-S", "N"), ["12", "12", "14", "13"], id="nice"),
        pytest.param(("-S", "-t"), ["12", "13", "12", "14"], id="tres descending"),
        pytest.param(("-j",), ["12", "12", "13", "14"], id="-j without ids: all"),
        pytest.param(("13", "-j"), ["13"], id="ids after -j as an operand"),
    ],
)
def test_filters_and_sorts(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    job_ids: list[str],
) -> None:
    status, out, err = output(monkeypatch, capsys, WEIGHTED, "-h", "-o", "%i", *argv)
    assert (status, err) == (0, "")
    assert out.split() == job_ids


def test_array_tasks_match_their_array_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = reply([row(job_id=20, display_id="20_1"), row(job_id=21, display_id="20_2")])
    _, out, _ = output(monkeypatch, capsys, tasks, "-h", "-o", "%i", "-j", "20")
    assert out.split() == ["20", "21"]
    _, out, _ = output(monkeypatch, capsys, tasks, "-h", "-o", "%i", "-j", "20_2")
    assert out.split() == ["21"]


def test_user_option_adds_the_user_column(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = output(monkeypatch, capsys, GOLDEN, "-u", "0")
    assert out.splitlines()[:2] == [
        "          JOBID PARTITION     USER   PRIORITY       SITE",
        "              2 debug         root          1          0",
    ]


def test_unknown_user_is_reported_and_matches_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = output(monkeypatch, capsys, GOLDEN, "-u", "no-such-user-here")
    assert status == 0
    assert err == "sprio: error: Invalid user: no-such-user-here\n\n"
    assert out == "          JOBID PARTITION     USER   PRIORITY       SITE\n"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("%i|%u|%o|%n|%N|%c", "JOBID|USER|ACCOUNT|QOSNAME|NICE|CLUSTER", id="names"),
        pytest.param("%.5i %4r", "JOBID PART", id="widths"),
        pytest.param(">%i<", ">JOBID<", id="prefix and suffix"),
        pytest.param("%.3Y%a", "PRIAGE", id="no separator, cut"),
    ],
)
def test_format_headers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: str, expected: str
) -> None:
    _, out, _ = output(monkeypatch, capsys, GOLDEN, "-o", spec)
    assert out.splitlines()[0] == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("%i|%u|%o|%n|%N", "13|bob|chem|normal|100", id="fields"),
        pytest.param("%A|%a|%F|%f", "100|0.1000000|3333|0.3333333", id="weighted and norm"),
        pytest.param("%Y|%y|%S", "4583|0.00000106714045|0", id="priority"),
        pytest.param("%T|%t", "cpu=500|cpu=0.50", id="tres"),
        pytest.param("%B|%b|%Q|%q", "0|0.0000000|0|0.0000000", id="zero weights"),
    ],
)
def test_format_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: str, expected: str
) -> None:
    _, out, _ = output(monkeypatch, capsys, WEIGHTED, "-h", "-j", "13", "-o", spec)
    assert out == expected + "\n"


def test_direct_priority_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = output(monkeypatch, capsys, WEIGHTED, "-h", "-j", "14", "-o", "%Y|%y|%A|%a|%N|%T")
    assert out == "1000000|1000000.00000000000000|0|0|0|\n"


def test_environment_format_unless_overridden(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sprio.parse_settings([], {"SPRIO_FORMAT": "%i"}).fmt == "%i"
    assert sprio.parse_settings(["-o", "%r"], {"SPRIO_FORMAT": "%i"}).fmt == "%r"
    assert sprio.parse_settings(["-l"], {"SPRIO_FORMAT": "%i"}).fmt is None


def test_unknown_format_letter_is_reported_and_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = output(monkeypatch, capsys, GOLDEN, "-o", "%i %x|%r")
    assert status == 0
    assert err == "sprio: error: Invalid job format specification: x\n"
    assert out.splitlines()[:2] == ["JOBID PARTITION", "2 debug"]


def test_no_pending_jobs_with_ids_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = output(monkeypatch, capsys, reply([]), "-j", "5")
    assert (status, out) == (0, "Unable to find jobs matching user/id(s) specified\n")
    status, out, _ = output(monkeypatch, capsys, reply([]))
    assert (status, out) == (0, GOLDEN_DEFAULT.splitlines(True)[0])


def test_basic_priority_plugin_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    basic = dict(GOLDEN, priority_type="priority/basic")
    status, out, err = output(monkeypatch, capsys, basic)
    assert (status, out) == (1, "")
    assert err == (
        "You are not running a supported priority plugin\n(priority/basic).\n"
        "Only 'priority/multifactor' is supported.\n"
    )


def test_controller_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = output(monkeypatch, capsys, SlurmError(2002))
    assert (status, out) == (1, "")
    assert err == "Couldn't get priority factors from controller: Access/permission denied\n"


@pytest.mark.parametrize(
    ("argv", "status", "out", "err"),
    [
        pytest.param(("--version",), 0, "slurm 24.11.0\n", "", id="version"),
        pytest.param(("-V",), 0, "slurm 24.11.0\n", "", id="-V"),
        pytest.param(("--usage",), 0, sprio.USAGE, "", id="usage"),
        pytest.param(("--help",), 0, sprio.HELP, "", id="help"),
        pytest.param(
            ("-j", "abc"), 1, "", "sprio: error: Invalid job id: abc\n", id="bad job id"
        ),
        pytest.param(
            ("-j", "5_[1-3]"), 1, "", "sprio: error: Invalid job id: 5_[1-3]\n", id="array range"
        ),
        pytest.param(
            ("-S", "Z"), 1, GOLDEN_DEFAULT.splitlines(True)[0],
            "sprio: error: Invalid sort specification: Z\n", id="bad sort",
        ),
        pytest.param(
            ("-o", "%i", "-l"), 1, "",
            "sprio: fatal: Options -o(--format) and -l(--long) are mutually exclusive. "
            "Please remove one and retry.\n",
            id="-o and -l",
        ),
        pytest.param(
            ("-x",), 1, "",
            "sprio: invalid option -- 'x'\nTry \"sprio --help\" for more information\n",
            id="bad option",
        ),
        pytest.param(
            ("stray",), 1, sprio.USAGE, "sprio: error: Unrecognized option: stray\n",
            id="operand",
        ),
    ],
)  # fmt: skip
def test_early_ends(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    status: int,
    out: str,
    err: str,
) -> None:
    assert output(monkeypatch, capsys, GOLDEN, *argv) == (status, out, err)


def test_help_format() -> None:
    assert sprio.help_format() == (
        "%a    %A    %b    %B    %c    %f    %F    %i    \n"
        "%j    %J    %n    %N    %o    %p    %P    %r    \n"
        "%S    %q    %Q    %u    %y    %Y    %t    %T    \n"
    )


def test_priority_sum_matches_slurm() -> None:
    # get_priority_from_factors: weighted terms + site - nice + TRES, at least 1.
    record = row(job_id=1, age_weighted=10.6, nice=3, site=2, tres=[tres("cpu", 0.5, 3)])
    assert sprio.priority_of(record) == pytest.approx(11.1)
    assert sprio.priority_of(row(job_id=1, nice=50)) == 1.0
