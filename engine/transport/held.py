"""Hot round trips on a connection each thread keeps: a pipeline sent and read with nothing else around it.

redis-py runs every call through its pool (check out, a readiness poll of the socket, check in, a fork
check each way), its retry wrapper and its observability hooks: about 20 us of CPU a round trip, and the
poll is one more system call, which releases the GIL. `HeldConnection.execute` sends a pipeline's
commands on the calling thread's own connection and parses the replies with the client's own response
callbacks, so replies and errors are those of `Pipeline.execute` (`redis.ConnectionError` when the
connection fails; the next call connects again). Workers and the projector retry nothing here: they already
treat a failed round trip as lost (a worker redelivers its batch, the projector re-reads its pending
entries). `retry=True` sends the pipeline once more on a new connection when the kept one fails, as
redis-py's default retry would (for a connection left stale by a restarted server).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

import redis
import redis.client
from hiredis import pack_command


def _packed(conn: Any, commands: list[Any]) -> Any:
    """The commands in the Redis protocol: what `conn.pack_commands` sends, packed by hiredis in one call a command
    (redis-py's own packer first walks every argument in Python)."""
    if all(isinstance(args[0], str) and " " not in args[0] for args in commands):
        try:
            return [b"".join([pack_command(args) for args in commands])]
        except TypeError:  # an argument hiredis does not take (a memoryview): redis-py converts it
            pass
    return conn.pack_commands(commands)


_HELD: weakref.WeakSet[HeldConnection] = weakref.WeakSet()


def _forget_in_child() -> None:
    """A forked child must not speak on its parent's sockets: every held connection starts anew there."""
    for held in list(_HELD):
        held._local = threading.local()


os.register_at_fork(after_in_child=_forget_in_child)


class HeldConnection:
    """Per thread, one connection to `client`'s server (its pool's settings, outside the pool)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._local = threading.local()
        _HELD.add(self)

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            pool = self.client.connection_pool
            conn = self._local.conn = pool.connection_class(**pool.connection_kwargs)
        return conn

    def pipeline(self) -> redis.client.Pipeline:
        """A non-transactional pipeline to fill and hand to `execute`."""
        return self.client.pipeline(transaction=False)

    def execute(self, pipe: redis.client.Pipeline, raise_on_error: bool = True, retry: bool = False) -> list[Any]:
        """Run `pipe`'s commands in one round trip; its replies, as `pipe.execute()` returns them."""
        stack, pipe.command_stack = pipe.command_stack, []
        if not stack:
            return []
        try:
            responses = self._round_trip(pipe, stack)
        except (redis.ConnectionError, redis.TimeoutError):
            if not retry:
                raise
            responses = self._round_trip(pipe, stack)
        if raise_on_error:
            pipe.raise_first_error(stack, responses)
        return responses

    def _round_trip(self, pipe: redis.client.Pipeline, stack: list[Any]) -> list[Any]:
        conn = self._connection()
        responses: list[Any] = []
        try:
            conn.send_packed_command(_packed(conn, [args for args, _options in stack]))
            for args, options in stack:
                try:
                    responses.append(redis.Redis.parse_response(pipe, conn, args[0], **options))
                except redis.ResponseError as exc:
                    responses.append(exc)
        except BaseException:
            conn.disconnect()  # replies left unread would answer the next call: start on a new connection
            raise
        return responses

    def close(self) -> None:
        """Close the calling thread's connection (the others close with their threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.disconnect()
            self._local.conn = None
