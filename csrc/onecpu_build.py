"""cffi (API mode) builder for ``corral._onecpu``, the one-CPU-node pass of csrc/onecpu.c.

The same two ways in as csrc/nodeset_build.py, whose builder this uses: setuptools
(``cffi_modules=["csrc/onecpu_build.py:ffibuilder"]``; cffi execs this file, so the
sibling is run by path, not imported) and ``python csrc/onecpu_build.py`` in a
developer checkout, which drops the module into corral/.
"""

from __future__ import annotations

import os
import runpy

CSRC = os.path.dirname(os.path.abspath(__file__))

_builders = runpy.run_path(os.path.join(CSRC, "nodeset_build.py"))
ffibuilder = _builders["make_builder"](os.path.relpath(CSRC), "onecpu")

if __name__ == "__main__":
    print(_builders["build_in_place"]("onecpu"))
