"""What is on a record: the run and node it was logged for, across threads, and through the Redis channel."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import redis

from engine.log_channel import LogPublisher, LogReceiver
from engine.logs import FILE_FORMAT, RecordBuffer, RecordFormatter, RunContextFilter, current_run, run_context
from engine.transport.keys import Keyspace


def record(message: str, level: int = logging.WARNING) -> logging.LogRecord:
    made = logging.LogRecord("lockgate.test", level, __file__, 1, message, None, None)
    RunContextFilter().filter(made)
    return made


def test_a_record_inside_a_step_names_its_run_and_node() -> None:
    formatter = RecordFormatter(FILE_FORMAT)
    with run_context("run-1"):
        assert "[run=run-1]" in formatter.format(record("taken"))
        with run_context("run-1", "each[2]"):
            assert formatter.format(record("in the step")).endswith("in the step [run=run-1 node=each[2]]")
        assert current_run() == ("run-1", None)
    assert current_run() == (None, None)
    assert "[run=" not in formatter.format(record("idle"))


def test_the_run_goes_before_a_traceback() -> None:
    formatter = RecordFormatter("%(message)s")
    try:
        raise ValueError("boom")
    except ValueError:
        with run_context("run-2", "fetch"):
            failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, __import__("sys").exc_info())
            RunContextFilter().filter(failed)
    first, *rest = formatter.format(failed).splitlines()
    assert first == "failed [run=run-2 node=fetch]" and rest[0].startswith("Traceback") and "ValueError: boom" in rest


def test_threads_do_not_see_each_others_run() -> None:
    seen: dict[str, tuple[str | None, str | None]] = {}
    inside = threading.Barrier(2)

    def work(run_id: str) -> None:
        with run_context(run_id, "step"):
            inside.wait(5)
            seen[run_id] = current_run()

    threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert seen == {"a": ("a", "step"), "b": ("b", "step")}


def test_the_buffer_keeps_the_newest_and_counts_what_it_dropped() -> None:
    buffer = RecordBuffer(capacity=3)
    logger = logging.getLogger(f"lockgate.test.{uuid.uuid4().hex[:6]}")
    logger.propagate = False
    logger.addHandler(buffer)
    for index in range(5):
        logger.warning("line %d", index)
    logger.info("too quiet")
    drained = buffer.drain(10)
    assert [line.split(": ", 1)[1] for line in drained.lines] == ["line 2", "line 3", "line 4"]
    assert drained.dropped == 2 and buffer.drain(10).dropped == 0


def test_a_published_record_arrives_whole(redis_url: str, key_prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    channel = Keyspace(key_prefix).logs
    received = RecordBuffer()
    receiver = LogReceiver(client, channel, received).start()
    publisher = LogPublisher(client, channel).start()
    logger = logging.getLogger(f"lockgate.test.{uuid.uuid4().hex[:6]}")
    logger.propagate = False
    logger.addHandler(publisher)
    try:
        with run_context("run-9", "pay"):
            logger.warning("budget %s is %d%% spent", "ops", 90)
            logger.info("not forwarded")
        try:
            raise RuntimeError("redis away")
        except RuntimeError:
            logger.exception("tick failed")
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while len(lines) < 2 and time.monotonic() < deadline:
            lines += received.drain(10).lines
            time.sleep(0.05)
    finally:
        logger.removeHandler(publisher)
        publisher.close()
        receiver.stop()
    assert len(lines) == 2, lines
    assert lines[0].endswith(f"WARNING {logger.name}: budget ops is 90% spent [run=run-9 node=pay]")
    assert lines[1].splitlines()[0].endswith("ERROR " + logger.name + ": tick failed")
    assert "RuntimeError: redis away" in lines[1] and publisher.dropped == 0
