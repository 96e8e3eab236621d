"""GPU isolation of jobs and steps (ConstrainDevices=yes) with the cgroup v2 device program.

cgroup v2 controls device access with an eBPF program of type
BPF_PROG_TYPE_CGROUP_DEVICE attached to a cgroup: the kernel runs it on
every open (and mknod) of a device file by a process of that cgroup, and the
access is refused with EPERM when it returns 0. The program built here
(:func:`program`) refuses exactly a list of devices, ``(kind, major, minor)``
with ``kind`` :data:`CHAR` or :data:`BLOCK`, and allows everything else:
``/dev/null``, ttys and the GPUs the job was given stay usable.

Who does what:

* the agent, at start-up, finds each served node's GPU device files in
  gres.conf (``File=``) and checks once that isolation works here
  (:func:`unavailable`: root, a cgroup2 mount, bpf(2) allowed); if it does
  not, it logs why, and launches with GPUs to refuse are refused. For each launch,
  :meth:`DeviceGuard.confine` says which cgroup the job's (or step's)
  processes go in and which devices they may not open: the device numbers
  (``st_rdev``) of the node's gres.conf GPU files that are not among those the
  launch's typed grant gives it (``GpuGrant``: its whole GPUs and those it
  holds a share of; :func:`nodeagent.gpubinding.granted`), never the GPUs its
  environment names, which the submitter could have set. Nothing to refuse
  means no cgroup at all.
  On a host where isolation does not work, a launch that has GPUs to refuse
  is refused itself (:class:`~nodeagent.runas.LaunchError`).
* a contained run (:mod:`nodeagent.cgroups`, ProctrackType=proctrack/cgroup)
  has its cgroup v2 cgroup made by :mod:`nodeagent.cgroups`, below the agent's
  own cgroup; the program is attached to it (:func:`fence`) and the tasks join
  it with the run's other cgroups. Otherwise:
* the supervisor (the step runner), root, makes the cgroup
  ``<cgroup2 mount>/corral/<node>/job_<id>/step_batch`` (``step_<n>``) and
  attaches the program (:func:`prepare`) before it forks; the forked child
  moves itself in (:func:`join`) before it becomes the user and execs, so that
  nothing of the job runs outside; once the job's processes are gone the
  cgroup is removed (:func:`remove`), and the job's directory with its last
  cgroup. A confined job's binding variables (CUDA_VISIBLE_DEVICES and the
  like) number its GPUs from 0, since that is how it sees them
  (:func:`local_binding`).

Isolation fails closed: a job or step whose devices cannot be fenced (no
program loaded, no cgroup made, the child not moved in) does not run; its
launch fails (:class:`~nodeagent.runas.LaunchError`, Slurm's JobLaunchFailure)
with the reason, since running it would hand it every GPU of the node.
Standard library only; ``ctypes`` is imported on first use (the
zygote imports it ahead: :func:`preload`).

Why this module is over 500 lines: the eBPF device program, its loading and
the cgroup handling it is attached with are one mechanism that fails closed as
a whole; ``DeviceGuard`` is its only entry for the agent.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import struct

from nodeagent import cgroups
from nodeagent.runas import LaunchError

# Importing typing costs every job milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

log = logging.getLogger(__name__)

#: Device kinds, as struct bpf_cgroup_dev_ctx's access_type has them in its low 16 bits.
BLOCK = 1  # BPF_DEVCG_DEV_BLOCK
CHAR = 2  # BPF_DEVCG_DEV_CHAR

#: Where the cgroups go, under the cgroup2 mount.
TOP = "corral"
#: The batch script's cgroup in its job's; a step's is ``step_<id>``.
BATCH = "step_batch"
#: A job's cgroup's ancestors that go with the last of them: the job's, the node's, TOP.
PARENTS = 3
#: How long :func:`remove` waits for the killed processes of a cgroup to be gone.
REMOVE_WAIT = 0.5

# bpf(2): commands, program and attach types, flags (linux/bpf.h).
_BPF_PROG_LOAD = 5
_BPF_PROG_ATTACH = 8
_BPF_PROG_TYPE_CGROUP_DEVICE = 15
_BPF_CGROUP_DEVICE = 6
_BPF_F_ALLOW_MULTI = 2
#: bpf's system call number by machine (os.uname().machine).
_BPF_SYSCALL = {
    "x86_64": 321,
    "aarch64": 280,
    "arm64": 280,
    "riscv64": 280,
    "loongarch64": 280,
    "ppc64le": 361,
    "ppc64": 361,
    "s390x": 351,
    "i386": 357,
    "i686": 357,
    "armv7l": 386,
}
_PROGRAM_NAME = b"corral_devices"  # what bpftool shows (15 bytes at most)
_LICENSE = b"GPL\0"
_LOG_SIZE = 1 << 16

# eBPF instruction codes (linux/bpf_common.h, linux/bpf.h).
_LDX_MEM_W = 0x61  # BPF_LDX | BPF_MEM | BPF_W: dst = *(u32 *)(src + off)
_ALU64_AND_K = 0x57  # BPF_ALU64 | BPF_AND | BPF_K: dst &= imm
_ALU64_MOV_K = 0xB7  # BPF_ALU64 | BPF_MOV | BPF_K: dst = imm
_JMP_JNE_K = 0x55  # BPF_JMP | BPF_JNE | BPF_K: if dst != imm, skip off instructions
_JMP_EXIT = 0x95  # BPF_JMP | BPF_EXIT: return r0
_R0, _R1, _R2, _R3, _R4 = range(5)

Rule = tuple[int, int, int]  # (kind, major, minor)


# ------------------------------------------------------------------ the program


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """One eBPF instruction: struct bpf_insn {u8 code; u8 dst:4, src:4; s16 off; s32 imm}."""
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(deny: Iterable[Rule]) -> bytes:
    """A cgroup device program refusing the devices ``deny`` lists, allowing all others.

    It reads struct bpf_cgroup_dev_ctx {u32 access_type; u32 major; u32 minor}
    from r1 (the device kind is access_type's low 16 bits; the access, read,
    write or mknod, does not matter) and returns 0 (refuse) or 1 (allow)::

        r2 = ctx->access_type & 0xffff; r3 = ctx->major; r4 = ctx->minor
        if r2 == kind && r3 == major && r4 == minor: return 0    (each rule)
        return 1
    """
    code = [
        _insn(_LDX_MEM_W, _R2, _R1, 0),
        _insn(_ALU64_AND_K, _R2, imm=0xFFFF),
        _insn(_LDX_MEM_W, _R3, _R1, 4),
        _insn(_LDX_MEM_W, _R4, _R1, 8),
    ]
    for kind, major, minor in sorted(set(deny)):
        code += [
            _insn(_JMP_JNE_K, _R2, off=4, imm=kind),  # not this one: on to the next rule
            _insn(_JMP_JNE_K, _R3, off=3, imm=major),
            _insn(_JMP_JNE_K, _R4, off=2, imm=minor),
            _insn(_ALU64_MOV_K, _R0, imm=0),
            _insn(_JMP_EXIT),
        ]
    code += [_insn(_ALU64_MOV_K, _R0, imm=1), _insn(_JMP_EXIT)]
    return b"".join(code)


# ------------------------------------------------------------------ bpf(2)

_libc: Any = None


def preload() -> None:
    """Import ctypes and find libc now (the zygote does, for the children it forks)."""
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: bytes) -> int:
    """bpf(cmd, attr, sizeof attr): its non-negative result, else OSError."""
    number = _BPF_SYSCALL.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"no bpf system call number known for {os.uname().machine}")
    preload()
    import ctypes

    buf = ctypes.create_string_buffer(attr, len(attr))
    result: int = _libc.syscall(
        ctypes.c_long(number), ctypes.c_long(cmd), buf, ctypes.c_uint(len(attr))
    )
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def load(deny: Iterable[Rule]) -> int:
    """Load :func:`program` for ``deny`` into the kernel: the program's descriptor.

    OSError when the kernel refuses it (EPERM: not privileged enough); the
    verifier's log is in the message when it rejects the program itself.
    """
    import ctypes

    code = program(deny)
    insns = ctypes.create_string_buffer(code, len(code))
    license_ = ctypes.create_string_buffer(_LICENSE, len(_LICENSE))

    def attr(log_buf: Any = None) -> bytes:
        return struct.pack(
            "<IIQQIIQII16sII",
            _BPF_PROG_TYPE_CGROUP_DEVICE,
            len(code) // 8,
            ctypes.addressof(insns),
            ctypes.addressof(license_),
            1 if log_buf is not None else 0,  # log_level
            _LOG_SIZE if log_buf is not None else 0,
            ctypes.addressof(log_buf) if log_buf is not None else 0,
            0,  # kern_version
            0,  # prog_flags
            _PROGRAM_NAME,
            0,  # prog_ifindex
            0,  # expected_attach_type
        )

    try:
        return _bpf(_BPF_PROG_LOAD, attr())
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EACCES):
            raise
        verifier = ctypes.create_string_buffer(_LOG_SIZE)
        with contextlib.suppress(OSError):
            os.close(_bpf(_BPF_PROG_LOAD, attr(verifier)))
        text = verifier.value.decode(errors="replace").strip()
        raise OSError(exc.errno, f"{exc.strerror}: {text}" if text else exc.strerror) from None


def attach(prog_fd: int, cgroup_fd: int) -> None:
    """Attach a loaded device program to the cgroup open as ``cgroup_fd``.

    With BPF_F_ALLOW_MULTI: the programs of the cgroup's ancestors (a
    container's, systemd's) still run, and every one must allow an access.
    The cgroup holds the program from then on; its descriptor may be closed.
    """
    attr = struct.pack("<IIIII", cgroup_fd, prog_fd, _BPF_CGROUP_DEVICE, _BPF_F_ALLOW_MULTI, 0)
    _bpf(_BPF_PROG_ATTACH, attr)


# ------------------------------------------------------------------ cgroups


def cgroup2_mount(mounts: str = "/proc/self/mounts") -> str | None:
    """Where the cgroup v2 hierarchy is mounted (see :func:`nodeagent.cgroups.cgroup2_mount`)."""
    return cgroups.cgroup2_mount(mounts)


def _make(path: str) -> str:
    """Create cgroup ``path`` (and its parents): the path made.

    If ``path`` exists it is a leftover of a run that died, or another agent's
    on this host with the same node and job names (test clusters): it is left
    alone and ``path.<pid>`` is made instead. A parent removed meanwhile (by the
    end of the last job there, see :func:`remove`) is made again.
    """
    candidates = (path, f"{path}.{os.getpid()}")
    for _ in range(3):
        for candidate in candidates:
            try:
                os.makedirs(os.path.dirname(candidate), exist_ok=True)
                os.mkdir(candidate)
                return candidate
            except FileExistsError:
                continue
            except FileNotFoundError:
                break  # the job's directory went with its last step's cgroup: again
        else:
            # Both taken: the second by a dead process that had our pid.
            with contextlib.suppress(OSError):
                os.rmdir(candidates[1])
    raise OSError(errno.EEXIST, f"cannot create cgroup {path}")


def fence(path: str, deny: Sequence[Rule]) -> None:
    """Attach a device program refusing ``deny`` to the existing cgroup ``path`` (a
    contained run's, :mod:`nodeagent.cgroups`). :class:`LaunchError` when that
    cannot be done: the job or step must then not run (it would open every GPU)."""
    prog_fd = _loaded(deny)
    try:
        _attach_at(prog_fd, path)
    except OSError as exc:
        raise LaunchError(f"cannot fence GPUs: cgroup {path}: {exc}") from None
    finally:
        os.close(prog_fd)


def _loaded(deny: Sequence[Rule]) -> int:
    """:func:`load`, failing as a launch does."""
    try:
        return load(deny)
    except OSError as exc:
        raise LaunchError(f"cannot fence GPUs: cannot load the device program: {exc}") from None


def _attach_at(prog_fd: int, path: str) -> None:
    """:func:`attach` to the cgroup at ``path``."""
    cgroup_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        attach(prog_fd, cgroup_fd)
    finally:
        os.close(cgroup_fd)


def prepare(path: str, deny: Sequence[Rule]) -> str:
    """Create cgroup ``path`` with a device program refusing ``deny``: the cgroup's
    path (see :func:`_make`); for a run that is not contained (ProctrackType is not
    proctrack/cgroup, or cgroups unusable but for the fence). :class:`LaunchError`
    when that cannot be done: the job or step must then not run (it would open
    every GPU)."""
    prog_fd = _loaded(deny)
    made = None
    try:
        made = _make(path)
        _attach_at(prog_fd, made)
    except OSError as exc:
        if made is not None:
            remove(made, 0, parents=PARENTS)
        else:  # the job's and node's cgroups may have been made for it: not kept empty
            _remove_empty_parents(path)
        raise LaunchError(f"cannot fence GPUs: cgroup {made or path}: {exc}") from None
    finally:
        os.close(prog_fd)
    return made


def _remove_empty_parents(path: str) -> None:
    """rmdir ``path``'s :data:`PARENTS` ancestors, each if it is empty."""
    for _ in range(PARENTS):
        path = os.path.dirname(path)
        try:
            os.rmdir(path)
        except OSError:  # not empty (another job's), or never made
            return


def join(path: str, pid: int = 0) -> None:
    """Move process ``pid`` (0: the caller) into cgroup ``path`` (as root)."""
    fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(pid or os.getpid()).encode())
    finally:
        os.close(fd)


def enter(path: str | None) -> bool:
    """In a forked child, still root, before it execs: move into cgroup ``path`` if
    there is one; whether it did. :class:`LaunchError` when it cannot: the child
    must not exec unfenced."""
    if path is None:
        return False
    try:
        join(path)
    except OSError as exc:
        raise LaunchError(f"cannot fence GPUs: cannot join cgroup {path}: {exc}") from None
    return True


def remove(path: str, wait: float = REMOVE_WAIT, parents: int = 1) -> bool:
    """Remove cgroup ``path`` once its processes are gone (``wait`` seconds at most),
    then up to ``parents`` of its ancestors, each if that was its last child (a
    job's cgroup: :data:`PARENTS`); False if processes remain.

    A process that left its job's process group outlives the job and keeps its
    cgroup (and the devices it may not open); the cgroup is then left in place.
    """
    if not cgroups.remove_when_empty(path, wait):
        return False
    for _ in range(parents):
        path = os.path.dirname(path)
        try:
            os.rmdir(path)
        except OSError:  # not the last: another job's or step's cgroup is still there
            break
    return True


def default_top(name: str = TOP) -> str | None:
    """Where the cgroups go: ``<cgroup2 mount>/<name>`` (``name``: see
    :func:`nodeagent.cgroups.top_name`); None without a cgroup2 mount."""
    mount = cgroup2_mount()
    return None if mount is None else os.path.join(mount, name)


def unavailable(top: str | None) -> str | None:
    """Why device isolation cannot work here with cgroups under ``top`` (None: there
    is no cgroup2 mount), or None when it can.

    Tried for real: a cgroup made under ``top``, an allow-all program loaded and
    attached to it, the cgroup removed.
    """
    if os.geteuid() != 0:
        return "the node agent is not root"
    if top is None:
        return "no cgroup2 file system is mounted"
    probe = os.path.join(top, f"probe.{os.getpid()}")
    try:
        prog_fd = load(())
    except OSError as exc:
        return f"cannot load a device program: {exc}"
    try:
        made = _make(probe)
        try:
            _attach_at(prog_fd, made)
        finally:
            remove(made, 0, parents=1)  # and TOP, unless a job's cgroup is there
    except OSError as exc:
        return f"cannot attach a device program to a cgroup under {top}: {exc}"
    finally:
        os.close(prog_fd)
    return None


# ------------------------------------------------------------------ the agent's side


def device_rule(path: str) -> Rule | None:
    """``(kind, major, minor)`` of a device file; None if it is missing or no device."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if stat.S_ISCHR(info.st_mode):
        kind = CHAR
    elif stat.S_ISBLK(info.st_mode):
        kind = BLOCK
    else:
        return None
    return (kind, os.major(info.st_rdev), os.minor(info.st_rdev))


#: What binds a program to its GPUs by index (the controller's gpu_environment).
BINDING = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")


def local_binding(env: dict[str, str], gpus: set[int]) -> None:
    """Number the GPUs in ``env``'s binding variables as a program confined to ``gpus``
    sees them: from 0, in the node's order.

    CUDA, ROCm and oneAPI count only the devices a process can open, so in a
    device cgroup a job's GPUs 4 and 6 are its devices 0 and 1, and
    CUDA_VISIBLE_DEVICES=4,6 would name none. As Slurm does with
    ConstrainDevices=yes, the binding variables then hold those local numbers;
    SLURM_JOB_GPUS and SLURM_STEP_GPUS keep the node's indices. Only for a
    process that is confined: one that is not sees every GPU.
    """
    local = {index: str(rank) for rank, index in enumerate(sorted(gpus))}
    for name in BINDING:
        values = env[name].split(",") if name in env else []
        if values and all(v.strip().isdigit() and int(v) in local for v in values):
            env[name] = ",".join(local[int(v)] for v in values)


def _name(part: str) -> str:
    """A node name as one path component."""
    part = part.replace("/", "_")
    return f"_{part}" if part in ("", ".", "..") else part


class DeviceGuard:
    """The agent's side: each served node's GPUs from gres.conf, and what a launch gets.

    ``gpus`` maps a node to its GPUs as ``(index, files)``: the index a job's
    SLURM_JOB_GPUS names it by (the number its first file ends with) and its
    device files (several for a MIG device). ``top`` is where the cgroups go.
    """

    def __init__(
        self,
        top: str,
        gpus: Mapping[str, Sequence[tuple[int, Sequence[str]]]],
        broken: str | None = None,
    ) -> None:
        self.top = top
        self.gpus = {node: tuple(devices) for node, devices in gpus.items()}
        self.broken = broken  # why isolation cannot work on this host (None: it can)

    def denied(self, node: str, mine: set[int]) -> list[Rule]:
        """The devices of ``node``'s GPUs not in ``mine`` (by index), but for files
        those share with GPUs that are."""
        allowed: set[Rule] = set()
        refused: set[Rule] = set()
        for index, files in self.gpus.get(node, ()):
            for path in files:
                rule = device_rule(path)
                if rule is not None:
                    (allowed if index in mine else refused).add(rule)
        return sorted(refused - allowed)

    def confine(
        self, node: str, job_id: int, leaf: str, gpus: set[int]
    ) -> tuple[str, list[list[int]]]:
        """The cgroup and the refused devices (as JSON keeps them) of a batch job
        (``leaf`` :data:`BATCH`) or step (``step_<id>``) granted ``gpus`` (see
        :func:`nodeagent.gpubinding.granted`); ``("", [])`` when nothing is to be
        refused.
        :class:`LaunchError` when something is, but isolation cannot work here."""
        deny = self.denied(node, gpus)
        if not deny:
            return "", []
        if self.broken is not None:
            raise LaunchError(f"cannot fence GPUs on node {node}: {self.broken}")
        path = os.path.join(self.top, _name(node), f"job_{job_id}", leaf)
        return path, [list(rule) for rule in deny]


def rules(deny: Sequence[Sequence[int]]) -> list[Rule]:
    """A launch description's refused devices as rules."""
    return [(int(kind), int(major), int(minor)) for kind, major, minor in deny]
