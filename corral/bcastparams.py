"""BcastParameters and BcastExclude (slurm.conf): sbcast's defaults, for clients and daemons.

Slurm 22.05 reads three words in BcastParameters: ``DestDir=`` (where a DEST that
is not absolute goes, instead of the current directory), ``Compression=`` (the
library sbcast uses when ``-C`` does not name one, and whether it compresses at
all without ``-C``) and ``send_libs`` (sbcast sends the executable's shared
objects too, as ``--send-libs``). BcastExclude lists the directories whose shared
objects are not sent (``none``: every one is).

slurmctld accepts any other word and never reads it; here an unknown word is a
configuration error, so that a site's setting is never ignored in silence. Both
the clients (``corral.clientconf``) and the daemons' model (``corral.config``) go
through ``parse``, so they agree. Standard library only, and no ``re``: sbcast
pays for every import at start-up.
"""

from __future__ import annotations

#: Compression='s libraries: Slurm's lz4 and none, and Corral's zlib (cli/sbcast.py).
COMPRESSIONS = ("lz4", "none", "zlib")
#: BcastExclude's default (slurm.conf(5)).
DEFAULT_EXCLUDE = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")


class BcastParams:
    """BcastParameters as read: ``compression`` is the text written ("": not set)."""

    __slots__ = ("compression", "dest_dir", "send_libs")

    def __init__(self, dest_dir: str = "", compression: str = "", send_libs: bool = False):
        self.dest_dir = dest_dir
        self.compression = compression
        self.send_libs = send_libs

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BcastParams) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    def __hash__(self) -> int:
        return hash((self.dest_dir, self.compression, self.send_libs))

    def __repr__(self) -> str:
        return (
            f"BcastParams(dest_dir={self.dest_dir!r}, compression={self.compression!r}, "
            f"send_libs={self.send_libs!r})"
        )


def parse(text: str) -> BcastParams:
    """BcastParameters' comma list; ValueError naming the first word it does not know.

    Words are case-insensitive, as slurmctld matches them; a relative DestDir is
    refused (it would depend on each sbcast's current directory)."""
    params = BcastParams()
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        key, equals, value = word.partition("=")
        lowered = key.lower()
        if lowered == "destdir" and equals:
            if not value.startswith("/"):
                raise ValueError(f"BcastParameters DestDir={value} is not an absolute path")
            params.dest_dir = value
        elif lowered == "compression" and equals:
            if value.lower() not in COMPRESSIONS:
                raise ValueError(f"BcastParameters Compression={value}: use lz4, none or zlib")
            params.compression = value.lower()
        elif lowered == "send_libs" and not equals:
            params.send_libs = True
        else:
            raise ValueError(f"BcastParameters: unknown option {word!r}")
    return params


def parse_exclude(text: str) -> tuple[str, ...]:
    """BcastExclude (or sbcast ``--exclude``): absolute directories, or none at all for
    ``none``; ValueError for a path that is not absolute."""
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    if len(words) == 1 and words[0].lower() == "none":
        return ()
    for word in words:
        if not word.startswith("/"):
            raise ValueError(f"BcastExclude: {word} is not an absolute path")
    return words
