"""Where a step's standard input goes: srun's ``-i/--input`` read as Slurm 22.05 reads it.

srun(1) "IO Redirection" names the forms, and a real 22.05 behaves so (measured with
two slurmd, docs/design.md "Standard input of a step"):

* nothing, ``all`` or ``-1``: srun reads its own stdin and every task gets all of it (each
  task's stdin closes when srun's input ends);
* ``none``: every task reads /dev/null;
* a task id below the step's task count (``-i 1``): that task alone gets srun's
  stdin, the others read /dev/null (leading zeros allowed: ``01`` is task 1); a
  number at or past the count is a file name (srun given ``-i ''`` sends task 0's);
* a file name whose pattern differs from task to task (``%t``, ``%n``, ``%N``): each
  task's file is opened on its node, relative to the step's working directory;
* any other file name (``%j`` and the like expanded): srun opens it, relative to its
  own directory, and sends its bytes to every task as it sends its stdin.

Both srun (what to read and whom to send it to) and the step runners (which tasks get
a pipe fed by IN frames) decide from the same value and the step's task count, so
they cannot disagree.
"""

from __future__ import annotations

ALL = "all"
NONE = "none"
TASK = "task"
NODE_FILE = "node-file"
SRUN_FILE = "srun-file"

#: Pattern letters that name something each task or node has its own of.
PER_TASK_LETTERS = frozenset("tnN")


def per_task(pattern: str) -> bool:
    """Whether ``pattern`` names a different file for different tasks or nodes (a
    backslash turns patterns off, as corral/filepattern.py reads it)."""
    if "\\" in pattern:
        return False
    at, end = 0, len(pattern)
    while at < end:
        if pattern[at] != "%" or at + 1 == end:
            at += 1
            continue
        if pattern[at + 1] == "%":
            at += 2
            continue
        letter = at + 1
        while letter < end and pattern[letter].isascii() and pattern[letter].isdigit():
            letter += 1
        if letter < end and pattern[letter] in PER_TASK_LETTERS:
            return True
        at = letter + 1
    return False


def mode(value: str, ntasks: int) -> tuple[str, int]:
    """(the form of ``value``, the task it names: -1 unless ``TASK``)."""
    if value in ("", ALL, "-1"):
        return ALL, -1
    if value == NONE:
        return NONE, -1
    if value.isascii() and value.isdigit() and int(value) < ntasks:
        return TASK, int(value)
    if per_task(value):
        return NODE_FILE, -1
    return SRUN_FILE, -1


def fed_by_srun(value: str, ntasks: int) -> bool:
    """Whether srun sends the step any input (IN frames) at all."""
    return mode(value, ntasks)[0] in (ALL, TASK, SRUN_FILE)


def piped(value: str, ntasks: int, task_id: int) -> bool:
    """Whether task ``task_id``'s stdin is a pipe that IN frames feed."""
    form, target = mode(value, ntasks)
    if form == TASK:
        return task_id == target
    return form in (ALL, SRUN_FILE)
