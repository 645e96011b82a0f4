"""Fixtures of the scale-out fault suite: a 3-node JetStream cluster on loopback
(tests/support/nats_server.py ``NatsCluster``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.nats_server import NatsCluster, running_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    yield from running_cluster(tmp_path / "cluster")
