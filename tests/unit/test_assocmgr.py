"""scontrol show assoc_mgr: dbd's ids and tree positions, the controller's view of
use and PrivateData, and the text scontrol prints (Slurm 22.05's)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from cli import scontrolassoc
from cli.scontrol import Session
from controller import assocmgr
from controller.associations import AssocSet
from controller.core.fairshare import ShareTree, Usage
from controller.jobstate import JobState, Reason
from controller.model import Job
from controller.principal import Principal
from corral.wire import codec
from corral.wire import corral_pb2 as pb
from dbd.admin import Admin
from dbd.enforced import enforced
from tests.unit.test_dbd_admin import admin, run

__all__ = ["admin"]  # the fixture: dbd with cluster "bench" registered, on each backend

NOW = 1_700_000_000
UIDS = {"ann": 1001, "bob": 1002}


def test_dbd_sends_ids_parents_and_nested_set_positions(admin: Admin) -> None:
    run(admin, "add", "account", {"name": "lab"})
    run(admin, "add", "account", {"name": "sub"}, parent="lab")
    run(admin, "add", "user", {"name": "eve"}, account="lab")
    run(admin, "modify", "qos", {"name": "normal"}, mintres="cpu=2", grptresrunmins="cpu=600")
    reply = enforced(admin.engine, "bench")
    by = {(a.account, a.user): a for a in reply.associations}
    root, lab, sub, eve = by["root", ""], by["lab", ""], by["sub", ""], by["lab", "eve"]
    assert (root.parent_id, lab.parent_id, sub.parent_id, eve.parent_id) == (
        0,
        root.id,
        lab.id,
        lab.id,
    )
    assert by["root", "root"].parent_id == root.id
    # Newest child leftmost, as slurmdbd inserts: root(1) lab(2) eve(3-4) sub(5-6)
    # lab's right 7, root's user 8-9.
    assert [root.lft, lab.lft, eve.lft, sub.lft, by["root", "root"].lft] == [1, 2, 3, 5, 8]
    normal = next(q for q in reply.qos if q.name == "normal")
    assert normal.id == 1
    assert (dict(normal.min_tres), dict(normal.grp_tres_run_mins)) == ({"cpu": 2}, {"cpu": 600})


def _cache() -> AssocSet:
    def assoc(account: str, user: str, parent: str, ident: int, lft: int, **kw: Any) -> Any:
        return pb.AssociationLimits(
            account=account, user=user, parent=parent, shares=1, qos=["normal"], id=ident,
            parent_id=kw.pop("parent_id", 0), lft=lft, **kw,
        )  # fmt: skip

    return AssocSet.from_reply(
        pb.AssociationsReply(
            associations=[
                assoc("root", "", "", 1, 1),
                assoc("lab", "", "root", 3, 2, parent_id=1, grp_jobs=4, grp_tres={"cpu": 8}),
                assoc("lab", "ann", "lab", 4, 3, parent_id=3, max_jobs=2),
                assoc("lab", "bob", "lab", 5, 5, parent_id=3),
            ],
            users=[
                pb.AccountingUser(name="ann", default_account="lab", admin_level="None"),
                pb.AccountingUser(name="bob", default_account="lab", admin_level="None"),
            ],
            qos=[pb.QosLimitsRecord(name="normal", id=1, max_jobs_pu=3, usage_factor=1.0)],
        )
    )


def _job(job_id: int, user: str, state: JobState, **kw: Any) -> Job:
    running = state == JobState.RUNNING
    return Job(
        job_id=job_id, name="j", uid=UIDS[user], gid=1000, user=user, group="g",
        state=state, reason=Reason.NONE, submit_time=NOW - 100, partitions=("debug",),
        account="lab", partition="debug" if running else "", nodes=("n1",) if running else (),
        cpus=(2,) if running else (), min_cpus=2, time_limit=10,
        start_time=NOW - 60 if running else 0, eligible_time=NOW - 100, **kw,
    )  # fmt: skip


def _who(user: str, uid: int = 4242, **kw: Any) -> Principal:
    return Principal(uid, uid, user, frozenset(), **kw)


def _reply(who: Principal, private: frozenset[str] = frozenset(), **asked: Any) -> Any:
    jobs = [
        _job(1, "ann", JobState.RUNNING),
        _job(2, "ann", JobState.PENDING),
        _job(3, "bob", JobState.PENDING, held="user"),
    ]
    wanted = assocmgr.Wanted.of(pb.AssocMgrRequest(**asked), who, private)
    reply = assocmgr.reply(
        "bench", _cache(), jobs, ShareTree((), {}, False), Usage(), wanted, who, NOW
    )
    return codec.decode("AssocMgrReply", reply.SerializeToString())


def test_use_counts_up_the_tree() -> None:
    reply = _reply(_who("root", 0))
    used = {(a["limits"]["account"], a["limits"]["user"]): a["used"] for a in reply["associations"]}
    assert (used["lab", "ann"]["jobs"], used["lab", "ann"]["submitted"]) == (1, 2)
    assert used["lab", "ann"]["accruing"] == 1  # the held job accrues nothing
    assert (used["lab", ""]["jobs"], used["lab", ""]["submitted"]) == (1, 3)
    assert used["root", ""]["tres"]["cpu"] == 2
    assert used["lab", ""]["run_secs"]["cpu"] == 2 * (600 - 60)
    qos = reply["qos"][0]
    assert [u["name"] for u in qos["users"]] == ["ann", "bob"]
    assert [(a["name"], a["jobs"], a["submitted"]) for a in qos["accounts"]] == [("lab", 1, 3)]


def test_private_usage_leaves_a_user_their_own_associations() -> None:
    hidden = frozenset({"usage", "users"})
    mine = _reply(_who("bob"), hidden)
    assert [(a["limits"]["account"], a["limits"]["user"]) for a in mine["associations"]] == [
        ("lab", "bob")
    ]
    assert [u["user"]["name"] for u in mine["users"]] == ["bob"]
    assert [q["limits"]["name"] for q in mine["qos"]] == ["normal"]  # QOS: for all
    coordinator = _reply(_who("bob", coordinates=frozenset({"lab"})), hidden)
    assert len(coordinator["associations"]) == 3
    assert len(_reply(_who("bob", admin_level="Operator"), hidden)["associations"]) == 4
    assert len(_reply(_who("bob"))["associations"]) == 4  # without PrivateData


def test_filters_and_flags() -> None:
    reply = _reply(_who("root", 0), users=["ANN"], flags=1)
    assert [a["limits"]["user"] for a in reply["associations"]] == ["", "", "ann"]
    assert reply["users"] == [] and reply["qos"] == []
    assert _reply(_who("root", 0), accounts=["root"], qos=["nope"])["qos"] == []
    assert [q["limits"]["name"] for q in _reply(_who("root", 0), qos=["NORMAL"])["qos"]] == [
        "normal"
    ]


EXPECTED = """\
Current Association Manager state

User Records

UserName=ann(4294967294) DefAccount=lab DefWckey=(null) AdminLevel=None

Association Records

ClusterName=bench Account=lab UserName= Partition= Priority=0 ID=3
    SharesRaw/Norm/Level/Factor=1/0.00/1/0.00
    UsageRaw/Norm/Efctv=0.00/1.00/0.00
    ParentAccount=root(1) Lft=2 DefAssoc=No
    GrpJobs=4(1) GrpJobsAccrue=N(1)
    GrpSubmitJobs=N(3) GrpWall=N(0.00)
    GrpTRES=cpu=8(2),mem=N(0),energy=N(0),node=N(1),billing=N(2),fs/disk=N(0),vmem=N(0),pages=N(0)
    GrpTRESMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vmem=N(0),pages=N(0)
    GrpTRESRunMins=cpu=N(18),mem=N(0),energy=N(0),node=N(9),billing=N(18),fs/disk=N(0),vmem=N(0),pages=N(0)
    MaxJobs= MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=
    MaxTRESPJ=
    MaxTRESPN=
    MaxTRESMinsPJ=
    MinPrioThresh=

QOS Records

QOS=normal(1)
    UsageRaw=0.000000
    GrpJobs=N(1) GrpJobsAccrue=N(1) GrpSubmitJobs=N(3) GrpWall=N(0.00)
    GrpTRES=cpu=N(2),mem=N(0),energy=N(0),node=N(1),billing=N(2),fs/disk=N(0),vmem=N(0),pages=N(0)
    GrpTRESMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vmem=N(0),pages=N(0)
    GrpTRESRunMins=cpu=N(18),mem=N(0),energy=N(0),node=N(9),billing=N(18),fs/disk=N(0),vmem=N(0),pages=N(0)
    MaxWallPJ=
    MaxTRESPJ=
    MaxTRESPN=
    MaxTRESMinsPJ=
    MinPrioThresh=<SP>
    MinTRESPJ=
    PreemptMode=OFF
    Priority=0
    Account Limits
      lab
        MaxJobsPA=N(1) MaxJobsAccruePA=N(1) MaxSubmitJobsPA=N(3)
        MaxTRESPA=cpu=N(2),mem=N(0),energy=N(0),node=N(1),billing=N(2),fs/disk=N(0),vmem=N(0),pages=N(0)
    User Limits
        No Users
""".replace("<SP>", " ")


def test_the_text_is_slurms() -> None:
    reply = _reply(_who("root", 0), accounts=["lab"], users=["ann"])
    reply["associations"] = reply["associations"][:1]
    reply["users"] = reply["users"][:1]
    reply["qos"][0]["users"] = []
    assert scontrolassoc.render(reply, 7) == EXPECTED


def test_one_record_a_line_with_oneliner() -> None:
    reply = _reply(_who("root", 0), flags=4)
    text = scontrolassoc.render(reply, 4, oneliner=True)
    lines = text.splitlines()
    assert lines[:2] == ["Current Association Manager state", "QOS Records"]
    assert len(lines) == 3
    assert " Account Limits= lab={MaxJobsPA=N(1) " in lines[2]
    assert " User Limits= ann(1001)={MaxJobsPU=3(1) " in lines[2]


def test_nothing_cached_is_said_for_what_was_asked() -> None:
    empty = {"cluster": "bench", "tres": [], "users": [], "associations": [], "qos": []}
    assert scontrolassoc.render(empty, 2) == (
        "Current Association Manager state\n\nNo users currently cached in Slurm.\n\n"
    )


class _Shell:
    """scontrol's session as the command sees it, answering from a fixed reply."""

    def __init__(self) -> None:
        self.oneliner = self.quiet = False
        self.out, self.err = io.StringIO(), io.StringIO()
        self.asked: list[dict[str, Any]] = []
        self.exit_code = 0

    def call(self, method: str, request: dict[str, Any]) -> Any:
        self.asked.append(request)
        return {"cluster": "c", "tres": [], "users": [], "associations": [], "qos": []}

    def fail(self, text: str, *, quiet_ok: bool = True) -> None:
        self.exit_code = 1
        print(text, file=self.err)

    def print(self, text: str = "", end: str = "\n") -> None:
        self.out.write(text + end)


@pytest.mark.parametrize(
    ("words", "asked", "err", "code"),
    [
        (["u=ann,bob", "acc=lab", "fl=QOS,users"],
         {"users": ["ann", "bob"], "accounts": ["lab"], "qos": [], "flags": 6}, "", 0),
        (["users="], None, "No value given for option users=\n", 0),
        (["flags=nope"], None,
         "invalid flag 'nope', valid options are 'Assoc, QOS, and/or Users'\n", 0),
        (["colour=red"], None, "invalid entity: colour=red for keyword:show assoc_mgr\n", 1),
    ],
    ids=["abbreviated options", "no value", "bad flag", "unknown option"],
)  # fmt: skip
def test_options_as_slurm_reads_them(
    words: list[str], asked: dict[str, Any] | None, err: str, code: int
) -> None:
    shell = _Shell()
    scontrolassoc.show(shell, words)
    assert shell.asked == ([asked] if asked else [])
    assert (shell.err.getvalue(), shell.exit_code) == (err, code)


class _Client:
    """The controller's end of the framed socket, answering AssocMgr from a fixed reply."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def call(self, method: str, request: dict[str, Any]) -> Any:
        self.asked.append((method, request))
        return self.reply


def test_scontrol_dispatches_show_assoc_mgr_with_several_options() -> None:
    reply = _reply(_who("root", 0), flags=4)
    session = Session(io.StringIO(), io.StringIO())
    session._client = client = _Client(reply)
    session.oneliner = True
    session.run(["show", "assoc", "users=a", "accounts=b", "flags=qos"])
    assert client.asked == [
        ("AssocMgr", {"users": ["a"], "accounts": ["b"], "qos": [], "flags": 4})
    ]
    assert session.out.getvalue() == scontrolassoc.render(reply, 4, oneliner=True)
    assert session.exit_code == 0
