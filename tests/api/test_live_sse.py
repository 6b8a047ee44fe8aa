"""Live runs over HTTP (Server-Sent Events): snapshot first, every applied change once and in order, closed
after the terminal change; `Last-Event-ID` resumes from the store; `/api/v1/live` with its flow filter and
heartbeats; a slow reader dropped with `event: overflow`. Real engine, Redis, SQLite, uvicorn, httpx."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest
import sqlalchemy as sa

from engine.api.live_routes import LiveSettings
from engine.approvals.decide import decide
from engine.approvals.pending import list_pending
from engine.store.models import AppliedEvent
from tests.api.conftest import APPROVAL, HELLO, Api
from tests.api.sse import SseEvent, SseServer, collect, parse_block, serve_live

GUARD = 30.0
"""Hang guard for a whole exchange (never a timing assert)."""


@pytest.fixture
def sse(api: Api) -> Iterator[SseServer]:
    with serve_live(api.services, LiveSettings(heartbeat_seconds=0.2)) as server:
        yield server


def _stored(api: Api, run_id: str) -> list[tuple[int, str]]:
    assert api.services.sql is not None
    with api.services.sql.connect() as conn:
        rows = conn.execute(sa.select(AppliedEvent.seq, AppliedEvent.event_type)
                            .where(AppliedEvent.run_id == run_id, AppliedEvent.seq.is_not(None))
                            .order_by(AppliedEvent.seq)).all()
    return [(row.seq, row.event_type) for row in rows]


def _parked_for_approval(api: Api) -> tuple[str, str]:
    api.publish(APPROVAL)
    run_id = api.services.create_run("ask").run_id
    api.services.wait_for_run(run_id, timeout=GUARD, statuses=frozenset({"waiting"}))
    [pending] = [item for item in list_pending(api.services.require_handles()) if item.run_id == run_id]
    return run_id, pending.id


def _assert_every_change_after(api: Api, events: list[SseEvent], after: int, run_id: str) -> None:
    stored = _stored(api, run_id)
    assert [(e.id, e.kind) for e in events] == [(seq, kind) for seq, kind in stored if seq > after]
    assert all(e.data["run_id"] == run_id and e.data["seq"] == e.id and e.data["event"] == e.kind for e in events)


async def _run_to_end_while_streaming(api: Api, sse: SseServer, run_id: str, approval_id: str,
                                      headers: dict[str, str]) -> list[SseEvent]:
    opened = asyncio.Event()
    async with httpx.AsyncClient(base_url=sse.url, timeout=GUARD) as client:
        reading = asyncio.create_task(collect(client, f"/api/v1/runs/{run_id}/events", headers, opened=opened))
        await asyncio.wait_for(opened.wait(), GUARD)
        result = await asyncio.to_thread(decide, api.services.require_handles(), approval_id, "approve", "user:ada")
        assert result.accepted
        return await asyncio.wait_for(reading, GUARD)


def test_snapshot_then_every_change_in_order_then_closed_after_the_terminal_change(api: Api, sse: SseServer) -> None:
    run_id, approval_id = _parked_for_approval(api)
    api.idle.wait()
    parked = api.http.get(f"/api/v1/runs/{run_id}", headers=api.headers()).json()  # nothing moves until decided
    parked_at = _stored(api, run_id)[-1][0]
    events = asyncio.run(_run_to_end_while_streaming(api, sse, run_id, approval_id, api.headers()))
    snapshot, changes = events[0], events[1:]
    assert snapshot.kind == "snapshot" and snapshot.data == parked and snapshot.id == parked_at
    assert parked["status"] == "waiting"
    _assert_every_change_after(api, changes, snapshot.id or 0, run_id)
    assert changes[0].kind == "approval_decided" and changes[-1].kind == "run_succeeded"
    assert changes[-1].data["status"] == "succeeded"


def test_a_finished_run_answers_its_snapshot_and_closes(api: Api, sse: SseServer) -> None:
    api.publish(HELLO)
    run_id = api.services.create_run("hello", {"name": "Ada"}).run_id
    api.services.wait_for_run(run_id, timeout=GUARD)

    async def read() -> list[SseEvent]:
        async with httpx.AsyncClient(base_url=sse.url, timeout=GUARD) as client:
            return await collect(client, f"/api/v1/runs/{run_id}/events", api.headers())

    [snapshot] = asyncio.run(read())
    assert snapshot.kind == "snapshot" and snapshot.data["status"] == "succeeded"
    assert snapshot.data["result"] == "Hello, Ada!" and snapshot.id == _stored(api, run_id)[-1][0]


@pytest.mark.parametrize("after", [0, 3, "last"])
def test_last_event_id_resumes_from_the_store_without_gaps_or_repeats(api: Api, sse: SseServer,
                                                                        after: int | str) -> None:
    api.publish(HELLO)
    run_id = api.services.create_run("hello", {"name": "Ada"}).run_id
    api.services.wait_for_run(run_id, timeout=GUARD)
    last = _stored(api, run_id)[-1][0]
    resume = last if after == "last" else int(after)

    async def read() -> list[SseEvent]:
        async with httpx.AsyncClient(base_url=sse.url, timeout=GUARD) as client:
            return await collect(client, f"/api/v1/runs/{run_id}/events",
                                 {**api.headers(), "Last-Event-ID": str(resume)})

    events = asyncio.run(read())
    assert all(event.kind != "snapshot" for event in events)
    _assert_every_change_after(api, events, resume, run_id)
    assert (events[-1].kind == "run_succeeded") if resume < last else events == []


def test_last_event_id_resumes_a_parked_run_then_follows_it_live(api: Api, sse: SseServer) -> None:
    run_id, approval_id = _parked_for_approval(api)
    headers = {**api.headers(), "Last-Event-ID": "2"}
    events = asyncio.run(_run_to_end_while_streaming(api, sse, run_id, approval_id, headers))
    _assert_every_change_after(api, events, 2, run_id)
    kinds = [event.kind for event in events]
    assert "run_parked" in kinds and kinds.index("run_parked") < kinds.index("approval_decided")
    assert kinds[-1] == "run_succeeded"


def test_refusals_have_the_api_error_shape(api: Api, sse: SseServer) -> None:
    with httpx.Client(base_url=sse.url, timeout=GUARD) as client:
        missing = client.get("/api/v1/runs/nope/events", headers=api.headers())
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_run"
        assert client.get("/api/v1/runs/x/events").json()["error"]["code"] == "missing_key"
        bad = client.get("/api/v1/live", headers={"Authorization": "Bearer lgk_nope"})
        assert bad.status_code == 401 and bad.json()["error"]["code"] in ("malformed_key", "unknown_key")
        api.publish(HELLO)
        run_id = api.services.create_run("hello", {"name": "Ada"}).run_id
        wrong = client.get(f"/api/v1/runs/{run_id}/events", headers={**api.headers(), "Last-Event-ID": "soon"})
        assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "bad_request"
        assert "must be the id of an event of this stream" in wrong.json()["error"]["message"]
        impossible = client.get("/api/v1/runs/a.b/events", headers=api.headers())
        assert (impossible.status_code, impossible.json()["error"]["code"]) == (404, "unknown_run")
    assert sse.feed.reader_count == 0  # a refused request leaves no reader behind


def test_live_sends_the_flow_it_is_asked_for_and_heartbeats_while_idle(api: Api, sse: SseServer) -> None:
    api.publish(HELLO)
    api.publish(APPROVAL)

    async def watch() -> tuple[list[SseEvent], str]:
        async with httpx.AsyncClient(base_url=sse.url, timeout=GUARD) as client, \
                client.stream("GET", "/api/v1/live", headers=api.headers(), params={"flow_id": "hello"}) as answer:
            assert answer.status_code == 200
            await asyncio.to_thread(api.services.create_run, "ask")
            run_id = (await asyncio.to_thread(api.services.create_run, "hello", {"name": "Ada"})).run_id
            seen: list[SseEvent] = []
            buffer = ""
            async for text in answer.aiter_text():
                buffer += text
                while "\n\n" in buffer:
                    block, buffer = buffer.split("\n\n", 1)
                    event = parse_block(block)
                    assert event is not None
                    seen.append(event)
                ended = any(e.kind == "change" and e.data["event"] == "run_succeeded" for e in seen)
                if ended and seen[-1].kind == "comment":  # a heartbeat after the run's last change
                    return seen, run_id
        raise AssertionError("the stream closed")

    seen, run_id = asyncio.run(asyncio.wait_for(watch(), GUARD))
    changes = [event.data for event in seen if event.kind == "change"]
    assert {change["flow_id"] for change in changes} == {"hello"}
    assert [(c["seq"], c["event"]) for c in changes] == _stored(api, run_id)
    assert all({"run_id", "flow_id", "version", "node", "status", "waiting_on", "seq"} <= set(c) for c in changes)
    assert seen[-1].data == "heartbeat"


def test_a_reader_too_slow_is_dropped_with_a_final_overflow_event(api: Api) -> None:
    """A client that stops reading: the socket and uvicorn's buffer fill, then the reader's small queue; the feed
    drops it (nothing more is held for it) and the client, reading again, gets `overflow` last and the end."""
    api.publish(HELLO)
    with serve_live(api.services, LiveSettings(heartbeat_seconds=60), queue_size=8) as sse:
        port = int(sse.url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET /api/v1/live HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {api.key}\r\n\r\n".encode())
        sock.settimeout(GUARD)
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 200")
        started = 0
        deadline = time.monotonic() + 120
        while sse.feed.overflows == 0:  # a positive signal: the feed dropped the reader
            assert time.monotonic() < deadline and started < 5000, "the slow reader was never dropped"
            for _ in range(20):
                api.services.create_run("hello", {"name": "Ada"})
            started += 20
            api.services.wait_for_run(api.services.create_run("hello", {"name": "Ada"}).run_id, timeout=GUARD)
            started += 1
        assert sse.feed.reader_count == 0
        received = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        sock.close()
    body = received.split(b"\r\n\r\n", 1)[-1] if received.startswith(b"HTTP") else received
    blocks = [part for part in _dechunk(body).decode().split("\n\n") if part.strip()]
    last = parse_block(blocks[-1])
    assert last is not None and last.kind == "overflow" and last.data["code"] == "overflow"
    assert all(parse_block(block).kind == "change" for block in blocks[:-1])  # type: ignore[union-attr]


def _rss() -> int:
    """This process's resident memory in bytes (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def _dechunk(body: bytes) -> bytes:
    """The payload of an HTTP/1.1 chunked body."""
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def test_changes_published_are_the_stored_ones(api: Api, sse: SseServer) -> None:
    """The `data:` of each change is the text the store keeps for it (the resume path sends that text)."""
    api.publish(HELLO)
    run_id = api.services.create_run("hello", {"name": "Ada"}).run_id
    api.services.wait_for_run(run_id, timeout=GUARD)
    assert api.services.sql is not None
    with api.services.sql.connect() as conn:
        stored = conn.execute(sa.select(AppliedEvent.change).where(AppliedEvent.run_id == run_id)
                              .order_by(AppliedEvent.seq)).scalars().all()

    async def read() -> list[SseEvent]:
        async with httpx.AsyncClient(base_url=sse.url, timeout=GUARD) as client:
            return await collect(client, f"/api/v1/runs/{run_id}/events", {**api.headers(), "Last-Event-ID": "0"})

    assert [event.data for event in asyncio.run(read())] == [orjson.loads(text or "null") for text in stored]


def test_a_hundred_concurrent_clients_each_see_every_change_of_their_run_and_memory_stays_bounded(
        api: Api, sse: SseServer) -> None:
    api.publish(APPROVAL)
    runs = [api.services.create_run("ask").run_id for _ in range(50)]
    clients_per_run = 2

    async def main() -> list[list[SseEvent]]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=sse.url, timeout=GUARD * 4, limits=limits) as client:
            opened = [asyncio.Event() for _ in range(len(runs) * clients_per_run)]
            tasks = [asyncio.create_task(collect(client, f"/api/v1/runs/{runs[i // clients_per_run]}/events",
                                                 api.headers(), opened=opened[i]))
                     for i in range(len(opened))]
            await asyncio.wait_for(asyncio.gather(*(o.wait() for o in opened)), GUARD * 4)
            assert sse.feed.reader_count == len(opened)

            def settle() -> None:
                for run_id in runs:
                    api.services.wait_for_run(run_id, timeout=GUARD, statuses=frozenset({"waiting"}))
                for item in list_pending(api.services.require_handles()):
                    assert decide(api.services.require_handles(), item.id, "approve", "user:ada").accepted

            await asyncio.to_thread(settle)
            return list(await asyncio.wait_for(asyncio.gather(*tasks), GUARD * 4))

    baseline = _rss()
    peak = [baseline]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.05):
            peak[0] = max(peak[0], _rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        streams = asyncio.run(main())
    finally:
        sampling.set()
        sampler.join()
    for index, events in enumerate(streams):
        run_id = runs[index // clients_per_run]
        assert events[0].kind == "snapshot" and events[0].data["id"] == run_id
        _assert_every_change_after(api, events[1:], events[0].id or 0, run_id)
        assert events[-1].kind == "run_succeeded"
    assert sse.feed.reader_count == 0 and sse.feed.overflows == 0
    # A guard on memory, not a measurement: 100 streams and the engine behind them fit well within this.
    growth = peak[0] - baseline
    assert growth < 256 * 1024 * 1024, f"resident memory grew {growth / 1e6:.1f} MB"
    print(f"100 SSE clients: resident memory grew {growth / 1e6:.1f} MB at most")


def test_snapshot_and_resume_read_the_store_on_any_database(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(HELLO)
    run_id = api.services.create_run("hello", {"name": "Ada"}).run_id
    api.services.wait_for_run(run_id, timeout=GUARD)

    async def read(headers: dict[str, str]) -> list[SseEvent]:
        async with httpx.AsyncClient(base_url=sse.url, timeout=GUARD) as client:
            return await collect(client, f"/api/v1/runs/{run_id}/events", headers)

    with serve_live(api.services) as sse:
        [snapshot] = asyncio.run(read(api.headers()))
        resumed = asyncio.run(read({**api.headers(), "Last-Event-ID": "1"}))
    assert snapshot.kind == "snapshot" and snapshot.data["status"] == "succeeded"
    assert snapshot.id == _stored(api, run_id)[-1][0]
    _assert_every_change_after(api, resumed, 1, run_id)
