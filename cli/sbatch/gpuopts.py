"""The GPU options of sbatch, salloc and srun's allocations: checked as Slurm's
clients check them, sent as they were given, and told to the job.

Slurm's clients send ``--gpus``, ``--gpus-per-socket``, ``--gpus-per-task``,
``--cpus-per-gpu``, ``--mem-per-gpu``, ``--ntasks-per-gpu``, ``--gpu-bind`` and
``--gres-flags`` to the controller as given (TresPerJob, TresPerTask, ...), and
the controller spreads a job-wide total over the nodes it picks
(controller/core/gpus.py). ``--gpus-per-node`` is ``--gres=gpu`` under another
name (TresPerNode). What Slurm's client refuses before anything is sent is
refused here with its words (``slurm_opt.c``'s validation); the controller
checks the same for any client (controller/gpuspec.py).

The job learns its options from SLURM_GPUS, SLURM_GPUS_PER_NODE,
SLURM_GPUS_PER_SOCKET, SLURM_GPUS_PER_TASK, SLURM_CPUS_PER_GPU,
SLURM_MEM_PER_GPU, SLURM_NTASKS_PER_GPU and SLURM_GPU_BIND, set as Slurm's
``set_env_from_opts`` sets them (the text as given); srun in the job reads them
back as its own defaults, as Slurm's does.
"""

from __future__ import annotations

from cli.failure import Failure

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

GRES_ERROR = "Invalid generic resource (gres) specification"
_MIXED = "Invalid GRES specification (with and without type identification)"
_DIGITS = "0123456789"


def gpu_count(option: str, text: str) -> tuple[str, int]:
    """``[type:]count`` of a GPU option as Slurm reads it: ``a100:2``, ``2``, and a
    bare word as a type with a count of 1 (``--gpus=x`` asks one GPU of type x).
    The ``gpu:type:count`` spelling of ``--gres`` is taken too. A comma list of
    several types is refused here (``--gpus`` and ``--gpus-per-node`` take one:
    ``job_counts``, ``node_counts``), and so are
    alternatives (``a100:8|h100:8``), which ``--gres`` alone takes (core/alternatives.py):
    read as a count, the second would have been a GRES named ``h100``."""
    if "|" in text:
        raise Failure(
            f"{option}={text}: alternatives (A|B) are taken by --gres only, "
            "as in --gres=gpu:a100:8|gpu:h100:8"
        )
    if "," in text:
        parts = [p.rpartition(":") for p in text.split(",")]
        if any(not kind for kind, _, _ in parts) and any(kind for kind, _, _ in parts):
            raise Failure(_MIXED)
        raise Failure(f"{option}={text}: GPUs of several types in one option are not supported")
    kind, _, number = text.rpartition(":")
    kind = kind.removeprefix("gpu:") if kind != "gpu" else ""
    if not number or number.strip(_DIGITS):
        return (f"{kind}:{number}" if kind else number), 1
    value = int(number)
    if value >= 2**31 - 1:
        raise Failure(f"Numeric argument ({value}) too large for {option}.", status=1)
    return kind, value


def _last_wins(option: str, text: str) -> list[tuple[str, int]]:
    """A comma list of ``[type:]count`` as Slurm 22.05 keeps it: a type named again
    (untyped counts being one type) replaces its earlier count where it first stood
    (``--gpus=1,2`` asks 2, ``a100:1,v100:1,a100:2`` two A100s and a V100); typed and
    untyped together are refused in Slurm's words."""
    counts: dict[str, int] = {}
    for part in text.split(","):
        kind, count = gpu_count(option, part)
        counts[kind] = count
    if len({bool(kind) for kind in counts}) > 1:
        raise Failure(_MIXED)
    return list(counts.items())


def job_counts(option: str, text: str) -> dict[str, Any]:
    """``--gpus``: ``[type:]count``, or a comma list, a total of each type
    (``a100:1,v100:2``, Slurm's TresPerJob): the first as ``gpus``, the others as
    ``gpus_also`` (``_last_wins``: a type given twice counts once)."""
    if "|" in text or "," not in text:
        return {"gpus": gpu_count(option, text)}
    counts = _last_wins(option, text)
    if len(counts) == 1:
        return {"gpus": counts[0]}
    return {"gpus": counts[0], "gpus_also": tuple(counts[1:])}


def node_counts(option: str, text: str) -> tuple[tuple[str, int], ...]:
    """``--gpus-per-node``: a comma list of ``[type:]count`` (``a100:1,v100:2``), GPUs
    of each type on every node, as Slurm's TresPerNode holds them (``_last_wins``)."""
    if "|" in text or "," not in text:
        return (gpu_count(option, text),)
    return tuple(_last_wins(option, text))


def bind_valid(text: str) -> bool:
    """``--gpu-bind`` as Slurm's ``tres_bind_verify_cmdline`` accepts it: an optional
    ``verbose,``, then ``closest``, ``none``, ``map_gpu:LIST``, ``mask_gpu:LIST``,
    ``per_task:N`` or ``single:N`` (any word starting with ``c`` or ``n`` passes
    for the first two, as there)."""
    word = text[8:] if text[:8].lower() == "verbose," else text
    lower = word.lower()
    if lower[:1] in ("c", "n") and not lower.startswith(("map_gpu:", "mask_gpu:")):
        return True
    for prefix, hexadecimal in (("map_gpu:", False), ("mask_gpu:", True)):
        if lower.startswith(prefix):
            return _number_list(word[len(prefix) :], hexadecimal)
    for prefix in ("per_task:", "single:"):
        if lower.startswith(prefix):
            return _c_number(word[len(prefix) :]) >= 0
    return False


def _c_number(text: str) -> int:
    """C's ``strtol(text, NULL, 0)`` of a leading number, -1 for a negative one."""
    body = text.strip()
    try:
        return max(int(body, 0), -1) if body else 0
    except ValueError:
        digits = body[: len(body) - len(body.lstrip(_DIGITS))]
        return int(digits) if digits else 0


def _number_list(text: str, hexadecimal: bool) -> bool:
    """A comma list of numbers (hex for masks, ``0x`` allowed), each with ``*count``."""
    allowed = "0123456789abcdefABCDEF*" if hexadecimal else _DIGITS + "*"
    for item in text.split(","):
        if hexadecimal and item[:2] == "0x":
            item = item[2:]
        value, star, repeat = item.partition("*")
        if not value or value.strip(allowed) or (star and (not repeat or repeat.strip(_DIGITS))):
            return False
    return True


def _fail(line: str) -> Failure:
    """Slurm's two lines: what is wrong, then the errno the submission got."""
    return Failure(line, GRES_ERROR)


def _node_gpus(fields: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The GPUs asked on every node, (type, count) each: ``--gres``'s GPU items (as
    written: a malformed one is the controller's to refuse) and ``--gpus-per-node``."""
    out = []
    for item in str(fields.get("gres") or "").split(","):
        parts = item.removeprefix("gres/").removeprefix("gres:").split(":")
        if parts[0] == "gpu" and "|" not in item:
            last = parts[-1] if len(parts) > 1 else "1"
            count = int(last) if last.isdigit() else 1
            kind = parts[1] if len(parts) > 2 or not last.isdigit() else ""
            out.append((kind, count))
    return out + list(fields.get("gpus_per_node", ()))


def _types(fields: Mapping[str, Any]) -> str:
    """The one GPU type dealt node by node ("" for any): per task's or per socket's,
    else --gpus's (its first); refused when per task and per socket name two, or when
    GPUs with a type and without one are asked together, as Slurm's client refuses
    them. --gpus may name others, totals of their own (``also``); GPUs per node too
    (``--gres=gpu:a100:1 --gpus=v100:2``), and per socket (``--gpus=a100:1,v100:2
    --gpus-per-socket=v100:1``: V100s per socket, the V100 total making the node count,
    and one A100 in all, as Slurm 22.05 takes it)."""
    dealt = [fields[key][0] for key in ("gpus_per_socket", "gpus_per_task") if key in fields]
    totals = [fields["gpus"][0]] if "gpus" in fields else []
    totals += [kind for kind, _ in fields.get("gpus_also", ())]
    typed = {bool(kind) for kind in (*dealt, *totals)}
    typed |= {bool(kind) for kind, _ in _node_gpus(fields)}
    if len(typed) > 1:
        raise Failure(_MIXED)
    kinds = set(dealt) - {""}
    if len(kinds) > 1:
        raise _fail(f"GPUs of several types ({', '.join(sorted(kinds))}) are not supported")
    return next(iter(kinds), totals[0] if totals else "")


def _totals(fields: Mapping[str, Any]) -> list[tuple[str, int]]:
    """--gpus's (type, count) of each type it names."""
    return [fields["gpus"], *fields.get("gpus_also", ())] if "gpus" in fields else []


def also(fields: Mapping[str, Any]) -> list[tuple[str, int]]:
    """--gpus's totals of other types than the dealt one (``_types``)."""
    kind = _types(fields)
    return [(own, count) for own, count in _totals(fields) if own != kind]


def _dealt_total(fields: Mapping[str, Any]) -> int:
    """--gpus's total of the dealt type (0: none, or of other types only)."""
    kind = _types(fields)
    return sum(int(count) for own, count in _totals(fields) if own == kind)


def _same_per_node(fields: Mapping[str, Any], kind: str) -> int:
    """``--gpus-per-node``'s GPUs of the dealt type (all when untyped)."""
    return sum(count for own, count in fields.get("gpus_per_node", ()) if own == kind)


def check(fields: Mapping[str, Any]) -> None:
    """Slurm's client checks of the GPU options together (``slurm_opt.c``)."""
    tasks = fields.get("num_tasks")
    gpus = _dealt_total(fields)
    per_task = fields["gpus_per_task"][1] if "gpus_per_task" in fields else 0
    per_gpu = fields.get("ntasks_per_gpu", 0)
    if per_gpu and per_task:
        raise Failure(
            "--gpus-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU",
            level="fatal",
        )
    if per_gpu and "gpus_per_socket" in fields:
        raise Failure(
            "--gpus-per-socket is mutually exclusive with --ntasks-per-gpu and "
            "SLURM_NTASKS_PER_GPU",
            level="fatal",
        )
    if per_gpu and "ntasks_per_node" in fields:
        raise Failure(
            "--ntasks-per-node is mutually exclusive with --ntasks-per-gpu and "
            "SLURM_NTASKS_PER_GPU",
            level="fatal",
        )
    if "cpus_per_gpu" in fields and "cpus_per_task" in fields:
        raise _fail("--cpus-per-gpu is mutually exclusive with --cpus-per-task")
    if "gpus_per_socket" in fields and not fields.get("sockets_per_node"):
        raise _fail("--gpus-per-socket option requires --sockets-per-node specification")
    if per_task and not gpus and tasks is None:
        raise _fail(
            "Failed to validate job spec. --gpus-per-task used without either --gpus or "
            "-n/--ntasks is not allowed."
        )
    if per_task and gpus and tasks is not None and gpus // per_task != tasks:
        raise _fail(
            "Failed to validate job spec. Based on --gpus and --gpus-per-task number of "
            "requested tasks differ from -n/--ntasks."
        )
    _types(fields)
    _check_counts(fields, gpus, tasks, per_gpu)


def _check_nodes(fields: Mapping[str, Any]) -> None:
    """--gpus's totals against GPUs per node and ``-N``, type by type in the order given,
    as sbatch 22.05 checks them: a total with GPUs of its type per node (of
    --gpus-per-node) fixes the node count (``--gpus=a100:2,v100:3
    --gpus-per-node=a100:1,v100:1``: two nodes, then three is refused), and each total
    must be at least the node count known by then (``--gpus=a100:2,v100:1
    --gpus-per-node=a100:1`` is "--gpus < -N", ``--gpus=a100:1,v100:2
    --gpus-per-node=v100:1`` is left to the controller)."""
    low, high = fields.get("min_nodes") or 0, fields.get("max_nodes") or 0
    for kind, total in _totals(fields):
        own = _same_per_node(fields, kind)
        if total and own:
            if total % own:
                raise _fail(
                    "Failed to validate job spec, --gpus is not multiple of "
                    "--gres=gpu/--gpus-per-node"
                )
            nodes = total // own
            if nodes < low or (high and nodes > high):
                raise _fail(
                    "Failed to validate job spec. Based on --gpu and --gres=gpu/--gpus-per-node "
                    f"required nodes ({nodes}) doesn't fall between min_nodes ({low}) and "
                    f"max_nodes ({high}) boundaries."
                )
            low = high = nodes
        if low and total < low:
            raise _fail("Failed to validate job spec, --gpus < -N")


def _check_counts(fields: Mapping[str, Any], gpus: int, tasks: int | None, per_gpu: int) -> None:
    per_node = _same_per_node(fields, _types(fields))
    if per_node and "gpus_per_task" in fields and per_node < fields["gpus_per_task"][1]:
        raise _fail("Failed to ensure --gpus >= --gpus-per-task")
    _check_nodes(fields)
    if per_gpu and tasks is not None and tasks % per_gpu:
        raise Failure(
            "Failed to validate job spec, -n/--ntasks has to be a multiple of --ntasks-per-gpu."
        )
    asked = (
        gpus
        or also(fields)
        or any(count for _, count in fields.get("gpus_per_node", ()))
        or "gpus_per_socket" in fields
        or "gpus_per_task" in fields
    )
    gres_gpus = any(
        item.split(":")[0] in ("gpu", "gres/gpu") for item in str(fields.get("gres", "")).split(",")
    )
    if "mem_per_gpu" in fields and not (asked or gres_gpus or per_gpu):
        raise _fail(
            f"Requested mem_per_tres=gres:gpu:{fields['mem_per_gpu']} but did not request any GPU."
        )


def spec_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSpec fields of the GPU options, as given (``--gpus-per-node`` as --gres)."""
    spec: dict[str, Any] = {}
    kind = _types(fields)
    if kind:
        spec["gpu_type"] = kind
    for field, key in (
        ("gpus_per_socket", "gpus_per_socket"),
        ("gpus_per_task", "gpus_per_task"),
    ):
        if key in fields and fields[key][1]:
            spec[field] = fields[key][1]
    if _dealt_total(fields):
        spec["gpus"] = _dealt_total(fields)
    if also(fields):
        spec["gpus_also"] = ",".join(f"{own}:{count}" for own, count in also(fields))
    for key in (
        "cpus_per_gpu",
        "mem_per_gpu",
        "ntasks_per_gpu",
        "gpu_bind",
        "gres_flags",
        "sockets_per_node",
    ):
        if key in fields:
            spec[key] = fields[key]
    per_node = [
        f"gpu:{kind}:{count}" if kind else f"gpu:{count}"
        for kind, count in fields.get("gpus_per_node", ())
        if count
    ]
    if per_node:
        spec["gres"] = ",".join(g for g in (fields.get("gres"), *per_node) if g)
    return spec


_LISTED = (("gpus", "gpus_listed"), ("gpus-per-node", "gpus_per_node_listed"))


def list_texts(texts: Mapping[str, str]) -> dict[str, str]:
    """``--gpus`` and ``--gpus-per-node`` as given where a comma list of ``[type:]count``
    (``1,2``), which Slurm's record shows so (TresPerJob=gres:gpu:1,gres:gpu:2) while
    it counts each type once (controller/gpulists.py)."""
    out: dict[str, str] = {}
    for key, field in _LISTED:
        items = texts.get(key, "").split(",")
        if len(items) > 1 and all(_list_item(item) for item in items):
            out[field] = texts[key]
    return out


def _list_item(item: str) -> bool:
    """Whether ``item`` is ``[type:]count`` (a positive count, a plain type name)."""
    kind, _, count = item.rpartition(":")
    return count.isdigit() and int(count) > 0 and ":" not in kind and not kind.startswith("gres")


#: Option -> the variable that tells the job of it (Slurm's ``set_env_from_opts``).
ENVIRONMENT = (
    ("cpus-per-gpu", "SLURM_CPUS_PER_GPU"),
    ("gpus", "SLURM_GPUS"),
    ("gpu-bind", "SLURM_GPU_BIND"),
    ("gpus-per-node", "SLURM_GPUS_PER_NODE"),
    ("gpus-per-socket", "SLURM_GPUS_PER_SOCKET"),
    ("gpus-per-task", "SLURM_GPUS_PER_TASK"),
    ("ntasks-per-gpu", "SLURM_NTASKS_PER_GPU"),
)


def environment(fields: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, str]:
    """The SLURM_* variables the options give the job (their text as given;
    SLURM_MEM_PER_GPU in MiB)."""
    env = {variable: texts[key] for key, variable in ENVIRONMENT if key in texts}
    if "mem_per_gpu" in fields:
        env["SLURM_MEM_PER_GPU"] = str(fields["mem_per_gpu"])
    return env
