"""``corral queues``' table (cli/queues.py) and document (corral/queuedoc.py): sshare's
layout, indented names, the ``|`` forms, no header, a blank unlimited Limit."""

from __future__ import annotations

from typing import Any

from cli.printfields import NOT_PARSABLE, PARSABLE, PARSABLE2
from cli.queues import table
from corral.queuedoc import queues_document


def _resource(name: str, limit: int | None, **amounts: int) -> dict[str, Any]:
    numbers = dict.fromkeys(("guarantee", "fair_share", "allocated", "borrowed", "lent"), 0)
    return {"resource": name, "limit": limit, "pending": 0, **numbers, **amounts}


def _queue(name: str, parent: str, depth: int, *resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "parent": parent,
        "depth": depth,
        "priority": 0 if depth < 2 else 3,
        "over_quota_weight": 1.0 if depth < 2 else 2.5,
        "running_jobs": depth,
        "pending_jobs": 1,
        "resources": list(resources),
    }


REPLY = {
    "now": 1_700_000_000,
    "queues": [
        _queue("root", "", 0, _resource("gres/gpu", None, guarantee=8, fair_share=8)),
        _queue("ai", "root", 1, _resource("gres/gpu", 8, guarantee=6, fair_share=8)),
        _queue(
            "teama",
            "ai",
            2,
            _resource("cpu", None),
            _resource("gres/gpu", 6, guarantee=3, fair_share=5, allocated=5, borrowed=2, pending=1),
        ),
    ],
}
DOC = queues_document(REPLY)


def test_the_document_says_null_for_the_roots_parent_and_an_unlimited_limit() -> None:
    root = DOC["queues"][0]
    assert root["parent"] is None and root["resources"][0]["limit"] is None
    assert DOC["queues"][2]["resources"][1] == {
        "resource": "gres/gpu",
        "guarantee": 3,
        "limit": 6,
        "fair_share": 5,
        "allocated": 5,
        "borrowed": 2,
        "lent": 0,
        "pending": 1,
    }


def test_the_table_indents_names_as_sshare_indents_accounts() -> None:
    lines = table(DOC, NOT_PARSABLE).splitlines()
    assert lines[0].split() == [
        "Queue", "Resource", "Guarantee", "Limit", "FairShare", "Allocated", "Borrowed",
        "Lent", "Pending", "RunJobs", "PendJobs", "Priority", "OverQuotaW",
    ]  # fmt: skip
    assert set(lines[1]) == {"-", " "}
    # Queue (20 wide, left), Resource (12, left), Guarantee and Limit (10, right)
    assert lines[2][:56] == "root".ljust(21) + "gres/gpu".ljust(13) + "8".rjust(10) + " " * 12
    ai = " ai".ljust(21) + "gres/gpu".ljust(13) + "6".rjust(10) + " " + "8".rjust(10) + " "
    assert lines[3][:56] == ai
    assert lines[4][:34] == "  teama".ljust(21) + "cpu".ljust(13)
    assert lines[5].split() == ["teama", "gres/gpu", "3", "6", "5", "5", "2", "0", "1", "2", "1",
                                "3", "2.5"]  # fmt: skip
    assert len({len(line) for line in lines}) == 1  # fixed-width columns


def test_parsable_forms_and_no_header() -> None:
    two = table(DOC, PARSABLE2).splitlines()
    assert two[0].startswith("Queue|Resource|Guarantee|Limit|") and two[0].endswith("OverQuotaW")
    assert two[1] == "root|gres/gpu|8||8|0|0|0|0|0|1|0|1"
    assert two[4] == "  teama|gres/gpu|3|6|5|5|2|0|1|2|1|3|2.5"
    one = table(DOC, PARSABLE, header=False).splitlines()
    assert one[0] == "root|gres/gpu|8||8|0|0|0|0|0|1|0|1|" and len(one) == 4
