"""The adversarial suite: what an attacker would try, each attempt refused.

Tests here start the real daemons, as the integration tests do, and reuse their fixtures.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import cluster, make_cluster, users

__all__ = ["cluster", "make_cluster", "users"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/security" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
