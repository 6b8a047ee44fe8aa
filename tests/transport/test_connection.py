"""Clients survive blocking reads longer than redis-py's default 5 s timeout; `open_redis` picks the server."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import redis

from engine.config import EngineConfig
from engine.transport.connection import open_redis, redis_client
from engine.transport.keys import Keyspace


def test_blocking_stream_read_longer_than_five_seconds(client: redis.Redis, keyspace: Keyspace, redis_url: str) -> None:
    client.xgroup_create(keyspace.jobs, keyspace.jobs_group, id="0", mkstream=True)
    timer = threading.Timer(5.6, lambda: client.xadd(keyspace.jobs, {b"run": b"r1"}))
    timer.start()
    started = time.monotonic()
    reader = redis_client(redis_url)
    try:
        reply: Any = reader.xreadgroup(keyspace.jobs_group, "w1", {keyspace.jobs: ">"}, count=1, block=8_000)
    finally:
        timer.cancel()
        timer.join()  # an XADD under way still reads its reply on `client`, which the fixture closes next
        reader.close()
    assert time.monotonic() - started >= 5.5
    assert reply and reply[0][1][0][1] == {b"run": b"r1"}


def test_configured_url_is_used_as_is(redis_url: str, tmp_path: Path) -> None:
    handle = open_redis(EngineConfig(data_dir=tmp_path, redis_url=redis_url))
    try:
        assert handle.url == redis_url and not handle.embedded
        assert handle.client().ping()
    finally:
        handle.close()
    assert not (tmp_path / "redis.sock").exists()


def test_without_url_the_data_folders_embedded_server_runs(tmp_path: Path) -> None:
    handle = open_redis(EngineConfig(data_dir=tmp_path))
    try:
        assert handle.embedded and handle.url == f"unix://{tmp_path.resolve() / 'redis.sock'}"
        client = handle.client()
        client.set(b"k", b"v")
        assert client.get(b"k") == b"v"
    finally:
        handle.close()
    assert not (tmp_path / "redis.sock").exists()
