"""The corral command's subcommands take exactly the options their tables list
(the tables docs/compatibility.md is written from): any other is refused with
getopt's words and a non-zero exit, before anything is started or written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.corral_options import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]


def corral(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.corral", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "prog"),
    [
        (("up", "--nodez=2"), "corral"),
        (("down", "--keep"), "corral"),
        (("cert", "issue", "ctld", "--ca", "x", "--host", "h", "--days=30"), "corral"),
        (("sim", "t.swf", "--seed=1"), "corral sim"),
        (("why", "--all", "1"), "corral why"),
        (("ray", "--nodes=2", "--", "true"), "corral ray"),
    ],
)
def test_an_option_not_in_the_table_is_refused(
    args: tuple[str, ...], prog: str, tmp_path: Path
) -> None:
    done = corral(*args, "--dir", str(tmp_path)) if args[0] in ("up", "down") else corral(*args)
    assert done.returncode == 1, done
    assert done.stderr.startswith(f"{prog}: error: unrecognized option '--"), done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started


def test_values_are_checked_and_arguments_left_over_refused(tmp_path: Path) -> None:
    nodes = corral("up", "--nodes", "many", "--dir", str(tmp_path))
    assert nodes.stderr == "corral: error: --nodes wants a positive integer, got 'many'\n"
    extra = corral("down", "--dir", str(tmp_path), "now")
    assert extra.returncode == 1 and "unknown argument 'now'" in extra.stderr
    assert list(tmp_path.iterdir()) == []


def test_every_subcommand_row_says_what_it_does() -> None:
    for name, table in SUBCOMMANDS:
        assert table.prog == f"corral {name}"
        for row in table.options:
            assert row.note, (name, row)
