"""``srun --multi-prog``'s configuration file: a program and arguments per task.

Each line is ``RANKS PROGRAM [ARGS...]``. ``RANKS`` is a comma-separated list of
task ids and ranges (``0-3,5``), or ``*`` for every task no earlier line named
(then the last line). ``%t`` in the program or arguments becomes the task's id
and ``%o`` its offset among the line's tasks (under ``*``, its id). ``#`` starts a comment line;
blank lines are skipped; quotes group words ("a b" is one argument; an
unterminated quote runs to the end of the line, as Slurm reads it).

srun checks the file against the step's task count before it asks for the
step (``verify``: errors in srun's words, the line's number after the cause);
each node's agent picks its tasks' command lines (``commands``). The text
travels in the step request, so the file need only exist where srun runs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Entry", "MultiProgError", "commands", "parse", "verify"]


class MultiProgError(ValueError):
    """A configuration file srun refuses: its lines, as srun prints them."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass(frozen=True, slots=True)
class Entry:
    """One line: its tasks (() for ``*``) and its words, ``%t``/``%o`` unexpanded."""

    line: int
    tasks: tuple[int, ...]
    words: tuple[str, ...]


def _words(text: str) -> list[str]:
    """Whitespace-separated words; quotes group, and are dropped."""
    words: list[str] = []
    current: list[str] = []
    quote = ""
    started = False
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
            else:
                current.append(ch)
        elif ch in "\"'":
            quote, started = ch, True
        elif ch.isspace():
            if started:
                words.append("".join(current))
                current, started = [], False
        else:
            current.append(ch)
            started = True
    if started:
        words.append("".join(current))
    return words


def _ranks(spec: str, ntasks: int) -> tuple[int, ...]:
    """``0-3,5`` as task ids (each below ``ntasks``); MultiProgError for a bad one."""
    tasks: list[int] = []
    for item in spec.split(","):
        low, dash, high = item.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise MultiProgError(f"Invalid task range specification ({spec})")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise MultiProgError(f"Invalid task range, {first}-{last}")
        if last >= ntasks:
            raise MultiProgError(f"Invalid task id, {last} >= ntasks")
        tasks.extend(range(first, last + 1))
    return tuple(tasks)


def parse(text: str, name: str, ntasks: int) -> list[Entry]:
    """The entries of configuration file ``name`` for a step of ``ntasks`` tasks, each
    task named once (MultiProgError, in srun's words, otherwise)."""
    entries: list[Entry] = []
    seen: set[int] = set()
    star = False
    for number, raw in enumerate(text.splitlines(), start=1):
        words = _words(raw)
        if not words or words[0].startswith("#"):
            continue
        invalid = f"Line {number} of configuration file {name} invalid"
        if star:
            raise MultiProgError("Task range specification with asterisk must be last", invalid)
        if len(words) < 2:  # no program
            raise MultiProgError(invalid)
        if words[0] == "*":
            star = True
            tasks: tuple[int, ...] = ()
        else:
            try:
                tasks = _ranks(words[0], ntasks)
            except MultiProgError as exc:
                raise MultiProgError(*exc.lines, invalid) from None
            for task in tasks:
                if task in seen:
                    raise MultiProgError(f"Duplicate record for task {task}", invalid)
                seen.add(task)
        entries.append(Entry(number, tasks, tuple(words[1:])))
    if not star:
        for task in range(ntasks):
            if task not in seen:
                raise MultiProgError(
                    f"Configuration file {name} invalid, no record for task id {task}"
                )
    return entries


def verify(text: str, name: str, ntasks: int) -> None:
    """srun's check of the file before the step is asked for."""
    parse(text, name, ntasks)


def commands(text: str, ntasks: int, tasks: tuple[int, ...] | list[int]) -> list[list[str]]:
    """The command line of each of ``tasks`` (global ids), ``%t`` and ``%o`` expanded."""
    entries = parse(text, "", ntasks)
    named = {task: (entry, offset) for entry in entries for offset, task in enumerate(entry.tasks)}
    star = next((entry for entry in entries if not entry.tasks), None)
    out = []
    for task in tasks:
        if task in named:
            entry, offset = named[task]
        elif star is not None:
            entry, offset = star, task  # ``*`` is every task from 0: its offset is the id
        else:  # verified by srun: cannot be
            raise MultiProgError(f"Configuration file invalid, no record for task id {task}")
        out.append([_expand(word, task, offset) for word in entry.words])
    return out


def _expand(word: str, task: int, offset: int) -> str:
    """``%t`` and ``%o`` in one word (``%%``: a percent sign)."""
    out: list[str] = []
    i = 0
    while i < len(word):
        if word[i] == "%" and i + 1 < len(word) and word[i + 1] in "to%":
            code = word[i + 1]
            out.append(str(task) if code == "t" else str(offset) if code == "o" else "%")
            i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)
