"""What ``corral ray`` runs, worked out from the allocation: no processes, no I/O.

The allocation comes from the variables every job and step has:
``SLURM_JOB_ID``, ``SLURM_JOB_NODELIST`` and ``SLURM_JOB_CPUS_PER_NODE``
(Slurm's run-length form, ``4(x2),2``: the CPUs of each node, in node list
order). The GPUs of each node are read on that node, by the launcher the
step runs there (``cli/ray/node.py``), from ``SLURM_GPUS_ON_NODE``: the batch
script only sees its own node's, and a step that asks for no GPUs is given
all of the job's on each of its nodes.

The head is a one-task step on the first node, the workers one step with a
task on each other node, both ``--overlap`` (Ray hands out the node's CPUs
itself; the steps hold none of them against the steps a driver may start).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cli.boundary import UsageError
from corral import hostlist

#: ``ray start`` options corral ray sets itself, from the allocation: refused in
#: ``--ray-args`` and ``--head-args``, where they would contradict it.
RESERVED = (
    "--address",
    "--block",
    "--head",
    "--node-ip-address",
    "--node-name",
    "--num-cpus",
    "--num-gpus",
    "--port",
)

#: Run by the Python that runs ``ray`` (corral's own need not have Ray): connects
#: to the cluster as a driver, prints the live nodes (a JSON line whenever they
#: change) and exits once every node named on its command line is among them.
#: ``corral ray`` bounds the wait; this only watches.
CHECK = """\
import json, sys, time
import ray
address, wanted = sys.argv[1], set(sys.argv[2:])
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
seen = None
while True:
    nodes = sorted(
        (n["NodeName"], n["Resources"].get("CPU", 0), n["Resources"].get("GPU", 0))
        for n in ray.nodes()
        if n["Alive"]
    )
    if nodes != seen:
        print(json.dumps(nodes), flush=True)
        seen = nodes
    if wanted <= {name for name, _, _ in nodes}:
        break
    time.sleep(0.2)
ray.shutdown()
"""


@dataclass(frozen=True, slots=True)
class Allocation:
    """The job's nodes, first (the head's) first, and the CPUs it has on each."""

    job_id: str
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]

    @property
    def head(self) -> str:
        return self.nodes[0]

    @property
    def workers(self) -> tuple[str, ...]:
        return self.nodes[1:]

    def cpus_of(self, names: Sequence[str]) -> str:
        """``NODES=CPUS`` items for ``names``, nodes with equal counts in one hostlist,
        separated by ``;`` (a hostlist has commas: ``node[2-9,11]=4;node10=2``): what
        the launcher on each node reads its count from."""
        by_count: dict[int, list[str]] = {}
        given = dict(zip(self.nodes, self.cpus, strict=True))
        for name in names:
            by_count.setdefault(given[name], []).append(name)
        return ";".join(
            f"{hostlist.compress(group, sort=False)}={count}" for count, group in by_count.items()
        )


def counts(text: str) -> list[int]:
    """Slurm's per-node counts (``2(x3),1`` -> ``[2, 2, 2, 1]``); ValueError if malformed."""
    values: list[int] = []
    for item in text.split(","):
        number, sep, repeat = item.partition("(x")
        if sep and not (repeat.endswith(")") and repeat[:-1].isdigit()):
            raise ValueError(text)
        times = int(repeat[:-1]) if sep else 1
        if not number.isdigit() or times < 1:
            raise ValueError(text)
        values += [int(number)] * times
    return values


def allocation(env: Mapping[str, str]) -> Allocation:
    """The allocation ``env`` (a job's or a step's environment) describes, or UsageError."""
    job_id = env.get("SLURM_JOB_ID", "")
    if not job_id:
        raise UsageError(
            "not inside an allocation (SLURM_JOB_ID is not set): run corral ray in an sbatch "
            "script or under salloc"
        )
    nodelist = env.get("SLURM_JOB_NODELIST", "")
    per_node = env.get("SLURM_JOB_CPUS_PER_NODE", "")
    try:
        nodes = hostlist.expand(nodelist)
        cpus = counts(per_node)
    except ValueError:
        nodes, cpus = [], []
    if not nodes or len(cpus) != len(nodes):
        raise UsageError(
            f"job {job_id}: cannot read its nodes and CPUs from SLURM_JOB_NODELIST="
            f"{nodelist!r} and SLURM_JOB_CPUS_PER_NODE={per_node!r}"
        )
    return Allocation(job_id, tuple(nodes), tuple(cpus))


def node_cpus(text: str, node: str) -> int:
    """The CPUs a ``cpus_of`` string gives ``node``; KeyError if none, ValueError if malformed."""
    for item in text.split(";"):
        names, _, count = item.rpartition("=")
        if node in hostlist.expand(names):
            return int(count)
    raise KeyError(node)


def start_options(option: str, text: str) -> tuple[str, ...]:
    """Extra ``ray start`` options as given to ``option`` (shell words), or UsageError
    for one corral ray sets itself."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}: {text!r}") from None
    for word in words:
        if word.partition("=")[0] in RESERVED:
            raise UsageError(
                f"{option}: {word.partition('=')[0]} is set by corral ray from the allocation"
            )
    return tuple(words)


def interpreter(head: bytes, path: str) -> tuple[str, ...]:
    """How to run Python as ``path``'s ``#!`` line does (``head``: the file's first
    bytes), so that ``CHECK`` imports the same Ray; UsageError if it names none.

    pip writes ``#!/abs/python``; distributions ``#!/usr/bin/env python3``; pip, for
    an interpreter path with spaces or over 127 bytes, a ``#!/bin/sh`` line
    followed by ``'''exec' "/abs/python" "$0" "$@"``.
    """
    lines = head.decode(errors="replace").splitlines()
    words = shlex.split(lines[0][2:]) if lines and lines[0].startswith("#!") else []
    if words == ["/bin/sh"] and len(lines) > 1 and lines[1].startswith("'''exec' "):
        words = shlex.split(lines[1].removeprefix("'''exec' "))[:1]
    if words and "python" in words[-1].rsplit("/", 1)[-1]:
        return tuple(words)
    raise UsageError(f"cannot tell which Python runs {path}: its first line names none")


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything ``corral ray`` runs, as argument lists."""

    allocation: Allocation
    ray: str  # the ray executable, by its absolute path
    python: tuple[str, ...]  # the Python that runs it
    srun: tuple[str, ...]
    launcher: tuple[str, ...]  # runs cli.ray.node on a node
    address: str  # the head's HOST:PORT
    ray_args: tuple[str, ...] = ()  # for every node's ray start
    head_args: tuple[str, ...] = ()  # for the head's only
    token: str = ""  # this cluster's token for Ray's token authentication

    @property
    def host(self) -> str:
        return self.address.rpartition(":")[0]

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    def head_step(self) -> list[str]:
        head = self.allocation.head
        return [
            *self.srun,
            "-N1",
            "-n1",
            "-w",
            head,
            "--overlap",
            "-J",
            "ray-head",
            *self.launcher,
            "--cpus",
            self.allocation.cpus_of([head]),
            self.ray,
            "start",
            "--head",
            "--block",
            f"--node-ip-address={self.host}",
            f"--port={self.port}",
            *self.ray_args,
            *self.head_args,
        ]

    def worker_step(self) -> list[str] | None:
        """The workers' step; None for a one-node allocation."""
        workers = self.allocation.workers
        if not workers:
            return None
        return [
            *self.srun,
            f"-N{len(workers)}",
            "--ntasks-per-node=1",
            "-x",
            self.allocation.head,
            "--overlap",
            "-J",
            "ray-workers",
            *self.launcher,
            "--cpus",
            self.allocation.cpus_of(workers),
            self.ray,
            "start",
            f"--address={self.address}",
            "--block",
            *self.ray_args,
        ]

    def check(self) -> list[str]:
        return [*self.python, "-c", CHECK, self.address, *self.allocation.nodes]

    def ray_environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for every Ray process of the job (the steps pass theirs on to Ray):
        Ray's token authentication with this cluster's token, so that only the job's
        own processes can connect to it and run code as its user; unless the job's
        environment chose a mode itself (``RAY_AUTH_MODE``)."""
        if "RAY_AUTH_MODE" in env:
            return dict(env)
        return {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def driver_environment(self, env: Mapping[str, str]) -> dict[str, str]:
        return {**self.ray_environment(env), "RAY_ADDRESS": self.address}


def launch_options(node: str, cpus: int, env: Mapping[str, str]) -> list[str]:
    """What the launcher adds to ``ray start`` on ``node``: the allocation's CPUs there,
    the GPUs the step was given there (``SLURM_GPUS_ON_NODE``; 0 rather than Ray's
    own detection, which would count GPUs the job does not have), and the node's
    Slurm name as the Ray node's name."""
    gpus = env.get("SLURM_GPUS_ON_NODE", "") or "0"
    return [f"--num-cpus={cpus}", f"--num-gpus={gpus}", f"--node-name={node}"]


def relaunch(
    srun: Sequence[str], head: str, corral: Sequence[str], argv: Sequence[str]
) -> list[str]:
    """``corral ray`` again, as a one-task step on the head node: where a driver must run
    to reach its local Ray (salloc's command runs on the submitting host)."""
    return [*srun, "-N1", "-n1", "-w", head, "--overlap", "-J", "corral-ray", *corral, *argv]
