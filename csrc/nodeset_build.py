"""cffi (API mode) builder for ``corral._nodeset``, the C bitset behind corral.nodeset.

Two ways in:

* setuptools: ``cffi_modules=["csrc/nodeset_build.py:ffibuilder"]``. cffi execs this
  file from the project root (also in an isolated pip build, where that root is a
  copy), and setuptools wants source paths relative to it, so ``ffibuilder`` names
  the sources relative to the current directory.
* a developer checkout: ``python csrc/nodeset_build.py`` compiles in a scratch
  directory and drops only the extension module into corral/. cffi's compile()
  changes into its scratch directory, so this builder uses absolute paths.

The cdef is nodeset.h itself minus its preprocessor lines, so the header stays the
one statement of the C interface.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from cffi import FFI  # type: ignore[import-untyped]

CSRC = os.path.dirname(os.path.abspath(__file__))


def make_builder(csrc: str, name: str = "nodeset") -> FFI:
    """An FFI for the extension ``corral._NAME`` of ``NAME.c`` and ``NAME.h``, naming
    the sources under ``csrc`` as given (csrc/spawn_build.py builds ``_spawn`` so)."""
    with open(os.path.join(CSRC, f"{name}.h"), encoding="utf-8") as header:
        declarations = [line for line in header if not line.lstrip().startswith("#")]
    builder = FFI()
    builder.cdef("".join(declarations))
    builder.set_source(
        f"corral._{name}",
        f'#include "{name}.h"',
        sources=[os.path.join(csrc, f"{name}.c")],
        include_dirs=[csrc],
        depends=[os.path.join(csrc, f"{name}.h")],
        extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra"],
    )
    return builder


ffibuilder = make_builder(os.path.relpath(CSRC))


def build_in_place(name: str = "nodeset") -> str:
    """Compile the extension and place it in corral/; returns the module's path.

    The finished module is copied under a temporary name and renamed over the old
    one, so a process that has the previous build mapped keeps a valid file.
    """
    package_dir = os.path.join(os.path.dirname(CSRC), "corral")
    with tempfile.TemporaryDirectory(prefix=f"corral-{name}-") as scratch:
        built = make_builder(CSRC, name).compile(tmpdir=scratch, verbose=False)
        target = os.path.join(package_dir, os.path.basename(built))
        fd, staging = tempfile.mkstemp(prefix=f"_{name}.", suffix=".so", dir=package_dir)
        os.close(fd)
        try:
            shutil.copy2(built, staging)
            os.replace(staging, target)
        finally:
            if os.path.exists(staging):
                os.unlink(staging)
    return target


if __name__ == "__main__":
    print(build_in_place())
