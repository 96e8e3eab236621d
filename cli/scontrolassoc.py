"""``scontrol show assoc_mgr``: the controller's cached associations, users and QOS.

Arguments and messages are Slurm 22.05's (``users=``, ``accounts=``, ``qos=``
as comma lists, ``flags=`` naming any of users, assoc and qos; a bad flag or
an option without a value is reported on stderr without failing the
command, an unknown word fails it). Records print as slurmctld's association
manager holds them: each limit with its current use in parentheses (``N``
where there is no limit), one attribute group a line, or one record a line
with ``-o``.
"""

from __future__ import annotations

from corral.errors import SlurmError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, Protocol, TextIO

    class Shell(Protocol):
        """What of scontrol's session this command uses."""

        oneliner: bool
        quiet: bool
        err: TextIO

        def call(self, method: str, request: dict[str, Any]) -> Any: ...
        def fail(self, text: str, *, quiet_ok: bool = True) -> None: ...
        def print(self, text: str = "", end: str = "\n") -> None: ...


#: AssocMgrRequest's flags.
ASSOC, USERS, QOS = 1, 2, 4
#: The options, in the order Slurm tries a prefix against them.
OPTIONS = ("accounts", "flags", "qos", "users")


def _names(text: str) -> list[str]:
    return [n for n in text.split(",") if n]


def show(shell: Shell, words: Sequence[str]) -> None:
    """``show assoc_mgr [users=..] [accounts=..] [qos=..] [flags=..]`` (``words``:
    what follows ``assoc_mgr``)."""
    request: dict[str, Any] = {"users": [], "accounts": [], "qos": [], "flags": 0}
    for word in words:
        tag, sep, value = word.partition("=")
        if not sep or not value:
            print(f"No value given for option {word}", file=shell.err)
            return
        option = next((o for o in OPTIONS if tag and o.startswith(tag.lower())), None)
        if option is None:
            shell.fail(f"invalid entity: {word} for keyword:show assoc_mgr")
            return
        if option != "flags":
            for name in _names(value):
                if name not in request[option]:
                    request[option].append(name)
            continue
        lowered = value.lower()
        for bit, word_ in ((USERS, "users"), (ASSOC, "assoc"), (QOS, "qos")):
            if word_ in lowered:
                request["flags"] |= bit
        if not request["flags"]:
            print(
                f"invalid flag '{value}', valid options are 'Assoc, QOS, and/or Users'",
                file=shell.err,
            )
            return
    flags = request["flags"] or ASSOC | USERS | QOS
    try:
        reply = shell.call("AssocMgr", request)
    except SlurmError as exc:
        shell.fail(f"slurm_load_assoc_mgr_info error: {exc}")
        return
    shell.print(render(reply, flags, oneliner=shell.oneliner), end="")


def render(reply: Mapping[str, Any], flags: int, *, oneliner: bool = False) -> str:
    """The text scontrol prints for an AssocMgrReply (decoded to a dict)."""
    out = Writer(list(reply["tres"]), oneliner)
    out.put("Current Association Manager state\n")
    none = "No {} currently cached in Slurm."
    out.section("User Records", none.format("users"), reply["users"], USERS & flags)
    for user in reply["users"]:
        u = user["user"]
        out.put(
            f"UserName={u['name']}({user['uid']}) DefAccount={u['default_account']} "
            f"DefWckey=(null) AdminLevel={u['admin_level'] or 'None'}\n"
        )
    assocs = reply["associations"]
    out.section("Association Records", none.format("associations"), assocs, ASSOC & flags)
    for assoc in assocs:
        out.association(reply["cluster"], assoc)
    out.section("QOS Records", none.format("QOS"), reply["qos"], QOS & flags)
    for qos in reply["qos"]:
        out.qos(qos)
    return "".join(out.parts)


def _cap(value: int | None) -> str:
    return "N" if value is None else str(value)


def _preempt_mode(mode: str) -> str:
    """A QOS's PreemptMode as Slurm names it (unset and "cluster" are OFF)."""
    return "OFF" if mode in ("", "cluster") else mode.upper()


class Writer:
    """The text of one reply, built record by record."""

    def __init__(self, tres: list[str], oneliner: bool) -> None:
        self.tres = tres
        self.oneliner = oneliner
        self.nl = " " if oneliner else "\n    "
        self.parts: list[str] = []

    def put(self, text: str) -> None:
        self.parts.append(text)

    def section(self, title: str, empty: str, records: list[Any], asked: int) -> None:
        edge = "" if self.oneliner else "\n"
        if records:
            self.put(f"{edge}{title}{edge}\n")
        elif asked:
            self.put(f"{edge}{empty}{edge}\n")

    def tres_line(
        self, name: str, limits: Mapping[str, int], used: Mapping[str, int] | None, divide: int = 1
    ) -> str:
        """``name=`` and each TRES: with ``used``, every TRES as ``limit(use)``;
        without, only the TRES that have a limit."""
        shown = []
        for tres in self.tres:
            limit = limits.get(tres)
            if used is None:
                if limit is not None:
                    shown.append(f"{tres}={limit}")
                continue
            shown.append(f"{tres}={_cap(limit)}({int(used.get(tres, 0)) // divide})")
        return f"{name}={','.join(shown)}"

    def association(self, cluster: str, a: Mapping[str, Any]) -> None:
        m, used, nl = a["limits"], a["used"], self.nl
        user = f"UserName={m['user']}({a['uid']}) " if m["user"] else "UserName= "
        shares = m["shares"] if m["shares"] >= 0 else 0x7FFFFFFF  # Fairshare=parent
        parent = "ParentAccount= "  # a user's and root's: none shown
        if m["parent"] and not m["user"]:
            parent = f"ParentAccount={m['parent']}({m['parent_id']}) "
        lines = [
            f"ClusterName={cluster} Account={m['account']} {user}Partition={m['partition']} "
            f"Priority={m['priority'] or 0} ID={m['id']}",
            f"SharesRaw/Norm/Level/Factor={shares}/{a['norm_shares']:.2f}/"
            f"{a['level_shares']}/{a['fs_factor']:.2f}",
            f"UsageRaw/Norm/Efctv={a['usage_raw']:.2f}/{a['usage_norm']:.2f}/"
            f"{a['usage_efctv']:.2f}",
            f"{parent}Lft={m['lft']} DefAssoc={'Yes' if a['is_default'] else 'No'}",
            f"GrpJobs={_cap(m['grp_jobs'])}({used['jobs']}) GrpJobsAccrue=N({used['accruing']})",
            f"GrpSubmitJobs={_cap(m['grp_submit'])}({used['submitted']}) "
            f"GrpWall={_cap(m['grp_wall'])}({used['wall'] / 60:.2f})",
            self.tres_line("GrpTRES", m["grp_tres"], used["tres"]),
            self.tres_line("GrpTRESMins", m["grp_tres_mins"], used["tres_secs"], 60),
            self.tres_line("GrpTRESRunMins", m["grp_tres_run_mins"], used["run_secs"], 60),
            _maximum("MaxJobs", m["max_jobs"], used["jobs"])
            + "MaxJobsAccrue= "
            + _maximum("MaxSubmitJobs", m["max_submit"], used["submitted"])
            + f"MaxWallPJ={'' if m['max_wall'] is None else m['max_wall']}",
            self.tres_line("MaxTRESPJ", m["max_tres"], None),
            self.tres_line("MaxTRESPN", m["max_tres_per_node"], None),
            self.tres_line("MaxTRESMinsPJ", m["max_tres_mins"], None),
            "MinPrioThresh=",
        ]
        self.put(nl.join(lines) + "\n")

    def qos(self, q: Mapping[str, Any]) -> None:
        m, used, nl = q["limits"], q["used"], self.nl
        lines = [
            f"QOS={m['name']}({m['id']})",
            f"UsageRaw={q['usage_raw']:f}",
            f"GrpJobs={_cap(m['grp_jobs'])}({used['jobs']}) "
            f"GrpJobsAccrue=N({used['accruing']}) "
            f"GrpSubmitJobs={_cap(m['grp_submit'])}({used['submitted']}) "
            f"GrpWall={_cap(m['grp_wall'])}({used['wall'] / 60:.2f})",
            self.tres_line("GrpTRES", m["grp_tres"], used["tres"]),
            self.tres_line("GrpTRESMins", m["grp_tres_mins"], used["tres_secs"], 60),
            self.tres_line("GrpTRESRunMins", m["grp_tres_run_mins"], used["run_secs"], 60),
            f"MaxWallPJ={'' if m['max_wall'] is None else m['max_wall']}",
            self.tres_line("MaxTRESPJ", m["max_tres"], None),
            self.tres_line("MaxTRESPN", m["max_tres_per_node"], None),
            self.tres_line("MaxTRESMinsPJ", m["max_tres_mins"], None),
            "MinPrioThresh= ",
            self.tres_line("MinTRESPJ", m["min_tres"], None),
            f"PreemptMode={_preempt_mode(m['preempt_mode'])}",
            f"Priority={m['priority']}",
            "Account Limits" + self._uses(q["accounts"], m, "PA", "No Accounts"),
            "User Limits" + self._uses(q["users"], m, "PU", "No Users"),
        ]
        self.put(nl.join(lines) + "\n")

    def _uses(
        self, uses: list[Mapping[str, Any]], m: Mapping[str, Any], kind: str, none: str
    ) -> str:
        """A QOS's per-account (``kind`` PA) or per-user (PU) limits with each one's use."""
        one = self.oneliner
        head = "=" if one else ""
        if not uses:
            return f"{head}{'' if one else chr(10) + ' ' * 8}{none}"
        per = "pa" if kind == "PA" else "pu"
        text = head
        for use in uses:
            who = use["name"] if kind == "PA" else f"{use['name']}({use['uid']})"
            inner = " " if one else "\n        "
            text += (
                f"{' ' if one else chr(10) + ' ' * 6}{who}{'={' if one else inner}"
                f"MaxJobs{kind}={_cap(m[f'max_jobs_{per}'])}({use['jobs']}) "
                f"MaxJobsAccrue{kind}=N({use['accruing']}) "
                f"MaxSubmitJobs{kind}={_cap(m[f'max_submit_{per}'])}({use['submitted']}){inner}"
                + self.tres_line(f"MaxTRES{kind}", m[f"max_tres_{per}"], use["tres"])
                + ("}" if one else "")
            )
        return text


def _maximum(name: str, cap: int | None, used: int) -> str:
    return f"{name}= " if cap is None else f"{name}={cap}({used}) "
