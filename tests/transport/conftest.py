"""Transport fixtures: a client of the shared test Redis and a keyspace of this test alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from engine.transport.connection import redis_client
from engine.transport.keys import Keyspace


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis_client(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def keyspace(key_prefix: str) -> Keyspace:
    return Keyspace(key_prefix)
