"""Run a piece of test code as another local user in a forked child (no exec: the
interpreter under /root need not be reachable by that user). tests/security/asuser.py
runs whole client commands as another user instead."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Callable, Sequence
from typing import Any


def call_as(user: pwd.struct_passwd, call: Callable[[], Any], groups: Sequence[int] = ()) -> Any:
    """``call()``'s result, through JSON, from a child that has become ``user`` with the
    supplementary ``groups`` (none by default). ``call`` turns the errors it expects
    into values itself; anything else leaves the child with no reply, which fails the
    parent's JSON decoding."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        status = 1
        try:
            os.close(read)
            os.setgroups(list(groups))
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            os.write(write, json.dumps(call(), default=str).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)
