"""A batch script or a step's task run in an OCI container, as slurmstepd runs one.

With oci.conf on the node (``corral.ociconf``), a launch that names a bundle
(``--container``) does not exec its program: the forked task writes its own copy
of the bundle's ``config.json`` in the run's spool directory and execs the
runtime (``RunTimeRun``, through ``/bin/sh -c`` as Slurm does) on that copy.
The copy is what makes the container the job's:

* ``process.args``: the batch script (the run's spool directory is mounted in the
  container, at ``MountSpoolDir`` or its own path) or the step's command;
* ``process.env``: the job's environment, less what ``EnvExclude`` matches;
  ``process.cwd``: the job's working directory; ``process.user``: the job's uid,
  gid and groups; ``process.terminal`` false, since the task's stdio (its files,
  srun's pipes or terminal) is handed to the runtime as it is;
* ``root.path``: the bundle's own root file system, by its absolute path;
* ``linux.devices`` and their ``linux.resources.devices`` rules: the device files
  of the GPUs the launch grants;
* ``linux.cgroupsPath``: the cgroup the task is in when the run is contained,
  so that the runtime keeps the container inside the job's limits rather than
  making a cgroup of its own elsewhere;
* the hook types ``DisableHooks`` names left out.

Without ``RunTimeRun`` the runtime is driven through create, start, query (until
the state is ``stopped``), kill (on a signal) and delete by :func:`main`, which the
task execs instead. The OCI state has no exit status, so such a task ends 0 unless
a runtime command fails (docs/containers.md).

Everything the child needs comes in the launch description (``describe``): the
bundle, oci.conf's settings and the GPU device files; nothing is read from the
job's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from typing import Any, NoReturn

from corral.ociconf import OciConf, Pattern, expand
from nodeagent.runas import LaunchError
from nodeagent.spool import OCI_DIR

#: %s of the batch script: Slurm's SLURM_BATCH_SCRIPT step id.
BATCH_STEP = "4294967291"
#: The bundles' directory within a run's spool directory (deleted with it).
SUBDIR = OCI_DIR
#: The file a bundle's configuration is in (OCI runtime-spec).
CONFIG = "config.json"
#: The environment file ``CreateEnvFile`` asks for, in each task's bundle.
ENV_FILE = "environment"
#: Slurm's message when --container reaches a node without oci.conf (slurm_errno.c).
NOT_CONFIGURED = "Container support is not configured"
#: The control devices every NVIDIA GPU needs beside its own file.
NVIDIA_SHARED = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
#: How often the create/start mode asks the runtime for the container's state.
POLL = 0.2
#: Seconds one RunTimeDelete may take after a run's end.
DELETE_TIMEOUT = 30


def describe(bundle: str, conf: OciConf, devices: list[str]) -> dict[str, Any]:
    """What a launch description carries for a run in ``bundle`` (``devices``: the
    device files of the GPUs it is granted)."""
    shared = [path for path in NVIDIA_SHARED if devices and os.path.exists(path)]
    return {"bundle": bundle, "conf": conf.to_dict(), "devices": [*devices, *shared]}


class BundleError(LaunchError):
    """The bundle cannot be used (the launch fails with this message)."""


def _read_base(bundle: str, conf: OciConf) -> dict[str, Any]:
    """The bundle's config.json (as the job's user), or the default one when oci.conf
    says IgnoreFileConfigJson."""
    if conf.ignore_config_json:
        return default_config()
    path = os.path.join(bundle, CONFIG)
    try:
        with open(path, encoding="utf-8") as src:
            config = json.load(src)
    except FileNotFoundError:
        raise BundleError(f"--container={bundle}: not an OCI bundle: no {CONFIG} in it") from None
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise BundleError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise BundleError(f"{path} is not an OCI configuration")
    return config


def default_config() -> dict[str, Any]:
    """The configuration of a bundle whose config.json is not read: its ``rootfs``,
    read-only, with /proc, /dev, /dev/pts, /dev/shm and /sys, in new mount, PID,
    IPC and UTS namespaces (what ``runc spec`` writes, without the capabilities
    list: the job's user has none)."""
    return {
        "ociVersion": "1.0.2",
        "root": {"path": "rootfs", "readonly": True},
        "process": {"args": ["sh"], "cwd": "/", "noNewPrivileges": True},
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
            },
            {
                "destination": "/dev/pts",
                "type": "devpts",
                "source": "devpts",
                "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
            },
            {
                "destination": "/dev/shm",
                "type": "tmpfs",
                "source": "shm",
                "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
            },
            {
                "destination": "/sys",
                "type": "sysfs",
                "source": "sysfs",
                "options": ["nosuid", "noexec", "nodev", "ro"],
            },
        ],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
        },
    }


def rootfs(bundle: str, config: dict[str, Any]) -> str:
    """The absolute path of the bundle's root file system (%r)."""
    root = config.get("root") or {}
    path = str(root.get("path") or "rootfs")
    return os.path.normpath(os.path.join(bundle, path))


def device_entries(paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``linux.devices`` and the ``linux.resources.devices`` rules allowing them, for
    the device files ``paths`` (a file that is missing or no device is left out)."""
    devices: list[dict[str, Any]] = []
    rules: list[dict[str, Any]] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        if stat.S_ISCHR(info.st_mode):
            kind = "c"
        elif stat.S_ISBLK(info.st_mode):
            kind = "b"
        else:
            continue
        major, minor = os.major(info.st_rdev), os.minor(info.st_rdev)
        devices.append(
            {
                "path": path,
                "type": kind,
                "major": major,
                "minor": minor,
                "fileMode": stat.S_IMODE(info.st_mode),
                "uid": info.st_uid,
                "gid": info.st_gid,
            }
        )
        rules.append({"allow": True, "type": kind, "major": major, "minor": minor, "access": "rwm"})
    return devices, rules


def current_cgroup(text: str) -> str:
    """The cgroup a process is in, from its /proc/PID/cgroup ``text``, as a runtime's
    ``linux.cgroupsPath`` names it: that of the hierarchy holding a run's processes
    (the one killed and frozen: nodeagent/cgroups.py), the v1 freezer's where the
    task is in one, else the unified one's; "" when it is the root. A runtime on a
    v1 host uses the one path in every hierarchy, which are the run's own where the
    agent has the same path in each (as under systemd).

    The container goes in a cgroup below it (:func:`container_cgroup`), not in it:
    the runtime removes the cgroup it was given when the container ends, which
    would fail, and be retried, while the runtime itself is still in it."""
    unified = ""
    for line in text.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and not controllers:
            unified = path
        elif "freezer" in controllers.split(",") and path != "/":
            return path
    return "" if unified in ("", "/") else unified


def container_cgroup(task_cgroup: str, task: int) -> str:
    """The cgroup the runtime puts task ``task``'s container in: one of its own below
    the task's (the run's), whose limits hold it, whose kill and freeze reach it and
    whose end removes it if the runtime did not (nodeagent/cgroups.py)."""
    return f"{task_cgroup.rstrip('/')}/oci_task_{task}" if task_cgroup else ""


def task_config(
    base: dict[str, Any],
    *,
    bundle: str,
    args: list[str],
    env: dict[str, str],
    cwd: str,
    user: tuple[int, int, list[int]],
    spool: tuple[str, str],
    cgroup: str,
    devices: list[str],
    conf: OciConf,
) -> dict[str, Any]:
    """One task's config.json: the bundle's ``base`` made the job's (see the module's
    docstring). ``user`` is (uid, gid, groups); ``spool`` (the run's spool directory,
    where it is mounted in the container); ``cgroup`` the task's cgroup ("": none)."""
    config: dict[str, Any] = json.loads(json.dumps(base))  # a deep copy of plain JSON
    config.setdefault("root", {})["path"] = rootfs(bundle, base)
    exclude = re.compile(conf.env_exclude) if conf.env_exclude else None
    uid, gid, groups = user
    process = config.setdefault("process", {})
    process.update(
        args=list(args),
        env=[
            f"{name}={value}"
            for name, value in env.items()
            if exclude is None or not exclude.search(f"{name}={value}")
        ],
        cwd=cwd,
        terminal=False,
        user={"uid": uid, "gid": gid, **({"additionalGids": groups} if groups else {})},
    )
    host, inside = spool
    config.setdefault("mounts", []).append(
        {"destination": inside, "type": "bind", "source": host, "options": ["rbind", "rw"]}
    )
    linux = config.setdefault("linux", {})
    if cgroup:
        linux["cgroupsPath"] = cgroup
    entries, rules = device_entries(devices)
    if entries:
        linux.setdefault("devices", []).extend(entries)
        linux.setdefault("resources", {}).setdefault("devices", []).extend(rules)
    hooks = config.get("hooks")
    if isinstance(hooks, dict):
        for kind in conf.disable_hooks:
            hooks.pop(kind, None)
    return config


def _env_file(env: dict[str, str], style: str) -> bytes:
    """The environment file: NUL-terminated entries (``null``), or one a line
    (``newline``, leaving out any value with a newline in it)."""
    if style == "null":
        return b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())
    lines = [f"{k}={v}\n" for k, v in env.items() if "\n" not in v and "\n" not in k]
    return "".join(lines).encode()


def task_bundle(run_dir: str, task: int) -> str:
    """Where task ``task``'s bundle goes in the run's spool directory."""
    return os.path.join(run_dir, SUBDIR, f"task_{task}")


def make_bundle_dir(run_dir: str, task: int, uid: int, gid: int) -> str:
    """Make task ``task``'s bundle directory (as root, in the forked task) and give it
    to the job's user, who writes the configuration in it."""
    path = task_bundle(run_dir, task)
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(os.path.dirname(path), 0, 0)
        os.chmod(os.path.dirname(path), 0o755)
        os.chown(path, uid, gid)
    return path


def exec_container(
    launch: dict[str, Any],
    *,
    run_dir: str,
    args: list[str],
    env: dict[str, str],
    cwd: str,
    ids: tuple[int, int, str],
    job_id: int,
    node: str,
    step: str,
    task: int,
) -> NoReturn:
    """In the forked task, as the job's user (its bundle directory made already): write
    the task's bundle and exec the runtime. OSError or BundleError if it cannot."""
    conf = OciConf.from_dict(launch["conf"])
    bundle = str(launch["bundle"])
    base = _read_base(bundle, conf)
    path = task_bundle(run_dir, task)
    uid, gid, user = ids
    cgroup = ""
    if launch.get("contained"):
        with open("/proc/self/cgroup", encoding="utf-8") as src:
            cgroup = container_cgroup(current_cgroup(src.read()), task)
    inside = conf.mount_spool_dir or run_dir
    if inside != run_dir:  # the script's path as the container sees it
        args = [a.replace(run_dir, inside, 1) if a.startswith(run_dir) else a for a in args]
    config = task_config(
        base,
        bundle=bundle,
        args=args,
        env=env,
        cwd=cwd,
        user=(uid, gid, [g for g in os.getgroups() if g != gid]),
        spool=(run_dir, inside),
        cgroup=cgroup,
        devices=list(launch.get("devices", [])),
        conf=conf,
    )
    with open(os.path.join(path, CONFIG), "w", encoding="utf-8") as out:
        json.dump(config, out, indent=1)
    env_file = ""
    if conf.env_file:
        env_file = os.path.join(path, ENV_FILE)
        with open(env_file, "wb") as out:
            out.write(_env_file(env, conf.env_file))
    values = Pattern(
        bundle=path,
        env_file=env_file,
        job_id=job_id,
        spool=os.path.dirname(path),
        node=node,
        pid=os.getpid(),
        rootfs=rootfs(bundle, base),
        step=step,
        task=task,
        uid=uid,
        user=user,
        args=tuple(args),
    )
    keep = re.compile(conf.runtime_env_exclude) if conf.runtime_env_exclude else None
    runtime_env = {k: v for k, v in env.items() if keep is None or not keep.search(f"{k}={v}")}
    if conf.run:
        command = expand(conf.run, values)
        os.execve("/bin/sh", ["/bin/sh", "-c", command], runtime_env)
    commands = {
        name: expand(getattr(conf, name), values)
        for name in ("create", "start", "query", "kill", "delete")
    }
    os.execve(
        sys.executable,
        [sys.executable, "-m", "nodeagent.oci", json.dumps(commands)],
        runtime_env,
    )


def _task_values(
    path: str, ids: tuple[int, int, str], job_id: int, node: str, step: str, task: int
) -> Pattern:
    """The pattern values of a task whose bundle was written at ``path`` (its process
    gone: %p is 0, %@ empty)."""
    root = ""
    with contextlib.suppress(OSError, ValueError), open(os.path.join(path, CONFIG)) as src:
        root = str(json.load(src).get("root", {}).get("path", ""))
    env_file = os.path.join(path, ENV_FILE)
    return Pattern(
        bundle=path,
        env_file=env_file if os.path.exists(env_file) else "",
        job_id=job_id,
        spool=os.path.dirname(path),
        node=node,
        pid=0,
        rootfs=root,
        step=step,
        task=task,
        uid=ids[0],
        user=ids[2],
        args=(),
    )


def delete_after_run(
    launch: dict[str, Any],
    *,
    run_dir: str,
    ids: tuple[int, int, str],
    job_id: int,
    node: str,
    step: str,
    tasks: list[int],
    groups: list[int] | None,
) -> None:
    """After a RunTimeRun run's end, RunTimeDelete (when set) for each task that had a
    bundle, as the job's user: a runtime killed with its run (scancel, a time limit)
    leaves its container's state behind, and a requeued job's next run would find the
    same name taken. The create/start mode deletes its own (:func:`drive`)."""
    conf = OciConf.from_dict(launch["conf"])
    if not conf.run or not conf.delete:
        return
    commands = [
        expand(conf.delete, _task_values(task_bundle(run_dir, task), ids, job_id, node, step, task))
        for task in tasks
        if os.path.isdir(task_bundle(run_dir, task))
    ]
    if not commands:
        return
    pid = os.fork()
    if pid == 0:  # the user switch is for good: done in a child
        status = 1
        try:
            from nodeagent import runas

            runas.become_user(ids[0], ids[1], ids[2], groups)
            for command in commands:
                subprocess.run(
                    ["/bin/sh", "-c", command],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=DELETE_TIMEOUT,
                    check=False,
                )
            status = 0
        finally:
            os._exit(status)
    os.waitpid(pid, 0)


# ------------------------------------------------------------ create, start, query, delete


def _shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False)


def _state(query: str) -> str:
    """The container's OCI state (``creating``, ``created``, ``running``, ``stopped``);
    ``stopped`` when the runtime no longer knows it."""
    done = _shell(query)
    if done.returncode != 0:
        return "stopped"
    try:
        state = json.loads(done.stdout)
    except ValueError:
        return "stopped"
    return str(state.get("status", "stopped")) if isinstance(state, dict) else "stopped"


def drive(commands: dict[str, str]) -> int:
    """RunTimeCreate, RunTimeStart, RunTimeQuery until stopped (RunTimeKill on TERM,
    INT, HUP, USR1 or USR2), then RunTimeDelete; the exit status."""
    signalled: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda number, _frame: signalled.append(number))
    status = 0
    for name in ("create", "start"):
        done = subprocess.run(["/bin/sh", "-c", commands[name]], check=False)
        if done.returncode != 0:
            sys.stderr.write(f"slurmstepd: error: container {name} failed: {commands[name]}\n")
            status = done.returncode
            break
    else:
        while _state(commands["query"]) != "stopped":
            if signalled:
                signalled.clear()
                subprocess.run(["/bin/sh", "-c", commands["kill"]], check=False)
            time.sleep(POLL)
    subprocess.run(["/bin/sh", "-c", commands["delete"]], check=False)
    return status


def main(argv: list[str] | None = None) -> int:
    """``python -m nodeagent.oci COMMANDS``: a task in the create/start mode."""
    args = sys.argv[1:] if argv is None else argv
    return drive(json.loads(args[0]))


if __name__ == "__main__":
    sys.exit(main())
