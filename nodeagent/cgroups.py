"""Jobs and steps contained in cgroups: one cgroup per run, on cgroup v2 or v1.

Slurm's ``ProctrackType=proctrack/cgroup`` and ``TaskPlugin=task/cgroup``: every
run (the batch script, ``step_batch``; a step's tasks on a node, ``step_<id>``)
goes in a cgroup ``corral/<node>/job_<id>/<leaf>`` below the agent's own cgroup
of each hierarchy used (``/proc/self/cgroup``: under systemd, the hierarchy
delegated to its unit), never beside it. What a cgroup is used for, by role:

=========  =========================================  =====================================
role       cgroup v2 (the unified hierarchy)          cgroup v1
=========  =========================================  =====================================
procs      cgroup.procs; cgroup.kill, else            the freezer hierarchy (only where no
           cgroup.freeze and SIGKILL each pid         v2 is mounted): freezer.state FROZEN,
                                                      SIGKILL each pid, THAWED
memory     memory.max; memory.swap.max (the swap      memory.limit_in_bytes;
           beyond memory.max); memory.events          memory.memsw.limit_in_bytes (RAM and
           ``oom_kill``                               swap); memory.swappiness;
                                                      memory.oom_control ``oom_kill``
cpuset     cpuset.cpus                                cpuset.cpus and cpuset.mems (a new v1
                                                      cpuset has none: the parent's copied)
pids       pids.max                                   pids.max
=========  =========================================  =====================================

A controller is taken from the unified hierarchy when the agent's cgroup there
offers it (``cgroup.controllers``) and it can be enabled for its children
(``cgroup.subtree_control``; a v2 cgroup with processes in it cannot, so on a
pure v2 host the agent first moves itself into a leaf ``agent`` of its cgroup,
as slurmd does into ``system``); otherwise from the v1 hierarchy it is mounted
on (a hybrid host: cgroup v2 for processes, v1 for the controllers, Slurm's
cgroup/v1). :func:`detect` works this out once, at the agent's start, as a
:class:`Layout`; each launch description carries the layout and the run's
limits (:func:`describe`) and the run's process (the supervisor, the step
runner) makes, joins, kills and removes the cgroups (:class:`RunCgroups`).

The run's process stays outside its cgroup (only the tasks it forks join it),
so that it can kill everything in it at the end, setsid'd and double-forked
processes included, and see whether anything is left after the kill wait.
Standard library only: it runs once per job and step.

Why this module is over 500 lines: it is the one place that knows which cgroup
file means what in either version (the table above), for the agent's start
and for each run alike; split along that line, the two sides could disagree on
the layout they share.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import signal
import time

# Importing typing costs every job milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterable, Mapping
    from typing import Any

log = logging.getLogger(__name__)

V1 = 1
V2 = 2
#: Where the runs' cgroups go, below the agent's own cgroup of each hierarchy.
TOP = "corral"
#: The environment variable naming that cgroup instead (one path component): the
#: agents of several clusters whose nodes have the same names on one host (test
#: clusters) each keep to their own.
NAME_ENV = "CORRAL_CGROUP_NAME"
#: The batch script's cgroup in its job's; a step's is ``step_<id>``.
BATCH = "step_batch"
#: The leaf the agent moves itself into when it must enable controllers (v2).
AGENT_LEAF = "agent"
#: The controllers Corral limits runs with.
CONTROLLERS = ("memory", "cpuset", "pids")
#: How long the start-up clearing waits for a killed stale cgroup to be empty.
KILL_WAIT = 2.0
#: How long :meth:`RunCgroups.kill` waits for a killed run's cgroup to be empty
#: unless told (Slurm's UnkillableStepTimeout default): then the processes left are
#: unkillable and the node is drained "Kill task failed".
UNKILLABLE_TIMEOUT = 60

#: A hierarchy a run's cgroups live in: (version, base, roles). ``base`` is
#: ``<mount><the agent's cgroup>/corral``; the roles are ``procs`` and
#: :data:`CONTROLLERS`.
Place = tuple[int, str, tuple[str, ...]]
Layout = tuple[Place, ...]


# ------------------------------------------------------------------ files


def _unescape(field: str) -> str:
    """A /proc/self/mounts field: octal escapes for space, tab, newline and backslash."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def cgroup_mounts(mounts: str = "/proc/self/mounts") -> list[tuple[int, str, frozenset[str]]]:
    """Every cgroup mount: (version, mount point, its v1 controllers; v2: none)."""
    found: list[tuple[int, str, frozenset[str]]] = []
    try:
        with open(mounts) as src:
            for line in src:
                fields = line.split()
                if len(fields) < 4:
                    continue
                if fields[2] == "cgroup2":
                    found.append((V2, _unescape(fields[1]), frozenset()))
                elif fields[2] == "cgroup":
                    found.append((V1, _unescape(fields[1]), frozenset(fields[3].split(","))))
    except OSError:
        return []
    return found


def cgroup2_mount(mounts: str = "/proc/self/mounts") -> str | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on a
    hybrid system); None when it is not."""
    return next((point for version, point, _ in cgroup_mounts(mounts) if version == V2), None)


def own_cgroups(pid: int | str = "self") -> dict[str, str]:
    """This process's cgroup in each hierarchy: ``""`` for v2, else by v1 controller."""
    own: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/cgroup") as src:
            for line in src:
                _, names, path = line.rstrip("\n").split(":", 2)
                for name in names.split(",") if names else [""]:
                    own[name] = path
    except (OSError, ValueError):
        return {}
    return own


def _read(path: str) -> str:
    with open(path) as src:
        return src.read()


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _keyed(path: str, key: str) -> int:
    """The value of ``key`` in a flat keyed file (memory.events, memory.oom_control); 0
    when the file or key is missing."""
    try:
        text = _read(path)
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def cpu_list(text: str) -> set[int]:
    """The CPUs of a list such as ``0-3,8``."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        if low.strip().isdigit():
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _pids(path: str) -> list[int]:
    """The processes in the cgroup ``path`` and in those below it: a container runtime
    puts a container in a cgroup of its own within its run's (nodeagent/oci.py), and a
    v1 hierarchy's cgroup.procs, like v2's, lists a cgroup's own processes only."""
    found: list[int] = []
    for directory, _, _ in os.walk(path):
        try:
            found += [int(word) for word in _read(os.path.join(directory, "cgroup.procs")).split()]
        except (OSError, ValueError):
            continue
    return found


def _remove_below(path: str) -> None:
    """rmdir the cgroups below ``path``, deepest first (a container's, left by a
    runtime that was killed before it removed it)."""
    inner = sorted(os.walk(path), key=lambda found: -found[0].count("/"))
    for directory, _, _ in inner:
        if directory != path:
            with contextlib.suppress(OSError):
                os.rmdir(directory)


# ------------------------------------------------------------------ the agent's side


def _enable(directory: str, controllers: Iterable[str]) -> set[str]:
    """Enable ``controllers`` for ``directory``'s children (v2); those now enabled."""
    for name in controllers:
        with contextlib.suppress(OSError):
            _write(os.path.join(directory, "cgroup.subtree_control"), f"+{name}")
    try:
        return set(_read(os.path.join(directory, "cgroup.subtree_control")).split())
    except OSError:
        return set()


def _leave_for_leaf(directory: str) -> None:
    """Move this process into ``directory/agent`` (v2's no internal processes rule)."""
    leaf = os.path.join(directory, AGENT_LEAF)
    with contextlib.suppress(FileExistsError):
        os.mkdir(leaf)
    _write(os.path.join(leaf, "cgroup.procs"), str(os.getpid()))


def _v2_controllers(directory: str, wanted: tuple[str, ...]) -> set[str]:
    """Which of ``wanted`` the agent's v2 cgroup ``directory`` can give its children,
    enabling them (and moving the agent into a leaf when its processes are in the way)."""
    try:
        offered = set(_read(os.path.join(directory, "cgroup.controllers")).split())
    except OSError:
        return set()
    wanted = tuple(name for name in wanted if name in offered)
    enabled = _enable(directory, wanted)
    if set(wanted) - enabled and _pids(directory) == [os.getpid()]:
        try:
            _leave_for_leaf(directory)
        except OSError as exc:
            log.warning("cannot move the agent into %s/%s: %s", directory, AGENT_LEAF, exc)
        else:
            enabled = _enable(directory, wanted)
    return enabled & set(wanted)


def top_name(environ: Mapping[str, str] = os.environ) -> str:
    """The name of the cgroup runs go below: :data:`NAME_ENV` if set, else :data:`TOP`;
    ValueError when it is not one path component."""
    name = environ.get(NAME_ENV) or TOP
    if "/" in name or name in (".", ".."):
        raise ValueError(f"{NAME_ENV}={name}: not a cgroup name")
    return name


def detect(
    plugin: str = "autodetect",
    mounts: str = "/proc/self/mounts",
    top: str | None = None,
    name: str = TOP,
) -> Layout:
    """The hierarchies runs are contained and limited in here (see the module); an
    empty layout where there is no cgroup file system. ``plugin`` is cgroup.conf's
    CgroupPlugin: ``cgroup/v1`` uses only v1 hierarchies, ``cgroup/v2`` only the
    unified one. ``name``: the cgroup below the agent's own in each hierarchy
    (:func:`top_name`); ``top``: the v2 base instead of ``<mount><agent's
    cgroup>/<name>`` (a test cluster's own cgroup)."""
    found = [
        (version, point, opts)
        for version, point, opts in cgroup_mounts(mounts)
        if plugin == "autodetect" or version == (V1 if plugin == "cgroup/v1" else V2)
    ]
    own = own_cgroups()
    places: list[Place] = []
    taken: set[str] = set()
    unified = next((point for version, point, _ in found if version == V2), None)
    if unified is not None:
        directory = unified + own.get("", "/").rstrip("/")
        if os.path.basename(directory) == AGENT_LEAF:  # moved there by an earlier start
            directory = os.path.dirname(directory)
        taken = _v2_controllers(directory, CONTROLLERS)
        base = top or os.path.join(directory, name)
        places.append((V2, base, ("procs", *sorted(taken))))
    for controller in (*CONTROLLERS, "freezer"):
        if controller in taken or (controller == "freezer" and unified is not None):
            continue
        point = next((p for v, p, opts in found if v == V1 and controller in opts), None)
        if point is None:
            continue
        role = "procs" if controller == "freezer" else controller
        base = os.path.join(point + own.get(controller, "/").rstrip("/"), name)
        places.append((V1, base, (role,)))
    return tuple(places)


def unusable(layout: Layout) -> str | None:
    """Why runs cannot be contained with ``layout`` (None: they can): tried for real,
    a cgroup made and removed in each hierarchy."""
    if os.geteuid() != 0:
        return "the node agent is not root"
    if not any("procs" in roles for _, _, roles in layout):
        return "no cgroup v2 hierarchy and no cgroup v1 freezer is mounted"
    for _, base, _ in layout:
        probe = os.path.join(base, f"probe.{os.getpid()}")
        try:
            os.makedirs(os.path.dirname(base), exist_ok=True)
            _despite_a_vanishing_parent(probe, functools.partial(_mkdir_below, base, probe))
            os.rmdir(probe)
        except OSError as exc:
            return f"cannot create cgroup {probe}: {exc.strerror}"
        with contextlib.suppress(OSError):
            os.rmdir(base)
    return None


def _mkdir_below(parent: str, path: str) -> None:
    """Make ``path`` in ``parent``, making ``parent`` too where it is missing."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(parent)
    os.mkdir(path)


def _despite_a_vanishing_parent(path: str, make: Callable[[], None]) -> None:
    """Run ``make`` (which creates the cgroup ``path`` and its missing parents) again
    when a parent goes between its creation and the child's: another agent's probe
    or the end of the last other run below it removes an empty parent (ENOENT once
    it is gone, ENODEV while the kernel is still taking it down)."""
    for _ in range(5):
        try:
            make()
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENODEV):
                raise
    raise FileNotFoundError(errno.ENOENT, f"cgroup {path}: its parent keeps going")


def roles(layout: Layout) -> set[str]:
    return {role for _, _, names in layout for role in names}


def describe(
    layout: Layout,
    node: str,
    job_id: int,
    leaf: str,
    *,
    memory: int = 0,
    memsw: int = 0,
    swappiness: int = -1,
    cpus: Iterable[int] = (),
    pids: int = 0,
    unkillable: int = UNKILLABLE_TIMEOUT,
    job_memory: int | None = None,
    job_memsw: int | None = None,
) -> dict[str, Any]:
    """What a launch description carries for a run's cgroups: the layout, where the
    run's go below each base, its limits (bytes; 0, -1 or none: no limit), and how
    long its processes may outlive their SIGKILL (seconds). ``job_memory`` and
    ``job_memsw`` are the job's cgroup's, when the run's own are less (a step's
    ``srun --mem``); None: the run's."""
    return {
        "places": [[version, base, list(names)] for version, base, names in layout],
        "path": os.path.join(_name(node), f"job_{job_id}", leaf),
        "memory": memory,
        "memsw": memsw,
        "swappiness": swappiness,
        "cpus": sorted(set(cpus)),
        "pids": pids,
        "unkillable": unkillable,
        "job_memory": memory if job_memory is None else job_memory,
        "job_memsw": memsw if job_memsw is None else job_memsw,
    }


def _name(part: str) -> str:
    """A node name as one path component."""
    part = part.replace("/", "_")
    return f"_{part}" if part in ("", ".", "..") else part


#: The file of a run's directory naming its cgroups, by role (JSON), once made.
RECORD = "cgroups"


def run_paths(run_dir: str) -> dict[str, str]:
    """The cgroup directories of the run whose directory (job or step directory of the
    spool) is ``run_dir``, by role (``procs``, ``memory``, ``cpuset``, ``pids``); {}
    when it has none (not contained, not started yet, or ended). What reads a
    run's statistics starts here."""
    try:
        found = json.loads(_read(os.path.join(run_dir, RECORD)))
    except (OSError, ValueError):
        return {}
    return {str(role): str(path) for role, path in found.items()} if isinstance(found, dict) else {}


def oom_message(kills: int, step: str) -> str:
    """slurmstepd's line for a step (``<job>.batch``, ``<job>.<step>``) whose processes
    the OOM killer killed ``kills`` times."""
    events = "event" if kills == 1 else "events"
    return (
        f"slurmstepd: error: Detected {kills} oom_kill {events} in StepId={step}. "
        "Some of the step tasks have been OOM Killed.\n"
    )


# ------------------------------------------------------------------ a run's side


class RunCgroups:
    """One run's cgroups, from making them to removing them (the run's process)."""

    def __init__(self, description: dict[str, Any]) -> None:
        self.places: list[Place] = [
            (int(version), str(base), tuple(names))
            for version, base, names in description.get("places", ())
        ]
        self.rel: str = description["path"]
        self.memory = int(description.get("memory", 0))
        self.memsw = int(description.get("memsw", 0))
        # The job's cgroup's (a description from an older agent has none: the run's).
        self.job_memory = int(description.get("job_memory", self.memory))
        self.job_memsw = int(description.get("job_memsw", self.memsw))
        self.swappiness = int(description.get("swappiness", -1))
        self.cpus: list[int] = list(description.get("cpus", ()))
        self.pids = int(description.get("pids", 0))
        self.unkillable = float(description.get("unkillable", UNKILLABLE_TIMEOUT))
        self.made: list[tuple[int, str, tuple[str, ...]]] = []  # (version, leaf path, roles)

    def path(self, role: str) -> str | None:
        """The run's cgroup with ``role`` (None: none)."""
        return next((p for _, p, names in self.made if role in names), None)

    def unified(self) -> str | None:
        """The run's cgroup v2 cgroup (None: none), where its GPU fence goes."""
        return next((p for version, p, _ in self.made if version == V2), None)

    def paths(self) -> list[str]:
        """The run's cgroups, one per hierarchy."""
        return [p for _, p, _ in self.made]

    def record(self, run_dir: str) -> None:
        """Name the run's cgroups in ``run_dir`` (see :func:`run_paths`)."""
        roles = {role: path for _, path, names in self.made for role in names}
        tmp = os.path.join(run_dir, f"{RECORD}.tmp")
        with open(tmp, "w") as out:
            json.dump(roles, out)
        os.rename(tmp, os.path.join(run_dir, RECORD))

    # ------------------------------------------------------------ make

    def make(self) -> None:
        """Create the run's cgroups and set their limits; OSError when that fails
        (what was made is removed again).

        If the leaf exists (a run that died, or another agent's on this host with
        the same node and job names: test clusters) ``<leaf>.<pid>`` is made
        instead, in every hierarchy alike.
        """
        for rel in (self.rel, f"{self.rel}.{os.getpid()}"):
            try:
                for version, base, names in self.places:
                    path = self._mkdir(version, base, rel, names)
                    self.made.append((version, path, names))
                    if version == V1 and "cpuset" in names:
                        self._copy_cpuset(path)
                    self._limit(version, path, names, leaf=True)
                return
            except FileExistsError:
                self.remove()
                if rel != self.rel:
                    raise
                for _, base, _ in self.places:  # a dead process's that had our pid
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(base, f"{rel}.{os.getpid()}"))
            except OSError:
                self.remove()
                raise

    def _mkdir(self, version: int, base: str, rel: str, names: tuple[str, ...]) -> str:
        """Make the run's cgroup ``base/rel`` and its parents: its path (a parent removed
        meanwhile is made again)."""
        path = os.path.join(base, rel)

        def make() -> None:
            self._parents(version, base, os.path.dirname(rel), names)
            os.mkdir(path)

        _despite_a_vanishing_parent(path, make)
        return path

    def _parents(self, version: int, base: str, rel: str, names: tuple[str, ...]) -> None:
        """Make ``base`` and the node's and job's cgroups below it: controllers enabled
        for their children (v2), CPUs and memory nodes copied (v1 cpuset), the job's
        limits on the job's cgroup."""
        path = base
        controllers = [n for n in names if n in CONTROLLERS]
        for part in ("", *rel.split("/")):
            path = os.path.join(path, part) if part else path
            with contextlib.suppress(FileExistsError):
                os.mkdir(path)
            if version == V1 and "cpuset" in names:
                # Also where another run made it a moment ago and has not copied yet.
                self._copy_cpuset(path)
            if version == V2 and controllers:
                _enable(path, controllers)
        self._limit(version, path, names, leaf=False)

    @staticmethod
    def _copy_cpuset(path: str) -> None:
        """Give a v1 cpuset its parent's CPUs and memory nodes where it has none (a
        v1 cpuset with none cannot take processes: joining it fails with ENOSPC).

        A parent with none is given its own first, up to the hierarchy's root: the
        parent this run filled a moment ago may since have been removed by another
        run's end (the last below it) and made again, empty, by a third run that has
        not filled it yet; the child made under it would copy nothing.
        """
        parent = os.path.dirname(path)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if _read(os.path.join(path, name)).strip():
                continue
            value = _read(os.path.join(parent, name)).strip()
            if not value and os.path.exists(os.path.join(os.path.dirname(parent), name)):
                RunCgroups._copy_cpuset(parent)
                value = _read(os.path.join(parent, name)).strip()
            _write(os.path.join(path, name), value or "\n")

    def _limit(self, version: int, path: str, names: tuple[str, ...], leaf: bool) -> None:
        """The run's limits on ``path`` (a job's cgroup has its memory limit too, so that
        its steps together stay within it; CPUs and pids.max are each run's)."""
        if "memory" in names and leaf:
            self._memory(version, path, self.memory, self.memsw)
        elif "memory" in names:
            self._memory(version, path, self.job_memory, self.job_memsw)
        if "cpuset" in names and self.cpus and leaf:
            self._cpuset(path)
        if "pids" in names and self.pids and leaf:
            _write(os.path.join(path, "pids.max"), str(self.pids))

    def _cpuset(self, path: str) -> None:
        """The run's CPUs, those of them its parent has (an emulated node's CPU ids
        can be beyond the host's); none of them there: not confined, logged."""
        parent = os.path.dirname(path)
        try:
            text = _read(os.path.join(parent, "cpuset.cpus.effective"))
        except FileNotFoundError:
            text = _read(os.path.join(parent, "cpuset.effective_cpus"))
        cpus = [cpu for cpu in self.cpus if cpu in cpu_list(text)]
        if not cpus:
            log.warning("cgroup %s: none of CPUs %s here: not confined", path, self.cpus)
            return
        _write(os.path.join(path, "cpuset.cpus"), ",".join(map(str, cpus)))

    def _memory(self, version: int, path: str, memory: int, memsw: int) -> None:
        """The memory limits (``memory``, RAM and swap ``memsw``), "none" written too: a
        job's cgroup left by a run that died must not hold a later job of that id to
        its old limit."""
        if version == V2:
            _write(os.path.join(path, "memory.max"), str(memory or "max"))
            swap = str(max(memsw - memory, 0)) if memsw else "max"
            self._optional(path, "memory.swap.max", swap, quiet=not memsw)
            return
        # RAM and swap may never be below RAM: lifted first, set last.
        self._optional(path, "memory.memsw.limit_in_bytes", "-1", quiet=True)
        _write(os.path.join(path, "memory.limit_in_bytes"), str(memory or -1))
        if memsw:
            self._optional(path, "memory.memsw.limit_in_bytes", str(memsw))
        if self.swappiness >= 0:
            self._optional(path, "memory.swappiness", str(self.swappiness))

    @staticmethod
    def _optional(path: str, name: str, value: str, quiet: bool = False) -> None:
        """Write a file the kernel may lack (swap accounting off): logged if it does,
        unless the value limits nothing (``quiet``)."""
        try:
            _write(os.path.join(path, name), value)
        except FileNotFoundError:
            if not quiet:
                log.warning("cgroup %s has no %s (swap accounting off?): not limited", path, name)

    # ------------------------------------------------------------ use

    def join(self, pid: int = 0) -> None:
        """Move process ``pid`` (0: the caller: a forked task before it execs) into
        every one of the run's cgroups."""
        for _, path, _ in self.made:
            _write(os.path.join(path, "cgroup.procs"), str(pid or os.getpid()))

    def procs(self) -> list[int]:
        """The processes left in the run's cgroup."""
        path = self.path("procs")
        return [] if path is None else _pids(path)

    def oom_kills(self) -> int:
        """How many of the run's processes the OOM killer has killed."""
        for version, path, names in self.made:
            if "memory" in names:
                if version == V2:
                    return _keyed(os.path.join(path, "memory.events"), "oom_kill")
                return _keyed(os.path.join(path, "memory.oom_control"), "oom_kill")
        return 0

    def freeze(self, frozen: bool) -> bool:
        """Freeze (``frozen``) or thaw every process of the run's cgroup (scontrol
        suspend, resume): cgroup.freeze on v2, the v1 freezer's freezer.state.
        False when the run's processes are in no cgroup that can be frozen (the
        caller stops them with SIGSTOP instead)."""
        for version, path, names in self.made:
            if "procs" not in names:
                continue
            control, value = (
                ("cgroup.freeze", "1" if frozen else "0")
                if version == V2
                else ("freezer.state", "FROZEN" if frozen else "THAWED")
            )
            try:
                _write(os.path.join(path, control), value)
            except OSError as exc:
                log.warning("cgroup %s: %s not written: %s", path, control, exc.strerror)
                return False
            return True
        return False

    def kill(self, wait: float | None = None) -> list[int]:
        """SIGKILL every process in the run's cgroup; those still there after ``wait``
        seconds (default: the description's UnkillableStepTimeout): stuck in the
        kernel, or frozen, the node's problem. Killed again now and then meanwhile: a
        process that was frozen is killed once it thaws."""
        wait = self.unkillable if wait is None else wait
        deadline = time.monotonic() + wait
        again = 0.0
        while True:
            now = time.monotonic()
            if now >= again:
                for version, path, names in self.made:
                    if "procs" in names:
                        _kill_all(version, path)
                again = now + 1.0
            left = self.procs()
            if not left or now >= deadline:
                return left
            time.sleep(0.01)

    def remove(self) -> bool:
        """Remove the run's cgroups, and the job's and node's when they were the last;
        False when one could not be (processes left in it)."""
        done = True
        for _, path, _ in reversed(self.made):
            _remove_below(path)
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("cgroup %s not removed: %s", path, exc.strerror)
                done = False
                continue
            for _ in range(3):  # the job's, the node's, TOP
                path = os.path.dirname(path)
                try:
                    os.rmdir(path)
                except OSError:  # another run's cgroup is still there
                    break
        if done:
            self.made = []
        return done


def _kill_all(version: int, path: str) -> None:
    """SIGKILL every process in the cgroup ``path`` (and below it, v2) of the
    hierarchy holding the processes: cgroup.kill where the kernel has it, else
    frozen first so that nothing forks meanwhile."""
    if version == V2 and os.path.exists(os.path.join(path, "cgroup.kill")):
        with contextlib.suppress(OSError):
            _write(os.path.join(path, "cgroup.kill"), "1")
    elif version == V2:
        _frozen_kill(path, "cgroup.freeze", "1", "0")
    else:
        _frozen_kill(path, "freezer.state", "FROZEN", "THAWED")


def _frozen_kill(path: str, control: str, freeze: str, thaw: str) -> None:
    """Freeze the cgroup, SIGKILL each process, thaw."""
    with contextlib.suppress(OSError):
        _write(os.path.join(path, control), freeze)
    for _ in range(10):
        pids = _pids(path)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        _write(os.path.join(path, control), thaw)


# ------------------------------------------------------------------ the agent's start


def clear_stale(layout: Layout, node: str, keep: Container[int]) -> list[str]:
    """Kill what is left in the cgroups of ``node``'s jobs not in ``keep`` (the jobs of
    the runs the agent recovered) and remove them: the job cgroups that went away.

    Why: a run whose supervisor died without cleaning up (killed with its agent's
    whole unit, a crash) leaves processes nobody reports, on CPUs and memory the
    controller gives to other jobs; and a later job with the same id (a cluster
    whose state was started afresh) would start inside its cgroup, under its
    limits. slurmd likewise starts clean of steps no slurmstepd answers for.
    """
    cleared = []
    for version, base, names in layout:
        node_dir = os.path.join(base, _name(node))
        try:
            entries = os.listdir(node_dir)
        except OSError:
            continue
        for entry in entries:
            number = entry.removeprefix("job_")
            if number == entry or not number.isdigit() or int(number) in keep:
                continue
            job_dir = os.path.join(node_dir, entry)
            inner = sorted(os.walk(job_dir), key=lambda found: -found[0].count("/"))
            for directory, _, _ in inner:
                if "procs" in names:
                    _kill_all(version, directory)
                remove_when_empty(directory)
            if not os.path.isdir(job_dir):
                cleared.append(job_dir)
    return cleared


def remove_when_empty(path: str, wait: float = KILL_WAIT) -> bool:
    """rmdir the cgroup once its killed processes are gone (``wait`` seconds at most);
    False, with a warning, if they stay."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                log.warning("cgroup %s not removed: %s", path, exc.strerror)
                return False
            time.sleep(0.005)
