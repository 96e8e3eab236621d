"""``corral queues``: every queue of queues.conf with its quota, fair share and
holdings now, one line per queue and governed resource, laid out as sshare lays
out accounts.

The controller computes the numbers (the Queues RPC,
``controller/core/queuestatus.py``) from the view the scheduler's next pass
starts from. The table follows Slurm's ``print_fields`` (``cli/printfields.py``):
names indented one space per level below the root, as sshare indents accounts;
``-p``/``-P`` the ``|``-separated forms scripts split; ``-n`` no header. An
unlimited queue's Limit is blank. ``--json`` prints
``corral.queuedoc.queues_document``, the document the REST gateway serves.
"""

from __future__ import annotations

import sys

from cli.boundary import UsageError, connect, run
from cli.corral_options import QUEUES
from cli.options import parse
from cli.printfields import NOT_PARSABLE, PARSABLE, PARSABLE2, Printer
from corral.queuedoc import queues_document

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

USAGE = "Usage: corral queues [-p | -P] [-n] [--json]"

#: Column title, width (negative: left-justified), and the document's key.
FIELDS: tuple[tuple[str, int, str], ...] = (
    ("Queue", -20, "name"),
    ("Resource", -12, "resource"),
    ("Guarantee", 10, "guarantee"),
    ("Limit", 10, "limit"),
    ("FairShare", 10, "fair_share"),
    ("Allocated", 10, "allocated"),
    ("Borrowed", 10, "borrowed"),
    ("Lent", 10, "lent"),
    ("Pending", 10, "pending"),
    ("RunJobs", 8, "running_jobs"),
    ("PendJobs", 8, "pending_jobs"),
    ("Priority", 8, "priority"),
    ("OverQuotaW", 10, "over_quota_weight"),
)


def queues(argv: list[str]) -> int:
    found, operands = parse(QUEUES, argv, permute=True)
    keys = {option.key for option, _ in found}
    if "help" in keys:
        print(USAGE)
        return 0
    if operands:
        raise UsageError(USAGE)
    parsable = NOT_PARSABLE
    for option, _ in found:  # the last of -p and -P wins, as in sshare
        if option.key == "parsable":
            parsable = PARSABLE
        elif option.key == "parsable2":
            parsable = PARSABLE2
    doc = queues_document(connect().call("Queues", {}))
    if "json" in keys:
        import json  # imports re: only for --json

        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(table(doc, parsable, header="noheader" not in keys))
    return 0


def table(doc: Mapping[str, Any], parsable: int, *, header: bool = True) -> str:
    """The document as sshare-style lines: one per queue and resource."""
    printer = Printer(parsable)
    out = [printer.header(FIELDS)] if header else []
    last = len(FIELDS) - 1
    for queue in doc["queues"]:
        name = " " * queue["depth"] + queue["name"]
        for amounts in queue["resources"]:
            cells = []
            for index, (_, width, key) in enumerate(FIELDS):
                end = index == last
                if key == "name":
                    cells.append(printer.text(name, width, end))
                elif key == "resource":
                    cells.append(printer.text(amounts["resource"], width, end))
                elif key == "over_quota_weight":
                    cells.append(printer.text(f"{queue[key]:g}", width, end))
                elif key in amounts:
                    cells.append(printer.unsigned(amounts[key], width, end))
                else:
                    cells.append(printer.text(str(queue[key]), width, end))
            out.append("".join(cells) + "\n")
    return "".join(out)


def main() -> None:
    run("corral queues", queues)


if __name__ == "__main__":
    main()
