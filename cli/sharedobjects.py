"""The shared objects an executable loads, for ``sbcast --send-libs``.

The dynamic loader itself knows which files a program loads, so ``ldd`` is asked,
as Slurm's sbcast does: each line naming a file (``libc.so.6 => /lib/.../libc.so.6
(0x...)``, or the loader's own ``/lib64/ld-linux-x86-64.so.2 (0x...)``) gives one,
in ``ldd``'s order; the kernel's vDSO, which is no file, and a library ``ldd``
could not find are not sent. A file that is no dynamic executable (a script, a
static program) has none. Files in a directory of BcastExclude (or ``--exclude``)
stay: every node has the system's own.
"""

from __future__ import annotations

import subprocess

#: Where ldd is looked for: the C library's script, as on every glibc system.
LDD = "ldd"


def shared_objects(program: str, exclude: tuple[str, ...]) -> list[str]:
    """The paths of ``program``'s shared objects outside ``exclude``'s directories."""
    try:
        listing = subprocess.run(
            [LDD, program], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if listing.returncode != 0:
        return []
    return [path for path in parse_ldd(listing.stdout) if not excluded(path, exclude)]


def parse_ldd(text: str) -> list[str]:
    """The files ``ldd``'s output names, in order and once each."""
    found: list[str] = []
    for line in text.splitlines():
        _, arrow, target = line.strip().rpartition("=>")
        words = (target if arrow else line).split()
        if words and words[0].startswith("/") and words[0] not in found:
            found.append(words[0])
    return found


def excluded(path: str, exclude: tuple[str, ...]) -> bool:
    """Whether ``path`` lies in one of the directories ``exclude`` lists (or below)."""
    return any(path.startswith(directory.rstrip("/") + "/") for directory in exclude)
