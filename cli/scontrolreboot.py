"""scontrol's ``reboot`` and ``cancel_reboot``, worded as Slurm 22.05's
``_process_reboot_command`` and ``scontrol_cancel_reboot``; the controller keeps
the rules (``controller/reboots.py``)."""

from __future__ import annotations

from corral.errors import SlurmError

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Sequence

    from cli.scontroljobs import Session


def reboot(session: Session, words: Sequence[str]) -> None:
    """``reboot [ASAP] [nextstate=RESUME|DOWN] [reason=..] ALL|<NodeList>``: the
    options come first (up to three), then one node list."""
    request: dict[str, object] = {}
    used = 1
    for word in words[1:4]:
        key, eq, value = word.partition("=")
        if word.upper() == "ASAP":
            request["asap"] = True
        elif eq and key.lower() == "reason":
            if not value:
                session.fail("missing reason")
                return
            request["reason"] = value
        elif eq and key.lower() == "nextstate":
            if not value:
                session.fail("missing state")
                return
            state = next((s for s in ("DOWN", "RESUME") if s.startswith(value.upper())), "")
            if not state:
                session.fail(f"Invalid state: {value}")
                session.fail("Valid states: DOWN, RESUME")
                return
            request["next_state"] = state
        else:
            continue
        used += 1
    if len(words) - used > 1:
        session.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
        return
    if len(words) - used < 1:
        session.fail("Missing node list. Specify ALL|<NodeList>", quiet_ok=False)
        return
    request["nodes"] = words[used]
    try:
        session.call("NodeReboot", request)
    except SlurmError as exc:
        session.fail(f"scontrol_reboot_nodes error: {exc}")


def cancel_reboot(session: Session, words: Sequence[str]) -> None:
    """``cancel_reboot <NodeList>``: forget reboots not yet issued."""
    if len(words) < 2:
        session.fail(f"missing argument for keyword:{words[0]}", quiet_ok=False)
        return
    if len(words) > 2:
        session.fail(f"too many arguments for keyword:{words[0]}", quiet_ok=False)
        return
    try:
        session.call("NodeReboot", {"nodes": words[1], "cancel": True})
    except SlurmError as exc:
        session.fail(f"slurm_update error: {exc}")
