"""``corral install-units``: the systemd units of the daemons, copied where systemd reads them.

    corral install-units [--root DIR] [--bindir DIR] [--user NAME] [--force] [UNIT ...]

Why a command rather than a copy: the units name their programs by absolute
path, and where pip put them (``/usr/local/bin``, a virtual environment's
``bin``) is known only on the host. The command copies the units (all four, or
the ones named: ``controller``, ``nodeagent``, ``dbd``, ``restd``) into
``/etc/systemd/system`` (``DIR/etc/systemd/system`` with ``--root``, for an
image or a package being built), with ``ExecStart`` pointing at the programs
in ``--bindir`` (default: beside the Python running this command, else on
PATH) and ``User=``/``Group=`` of dbd and restd set to ``--user`` (SlurmUser;
default ``slurm``, Debian's). A unit already there that differs is left alone
unless ``--force``: local changes belong in a drop-in (``systemctl edit``).

It creates nothing else: no user, no directory, no key, and it runs no
systemctl. It prints what it wrote and what remains to do (docs/install.md).
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import sys
import sysconfig

from cli.boundary import UsageError
from cli.corral_options import INSTALL_UNITS
from cli.options import parse as parse_options

#: The daemons whose units there are, by the short names the command takes.
UNITS = ("controller", "nodeagent", "dbd", "restd")
#: Where systemd reads administrators' units (systemd.unit(5)).
UNIT_DIR = os.path.join("etc", "systemd", "system")
DEFAULT_USER = "slurm"

_EXEC = re.compile(r"^ExecStart=\S*/(corral-[a-z]+)(?=\s|$)", re.MULTILINE)


def source_dir() -> str:
    """Where the unit files are: installed with the package (``share/corral/systemd``
    under its data prefix), else the source checkout's ``systemd/``."""
    installed = os.path.join(sysconfig.get_path("data"), "share", "corral", "systemd")
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "systemd")


def program_dir(given: str | None) -> str:
    """The directory of the installed daemons: ``given``, else the one beside this
    Python (a virtual environment's bin), else the one on PATH."""
    if given:
        return os.path.abspath(given)
    beside = os.path.dirname(sys.executable)
    if os.access(os.path.join(beside, "corral-controller"), os.X_OK):
        return beside
    found = shutil.which("corral-controller")
    if found is None:
        raise UsageError("corral-controller is not on PATH: give --bindir DIR")
    return os.path.dirname(os.path.abspath(found))


def group_of(user: str) -> str:
    """``user``'s primary group where this host knows the user, else a group of its name."""
    try:
        return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
    except KeyError:
        return user


def render(text: str, bindir: str, user: str, group: str) -> str:
    """A unit's text for this host: its program in ``bindir``, run as ``user``:``group``
    where the unit names a user."""
    text = _EXEC.sub(lambda m: f"ExecStart={os.path.join(bindir, m.group(1))}", text)
    text = re.sub(r"^User=.*$", f"User={user}", text, flags=re.MULTILINE)
    return re.sub(r"^Group=.*$", f"Group={group}", text, flags=re.MULTILINE)


def install_units(argv: list[str]) -> int:
    root, bindir_given, user, force = "/", None, DEFAULT_USER, False
    found, names = parse_options(INSTALL_UNITS, argv, permute=True)
    for option, value in found:
        if option.key == "root":
            root = value or ""
        elif option.key == "bindir":
            bindir_given = value
        elif option.key == "user":
            user = value or ""
        elif option.key == "force":
            force = True
    for name in names:
        if name not in UNITS:
            raise UsageError(f"unknown unit {name!r}: give any of {', '.join(UNITS)}")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]*", user):
        raise UsageError(f"--user wants a user name, got {user!r}")
    if not root:
        raise UsageError("--root wants a directory")
    chosen = [unit for unit in UNITS if unit in names] or list(UNITS)
    bindir = program_dir(bindir_given)
    if re.search(r"[\s\\\"'%$]", bindir):  # ExecStart would split or expand it
        raise UsageError(f"{bindir}: a unit's ExecStart cannot name a path with spaces or quotes")
    for unit in chosen:
        if not os.access(os.path.join(bindir, f"corral-{unit}"), os.X_OK):
            raise UsageError(f"{bindir}/corral-{unit} is not an installed program")
    target = os.path.join(os.path.abspath(root), UNIT_DIR)
    if not os.path.isdir(target):
        if os.path.abspath(root) == "/":
            raise UsageError(f"{target} does not exist: is this a systemd host?")
        os.makedirs(target)
        print(f"created {target}")
    group = group_of(user)
    rendered = {}
    for unit in chosen:
        with open(os.path.join(source_dir(), f"corral-{unit}.service")) as src:
            rendered[unit] = render(src.read(), bindir, user, group)
    for unit, text in rendered.items():  # every refusal before anything is written
        path = os.path.join(target, f"corral-{unit}.service")
        if os.path.exists(path) and _read(path) != text and not force:
            raise UsageError(
                f"{path} exists and differs; --force replaces it (keep local changes in a "
                f"drop-in: systemctl edit corral-{unit})"
            )
    for unit, text in rendered.items():
        path = os.path.join(target, f"corral-{unit}.service")
        if os.path.exists(path) and _read(path) == text:
            print(f"unchanged {path}")
            continue
        with open(path + ".tmp", "w") as out:
            out.write(text)
        os.chmod(path + ".tmp", 0o644)
        os.replace(path + ".tmp", path)
        print(f"installed {path} (ExecStart {bindir}/corral-{unit})")
    _next_steps(chosen, user)
    return 0


def _read(path: str) -> str:
    with open(path) as src:
        return src.read()


def _next_steps(chosen: list[str], user: str) -> None:
    try:
        pwd.getpwnam(user)
    except KeyError:
        if {"dbd", "restd"} & set(chosen):
            print(f"user {user} does not exist on this host: corral-dbd and corral-restd run as it")
    units = " ".join(f"corral-{unit}" for unit in chosen)
    print(
        "No user, key or data directory was made and systemctl was not run. Next "
        f"(docs/install.md): SlurmUser {user}, /etc/corral/slurm.conf, corral.key beside it "
        f"(mode 0600, owned by {user}), /var/spool/corral for the controller; then\n"
        f"  systemctl daemon-reload\n  systemctl enable --now {units}\n"
        "enabling only the daemons this host runs."
    )
