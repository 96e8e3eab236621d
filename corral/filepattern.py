"""Expansion of ``%j``-style patterns in a batch job's output, error and input names.

sbatch passes ``-o/-e/-i`` through unexpanded; the node agent expands them when
the job starts, because only then are the job's node, array task and restart
count known. The rules follow Slurm's batch step (sbatch.1, FILENAME PATTERN):

* ``%%`` is ``%``; ``%A`` the array's master job id (the job id outside an
  array); ``%a`` the array index (4294967294, Slurm's NO_VAL, outside an
  array); ``%b`` that index modulo 10; ``%j`` the job id; ``%J`` the job id,
  followed by ``.step`` for a numbered step; ``%N`` the short host name; ``%n``
  the node index; ``%r`` the restart count; ``%s`` the step (``batch``);
  ``%t`` the task rank; ``%u`` the user name; ``%x`` the job name.
* Digits between ``%`` and the letter zero-pad a number (``%4j`` -> ``0128``),
  at most 10 wide; they do not pad names.
* An unknown letter leaves the whole ``%...`` text as it is.
* A backslash anywhere turns expansion off: the name is used literally, with
  each escaping backslash removed (``\\\\`` stands for one backslash). This is how
  users write names that contain ``%``.
"""

from __future__ import annotations

#: Slurm's NO_VAL, what ``%a`` gives outside a job array.
NO_ARRAY_TASK = 4294967294

#: The widest zero padding Slurm applies.
MAX_WIDTH = 10


def expand(
    pattern: str,
    *,
    job_id: int,
    array_job_id: int = 0,
    array_task_id: int | None = None,
    user: str,
    job_name: str,
    node: str,
    node_index: int = 0,
    task_id: int = 0,
    restarts: int = 0,
    step: str = "batch",
) -> str:
    """Return ``pattern`` with its ``%`` fields replaced for one job (see the module doc).

    ``step`` is ``"batch"`` for the batch script or a step number as text.
    Never raises: text that is not a known field is copied unchanged.
    """
    if "\\" in pattern:
        return _unescape(pattern)
    task = NO_ARRAY_TASK if array_task_id is None else array_task_id
    numbers = {
        "A": job_id if array_task_id is None else array_job_id,
        "a": task,
        "b": task % 10,
        "j": job_id,
        "n": node_index,
        "r": restarts,
        "t": task_id,
    }
    words = {"N": node, "u": user, "x": job_name}
    out: list[str] = []
    i, end = 0, len(pattern)
    while i < end:
        char = pattern[i]
        if char != "%" or i + 1 == end:
            out.append(char)
            i += 1
            continue
        if pattern[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        j = i + 1
        while j < end and pattern[j].isdigit() and pattern[j].isascii():
            j += 1
        width = _width(pattern[i + 1 : j])
        letter = pattern[j] if j < end else ""
        if letter in numbers:
            out.append(f"{numbers[letter]:0{width}d}")
        elif letter in words:
            out.append(words[letter])
        elif letter in ("J", "s"):
            out.append(_step_field(letter, job_id, step, width))
        else:
            out.append(pattern[i : j + 1])
        i = j + 1
    return "".join(out)


def _width(digits: str) -> int:
    """The zero padding ``digits`` ask for, at most ``MAX_WIDTH`` (digits may be many)."""
    significant = digits.lstrip("0")
    return MAX_WIDTH if len(significant) > 2 else min(int(significant or "0"), MAX_WIDTH)


def _step_field(letter: str, job_id: int, step: str, width: int) -> str:
    """``%J`` or ``%s``: the batch step has no number to show."""
    padded = step.zfill(width) if step.isdigit() else step
    if letter == "s":
        return padded
    job = f"{job_id:0{width}d}"
    return job if step == "batch" else f"{job}.{step}"


def _unescape(pattern: str) -> str:
    """Drop escaping backslashes; ``\\\\`` is a literal backslash."""
    out: list[str] = []
    i, end = 0, len(pattern)
    while i < end:
        if pattern[i] == "\\":
            i += 1
            if i < end and pattern[i] == "\\":
                out.append("\\")
                i += 1
            continue
        out.append(pattern[i])
        i += 1
    return "".join(out)
