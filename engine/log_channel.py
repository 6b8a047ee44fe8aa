"""An engine process's warnings and errors over Redis pub/sub, to a process that shows them (the app's Log dock).

`LogPublisher` is a logging handler: the thread that logs only formats the record and queues it (bounded);
the publisher's own thread sends the queue in batches and drops what Redis does not take (counted). The
process's log file has every record either way. `LogReceiver` subscribes on its own thread and hands each
record to a handler of the receiving process (e.g. `engine.logs.RecordBuffer`).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

import orjson
import redis

from engine.logs import RunContextFilter

FORWARDED_LEVEL = logging.WARNING
QUEUE_SIZE = 1000
BATCH = 100
POLL_S = 0.25
RETRY_S = 1.0
STOP_S = 2.0
_FIELDS = ("name", "levelno", "levelname", "created", "msecs", "process", "processName", "threadName",
           "run_id", "node")


def encode_record(record: logging.LogRecord, formatter: logging.Formatter) -> bytes:
    """The record as JSON: its fields, the message with its arguments filled in, any traceback as text."""
    data: dict[str, Any] = {field: getattr(record, field, None) for field in _FIELDS}
    data["msg"] = record.getMessage()
    if record.exc_info and not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    data["exc_text"] = record.exc_text
    data["stack_info"] = record.stack_info
    return orjson.dumps(data)


def decode_record(raw: bytes) -> logging.LogRecord:
    """A record `encode_record` made; its message needs no arguments."""
    data = orjson.loads(raw)
    data["args"] = None
    return logging.makeLogRecord(data)


class LogPublisher(logging.Handler):
    """Publishes records of `level` and worse to `channel`; `start()` its thread, `close()` flushes and ends it."""

    def __init__(self, client: redis.Redis, channel: str, level: int = FORWARDED_LEVEL) -> None:
        super().__init__(level)
        self.client = client
        self.channel = channel
        self.dropped = 0
        """Records not sent: the queue was full or Redis did not answer."""
        self.addFilter(RunContextFilter())
        self._queue: queue.Queue[bytes] = queue.Queue(QUEUE_SIZE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._encoder = logging.Formatter()

    def start(self) -> LogPublisher:
        self._thread = threading.Thread(target=self._run, name="lockgate-log-publisher", daemon=True)
        self._thread.start()
        return self

    def emit(self, record: logging.LogRecord) -> None:
        if threading.current_thread() is self._thread:
            return  # what Redis says while we publish must not feed the queue it is emptying
        try:
            self._queue.put_nowait(encode_record(record, self._encoder))
        except queue.Full:
            self.dropped += 1
        except Exception:
            self.handleError(record)

    def _run(self) -> None:
        while True:
            try:
                batch = [self._queue.get(timeout=POLL_S)]
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            while len(batch) < BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                pipe = self.client.pipeline(transaction=False)
                for raw in batch:
                    pipe.publish(self.channel, raw)
                pipe.execute()
            except redis.RedisError:
                self.dropped += len(batch)
                if self._stop.wait(RETRY_S):
                    return

    def close(self) -> None:
        """Send what is queued (a few seconds at most), then stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_S)
            self._thread = None
        super().close()


class LogReceiver:
    """Subscribes to `channel` on its own thread and passes each record of the handler's level to it."""

    def __init__(self, client: redis.Redis, channel: str, handler: logging.Handler) -> None:
        self.client = client
        self.channel = channel
        self.handler = handler
        self.received = 0
        self._stop = threading.Event()
        self._subscribed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LogReceiver:
        """Start; returns once subscribed (or after a few seconds when Redis does not answer)."""
        self._thread = threading.Thread(target=self._run, name="lockgate-log-receiver", daemon=True)
        self._thread.start()
        self._subscribed.wait(STOP_S)
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except redis.RedisError:
                self._stop.wait(RETRY_S)

    def _listen(self) -> None:
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self.channel)
            self._subscribed.set()
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=POLL_S)
                if message is None or message.get("type") != "message":
                    continue
                try:
                    record = decode_record(message["data"])
                except (orjson.JSONDecodeError, TypeError, KeyError):
                    continue
                self.received += 1
                if record.levelno >= self.handler.level:  # what a logger checks before calling a handler
                    self.handler.handle(record)
        finally:
            pubsub.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(POLL_S * 8)
            self._thread = None
