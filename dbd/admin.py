"""sacctmgr's operations on the accounting database: add, modify, delete and list.

Each request names a verb, a kind and two maps of sacctmgr's words
(``where``: which entities, ``set``: their new values; see dbd/entities.py).
A change runs in one transaction and is rolled back unless ``commit``, so
sacctmgr can show what would change before it asks. Every cluster gets
Slurm's defaults when it first registers: the ``root`` account and its
association, the ``root`` user, and the ``normal`` QOS.

Associations form Slurm's tree: an account's own association (user "") has
its parent account in ``parent``; a user's association hangs under its
account. ``list association`` walks that tree as sacctmgr prints it.

Why this module is over 500 lines: it is sacctmgr's one dispatcher: every verb
over every entity kind (accounts, users, associations, QOS, clusters,
coordinators), each change in one transaction with Slurm's rules for the tree.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import product

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from corral import SLURM_PROTOCOL_VERSION
from corral.errors import ESLURM_ACCESS_DENIED, SlurmError
from dbd import entities, licensetres, reservations, resources
from dbd.entities import DEFAULT_COLUMNS, SETTINGS, Setting, invalid, names
from dbd.models import (
    Account,
    Association,
    Cluster,
    Coordinator,
    NodeEventRecord,
    Qos,
    Tres,
    User,
)
from dbd.rollup import rollup

ASSOC_WORDS = frozenset(s.word for s in entities.ASSOCIATION) - {"cluster", "account", "user"}
ADMINS = ("Operator", "Administrator")


@dataclass(frozen=True, slots=True)
class Answer:
    rows: list[dict[str, str]]
    columns: tuple[str, ...]
    defaults: tuple[str, ...]


def _merged(where: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    merged = {entities.canonical(k): v for k, v in where.items()}
    merged.update({entities.canonical(k): v for k, v in values.items()})
    return merged


def _apply(row: object, kind: str, values: Mapping[str, str], skip: Iterable[str] = ()) -> None:
    """Set each of ``values`` (sacctmgr words) on ``row``, read as ``kind`` reads them."""
    ignored = set(skip)
    for key, text in values.items():
        if key in ignored:
            continue
        item = entities.setting(kind, key)
        setattr(row, item.column, item.read(text))


def _shown(row: object, settings: Iterable[Setting]) -> dict[str, str]:
    return {s.header: s.show(getattr(row, s.column)) for s in settings if s.header}


def ensure_cluster(session: Session, name: str) -> Cluster:
    """``name`` with Slurm's defaults: root account and user, ``normal`` QOS."""
    cluster = session.get(Cluster, name)
    if cluster is None:
        cluster = Cluster(name=name, control_host="", control_port=0, registered=0)
        session.add(cluster)
    if session.scalar(select(Qos).where(Qos.name == "normal")) is None:
        session.add(Qos(name="normal", description="Normal QOS default"))
    if session.get(Account, "root") is None:
        session.add(Account(name="root", description="default root account", organization="root"))
    if session.get(User, "root") is None:
        session.add(User(name="root", default_account="root", admin_level="Administrator"))
    for user in ("", "root"):
        association(session, name, "root", user, "", parent="" if not user else "root")
    return cluster


def association(
    session: Session, cluster: str, account: str, user: str, partition: str, parent: str
) -> tuple[Association, bool]:
    """The association of these four, made (with Slurm's defaults) if missing; True if made."""
    session.flush()
    found = session.scalar(
        select(Association).where(
            Association.cluster == cluster,
            Association.account == account,
            Association.user == user,
            Association.partition == partition,
        )
    )
    if found is not None:
        return found, False
    made = Association(
        cluster=cluster,
        account=account,
        user=user,
        partition=partition,
        parent=parent,
        shares=1,
        qos="normal",
        def_qos="",
    )
    session.add(made)
    session.flush()
    return made, True


def _new_association(
    session: Session, key: tuple[str, str, str, str, str], values: Mapping[str, str]
) -> list[dict[str, str]]:
    """The association ``key`` (cluster, account, user, partition, parent) with
    ``values`` set, as a row, if it is new; nothing if it was there."""
    assoc, new = association(session, *key)
    if not new:
        return []
    _apply(assoc, "association", values)
    return [_shown(assoc, entities.ASSOCIATION)]


def _require_accounts(session: Session, accounts: Iterable[str]) -> None:
    for account in accounts:
        if session.get(Account, account) is None:
            raise invalid(f"The account '{account}' doesn't exist")


def _coordinates(
    session: Session,
    caller: str,
    kind: str,
    verb: str,
    where: Mapping[str, str],
    values: Mapping[str, str],
) -> bool:
    """Whether ``caller`` may make this change as a coordinator: of users and
    associations in accounts at or below those they coordinate, or of sub-accounts
    added under them. The accounts must be named (``account=``, or ``parent=``)."""
    mine = set(session.scalars(select(Coordinator.account).where(Coordinator.user == caller)))
    if not mine or kind not in ("user", "association", "account"):
        return False
    merged = _merged(where, values)
    if kind == "account":
        if verb != "add":
            return False
        touched = names(merged.get("parent", "")) or ["root"]
    else:
        touched = names(merged.get("account", ""))
    parents = {
        a.account: a.parent
        for a in session.scalars(select(Association).where(Association.user == ""))
    }
    return bool(touched) and all(account_under(account, mine, parents) for account in touched)


def account_under(account: str, tops: set[str], parents: Mapping[str, str]) -> bool:
    """Whether ``account`` is one of ``tops`` or below one of them."""
    seen: set[str] = set()
    while account and account not in seen:
        if account in tops:
            return True
        seen.add(account)
        account = parents.get(account, "")
    return False


def _tree_order(rows: list[Association]) -> list[Association]:
    """One cluster's associations depth first: each account, its users, its sub-accounts."""
    accounts = {r.account: r for r in rows if not r.user}
    children: dict[str, list[str]] = {}
    for name, row in accounts.items():
        children.setdefault(row.parent, []).append(name)
    ordered: list[Association] = []
    seen: set[str] = set()

    def walk(account: str) -> None:
        seen.add(account)
        if account in accounts:
            ordered.append(accounts[account])
        users = [r for r in rows if r.user and r.account == account]
        ordered.extend(sorted(users, key=lambda r: (r.user, r.partition)))
        for child in sorted(children.get(account, [])):
            walk(child)

    for top in sorted(children.get("", [])):
        walk(top)
    for orphan in sorted({r.account for r in rows} - seen):
        walk(orphan)
    return ordered


class Admin:
    """sacctmgr's requests against one database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # ------------------------------------------------------------ requests

    def run(
        self,
        verb: str,
        kind: str,
        where: Mapping[str, str],
        values: Mapping[str, str],
        commit: bool,
        caller: str,
        admin: bool,
    ) -> Answer:
        """One sacctmgr request by ``caller`` (``admin``: root, SlurmUser)."""
        kind = {"assoc": "association"}.get(kind.lower(), kind.lower())
        if kind == "resource":
            return self._resource(verb, where, values, commit, caller, admin)
        if kind not in SETTINGS:
            raise invalid(f"Unknown entity: {kind}")
        columns = tuple(s.header for s in SETTINGS[kind] if s.header)
        defaults = DEFAULT_COLUMNS[kind]
        with Session(self.engine) as session:
            if verb == "list":
                return Answer(self._list(session, kind, where), columns, defaults)
            if verb not in ("add", "modify", "delete"):
                raise invalid(f"Unknown command: {verb}")
            if not (
                admin
                or self._admin_in(session, caller)
                or _coordinates(session, caller, kind, verb, where, values)
            ):
                raise SlurmError(ESLURM_ACCESS_DENIED, "Access/permission denied")
            method = getattr(self, f"_{verb}_{kind}", None)
            if method is None:
                raise invalid(f"{verb} is not supported for {kind}")
            if verb != "delete":
                licensetres.check(session, {**where, **values})
            rows = method(session, where, values)
            if commit:
                session.commit()
            else:
                session.rollback()
            return Answer(rows, columns, defaults)

    def _resource(
        self,
        verb: str,
        where: Mapping[str, str],
        values: Mapping[str, str],
        commit: bool,
        caller: str,
        admin: bool,
    ) -> Answer:
        """sacctmgr's resources (``dbd.resources``): any user lists them, as in Slurm;
        only administrators change them (no coordinator: they belong to no account)."""
        where = {entities.canonical(k): v for k, v in where.items()}
        values = {entities.canonical(k): v for k, v in values.items()}
        with Session(self.engine) as session:
            if verb == "list":
                rows = resources.listed(session, where)
                return Answer(rows, resources.COLUMNS, ())
            changes = {"add": resources.add, "modify": resources.modify, "delete": resources.delete}
            change = changes.get(verb)
            if change is None:
                raise invalid(f"Unknown command: {verb}")
            if not (admin or self._admin_in(session, caller)):
                raise SlurmError(ESLURM_ACCESS_DENIED, "Access/permission denied")
            rows = change(session, where, values)
            if commit:
                session.commit()
            else:
                session.rollback()
            return Answer(rows, resources.COLUMNS, ())

    @staticmethod
    def _admin_in(session: Session, caller: str) -> bool:
        row = session.get(User, caller)
        return row is not None and row.admin_level in ADMINS

    # ------------------------------------------------------------ list

    def _list(self, session: Session, kind: str, where: Mapping[str, str]) -> list[dict[str, str]]:
        if kind == "reservation":
            conditions = {entities.canonical(k): v for k, v in where.items() if v}
            now = int(time.time())
            usage = "withusage" in conditions
            if usage:  # sreport's reservation report: its use up to the last whole hour
                rollup(self.engine, now)
            found = reservations.listed(session, conditions, now)
            return [reservations.sacctmgr_row(item, usage) for item in found]
        wanted = {entities.canonical(k): names(v) for k, v in where.items() if v}
        if kind == "association":
            return [_shown(a, entities.ASSOCIATION) for a in self._associations(session, wanted)]
        if kind == "event":
            statement = select(NodeEventRecord)
            if "cluster" in wanted:
                statement = statement.where(NodeEventRecord.cluster.in_(wanted["cluster"]))
            if "nodes" in wanted:
                statement = statement.where(NodeEventRecord.node.in_(wanted["nodes"]))
            order = (NodeEventRecord.cluster, NodeEventRecord.time_start, NodeEventRecord.node)
            events = session.scalars(statement.order_by(*order))
            return [_shown(e, entities.EVENT) for e in events]
        if kind == "tres":  # Slurm's fixed TRES, then those clusters registered
            stored = session.scalars(select(Tres).order_by(Tres.id))
            return [
                {"Type": type_, "Name": name, "ID": str(number)}
                for type_, name, number in (
                    *entities.BASE_TRES,
                    *((t.type, t.name, t.id) for t in stored),
                )
            ]
        if kind in ("user", "account") and "withassoc" in wanted:
            rows = self._with_associations(session, kind, wanted)
        elif kind == "coordinator":
            return [
                {"User": c.user, "Account": c.account}
                for c in session.scalars(select(Coordinator).order_by(Coordinator.user))
                if "name" not in wanted or c.user in wanted["name"]
            ]
        else:
            rows = self._entities(session, kind, wanted)
        if kind in ("user", "account") and "withcoord" in wanted:
            coords: dict[str, list[str]] = {}
            for c in session.scalars(select(Coordinator).order_by(Coordinator.account)):
                coords.setdefault(c.user if kind == "user" else c.account, []).append(
                    c.account if kind == "user" else c.user
                )
            key = "User" if kind == "user" else "Account"
            for row in rows:
                row["Coord Accounts"] = ",".join(coords.get(row[key], []))
        return rows

    def _entities(
        self, session: Session, kind: str, wanted: Mapping[str, list[str]]
    ) -> list[dict[str, str]]:
        if kind == "cluster":
            clusters = list(session.scalars(select(Cluster).order_by(Cluster.name)))
            return [
                self._cluster_row(session, c)
                for c in clusters
                if "name" not in wanted or c.name in wanted["name"]
            ]
        rows: list[Account] | list[User] | list[Qos]
        if kind == "account":
            rows = list(session.scalars(select(Account).order_by(Account.name)))
        elif kind == "user":
            rows = list(session.scalars(select(User).order_by(User.name)))
        else:
            rows = list(session.scalars(select(Qos).order_by(Qos.id)))
        return [
            _shown(r, SETTINGS[kind])
            for r in rows
            if "name" not in wanted or r.name in wanted["name"]
        ]

    def _with_associations(
        self, session: Session, kind: str, wanted: Mapping[str, list[str]]
    ) -> list[dict[str, str]]:
        """``list user|account withassoc``: a row per association, the entity's fields
        beside the association's."""
        column = "user" if kind == "user" else "account"
        filters = {k: v for k, v in wanted.items() if k in ("cluster", "account", "user")}
        if "name" in wanted:
            filters[column] = wanted["name"]
        rows = []
        for assoc in self._associations(session, filters):
            if kind == "user" and not assoc.user:
                continue
            owner = session.get(User if kind == "user" else Account, getattr(assoc, column))
            if owner is None:
                continue
            rows.append({**_shown(assoc, entities.ASSOCIATION), **_shown(owner, SETTINGS[kind])})
        return rows

    def _cluster_row(self, session: Session, cluster: Cluster) -> dict[str, str]:
        root = session.scalar(
            select(Association).where(
                Association.cluster == cluster.name,
                Association.account == "root",
                Association.user == "",
            )
        )
        row = {
            "Cluster": cluster.name,
            "ControlHost": cluster.control_host,
            "ControlPort": str(cluster.control_port or ""),
            "RPC": SLURM_PROTOCOL_VERSION,
        }
        if root is not None:
            shown = _shown(root, entities.ASSOCIATION)
            for header in DEFAULT_COLUMNS["cluster"][4:]:
                row[header] = shown.get(header, "")
        return row

    def _associations(self, session: Session, wanted: Mapping[str, list[str]]) -> list[Association]:
        """Associations in sacctmgr's order: per cluster, the account tree depth first,
        each account followed by its users, then its sub-accounts."""
        rows = list(session.scalars(select(Association)))
        for key, column in (
            ("cluster", "cluster"),
            ("account", "account"),
            ("user", "user"),
            ("partition", "partition"),
        ):
            if key in wanted:
                rows = [r for r in rows if getattr(r, column) in wanted[key]]
        ordered: list[Association] = []
        for cluster in sorted({r.cluster for r in rows}):
            ordered += _tree_order([r for r in rows if r.cluster == cluster])
        return ordered

    # ------------------------------------------------------------ add

    def _clusters(self, session: Session, given: str | None) -> list[str]:
        known = [c.name for c in session.scalars(select(Cluster).order_by(Cluster.name))]
        if not given:
            return known
        asked = names(given)
        for name in asked:
            if name not in known:
                raise invalid(f"This cluster {name} hasn't been added to accounting yet")
        return asked

    def _add_cluster(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        merged = _merged(where, values)
        clusters = names(merged.pop("name", ""))
        added = []
        for name in clusters:
            if session.get(Cluster, name) is None:
                ensure_cluster(session, name)
                root, _ = association(session, name, "root", "", "", parent="")
                _apply(root, "association", merged)  # Fairshare, QOS, limits of the cluster
                added.append({"Cluster": name})
        return added

    def _add_account(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        merged = _merged(where, values)
        accounts = names(merged.pop("name", ""))
        if not accounts:
            raise invalid("Need name of account to add.")
        parent = merged.pop("parent", "root").lower()
        if session.get(Account, parent) is None:
            raise invalid(f"The parent account '{parent}' doesn't exist")
        clusters = self._clusters(session, merged.pop("cluster", None))
        description = merged.pop("description", None)
        organization = merged.pop("organization", None)
        rows: list[dict[str, str]] = []
        for name in accounts:
            account = session.get(Account, name)
            if account is None:
                account = Account(
                    name=name,
                    description=description or name,
                    organization=organization or (parent if parent != "root" else name),
                )
                session.add(account)
                rows.append(_shown(account, entities.ACCOUNT))
            for cluster in clusters:
                rows += _new_association(session, (cluster, name, "", "", parent), merged)
        return rows

    def _add_user(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        merged = _merged(where, values)
        users = names(merged.pop("name", "") or merged.pop("user", ""))
        if not users:
            raise invalid("Need name of user to add.")
        default = merged.pop("defaultaccount", "").lower()
        accounts = names(merged.pop("account", "")) or ([default] if default else [])
        if not accounts:
            raise invalid("Need a default account for these users to add.")
        _require_accounts(session, accounts)
        clusters = self._clusters(session, merged.pop("cluster", None))
        partitions = names(merged.pop("partition", "")) or [""]
        level = merged.pop("adminlevel", None)
        rows: list[dict[str, str]] = []
        for name in users:
            user = session.get(User, name)
            if user is None:
                user = User(
                    name=name,
                    default_account=default or accounts[0],
                    admin_level=entities.admin_level(level) if level else "None",
                )
                session.add(user)
                rows.append(_shown(user, entities.USER))
            for cluster, account, partition in product(clusters, accounts, partitions):
                key = (cluster, account, name, partition, account)
                rows += _new_association(session, key, merged)
        return rows

    def _add_qos(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        merged = _merged(where, values)
        rows = []
        for name in names(merged.pop("name", "")):
            if session.scalar(select(Qos).where(Qos.name == name)) is not None:
                continue
            qos = Qos(name=name, description=name)
            _apply(qos, "qos", merged)
            session.add(qos)
            session.flush()
            rows.append(_shown(qos, entities.QOS))
        return rows

    def _add_coordinator(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        merged = _merged(where, values)
        users = names(merged.get("name", "") or merged.get("user", ""))
        accounts = names(merged.get("account", ""))
        if not users or not accounts:
            raise invalid(" You need to specify conditions to to add the coordinator.")
        for user in users:
            if session.get(User, user) is None:
                raise invalid(f"User '{user}' doesn't exist")
        _require_accounts(session, accounts)
        rows = []
        for user in users:
            for account in accounts:
                if session.get(Coordinator, (user, account)) is None:
                    session.add(Coordinator(user=user, account=account))
                    rows.append({"User": user, "Account": account})
        session.flush()
        return rows

    # ------------------------------------------------------------ modify

    def _where_associations(
        self, session: Session, where: Mapping[str, str], user_rows: bool | None
    ) -> list[Association]:
        wanted = {entities.canonical(k): names(v) for k, v in where.items() if v}
        if "name" in wanted:
            wanted["user" if user_rows else "account"] = wanted.pop("name")
        rows = self._associations(session, wanted)
        if user_rows is None:
            return rows
        return [r for r in rows if bool(r.user) == user_rows]

    def _modify_association(
        self,
        session: Session,
        where: Mapping[str, str],
        values: Mapping[str, str],
        user_rows: bool | None = None,
    ) -> list[dict[str, str]]:
        changes = {entities.canonical(k): v for k, v in values.items()}
        for key in changes:
            if key not in ASSOC_WORDS:
                raise invalid(f"Unknown option: {key}")
        self._check_qos(session, changes)
        rows = self._where_associations(session, where, user_rows)
        for assoc in rows:
            _apply(assoc, "association", changes)
        return [_shown(a, entities.ASSOCIATION) for a in rows]

    def _check_qos(self, session: Session, changes: Mapping[str, str]) -> None:
        known = set(session.scalars(select(Qos.name)))
        for key in ("qos", "defaultqos"):
            for name in names(changes.get(key, "")):
                if name.lstrip("+-") not in known:
                    raise invalid(f"Invalid qos specification: {name}")

    def _modify_account(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        own = {
            k: v
            for k, v in values.items()
            if entities.canonical(k) in ("description", "organization")
        }
        rest = {k: v for k, v in values.items() if k not in own}
        rows: list[dict[str, str]] = []
        for name in names(_merged(where, {}).get("name", "")):
            account = session.get(Account, name)
            if account is None:
                continue
            if own:
                _apply(account, "account", {entities.canonical(k): v for k, v in own.items()})
                rows.append(_shown(account, entities.ACCOUNT))
        if rest:
            rows += self._modify_association(session, where, rest, user_rows=False)
        return rows

    def _modify_user(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        own_words = ("defaultaccount", "adminlevel")
        own = {
            entities.canonical(k): v
            for k, v in values.items()
            if entities.canonical(k) in own_words
        }
        rest = {k: v for k, v in values.items() if entities.canonical(k) not in own_words}
        rows: list[dict[str, str]] = []
        for name in names(_merged(where, {}).get("name", "")):
            user = session.get(User, name)
            if user is None or not own:
                continue
            if "defaultaccount" in own:
                account = own["defaultaccount"].lower()
                has = session.scalar(
                    select(Association).where(
                        Association.user == name, Association.account == account
                    )
                )
                if has is None:
                    raise invalid(f"User {name} has no association with account {account}")
                own = {**own, "defaultaccount": account}
            _apply(user, "user", own)
            rows.append(_shown(user, entities.USER))
        if rest:
            rows += self._modify_association(session, where, rest, user_rows=True)
        return rows

    def _modify_qos(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        changes = {entities.canonical(k): v for k, v in values.items()}
        wanted = names(_merged(where, {}).get("name", ""))
        rows = []
        for qos in session.scalars(select(Qos).where(Qos.name.in_(wanted))):
            _apply(qos, "qos", changes)
            rows.append(_shown(qos, entities.QOS))
        return rows

    # ------------------------------------------------------------ delete

    def _delete_association(
        self,
        session: Session,
        where: Mapping[str, str],
        values: Mapping[str, str],
        user_rows: bool | None = None,
    ) -> list[dict[str, str]]:
        rows = self._where_associations(session, where, user_rows)
        shown = [_shown(a, entities.ASSOCIATION) for a in rows]
        for assoc in rows:
            session.delete(assoc)
        session.flush()
        return shown

    def _delete_account(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        doomed = names(_merged(where, {}).get("name", ""))
        if "root" in doomed:
            raise invalid("You can't remove the root account")
        for name in doomed:
            child = session.scalar(
                select(Association).where(Association.parent == name, Association.user == "")
            )
            if child is not None:
                raise invalid(f"Account {name} has sub-accounts: remove them first")
        rows = []
        for name in doomed:
            assocs = list(session.scalars(select(Association).where(Association.account == name)))
            account = session.get(Account, name)
            if account is None:
                continue
            rows.append(_shown(account, entities.ACCOUNT))
            for assoc in assocs:
                session.delete(assoc)
            session.delete(account)
        return rows

    def _delete_user(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        rows = self._delete_association(session, where, values, user_rows=True)
        for name in {row["User"] for row in rows}:
            left = session.scalar(select(Association).where(Association.user == name))
            user = session.get(User, name)
            if left is None and user is not None:
                session.delete(user)
        return rows

    def _delete_coordinator(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        merged = _merged(where, values)
        users = names(merged.get("name", "") or merged.get("user", ""))
        accounts = names(merged.get("account", ""))
        statement = select(Coordinator).where(Coordinator.user.in_(users))
        if accounts:
            statement = statement.where(Coordinator.account.in_(accounts))
        rows = []
        for coordinator in session.scalars(statement):
            rows.append({"User": coordinator.user, "Account": coordinator.account})
            session.delete(coordinator)
        return rows

    def _delete_qos(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        wanted = names(_merged(where, {}).get("name", ""))
        rows = []
        for qos in session.scalars(select(Qos).where(Qos.name.in_(wanted))):
            rows.append(_shown(qos, entities.QOS))
            session.delete(qos)
        return rows

    def _delete_cluster(
        self, session: Session, where: Mapping[str, str], values: Mapping[str, str]
    ) -> list[dict[str, str]]:
        rows = []
        for name in names(_merged(where, {}).get("name", "")):
            cluster = session.get(Cluster, name)
            if cluster is None:
                continue
            for assoc in session.scalars(select(Association).where(Association.cluster == name)):
                session.delete(assoc)
            session.delete(cluster)
            rows.append({"Cluster": name})
        return rows
