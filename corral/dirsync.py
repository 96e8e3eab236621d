"""Making a rename durable: fsync the directory that holds the new name.

``rename`` is atomic but lives in the directory, not in the file: after a
power cut a file whose data was fsync'ed can still come back under its old
name (or not at all) unless the directory was fsync'ed after the rename.
"""

from __future__ import annotations

import os


def sync_dir(path: str) -> None:
    """fsync the directory ``path`` so the names it holds survive a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: str, path: str) -> None:
    """Rename ``tmp`` (already fsync'ed) over ``path`` and make the rename durable."""
    os.replace(tmp, path)
    sync_dir(os.path.dirname(path) or ".")
