"""sacctmgr's command words: entities, conditions and settings, as Slurm 24.11 reads them.

A command is ``VERB ENTITY WORD...``. Each word is a condition (which entities)
or a setting (what to give them), ``key=value``, ``key+=value`` or
``key-=value`` (lists), or a bare word: a name, a flag such as ``withassoc``,
or ``where``/``set``, which switch between conditions and settings in
``modify``. Keys may be abbreviated as far as Slurm allows and are matched in
Slurm's order, so ``sacctmgr`` here and Slurm's accept and reject the same
spellings, and word the rejections the same way.

What goes to the accounting daemon is Slurm's meaning, not the spelling: each
key becomes one canonical lower-case word (``Names=``, ``Accounts=``,
``Acct=`` or a bare word all become ``name`` for ``account``; ``Shares=`` and
``FairShare=`` become ``fairshare``), list values are lower-cased,
de-duplicated and joined with commas, and ``+=``/``-=`` put a ``+``/``-`` in
front of the value.
"""

from __future__ import annotations

from cli.halt import Halt
from cli.sacctmgr.fields import abbreviates

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Sequence

# ----------------------------------------------------------------- entities
#: ``(verb word, least, entity spellings)``; an entity spelling is
#: ``(word, least, kind)`` and a kind of None is an entity Slurm has and Corral not.
_Entities = tuple[tuple[str, int, str | None], ...]

_ADD_ENTITIES: _Entities = (
    ("Account", 1, "account"),
    ("Acct", 4, "account"),
    ("Cluster", 2, "cluster"),
    ("Coordinator", 2, "coordinator"),
    ("Federation", 1, None),
    ("QOS", 1, "qos"),
    ("Resource", 1, "resource"),
    ("User", 1, "user"),
)
_LIST_ENTITIES: _Entities = (
    ("Accounts", 2, "account"),
    ("Acct", 4, "account"),
    ("Associations", 2, "association"),
    ("Clusters", 2, "cluster"),
    ("Configuration", 2, None),
    ("Events", 1, "event"),
    ("Federation", 1, None),
    ("Instances", 1, None),
    ("Problems", 1, None),
    ("RunawayJobs", 2, None),
    ("OrphanJobs", 1, None),
    ("LostJobs", 1, None),
    ("QOS", 1, "qos"),
    ("Resource", 4, "resource"),
    ("Reservations", 4, "reservation"),
    ("Resv", 4, "reservation"),
    ("Stats", 1, None),
    ("Transactions", 1, None),
    ("Txn", 1, None),
    ("Users", 1, "user"),
    ("WCKeys", 1, None),
    ("tres", 2, "tres"),
)
_MODIFY_ENTITIES: _Entities = (
    ("Accounts", 1, "account"),
    ("Acct", 4, "account"),
    ("Clusters", 5, "cluster"),
    ("Federation", 1, None),
    ("Job", 1, None),
    ("QOSs", 1, "qos"),
    ("Resource", 1, "resource"),
    ("Users", 1, "user"),
)
_DELETE_ENTITIES: _Entities = (
    ("Accounts", 1, "account"),
    ("Acct", 4, "account"),
    ("Clusters", 2, "cluster"),
    ("Coordinators", 2, "coordinator"),
    ("Federations", 1, None),
    ("QOS", 2, "qos"),
    ("Resource", 1, "resource"),
    ("Users", 1, "user"),
)

#: Per verb: its entities and what Slurm says when none matches.
ENTITIES: dict[str, tuple[_Entities, str]] = {
    "add": (
        _ADD_ENTITIES,
        "No valid entity in add command\nInput line must include "
        '"Account", "Cluster", "Coordinator", "Federation", "QOS", "Resource", or "User"',
    ),
    "list": (
        _LIST_ENTITIES,
        "No valid entity in list command\nInput line must include "
        '"Account", "Association", "Cluster", "Configuration",\n"Event", '
        '"Federation", "Problem", "QOS", "Resource", "Reservation",\n"RunAwayJobs", '
        '"Stats", "Transaction", "TRES", "User", or "WCKey"',
    ),
    "modify": (
        _MODIFY_ENTITIES,
        "No valid entity in modify command\nInput line must include "
        '"Account", "Cluster", "Federation", "Job", "QOS", "Resource" or "User"',
    ),
    "delete": (
        _DELETE_ENTITIES,
        "No valid entity in delete command\nInput line must include "
        '"Account", "Cluster", "Coordinator", "Federation", "QOS", "Resource", or "User"',
    ),
}


def entity(verb: str, word: str | None) -> str:
    """The kind ``word`` names after ``verb``; ``Halt(1)`` with Slurm's words if none."""
    spellings, complaint = ENTITIES[verb]
    if word:
        for full, least, kind in spellings:
            if abbreviates(word, full, least):
                if kind is None:
                    raise Halt(1, f"sacctmgr: error: {verb} {full} is not supported by Corral")
                return kind
    raise Halt(1, *complaint.split("\n"))


# ----------------------------------------------------------------- keys
#: A key table: ``(spellings, canonical key)``, spellings as ``"Word/least ..."``.
_Keys = tuple[tuple[str, str], ...]

#: Association limits and placement: ``sacctmgr_set_assoc_rec``.
ASSOC_REC: _Keys = (
    ("Comment/2", "comment"),
    ("DefaultQOS/8", "defaultqos"),
    ("FairShare/1 Shares/1", "fairshare"),
    ("GrpCPUMins/7", "grpcpumins"),
    ("GrpCPURunMins/7", "grpcpurunmins"),
    ("GrpCpus/7", "grpcpus"),
    ("GrpJobs/4", "grpjobs"),
    ("GrpJobsAccrue/8", "grpjobsaccrue"),
    ("GrpMemory/4", "grpmemory"),
    ("GrpNodes/4", "grpnodes"),
    ("GrpSubmitJobs/4", "grpsubmitjobs"),
    ("GrpTRES/7", "grptres"),
    ("GrpTRESMins/8", "grptresmins"),
    ("GrpTRESRunMins/8", "grptresrunmins"),
    ("GrpWall/4", "grpwall"),
    ("MaxCPUMinsPerJob/7", "maxcpuminsperjob"),
    ("MaxCPURunMins/7", "maxcpurunmins"),
    ("MaxCpusPerJob/7", "maxcpusperjob"),
    ("MaxJobs/4", "maxjobs"),
    ("MaxJobsAccrue/8", "maxjobsaccrue"),
    ("MaxNodesPerJob/4", "maxnodesperjob"),
    ("MinPrioThresh/4", "minpriothresh"),
    ("MaxSubmitJobs/4", "maxsubmitjobs"),
    ("MaxTRES/7 MaxTRESPJ/9 MaxTRESPerJob/11", "maxtres"),
    ("MaxTRESPerNode/11 MaxTRESPN/9", "maxtrespernode"),
    ("MaxTRESMinsPerJob/8 MaxTRESMinsPJ/13", "maxtresmins"),
    ("MaxTRESRunMins/8", "maxtresrunmins"),
    ("MaxWallDurationPerJob/4", "maxwall"),
    ("Parent/2", "parent"),
    ("Priority/2", "priority"),
    ("QosLevel/1", "qos"),
)

#: Association conditions: ``sacctmgr_set_assoc_cond``.
ASSOC_COND: _Keys = (
    ("Accounts/2 Acct/4", "account"),
    ("Ids/1 Associations/2", "id"),
    ("Clusters/1", "cluster"),
    ("DefaultQOS/8", "defaultqos"),
    ("Partitions/3", "partition"),
    ("Parents/4", "parent"),
    ("QosLevel/1", "qos"),
    ("Users/1", "user"),
)

_QOS_REC: _Keys = (
    ("Description/1", "description"),
    ("Flags/2", "flags"),
    ("GraceTime/3", "gracetime"),
    ("GrpCPUMins/7", "grpcpumins"),
    ("GrpCPURunMins/7", "grpcpurunmins"),
    ("GrpCPUs/7", "grpcpus"),
    ("GrpJobs/4", "grpjobs"),
    ("GrpJobsAccrue/8", "grpjobsaccrue"),
    ("GrpMemory/4", "grpmemory"),
    ("GrpNodes/4", "grpnodes"),
    ("GrpSubmitJobs/4", "grpsubmitjobs"),
    ("GrpTRES/7", "grptres"),
    ("GrpTRESMins/8", "grptresmins"),
    ("GrpTRESRunMins/8", "grptresrunmins"),
    ("GrpWall/4", "grpwall"),
    ("LimitFactor/6", "limitfactor"),
    ("MaxCPUMinsPerJob/7", "maxcpuminsperjob"),
    ("MaxCPUsPerJob/7", "maxcpusperjob"),
    ("MaxCPUsPerUser/11 MaxCPUsPU/9", "maxcpuspu"),
    ("MaxJobsAccruePerAccount/17 MaxJobsAccruePA/15", "maxjobsaccruepa"),
    ("MaxJobsAccruePerUser/17 MaxJobsAccruePU/15", "maxjobsaccruepu"),
    ("MaxJobsPerAccount/11 MaxJobsPA/9", "maxjobspa"),
    ("MaxJobsPerUser/4 MaxJobsPU/4", "maxjobspu"),
    ("MaxNodesPerJob/4", "maxnodesperjob"),
    ("MaxNodesPerUser/8 MaxNodesPU/8", "maxnodespu"),
    ("MaxSubmitJobsPerAccount/17 MaxSubmitJobsPA/15", "maxsubmitpa"),
    ("MaxSubmitJobsPerUser/4 MaxSubmitJobsPU/4", "maxsubmitpu"),
    ("MaxTRESPerAccount/11 MaxTRESPA/9", "maxtrespa"),
    ("MaxTRES/7 MaxTRESPJ/9 MaxTRESPerJob/11", "maxtres"),
    ("MaxTRESPerNode/11 MaxTRESPN/9", "maxtrespernode"),
    ("MaxTRESPerUser/11 MaxTRESPU/9", "maxtrespu"),
    ("MaxTRESMinsPerJob/8 MaxTRESMinsPJ/13", "maxtresmins"),
    (
        "MaxTRESRunMinsPerAccount/24 MaxTRESRunMinsPerAcct/20 MaxTRESRunMinsPA/16",
        "maxtresrunminspa",
    ),
    ("MaxTRESRunMinsPerUser/20 MaxTRESRunMinsPU/16", "maxtresrunminspu"),
    ("MaxWallDurationPerJob/4", "maxwall"),
    ("MinCPUsPerJob/7", "mincpusperjob"),
    ("MinPrioThresh/4", "minpriothresh"),
    ("MinTRESPerJob/7", "mintres"),
    ("PreemptMode/8", "preemptmode"),
    ("Preempt/7", "preempt"),
    ("PreemptExemptTime/8", "preemptexempttime"),
    ("Priority/3", "priority"),
    ("RawUsage/7", "rawusage"),
    ("UsageFactor/6", "usagefactor"),
    ("UsageThreshold/6", "usagethreshold"),
)

#: Keys whose values are comma lists Slurm lower-cases and de-duplicates.
LIST_KEYS = frozenset(
    (
        "account",
        "classification",
        "cluster",
        "defaultaccount",
        "defaultqos",
        "defaultwckey",
        "description",
        "federation",
        "id",
        "name",
        "organization",
        "parent",
        "partition",
        "qos",
        "percentallowed",
        "rpc",
        "server",
        "servertype",
        "type",
        "user",
        "wckeys",
    )
)
#: Settings Slurm lower-cases (``strip_quotes(..., make_lower)``).
_LOWER_SETTINGS = frozenset(
    (
        "defaultaccount",
        "defaultwckey",
        "description",
        "newname",
        "organization",
        "parent",
        "server",
        "servertype",
        "type",
    )
)
#: Settings that are lists (names of what to add, where to add it).
_LIST_SETTINGS = frozenset(("account", "cluster", "name", "partition", "wckeys"))
#: Limits Slurm still accepts by their pre-TRES names, and the TRES they set.
_TRES_ALIASES = {
    "grpcpus": ("grptres", "cpu"),
    "grpmemory": ("grptres", "mem"),
    "grpnodes": ("grptres", "node"),
    "grpcpumins": ("grptresmins", "cpu"),
    "grpcpurunmins": ("grptresrunmins", "cpu"),
    "maxcpuminsperjob": ("maxtresmins", "cpu"),
    "maxcpusperjob": ("maxtres", "cpu"),
    "maxnodesperjob": ("maxtres", "node"),
    "maxcpurunmins": ("maxtresrunmins", "cpu"),
    "maxcpuspu": ("maxtrespu", "cpu"),
    "maxnodespu": ("maxtrespu", "node"),
    "mincpusperjob": ("mintres", "cpu"),
}


class Grammar:
    """How one verb reads the words of one kind of entity.

    ``flags``: bare words that set a flag (``withassoc``); ``keys``: the
    ``key=value`` spellings in order; ``bare``: the key a bare word gives (a
    name), or a message when a bare word is wrong there, or ``""`` when Slurm
    ignores it; ``unknown``: the lines for a key it does not know, with
    ``{}`` for the word; ``errors``: keys that are known but refused there.
    """

    __slots__ = ("bare", "errors", "flags", "keys", "unknown")

    def __init__(
        self,
        keys: _Keys,
        unknown: str,
        bare: str = "name",
        flags: _Keys = (),
        errors: dict[str, str] | None = None,
    ) -> None:
        self.keys = tuple((_spellings(names), key) for names, key in keys)
        self.flags = tuple((_spellings(names), key) for names, key in flags)
        self.unknown = unknown
        self.bare = bare
        self.errors = errors or {}

    def flag(self, word: str) -> str | None:
        """The flag a bare word sets, or None."""
        return _lookup(self.flags, word)

    def key(self, word: str) -> str | None:
        """The canonical key a ``key=`` spelling names, or None."""
        return _lookup(self.keys, word)


def _spellings(names: str) -> tuple[tuple[str, int], ...]:
    pairs = []
    for item in names.split():
        word, _, least = item.partition("/")
        pairs.append((word, int(least)))
    return tuple(pairs)


def _lookup(table: tuple[tuple[tuple[tuple[str, int], ...], str], ...], word: str) -> str | None:
    for spellings, key in table:
        if any(abbreviates(word, full, least) for full, least in spellings):
            return key
    return None


_UNKNOWN_COND = " Unknown condition: {}\n Use keyword 'set' to modify value"
_UNKNOWN_OPTION = " Unknown option: {}\n Use keyword 'where' to modify condition"
_COMMON_FLAGS: _Keys = (
    ("WithAssoc/5", "withassoc"),
    ("WithCoordinators/5", "withcoord"),
    ("WithDeleted/5", "withdeleted"),
    ("WithRawQOSLevel/5", "withrawqos"),
    ("WOPLimits/4", "woplimits"),
)

ACCOUNT_COND = Grammar(
    (
        ("Names/1 Accounts/1 Acct/4", "name"),
        ("Descriptions/1", "description"),
        ("Flags/2", "flags"),
        ("Format/2", "format"),
        ("Organizations/1", "organization"),
        *ASSOC_COND,
    ),
    _UNKNOWN_COND,
    flags=_COMMON_FLAGS,
)
_ACCOUNT_REC: _Keys = (
    ("Accounts/1 Names/1 Acct/4", "name"),
    ("Clusters/1", "cluster"),
    ("Description/1", "description"),
    ("Flags/2", "flags"),
    ("Organization/1", "organization"),
    ("RawUsage/7", "rawusage"),
    *ASSOC_REC,
)
ACCOUNT_ADD = Grammar(_ACCOUNT_REC, _UNKNOWN_OPTION)
ACCOUNT_SET = Grammar(
    _ACCOUNT_REC,
    _UNKNOWN_OPTION,
    bare=" Can't modify the name of an account",
    errors={
        "name": " Can't modify the name of an account",
        "cluster": " Can't modify the cluster of an account",
    },
)

USER_COND = Grammar(
    (
        ("Names/1 Users/1", "name"),
        ("AdminLevel/2", "adminlevel"),
        ("Clusters/1", "cluster"),
        ("DefaultAccount/8", "defaultaccount"),
        ("DefaultWCKey/8", "defaultwckey"),
        ("Format/1", "format"),
        ("WCKeys/1", "wckeys"),
        *ASSOC_COND,
    ),
    _UNKNOWN_COND,
    flags=_COMMON_FLAGS,
)
USER_ADD = Grammar(
    (
        ("Names/1 Users/1", "name"),
        ("Accounts/3 Acct/4", "account"),
        ("AdminLevel/2", "adminlevel"),
        ("Clusters/1", "cluster"),
        ("DefaultAccount/8", "defaultaccount"),
        ("DefaultWCKey/8", "defaultwckey"),
        ("Partitions/1", "partition"),
        ("WCKeys/1", "wckeys"),
        *ASSOC_REC,
    ),
    " Unknown option: {}",
)
USER_SET = Grammar(
    (
        ("AdminLevel/2", "adminlevel"),
        ("DefaultAccount/8", "defaultaccount"),
        ("DefaultWCKey/8", "defaultwckey"),
        ("NewName/1", "newname"),
        ("RawUsage/7", "rawusage"),
        *ASSOC_REC,
    ),
    _UNKNOWN_OPTION,
    bare=" Bad format on {}: End your option with an '=' sign",
)

QOS_COND = Grammar(
    (
        ("Names/1 QOSLevel/1", "name"),
        ("Clusters/1", "cluster"),
        ("Descriptions/1", "description"),
        ("Format/1", "format"),
        ("Ids/1", "id"),
        ("PreemptMode/8", "preemptmode"),
    ),
    # Slurm's own words, placeholder included.
    " Unknown condition: {}\n Use keyword 'set' to modify SLURM_PRINT_VALUE",
    flags=(("WithDeleted/5", "withdeleted"),),
)
QOS_ADD = Grammar((("Name/1", "name"), *_QOS_REC), _UNKNOWN_OPTION)
QOS_SET = Grammar((("Name/1", ""), *_QOS_REC), _UNKNOWN_OPTION, bare="")

CLUSTER_COND = Grammar(
    (
        ("Names/1 Clusters/3", "name"),
        ("Federations/3", "federation"),
        ("Classification/3", "classification"),
        ("flags/2", "flags"),
        ("Format/2", "format"),
        ("RPCVersions/1", "rpc"),
    ),
    _UNKNOWN_COND,
    flags=(("WithDeleted/5", "withdeleted"), ("WithFed/5", "withfed"), ("WOLimits/3", "wolimits")),
)
_CLUSTER_ROOT_ONLY = " is not a valid option for the root association of a cluster."
_CLUSTER_REC: _Keys = (
    ("Names/1 Clusters/3", "name"),
    ("Classification/3", "classification"),
    ("Features/2", "features"),
    ("Federation/3", "federation"),
    ("FedState/2", "fedstate"),
    ("GrpCPURunMins/7 GrpTRESRunMins/8", "grptresrunmins"),
    ("GrpCPUMins/7 GrpTRESMins/8", "grptresmins"),
    ("GrpWall/4", "grpwall"),
    *ASSOC_REC,
)
_CLUSTER_ERRORS = {
    "grptresrunmins": "GrpTRESRunMins" + _CLUSTER_ROOT_ONLY,
    "grptresmins": "GrpTRESMins" + _CLUSTER_ROOT_ONLY,
    "grpwall": "GrpWall" + _CLUSTER_ROOT_ONLY,
}
CLUSTER_ADD = Grammar(_CLUSTER_REC, _UNKNOWN_OPTION, errors=_CLUSTER_ERRORS)
CLUSTER_SET = Grammar(
    _CLUSTER_REC, _UNKNOWN_OPTION, bare="", errors={"name": "", **_CLUSTER_ERRORS}
)

ASSOC_LIST = Grammar(
    (("Ids/1 Associations/2", "id"), ("Format/1", "format"), *ASSOC_COND),
    " Unknown condition: {}",
    bare="id",
    flags=(
        ("OnlyDefaults/2", "onlydefaults"),
        ("Tree/4", "tree"),
        ("WithDeleted/5", "withdeleted"),
        ("WithRawQOSLevel/5", "withrawqos"),
        ("WithSubAccounts/5", "withsubaccounts"),
        ("WOPInfo/4", "wopinfo"),
        ("WOPLimits/4 WOLimits/3", "woplimits"),
    ),
)
TRES_LIST = Grammar(
    (("Type/2", "type"), ("Names/1", "name"), ("Format/1", "format"), ("Ids/1", "id")),
    _UNKNOWN_COND,
    bare="type",
    flags=(("WithDeleted/5", "withdeleted"),),
)

EVENT_LIST = Grammar(
    (
        ("Clusters/1", "cluster"),
        ("Nodes/1", "nodes"),
        ("Format/1", "format"),
    ),
    _UNKNOWN_COND,
    bare="nodes",
)

RESERVATION_LIST = Grammar(
    (
        ("Clusters/1", "cluster"),
        ("End/1", "end"),
        ("Format/1", "format"),
        ("Ids/1", "id"),
        ("Names/2", "name"),
        ("Nodes/2", "nodes"),
        ("Start/5", "start"),
    ),
    _UNKNOWN_COND,
    bare=_UNKNOWN_COND,
)

COORDINATOR_COND = Grammar(
    (("Names/1 Users/1", "name"), ("Accounts/2 Acct/4", "account")),
    _UNKNOWN_COND,
    bare="name",
)

_RESOURCE_REC: _Keys = (
    ("Names/1 Resources/1", "name"),
    ("Clusters/1", "cluster"),
    ("Count/3", "count"),
    ("Description/1", "description"),
    ("Server/1", "server"),
    ("ServerType/1", "servertype"),
    ("PercentAllowed/1", "percentallowed"),
    ("Type/1", "type"),
)
RESOURCE_COND = Grammar(
    (
        ("Names/1", "name"),
        ("Clusters/1", "cluster"),
        ("Descriptions/1", "description"),
        ("Format/1", "format"),
        ("Ids/1", "id"),
        ("PercentAllowed/1", "percentallowed"),
        ("ServerType/7", "servertype"),
        ("Server/2", "server"),
    ),
    " Unknown condition: {}\n Use keyword 'set' to modify SLURM_PRINT_VALUE",
    flags=(("WithDeleted/5", "withdeleted"), ("WithClusters/5", "withclusters")),
)
RESOURCE_ADD = Grammar(_RESOURCE_REC, _UNKNOWN_OPTION)
_NOT_MODIFIED = "sacctmgr: error: modify resource {} is not supported by Corral"
RESOURCE_SET = Grammar(
    (("Names/1 Resources/1", ""), *_RESOURCE_REC[1:]),
    _UNKNOWN_OPTION,
    bare="",
    errors={
        "cluster": " Can't modify the cluster of an resource",
        "server": _NOT_MODIFIED.format("Server="),
        "type": _NOT_MODIFIED.format("Type="),
    },
)

#: ``(kind, part)`` → grammar; part is ``cond`` (list, delete, modify's where),
#: ``set`` (modify's set) or ``add``.
GRAMMARS: dict[tuple[str, str], Grammar] = {
    ("account", "cond"): ACCOUNT_COND,
    ("account", "add"): ACCOUNT_ADD,
    ("account", "set"): ACCOUNT_SET,
    ("user", "cond"): USER_COND,
    ("user", "add"): USER_ADD,
    ("user", "set"): USER_SET,
    ("qos", "cond"): QOS_COND,
    ("qos", "add"): QOS_ADD,
    ("qos", "set"): QOS_SET,
    ("cluster", "cond"): CLUSTER_COND,
    ("cluster", "add"): CLUSTER_ADD,
    ("cluster", "set"): CLUSTER_SET,
    ("association", "cond"): ASSOC_LIST,
    ("tres", "cond"): TRES_LIST,
    ("event", "cond"): EVENT_LIST,
    ("reservation", "cond"): RESERVATION_LIST,
    ("coordinator", "cond"): COORDINATOR_COND,
    ("coordinator", "add"): COORDINATOR_COND,
    ("resource", "cond"): RESOURCE_COND,
    ("resource", "add"): RESOURCE_ADD,
    ("resource", "set"): RESOURCE_SET,
}


# ----------------------------------------------------------------- values
def split_option(word: str) -> tuple[str, str, str] | None:
    """``key=value`` as ``(key, op, value)`` with op ``""``, ``"+"`` or ``"-"``; None if bare.

    Slurm's ``parse_option_end``: the key ends at the first ``=``, ``+=`` or ``-=``.
    """
    for index, char in enumerate(word):
        if char == "=":
            return word[:index], "", word[index + 1 :]
        if char in "+-" and word[index + 1 : index + 2] == "=":
            return word[:index], char, word[index + 2 :]
    return None


def strip_quotes(text: str, lower: bool = False) -> str:
    """Slurm's ``strip_quotes``: drop an opening quote and what follows its match.

    Other quote characters inside become backquotes; ``lower`` lower-cases.
    """
    quote = text[:1] if text[:1] in ("'", '"') else ""
    body = text[1:] if quote else text
    if quote and quote in body:
        body = body[: body.index(quote)]
    body = body.replace('"', "`").replace("'", "`")
    return body.lower() if lower else body


def char_list(text: str, items: list[str] | None = None, lower: bool = True) -> list[str]:
    """Slurm's ``slurm_addto_char_list``: comma separated names added to ``items``.

    A leading quote protects the list up to its match; commas inside brackets
    (``n[1,2]``) do not split; blank items are dropped; names are lower-cased
    unless ``lower`` is false; a repeated name moves to the end.
    """
    items = [] if items is None else items
    quote = text[:1] if text[:1] in ("'", '"') else ""
    body = text[1:] if quote else text
    if quote and quote in body:
        body = body[: body.index(quote)]
    body = body.replace('"', "`").replace("'", "`")
    depth = 0
    start = 0
    pieces = []
    for index, char in enumerate(body):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif char == "," and not depth:
            pieces.append(body[start:index])
            start = index + 1
    pieces.append(body[start:])
    for piece in pieces:
        if not piece:
            continue
        name = piece.lower() if lower else piece
        if name in items:
            items.remove(name)
        items.append(name)
    return items


class Request:
    """A parsed ``VERB ENTITY WORD...``: what goes to the daemon and what stays here.

    ``where`` and ``settings`` hold lists as lists until ``message`` joins them;
    ``format`` is the ``format=`` words, which only this side reads.
    """

    __slots__ = ("format", "kind", "settings", "verb", "where")

    def __init__(self, verb: str, kind: str) -> None:
        self.verb = verb
        self.kind = kind
        self.where: dict[str, list[str] | str] = {}
        self.settings: dict[str, list[str] | str] = {}
        self.format: list[str] = []

    def names(self) -> list[str]:
        """The names the command gave (``name=``, or bare words)."""
        found = self.where.get("name", [])
        return list(found) if isinstance(found, list) else [found]

    def setting(self, key: str) -> str | None:
        """A setting as one string (lists joined with commas), or None if not given."""
        value = self.settings.get(key)
        if value is None:
            return None
        return ",".join(value) if isinstance(value, list) else value

    def message(self, commit: bool = False) -> dict[str, object]:
        """The ``AcctAdminRequest`` dict (without ``cred``, which the controller fills)."""
        message: dict[str, object] = {
            "verb": self.verb,
            "kind": self.kind,
            "where": _joined(self.where),
        }
        if self.verb in ("add", "modify"):
            message["set"] = _joined(self.settings)
        if self.verb != "list":
            message["commit"] = commit
        return message


def _joined(values: dict[str, list[str] | str]) -> dict[str, str]:
    return {key: ",".join(v) if isinstance(v, list) else v for key, v in values.items()}


def parse(verb: str, words: Sequence[str]) -> Request:
    """``ENTITY WORD...`` after ``verb`` as a ``Request``; ``Halt(1)`` with Slurm's lines if bad."""
    kind = entity(verb, words[0] if words else None)
    request = Request(verb, kind)
    errors: list[str] = []
    part = "add" if verb == "add" else "cond"
    for word in words[1:]:
        lowered = word.lower()
        if lowered in ("where", "set"):
            if verb == "modify":
                part = "cond" if lowered == "where" else "set"
            continue
        _read(request, GRAMMARS[(kind, part)], part, word, errors)
    if errors:
        raise Halt(1, *errors)
    return request


def _read(request: Request, grammar: Grammar, part: str, word: str, errors: list[str]) -> None:
    """Add one word to ``request`` (its ``where``, or ``settings`` when setting or adding)."""
    option = split_option(word)
    if option is None:
        flag = grammar.flag(word)
        if flag is not None and part == "cond":
            request.where[flag] = "yes"
        elif grammar.bare in ("name", "id", "type"):
            target = request.where
            target[grammar.bare] = char_list(word, _items(target, grammar.bare))
        elif grammar.bare:
            errors.append(grammar.bare.format(word))
        return
    typed, op, value = option
    key = grammar.key(typed)
    if key is None:
        errors.extend(grammar.unknown.format(word).split("\n"))
        return
    if key in grammar.errors:
        if grammar.errors[key]:
            errors.append(grammar.errors[key])
        return
    if not key:  # Slurm reads the word and ignores it here
        return
    if key == "format":
        char_list(value, request.format)
        return
    if part == "cond" or (part == "add" and key == "name"):
        target = request.where
        if key in LIST_KEYS:
            target[key] = char_list(value, _items(target, key))
        else:
            target[key] = op + strip_quotes(value)
        return
    target = request.settings
    if key in _TRES_ALIASES:
        key, tres = _TRES_ALIASES[key]
        value = _set_tres(target.get(key), tres, strip_quotes(value))
        op = ""
    if key in _LIST_SETTINGS and part == "add":
        target[key] = char_list(value, _items(target, key))
    else:
        target[key] = op + strip_quotes(value, key in _LOWER_SETTINGS)
    if key == "defaultaccount" and part == "add" and request.kind == "user":
        # Slurm adds the default account to the accounts to associate.
        target["account"] = char_list(value, _items(target, "account"))


def _set_tres(current: list[str] | str | None, name: str, count: str) -> str:
    """A TRES list with ``name=count`` in place of any ``name=`` it had."""
    text = current if isinstance(current, str) else ""
    kept = [item for item in text.split(",") if item and item.partition("=")[0] != name]
    return ",".join([*kept, f"{name}={count}"])


def _items(values: dict[str, list[str] | str], key: str) -> list[str]:
    found = values.get(key)
    if isinstance(found, list):
        return found
    return [] if found is None else [found]
