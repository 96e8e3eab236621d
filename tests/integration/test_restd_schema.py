"""schemathesis against the OpenAPI document corral-restd serves: for every
operation of every version, generated requests (valid and invalid) must never
get a 5xx, and every answer must follow the document's schema for its status."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.cluster import Cluster
from tests.integration.test_restd import token_for

#: Requests per operation and mode: 72 operations, two modes, about 20 s in all.
EXAMPLES = 8
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(restd's URL, root's token) of a live cluster."""
    cluster = Cluster(tmp_path_factory.mktemp("schema"), nodes=2, settings=("KillWait=2",))
    try:
        cluster.start()
        yield cluster.start_restd(), token_for(cluster, "root")
    finally:
        cluster.stop()


def _fuzz(operation: schemathesis.APIOperation, mode: GenerationMode, url: str, token: str) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=url, headers={"X-SLURM-USER-TOKEN": token}, checks=CHECKS)

    run()


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_every_operation_answers_by_its_schema_and_never_5xx(
    served: tuple[str, str], mode: GenerationMode
) -> None:
    url, token = served
    api = schemathesis.openapi.from_url(f"{url}/openapi/v3")
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) > 60  # every operation of the three versions
    for operation in operations:
        _fuzz(operation, mode, url, token)
