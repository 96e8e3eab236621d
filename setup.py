"""Build steps pyproject.toml cannot express: generated wire code and the C bitmap.

``build_py`` runs ``proto/generate.py`` first, so ``pip install .`` (and
editable installs) always ship wire code generated from ``proto/``; the cffi
hooks compile ``csrc/`` into ``corral._nodeset``, ``corral._spawn`` and ``corral._onecpu``.
"""

import pathlib
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent


class BuildWithWire(build_py):
    def run(self) -> None:
        sys.path.insert(0, str(ROOT / "proto"))
        import generate

        generate.generate(ROOT)
        super().run()


setup(
    cmdclass={"build_py": BuildWithWire},
    cffi_modules=[
        "csrc/nodeset_build.py:ffibuilder",
        "csrc/spawn_build.py:ffibuilder",
        "csrc/onecpu_build.py:ffibuilder",
    ],
)
