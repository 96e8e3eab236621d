"""cli.options: getopt_long semantics and glibc's error wording."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.options import NO_ARGUMENT, OPTIONAL, REQUIRED, Option, OptionError, OptionTable, parse

TABLE = OptionTable(
    [
        Option("hold", "H", "hold", NO_ARGUMENT),
        Option("quiet", "Q", "quiet", NO_ARGUMENT),
        Option("ntasks", "n", "ntasks", REQUIRED),
        Option("ntasks-per-node", "", "ntasks-per-node", REQUIRED),
        Option("ntasks-per-node", "", "tasks-per-node", REQUIRED),
        Option("partition", "p", "partition", REQUIRED),
        Option("parsable", "", "parsable", NO_ARGUMENT),
        Option("nice", "", "nice", OPTIONAL),
        Option("no-kill", "k", "no-kill", OPTIONAL),
        Option("verbose", "v", "verbose", NO_ARGUMENT),
    ]
)


def pairs(argv: list[str], permute: bool = False) -> tuple[list[tuple[str, str | None]], list[str]]:
    found, positional = parse(TABLE, argv, permute=permute)
    return [(opt.key, arg) for opt, arg in found], positional


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["-n4"], [("ntasks", "4")], id="short-attached"),
        pytest.param(["-n", "4"], [("ntasks", "4")], id="short-separate"),
        pytest.param(["--ntasks=4"], [("ntasks", "4")], id="long-equals"),
        pytest.param(["--ntasks", "4"], [("ntasks", "4")], id="long-separate"),
        pytest.param(["--ntasks="], [("ntasks", "")], id="long-empty-value"),
        pytest.param(["-n", "-5"], [("ntasks", "-5")], id="value-looks-like-option"),
        pytest.param(["--ntasks", "--hold"], [("ntasks", "--hold")], id="long-value-dashes"),
        pytest.param(["-HQ"], [("hold", None), ("quiet", None)], id="cluster"),
        pytest.param(["-Hn4"], [("hold", None), ("ntasks", "4")], id="cluster-then-value"),
        pytest.param(["-Hn", "4"], [("hold", None), ("ntasks", "4")], id="cluster-value-next"),
        pytest.param(["-vvv"], [("verbose", None)] * 3, id="repeated"),
        pytest.param(["--part=debug"], [("partition", "debug")], id="prefix"),
        pytest.param(["--parti", "debug"], [("partition", "debug")], id="prefix-separate"),
        pytest.param(["--pars"], [("parsable", None)], id="prefix-flag"),
        pytest.param(["--ntasks-per=2"], [("ntasks-per-node", "2")], id="prefix-of-longer"),
        pytest.param(["--ntasks=3"], [("ntasks", "3")], id="exact-beats-prefix"),
        pytest.param(["--tasks-per-node=2"], [("ntasks-per-node", "2")], id="alias"),
        pytest.param(["--nice"], [("nice", None)], id="optional-absent"),
        pytest.param(["--nice=5"], [("nice", "5")], id="optional-attached"),
        pytest.param(["-k"], [("no-kill", None)], id="short-optional-absent"),
        pytest.param(["-koff"], [("no-kill", "off")], id="short-optional-attached"),
    ],
)
def test_options(argv: list[str], expected: list[tuple[str, str | None]]) -> None:
    assert pairs(argv) == (expected, [])


@pytest.mark.parametrize(
    ("argv", "permute", "expected"),
    [
        pytest.param(["-H", "job.sh", "-n", "4"], False, ([("hold", None)], ["job.sh", "-n", "4"]),
                     id="first-positional-ends-options"),
        pytest.param(["-H", "job.sh", "-n", "4"], True, ([("hold", None), ("ntasks", "4")],
                     ["job.sh"]), id="permute"),
        pytest.param(["--", "-H"], False, ([], ["-H"]), id="double-dash"),
        pytest.param(["-H", "--", "-n", "x"], True, ([("hold", None)], ["-n", "x"]),
                     id="double-dash-permute"),
        pytest.param(["-", "-H"], True, ([("hold", None)], ["-"]), id="lone-dash-is-positional"),
        pytest.param(["--nice", "5"], False, ([("nice", None)], ["5"]),
                     id="optional-argument-not-taken-from-next"),
    ],
)  # fmt: skip
def test_positionals(
    argv: list[str], permute: bool, expected: tuple[list[tuple[str, str | None]], list[str]]
) -> None:
    assert pairs(argv, permute) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--foo"], "unrecognized option '--foo'", id="unknown-long"),
        pytest.param(["--foo=bar"], "unrecognized option '--foo=bar'", id="unknown-long-value"),
        pytest.param(["-Z"], "invalid option -- 'Z'", id="unknown-short"),
        pytest.param(["-HZ"], "invalid option -- 'Z'", id="unknown-in-cluster"),
        pytest.param(["--partition"], "option '--partition' requires an argument", id="missing"),
        pytest.param(["--parti"], "option '--partition' requires an argument", id="missing-prefix"),
        pytest.param(["-n"], "option requires an argument -- 'n'", id="missing-short"),
        pytest.param(["--hold=1"], "option '--hold' doesn't allow an argument", id="flag-value"),
        pytest.param(
            ["--par=x"],
            "option '--par=x' is ambiguous; possibilities: '--partition' '--parsable'",
            id="ambiguous",
        ),
        pytest.param(
            ["--n"],
            "option '--n' is ambiguous; possibilities: '--ntasks' '--ntasks-per-node' '--nice' "
            "'--no-kill'",
            id="ambiguous-many",
        ),
    ],
)
def test_errors(argv: list[str], message: str) -> None:
    with pytest.raises(OptionError) as info:
        parse(TABLE, argv)
    assert str(info.value) == message


def test_aliases_of_one_option_are_not_ambiguous() -> None:
    table = OptionTable(
        [Option("user", "u", "user", REQUIRED), Option("user", "", "users", REQUIRED)]
    )
    found, _ = parse(table, ["--us=bob"])
    assert [(opt.key, arg) for opt, arg in found] == [("user", "bob")]


@given(st.lists(st.text(max_size=12), max_size=8))
def test_positionals_are_the_tail_of_argv(argv: list[str]) -> None:
    """Without permuting, parsing only ever stops: the positionals are what is left."""
    try:
        _, positional = parse(TABLE, argv)
    except OptionError:
        return
    assert positional == argv[len(argv) - len(positional) :]


@given(st.lists(st.text(max_size=12), max_size=8))
def test_permuting_keeps_every_positional(argv: list[str]) -> None:
    try:
        _, positional = parse(TABLE, argv, permute=True)
    except OptionError:
        return
    assert all(word in argv for word in positional)
