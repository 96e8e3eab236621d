"""squeue's and sinfo's --yaml: the block YAML reads back as the same document."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from cli.jsonout import check_parser, envelope, render

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
_LEAF = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT
_DOC = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(_TEXT, _DOC, max_size=5))
def test_yaml_reads_back_as_the_json_document(document: dict[str, Any]) -> None:
    assert yaml.safe_load(render(document, as_yaml=True)) == document


def test_envelope_and_parser_check() -> None:
    body = envelope({"jobs": []}, ["squeue", "--json"], "c")
    assert body["meta"]["slurm"]["cluster"] == "c" and body["errors"] == []
    assert check_parser("squeue", "data_parser/v0.0.42") is None
    assert check_parser("sinfo", "v0.0.40") == (
        "sinfo: error: --json=v0.0.40 is not supported: only data_parser v0.0.42 is"
    )
