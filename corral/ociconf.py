"""oci.conf, read as Slurm reads it (oci.conf(5)), and its patterns expanded.

oci.conf sits beside slurm.conf on the nodes. Its presence turns container support
on: a job or step given ``--container=BUNDLE`` runs its batch script or each of its
tasks through the OCI runtime the file names (``RunTimeRun``, or the
``RunTimeCreate``/``RunTimeStart``/``RunTimeQuery``/``RunTimeKill``/``RunTimeDelete``
set), in a copy of the bundle's ``config.json`` the node agent writes per task
(:mod:`nodeagent.oci`). Without the file a ``--container`` launch fails: Slurm
runs it outside any container, which Corral does not do in silence
(docs/containers.md).

The syntax is slurm.conf's (``corral.confsyntax``), keys in any case. Unlike
slurm.conf and cgroup.conf, an unknown key is refused with its file and line:
oci.conf is short, and a misspelt runtime key would otherwise leave a job outside
its container. Every key oci.conf(5) documents is accepted (``confkeys.OCI`` says
what Corral does with each). The rules Slurm applies to the runtime keys hold:
``RunTimeRun`` excludes ``RunTimeCreate`` and ``RunTimeStart``; without it,
``RunTimeCreate``, ``RunTimeStart``, ``RunTimeQuery``, ``RunTimeKill`` and
``RunTimeDelete`` are all needed.

:func:`expand` is the OCI pattern replacement (oci.conf(5), "OCI Pattern").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from corral import confkeys
from corral.confsyntax import ConfigError, Reader, Where, boolean, read_text

__all__ = ["OciConf", "Pattern", "expand", "load", "parse", "quote_args"]

#: The file's name, in slurm.conf's directory.
NAME = "oci.conf"

#: CreateEnvFile's values (``true`` and ``false`` are the older spellings of two).
ENV_FILE = {"null": "null", "true": "null", "newline": "newline", "disabled": "", "false": ""}

#: OCI hook types (runtime-spec config.md) that DisableHooks may name.
HOOK_TYPES = (
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
)

_RUNTIME_KEYS = ("RunTimeCreate", "RunTimeStart", "RunTimeQuery", "RunTimeKill", "RunTimeDelete")


@dataclass(frozen=True)
class OciConf:
    """oci.conf's settings; ``warnings`` are the ``path:line: ...`` notes about keys
    without effect. Patterns are kept as written (see :func:`expand`)."""

    run: str = ""  # RunTimeRun
    create: str = ""  # RunTimeCreate
    start: str = ""  # RunTimeStart
    query: str = ""  # RunTimeQuery
    kill: str = ""  # RunTimeKill
    delete: str = ""  # RunTimeDelete
    env_exclude: str = ""  # EnvExclude: a regex; variables it matches stay out of the container
    runtime_env_exclude: str = ""  # RunTimeEnvExclude: ... out of the runtime's environment
    env_file: str = ""  # CreateEnvFile: "null", "newline" or "" (none)
    ignore_config_json: bool = False  # IgnoreFileConfigJson
    mount_spool_dir: str = ""  # MountSpoolDir: where the run's spool shows inside; "": its own path
    disable_hooks: tuple[str, ...] = ()  # DisableHooks: OCI hook types left out
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, object]:
        """The settings a launch description carries (JSON), without the warnings."""
        return {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in self.__dict__.items()
            if name != "warnings"
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OciConf:
        values = dict(data)
        values["disable_hooks"] = tuple(values.get("disable_hooks", ()))
        return cls(**values)


class _Reader(Reader):
    def __init__(self) -> None:
        self.values: dict[str, tuple[str, Where]] = {}
        self.warnings: list[str] = []

    def cluster_name(self) -> str | None:
        return None

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        for key, value in found:
            row = confkeys.OCI.get(key.lower())
            if row is None:
                raise ConfigError(*where, f"unknown key '{key}' in {NAME}")
            confkeys.check(row, value, where, self.warnings)
            self.values[row.key] = (value, where)


def _regex(key: str, value: str, where: Where) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ConfigError(*where, f"bad {key} value '{value}': {exc}") from None
    return value


def parse(text: str, path: str) -> OciConf:
    """oci.conf's settings from ``text`` (read from ``path``); ConfigError naming the
    file and line for an unknown key, a bad value or runtime keys that do not go
    together."""
    reader = _Reader()
    reader.feed(text, path, (os.path.abspath(path),))
    values = reader.values
    settings: dict[str, object] = {}
    for key, name in (
        ("RunTimeRun", "run"),
        ("RunTimeCreate", "create"),
        ("RunTimeStart", "start"),
        ("RunTimeQuery", "query"),
        ("RunTimeKill", "kill"),
        ("RunTimeDelete", "delete"),
        ("MountSpoolDir", "mount_spool_dir"),
    ):
        if key in values:
            settings[name] = values[key][0]
    for key, name in (("EnvExclude", "env_exclude"), ("RunTimeEnvExclude", "runtime_env_exclude")):
        if key in values:
            settings[name] = _regex(key, *values[key])
    if "CreateEnvFile" in values:
        value, where = values["CreateEnvFile"]
        if value.lower() not in ENV_FILE:
            raise ConfigError(
                *where, f"bad CreateEnvFile value '{value}': use null, newline or disabled"
            )
        settings["env_file"] = ENV_FILE[value.lower()]
    if "IgnoreFileConfigJson" in values:
        settings["ignore_config_json"] = boolean(
            "IgnoreFileConfigJson", *values["IgnoreFileConfigJson"]
        )
    if "MountSpoolDir" in values and not values["MountSpoolDir"][0].startswith("/"):
        value, where = values["MountSpoolDir"]
        raise ConfigError(*where, f"bad MountSpoolDir value '{value}': not an absolute path")
    if "DisableHooks" in values:
        value, where = values["DisableHooks"]
        hooks = tuple(h for h in value.split(",") if h)
        for hook in hooks:
            if hook not in HOOK_TYPES:
                raise ConfigError(
                    *where, f"bad DisableHooks value '{hook}': use {', '.join(HOOK_TYPES)}"
                )
        settings["disable_hooks"] = hooks
    _check_runtime(values, path)
    return OciConf(**settings, warnings=tuple(reader.warnings))  # type: ignore[arg-type]


def _check_runtime(values: dict[str, tuple[str, Where]], path: str) -> None:
    """Slurm's rules for the runtime keys: RunTimeRun alone, or the whole set."""
    if "RunTimeRun" in values:
        for key in ("RunTimeCreate", "RunTimeStart"):
            if key in values:
                raise ConfigError(*values[key][1], f"RunTimeRun and {key} are mutually exclusive")
        return
    missing = [key for key in _RUNTIME_KEYS if not values.get(key, ("", None))[0]]
    if missing:
        raise ConfigError(path, None, f"RunTimeRun is not set, so {', '.join(missing)} must be")


def load(path: str) -> OciConf | None:
    """The oci.conf at ``path``; None when there is none (containers are off)."""
    if not os.path.exists(path):
        return None
    return parse(read_text(path, (path, None), ""), path)


def quote_args(args: list[str] | tuple[str, ...]) -> str:
    """``%@``: each argument in single quotes, quotes in it escaped, as a shell reads them."""
    return " ".join("'" + arg.replace("'", "'\"'\"'") + "'" for arg in args)


@dataclass(frozen=True)
class Pattern:
    """What the letters of an OCI pattern stand for, for one task."""

    bundle: str  # %b: the generated bundle (the task's copy of config.json)
    env_file: str  # %e: the environment file ("" without CreateEnvFile)
    job_id: int  # %j
    spool: str  # %m: the run's container spool directory (the bundles' parent)
    node: str  # %n
    pid: int  # %p: the task's process
    rootfs: str  # %r: the bundle's own root file system
    step: str  # %s: the step id (the batch script's is Slurm's 4294967291)
    task: int  # %t: the task id
    uid: int  # %U
    user: str  # %u
    args: tuple[str, ...]  # %@: the command and its arguments


def expand(pattern: str, values: Pattern) -> str:
    """``pattern`` with oci.conf(5)'s replacements made: ``%%`` ``%@`` ``%b`` ``%e``
    ``%j`` ``%m`` ``%n`` ``%p`` ``%r`` ``%s`` ``%t`` ``%U`` ``%u``; any other ``%x``
    is left as it is."""
    letters = {
        "%": "%",
        "@": quote_args(values.args),
        "b": values.bundle,
        "e": values.env_file,
        "j": str(values.job_id),
        "m": values.spool,
        "n": values.node,
        "p": str(values.pid),
        "r": values.rootfs,
        "s": values.step,
        "t": str(values.task),
        "U": str(values.uid),
        "u": values.user,
    }
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%" and i + 1 < len(pattern) and pattern[i + 1] in letters:
            out.append(letters[pattern[i + 1]])
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)
