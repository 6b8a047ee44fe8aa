"""`HeldConnection`: a pipeline run on the thread's own connection answers as `Pipeline.execute` does."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
import redis

from engine.transport.held import HeldConnection
from engine.transport.keys import Keyspace


def _fill(pipe: Any, keyspace: Keyspace, key: str) -> None:
    pipe.set(key, "1")
    pipe.incr(key)
    pipe.exists(key, key + ":missing")
    pipe.hset(keyspace.heartbeats, "origin", 1_800_000_000.5)
    pipe.hget(keyspace.heartbeats, "origin")
    pipe.xadd(keyspace.events, {b"e": b'{"x": 1}'})
    pipe.xrange(keyspace.events)
    pipe.eval("return {1, 'two', {3}}", 0)
    pipe.delete(key)


def test_replies_are_those_of_a_pipeline(client: redis.Redis, keyspace: Keyspace) -> None:
    held = HeldConnection(client)
    plain = client.pipeline(transaction=False)
    _fill(plain, keyspace, keyspace.run_cancel("plain"))
    expected = plain.execute()
    client.delete(keyspace.events, keyspace.heartbeats)
    pipe = held.pipeline()
    _fill(pipe, keyspace, keyspace.run_cancel("plain"))
    got = held.execute(pipe)
    assert [type(reply) for reply in got] == [type(reply) for reply in expected]
    assert got[:5] == expected[:5] and got[7:] == expected[7:]
    assert got[6][0][1] == expected[6][0][1] == {b"e": b'{"x": 1}'}
    assert pipe.command_stack == [] and held.execute(pipe) == []
    client.delete(keyspace.events, keyspace.heartbeats)


def test_errors_come_with_the_replies_or_raised(client: redis.Redis, keyspace: Keyspace) -> None:
    held = HeldConnection(client)
    pipe = held.pipeline()
    pipe.set(keyspace.run_cancel("e"), "text")
    pipe.incr(keyspace.run_cancel("e"))
    pipe.get(keyspace.run_cancel("e"))
    replies = held.execute(pipe, raise_on_error=False)
    assert replies[0] is True and isinstance(replies[1], redis.ResponseError) and replies[2] == b"text"
    pipe.incr(keyspace.run_cancel("e"))
    with pytest.raises(redis.ResponseError):
        held.execute(pipe)
    pipe.get(keyspace.run_cancel("e"))
    assert held.execute(pipe) == [b"text"], "the connection stays in step after an error"
    client.delete(keyspace.run_cancel("e"))


def test_a_killed_connection_fails_once_then_connects_again_or_is_retried(client: redis.Redis,
                                                                        keyspace: Keyspace) -> None:
    held = HeldConnection(client)
    pipe = held.pipeline()
    pipe.client_id()
    (first,) = held.execute(pipe)
    client.client_kill_filter(_id=first)
    pipe.ping()
    with pytest.raises(redis.ConnectionError):
        held.execute(pipe)
    pipe.client_id()
    (second,) = held.execute(pipe)
    assert second != first
    client.client_kill_filter(_id=second)
    pipe.client_id()
    (third,) = held.execute(pipe, retry=True)
    assert third not in (first, second)


def test_each_thread_has_its_own_connection(client: redis.Redis) -> None:
    held = HeldConnection(client)
    ids: list[int] = []

    def read() -> None:
        pipe = held.pipeline()
        pipe.client_id()
        ids.extend(held.execute(pipe))

    read()
    thread = threading.Thread(target=read)
    thread.start()
    thread.join(10)
    read()
    assert len(ids) == 3 and ids[0] == ids[2] != ids[1]
    held.close()


def test_a_forked_child_connects_anew_instead_of_sharing_its_parents_socket(redis_url: str) -> None:
    held = HeldConnection(redis.Redis.from_url(redis_url))
    pipe = held.pipeline()
    pipe.ping()
    assert held.execute(pipe) == [True]
    parent_socket = held._connection()._sock
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports whether it got a connection of its own, and whether it works
        try:
            pipe = held.pipeline()
            pipe.ping()
            ok = held.execute(pipe) == [True] and held._connection()._sock is not parent_socket
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(child, 0)
    pipe = held.pipeline()
    pipe.ping()
    assert held.execute(pipe) == [True] and held._connection()._sock is parent_socket
