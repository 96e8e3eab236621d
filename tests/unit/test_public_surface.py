"""Each package's public surface: what other packages import from it is in its ``__all__``.

The programs share code only through what a package declares (``corral`` is the
shared library; the daemons' packages declare little), so a new import across
packages is a decision written down in the ``__init__`` rather than an accident.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("corral", "controller", "nodeagent", "dbd", "restd", "cli")
GENERATED = ("corral_pb2.py", "corral_pb2_grpc.py", "schema.py")


def _sources() -> list[Path]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    files += [p for p in (ROOT / "bin").iterdir() if p.is_file()]
    return [p for p in files if not (p.parent.name == "wire" and p.name in GENERATED)]


def _imports(path: Path) -> list[tuple[str, str]]:
    """(package, name) for each ``package.name`` the file imports, at any depth."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            dotted = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = node.module.split(".")
            dotted = [[module[0], a.name] for a in node.names] if len(module) == 1 else [module]
        else:
            continue
        found += [(parts[0], parts[1]) for parts in dotted if len(parts) > 1]
    return found


def _owner(path: Path) -> str:
    relative = path.relative_to(ROOT).parts
    return relative[0] if relative[0] in PACKAGES else ""


def test_imports_across_packages_stay_within_the_declared_surface() -> None:
    surfaces = {pkg: set(importlib.import_module(pkg).__all__) for pkg in PACKAGES}
    undeclared = sorted(
        f"{path.relative_to(ROOT)} imports {pkg}.{name}"
        for path in _sources()
        for pkg, name in _imports(path)
        if pkg in surfaces and pkg != _owner(path) and name not in surfaces[pkg]
    )
    assert undeclared == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_declared_name_exists(package: str) -> None:
    module = importlib.import_module(package)
    modules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    missing = [name for name in module.__all__ if name not in modules and not hasattr(module, name)]
    assert missing == []
