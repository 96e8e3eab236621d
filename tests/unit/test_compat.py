"""docs/compatibility.md is what cli.compat writes from the code's tables, and those
tables classify every option and key (no silent no-ops)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import compat
from cli.options import HONOURED, REFUSED, WARNED
from corral import confkeys

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
USES = {HONOURED, WARNED, REFUSED}


def test_the_checked_in_table_is_what_the_code_says() -> None:
    assert DOC.read_text() == compat.render(), "run: python -m cli.compat"


@pytest.mark.parametrize("command", compat.COMMANDS)
def test_every_option_is_classified_and_explained(command: str) -> None:
    table = compat.table_of(command)
    assert table.prog == command
    for row in table.options:
        assert row.use in USES, row
        if row.use != HONOURED:
            assert row.note, f"{command} {row.name}: a refusal or warning says why"
    # Aliases of one option agree on what is done with it.
    uses: dict[str, set[str]] = {}
    for row in table.options:
        uses.setdefault(row.key, set()).add(row.use)
    assert {key: use for key, use in uses.items() if len(use) > 1} == {}


def test_every_key_is_classified_and_explained() -> None:
    for _, rows in compat.CONFIG:
        for lowered, row in rows.items():
            assert lowered == row.key.lower()
            assert row.use in USES, row
            if row.use != HONOURED:
                assert row.note, row
            assert not row.harmless or row.use == REFUSED, row


def test_a_key_is_refused_warned_or_kept_by_its_value() -> None:
    warnings: list[str] = []
    where = ("slurm.conf", 3)
    confkeys.check(confkeys.TOP["usepam"], "0", where, warnings)  # asks for nothing
    confkeys.check(confkeys.TOP["resvprolog"], "", where, warnings)
    confkeys.check(confkeys.TOP["clustername"], "c", where, warnings)
    assert warnings == []
    with pytest.raises(confkeys.ConfigError, match=r"slurm.conf:3: ResvProlog=/x is not supported"):
        confkeys.check(confkeys.TOP["resvprolog"], "/x", where, warnings)
    confkeys.check(confkeys.TOP["accountingstoragebackuphost"], "h", where, warnings)
    assert warnings == [
        "slurm.conf:3: AccountingStorageBackupHost has no effect: one corral-dbd, no backup"
    ]
