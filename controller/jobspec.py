"""A submitted job as a typed value: the wire ``JobSpec``, decoded once.

Why: the service used to hand admission the message as a dict of whatever
fields the sender set, so every reader guessed its default (``spec.get("nice",
0)``, ``spec.get("name") or ...``) and nothing checked a name or a type. The
service builds a ``JobSpec`` from the message at its boundary (``from_wire``);
everything after it reads typed attributes.

The fields are the wire message's, with the same names and the wire's
defaults: a field with presence (``optional`` in proto/) is None when the
sender left it out, every other field is its zero value. Repeated fields are
tuples, the environment is a mapping. ``tests/unit/test_jobspec.py`` holds
this class and the message equal field by field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

_NO_ENVIRONMENT: Mapping[str, str] = MappingProxyType({})


def _no_environment() -> Mapping[str, str]:
    return _NO_ENVIRONMENT


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as sbatch, salloc, srun or restd submitted it (see proto/ for each field)."""

    name: str = ""
    script: str = ""
    argv: tuple[str, ...] = ()
    work_dir: str = ""
    std_out: str = ""
    std_err: str = ""
    std_in: str = ""
    partitions: tuple[str, ...] = ()
    min_nodes: int | None = None
    max_nodes: int | None = None
    num_tasks: int | None = None
    cpus_per_task: int | None = None
    ntasks_per_node: int | None = None
    mem_per_node: int | None = None
    mem_per_cpu: int | None = None
    time_limit: int | None = None
    time_min: int | None = None
    environment: Mapping[str, str] = field(default_factory=_no_environment)
    hold: bool = False
    begin_time: int = 0
    nice: int = 0
    comment: str = ""
    requeue: bool | None = None
    open_mode: str = ""
    signal_num: int = 0
    signal_time: int = 0
    signal_batch_only: bool = False
    req_nodes: str = ""
    exc_nodes: str = ""
    constraint: str = ""
    exclusive: bool = False
    dependency: str = ""
    array: str = ""
    account: str = ""
    qos: str = ""
    submit_host: str = ""
    submit_dir: str = ""
    min_cpus: int = 0
    submit_line: str = ""
    export_env: str = ""
    gres: str = ""
    kill_on_invalid_dep: bool | None = None
    priority: int | None = None
    deadline: int = 0
    command: str = ""
    oversubscribe: bool = False
    reservation: str = ""
    interactive: bool = False
    run_as_uid: int | None = None
    run_as_gid: int | None = None
    clusters: str = ""
    switches: int = 0
    switch_wait: int | None = None
    segment: int = 0
    topology_required: int | None = None
    topology_preferred: int | None = None
    gpus: int = 0
    gpus_per_socket: int = 0
    gpus_per_task: int = 0
    gpu_type: str = ""
    cpus_per_gpu: int = 0
    mem_per_gpu: int | None = None
    ntasks_per_gpu: int = 0
    gpu_bind: str = ""
    gres_flags: str = ""
    gpus_also: str = ""
    distribution: str = ""
    threads_per_core: int = 0
    cores_per_socket: int = 0
    sockets_per_node: int = 0
    node_info_zeros: tuple[str, ...] = ()
    ntasks_per_socket: int = 0
    prefer: str = ""
    licenses: str = ""
    elastic_signal: int = 0
    container: str = ""
    container_id: str = ""
    mail_type: str = ""
    mail_user: str = ""
    gpus_listed: str = ""
    gpus_per_node_listed: str = ""


def from_wire(message: Any) -> JobSpec:
    """The ``JobSpec`` of a protobuf ``JobSpec`` message.

    Only the fields the sender set are read (``ListFields``, in C); the rest
    keep the defaults above, which are the wire's.
    """
    return _build((f.name, v) for f, v in message.ListFields())


def from_fields(fields: Mapping[str, Any]) -> JobSpec:
    """The ``JobSpec`` of a message as fields by name (``codec.decode``'s dict, or
    a part of one); a None value leaves the field at its default."""
    return _build((name, value) for name, value in fields.items() if value is not None)


_REPEATED = frozenset({"argv", "partitions", "node_info_zeros"})


def to_wire(spec: JobSpec, message: Any) -> Any:
    """``message`` (an empty protobuf ``JobSpec``) given ``spec``'s fields: what
    ``from_wire`` reads back as ``spec`` (a job moved to another cluster is sent so)."""
    for name in JobSpec.__dataclass_fields__:
        value = getattr(spec, name)
        if value is None:
            continue
        if name == "environment":
            message.environment.update(value)
        elif name in _REPEATED:
            getattr(message, name).extend(value)
        else:
            setattr(message, name, value)
    return message


def _build(pairs: Iterable[tuple[str, Any]]) -> JobSpec:
    values: dict[str, Any] = {}
    for name, value in pairs:
        if name == "environment":
            values[name] = MappingProxyType(dict(value))
        elif name in _REPEATED:
            values[name] = tuple(value)
        else:
            values[name] = value
    return JobSpec(**values)
