"""Advance reservations in the clients: scontrol's create/update/delete/show
reservation and ``sinfo -T``, with Slurm's keywords, layout and messages.

scontrol reads ``Key=Value`` words (``Key+=``/``Key-=`` for flags) with
Slurm's shortest abbreviations and sends them, keys made canonical, to the
controller, which owns every rule (controller/reservations.py).
"""

from __future__ import annotations

from corral.timefmt import format_hms, format_timestamp

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

#: scontrol's keywords in the order Slurm tries them: (canonical, name, shortest prefix).
KEYWORDS = (
    ("accounts", "Accounts", 1),
    ("comment", "Comment", 3),
    ("flags", "Flags", 2),
    ("", "Groups", 1),
    ("users", "Users", 1),
    ("reservationname", "ReservationName", 3),
    ("", "BurstBuffer", 2),
    ("starttime", "StartTime", 2),
    ("endtime", "EndTime", 1),
    ("duration", "Duration", 1),
    ("", "MaxStartDelay", 2),
    ("nodecnt", "NodeCnt", 5),
    ("nodecnt", "NodeCount", 5),
    ("", "CoreCnt", 5),
    ("", "CPUCnt", 5),
    ("nodes", "Nodes", 5),
    ("", "Features", 2),
    ("licenses", "Licenses", 2),
    ("partitionname", "PartitionName", 1),
    ("", "TRES", 1),
)


def _keyword(tag: str) -> tuple[str, str] | None:
    """(canonical key, Slurm's name) of ``tag``; canonical "" for keys Corral lacks."""
    lower = tag.lower()
    for key, name, shortest in KEYWORDS:
        if len(lower) >= shortest and name.lower().startswith(lower):
            return key, name
    return None


def parse_settings(words: Sequence[str], action: str) -> dict[str, str]:
    """scontrol's words as the controller's settings; ValueError with Slurm's text."""
    trailer = "No reservation created." if action == "create" else "No reservation update."
    settings: dict[str, str] = {}
    for word in words:
        tag, eq, value = word.partition("=")
        if not eq:
            if tag.lower().startswith("res"):
                continue  # "create reservation ..."
            raise ValueError(
                f"Misformatted parameter '{word}', most options have a parameter after '='.  "
                f"{trailer}"
            )
        op = ""
        if tag[-1:] in "+-":
            tag, op = tag[:-1], tag[-1]
        found = _keyword(tag)
        if found is None:
            raise ValueError(f"Unknown parameter {word}.  {trailer}")
        key, name = found
        if not key:
            raise ValueError(f"{name} is not supported by Corral.  {trailer}")
        if op and key != "flags":
            raise ValueError(
                f"The +=/-= notation is not supported when updating {name}.  {trailer}"
            )
        key = key + op
        if key in settings:
            raise ValueError(f"Parameter {word} specified more than once")
        settings[key] = value
    return settings


def _null(text: str) -> str:
    return text or "(null)"


def show(reservation: Mapping[str, Any], oneliner: bool) -> str:
    """One reservation as ``scontrol show reservation`` prints it (Slurm 24.11)."""
    r = reservation
    start, end = int(r["start"]), int(r["end"])
    duration = format_hms(end - start) if end >= start else "N/A"
    lines = [
        f"ReservationName={r['name']} StartTime={format_timestamp(start)} "
        f"EndTime={format_timestamp(end)} Duration={duration}",
        f"Nodes={_null(r['nodes'])} NodeCnt={r['node_count']} CoreCnt={r['core_count']} "
        f"Features=(null) PartitionName={_null(r['partition'])} Flags={r['flags']}",
        f"TRES={_null(r['tres'])}",
        f"Users={_null(r['users'])} Groups=(null) Accounts={_null(r['accounts'])} "
        f"Licenses={_null(r['licenses'])} State={r['state']} BurstBuffer=(null)",
        "MaxStartDelay=(null)",
    ]
    if oneliner:
        return " ".join(lines) + "\n"
    return "\n   ".join(lines) + "\n\n"


def sinfo_table(reservations: Sequence[Mapping[str, Any]], header: bool) -> str:
    """``sinfo -T``: name, state, start, end, duration and nodes of each reservation."""
    # As Slurm: names widen the column only when there is a header.
    width = max([9, *(len(r["name"]) for r in reservations)]) if header else 9
    row = f"{{:<{width}}}  {{:>8}}  {{:>19}}  {{:>19}}  {{:>11}}  {{}}\n"
    out = [row.format("RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST")]
    out = out if header else []
    for r in reservations:
        start, end = int(r["start"]), int(r["end"])
        out.append(
            row.format(
                r["name"],
                r["state"],
                format_timestamp(start),
                format_timestamp(end),
                format_hms(end - start),
                _null(r["nodes"]),
            )
        )
    return "".join(out)
