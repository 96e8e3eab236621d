"""The batch script: finding it, reading it, checking it, and its #SBATCH directives.

sbatch reads the whole script before it returns (dask deletes the file and
submitit renames it right after sbatch exits), rejects scripts Slurm rejects
with Slurm's words, and extracts the options written in ``#SBATCH`` lines:

* only lines that start at column 0 with ``#SBATCH`` (or the old ``#SLURM``,
  with a warning) count, and only up to the first line that is neither blank
  nor a comment: later directives belong to the script's commands;
* a directive is split into words like a simple shell: ``'`` and ``"`` group
  (the quotes go), a backslash escapes the next character (``\\ `` keeps a
  space), and an unquoted ``#`` starts a comment;
* an unmatched quote is fatal.
"""

from __future__ import annotations

import os
import sys

from cli.failure import Failure

#: What ``--wrap`` puts before the command, byte for byte as Slurm does.
WRAP_HEADER = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n"

#: Characters C's isspace() accepts, which is what Slurm splits directives on.
_SPACE = " \t\n\v\f\r"


def wrap(command: str) -> str:
    """The script ``--wrap=command`` submits."""
    return f"{WRAP_HEADER}{command}\n"


def resolve(name: str, cwd: str, search_path: str) -> str:
    """Where the script argument ``name`` lives, searched in Slurm's order.

    A name starting with ``.`` or ``/`` is taken as given (relative to
    ``cwd``); otherwise a readable file in ``cwd``, then in each directory of
    ``search_path`` (``$PATH``). Returns ``name`` itself if nothing is found,
    so that opening it reports the name the user typed.
    """
    if name.startswith("/"):
        return name
    if name.startswith("."):
        return os.path.join(cwd, name)
    for directory in [cwd, *search_path.split(":")]:
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.R_OK):
            return os.path.abspath(candidate)
    return name


def read(path: str | None) -> bytes:
    """The script's bytes from ``path``, or from standard input when ``path`` is None."""
    if path is None:
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        raise Failure(f"Unable to open file {path}") from None


def check(data: bytes) -> str:
    """Return the script as text, or raise ``Failure`` with Slurm's complaint about it.

    Slurm checks, in this order: empty, only whitespace, no ``#!`` on the first
    line, a NUL byte, DOS line breaks. Corral also needs the text to be UTF-8,
    because the job script travels as a protobuf string.
    """
    if not data:
        raise Failure("Batch script is empty!")
    if not data.split(b"\0", 1)[0].strip(_SPACE.encode()):
        raise Failure("Batch script contains only whitespace!")
    if not data.startswith(b"#!"):
        raise Failure(
            "This does not look like a batch script.  The first",
            "line must start with #! followed by the path to an interpreter.",
            "For instance: #!/bin/sh",
        )
    if b"\0" in data:
        raise Failure(
            "The Slurm controller does not allow scripts that",
            "contain a NULL character '\\0'.",
        )
    if b"\r\n" in data:
        raise Failure(
            "Batch script contains DOS line breaks (\\r\\n)",
            "instead of expected UNIX line breaks (\\n).",
        )
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise Failure("Batch script is not valid UTF-8 text") from None


def directives(script: str, file: str) -> list[list[str]]:
    """The words of the script's #SBATCH lines, in order, as one argument list per
    component of a heterogeneous job: a ``#SBATCH hetjob`` (or the older ``packjob``)
    line starts the next one. A plain script has one.

    ``file`` names the script in error messages (Slurm uses its base name, or
    ``stdin``).
    """
    groups: list[list[str]] = [[]]
    words = groups[0]
    warned = False
    for lineno, line in enumerate(script.split("\n"), 1):
        if line.startswith("#SBATCH"):
            rest = line[7:]
        elif line.startswith("#SLURM"):
            rest = line[6:]
            if not warned:
                print(
                    "sbatch: error: Change from #SLURM to #SBATCH in your script "
                    "and verify the options are valid in sbatch",
                    file=sys.stderr,
                )
                warned = True
        elif line.lstrip(_SPACE)[:1] in ("", "#"):
            continue
        else:
            break
        if rest.lstrip(_SPACE).lower().split(None, 1)[:1] in (["hetjob"], ["packjob"]):
            words = []
            groups.append(words)
            continue
        words.extend(split(rest, file, lineno))
    return groups


def split(text: str, file: str, lineno: int) -> list[str]:
    """Split one directive's text into words (see the module doc).

    Raises ``Failure`` (fatal, exit 1) for an unmatched quote, and for a word
    starting with ``:``, the separator of heterogeneous job components. Unlike
    Slurm, which stops reading the line there, ``""`` is an empty word.
    """
    words: list[str] = []
    i, end = 0, len(text)
    while True:
        start = i
        while i < end and text[i] in _SPACE:
            i += 1
        if i == end or text[i] == "#":
            return words
        if text[i] == ":":
            raise Failure(
                f"{file}: line {lineno}: Unexpected `:` in [{text[start:]}]",
                status=1,
                level="fatal",
            )
        word, i, quote = _word(text, i)
        if quote:
            raise Failure(
                f"{file}: line {lineno}: Unmatched `{quote}` in [{text[start:]}]",
                status=1,
                level="fatal",
            )
        if word is not None:
            words.append(word)


def _word(text: str, i: int) -> tuple[str | None, int, str]:
    """Read the word starting at ``text[i]``: (the word, where reading stopped, open quote).

    The word is None when it held nothing, not even quotes (a lone ``\\``);
    the open quote is ``"`` or ``'`` if the text ended inside quotes, else "".
    A ``#`` outside quotes ends the word and the line.
    """
    word: list[str] = []
    quote = ""
    quoted = False
    end = len(text)
    while i < end and (quote or text[i] not in _SPACE):
        char = text[i]
        i += 1
        if char == "\\":
            if i < end and (quote or text[i] not in _SPACE or text[i] == " "):
                word.append(text[i])
                i += 1
        elif quote and char == quote:
            quote = ""
        elif not quote and char in "\"'":
            quote = char
            quoted = True
        elif not quote and char == "#":
            i = end
        else:
            word.append(char)
    return ("".join(word) if word or quoted else None), i, quote
