"""cffi (API mode) builder for ``corral._spawn``, the task start of csrc/spawn.c.

The same two ways in as csrc/nodeset_build.py, whose builder this uses: setuptools
(``cffi_modules=["csrc/spawn_build.py:ffibuilder"]``; cffi execs this file, so the
sibling is loaded by path, not imported) and ``python csrc/spawn_build.py`` in a
developer checkout, which drops the module into corral/.
"""

from __future__ import annotations

import importlib.util
import os

CSRC = os.path.dirname(os.path.abspath(__file__))


def _nodeset_build() -> object:
    spec = importlib.util.spec_from_file_location(
        "corral_nodeset_build", os.path.join(CSRC, "nodeset_build.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_builders = _nodeset_build()
ffibuilder = _builders.make_builder(os.path.relpath(CSRC), "spawn")  # type: ignore[attr-defined]

if __name__ == "__main__":
    print(_builders.build_in_place("spawn"))  # type: ignore[attr-defined]
