"""The generated wire code in corral/wire/ is exactly what proto/ generates today.

The generated files are build outputs (git ignores them; the build runs
proto/generate.py). This fails when proto/corral/wire/corral.proto or
proto/generate.py changed and the importable copies were not regenerated.
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
WIRE = ROOT / "corral" / "wire"
GENERATED = ["corral_pb2.py", "corral_pb2.pyi", "corral_pb2_grpc.py", "schema.py"]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "corral_proto_generate", ROOT / "proto" / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    out = tmp_path_factory.mktemp("wire")
    paths = _generator().generate(out)
    return {p.name: p for p in paths}


def test_generator_writes_exactly_the_four_files(regenerated: dict[str, pathlib.Path]) -> None:
    assert sorted(regenerated) == sorted(GENERATED)


@pytest.mark.parametrize("name", GENERATED, ids=GENERATED)
def test_importable_file_is_current(regenerated: dict[str, pathlib.Path], name: str) -> None:
    installed = WIRE / name
    assert installed.is_file(), f"corral/wire/{name} is missing: run `python proto/generate.py`"
    assert installed.read_bytes() == regenerated[name].read_bytes(), (
        f"corral/wire/{name} is stale: run `python proto/generate.py`"
    )


def test_codec_schema_lists_every_protobuf_message(regenerated: dict[str, pathlib.Path]) -> None:
    from corral.wire import corral_pb2
    from corral.wire.schema import MESSAGES

    assert set(MESSAGES) == set(corral_pb2.DESCRIPTOR.message_types_by_name)
    for name, fields in MESSAGES.items():
        descriptor = corral_pb2.DESCRIPTOR.message_types_by_name[name]
        assert [(f[0], f[1]) for f in fields] == [(f.name, f.number) for f in descriptor.fields]


@pytest.mark.parametrize(
    "module",
    ["corral.client", "corral.wire.codec"],
    ids=["client", "codec"],
)
def test_client_path_does_not_import_protobuf(module: str) -> None:
    code = f"import {module}, sys; print('google.protobuf' in sys.modules, 'grpc' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.stdout.split() == ["False", "False"]
