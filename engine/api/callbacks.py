"""The outgoing `execution.finished` webhook: pushed once to a run's `callback_url` when the run ends.

`POST /api/v1/runs` with `callback_url` stores {url, secret} under `Keyspace.run_callback`, adds the run to
`Keyspace.run_callbacks`, and gives the caller the secret once. The body is signed like incoming webhooks:
`X-Hub-Signature-256: sha256=HMAC-SHA256(raw body, secret)`.

One process at a time delivers: the one holding the run's claim (`Keyspace.run_callback_claim`, a lease of
`CLAIM_SECONDS`). The projector's process tries as the run's end is applied, the API's when the run had already
ended when the callback was registered. The callback is removed once delivered, or once its retries were refused
(logged and counted: `callback_failed` in `Keyspace.trigger_counters`). Every sender also sweeps the registered
callbacks when it starts and every `SWEEP_SECONDS`, so an end no sender heard (its process died after the
projector's commit) or a delivery whose process died (its claim expired) is pushed from there. A receiver can
therefore get one run's callback twice, after a crash; the body's `run_id` names it.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import orjson
import sqlalchemy as sa

from engine.runtime import crashpoints, queries
from engine.runtime.handles import EngineHandles
from engine.runtime.projection import BatchResult
from engine.runtime.transitions import TERMINAL
from engine.store.db import reading
from engine.store.models import Run
from engine.triggers.settings import count
from engine.triggers.webhooks import signature_of

log = logging.getLogger("lockgate.callbacks")
CALLBACK_TTL_SECONDS = 7 * 24 * 3600
RETRY_DELAYS_SECONDS = (0.5, 2.0, 5.0)
TIMEOUT_SECONDS = 10.0
EVENT_NAME = "execution.finished"
MAX_CHECK_BATCH = 500
GATHER_SECONDS = 0.05
"""How long the sender gathers ended runs before asking which have a callback: one round trip per window,
not per projector batch (a delivery starts at most this much later)."""
CLAIM_SECONDS = 120.0
"""Lease of a delivery's claim: longer than every attempt with its timeout and the waits between them."""
SWEEP_SECONDS = 30.0
"""How often a sender looks through the registered callbacks for ended runs nobody delivered."""
RUNS = cast(sa.Table, Run.__table__)


def register_callback(handles: EngineHandles, run_id: str, url: str) -> str:
    """Remember where to push `run_id`'s end; returns the signing secret (shown to the caller once)."""
    secret = "lgcb_" + secrets.token_urlsafe(24)
    key = handles.keys.run_callback(run_id)
    pipe = handles.client.pipeline(transaction=True)
    pipe.hset(key, mapping={"url": url, "secret": secret})
    pipe.expire(key, CALLBACK_TTL_SECONDS)
    pipe.zadd(handles.keys.run_callbacks, {run_id: time.time()})
    pipe.execute()
    return secret


def finished_body(run: dict[str, Any]) -> bytes:
    fields = ("flow_id", "version", "status", "result", "error", "error_type", "created_at", "finished_at")
    return orjson.dumps({"event": EVENT_NAME, "run_id": run["id"], **{name: run.get(name) for name in fields}})


class CallbackSender:
    """Batch listener, sweeper and the delivery thread."""

    def __init__(self, handles: EngineHandles, retry_delays: tuple[float, ...] = RETRY_DELAYS_SECONDS, *,
                 claim_seconds: float = CLAIM_SECONDS, sweep_seconds: float = SWEEP_SECONDS) -> None:
        self.handles = handles
        self.retry_delays = retry_delays
        self.claim_seconds = claim_seconds
        self.sweep_seconds = min(sweep_seconds, claim_seconds)
        """A claim whose process died is delivered by the first sweep after it expired."""
        self.pending: queue.Queue[str] = queue.Queue()
        """Ended runs to check for a callback; `unfinished_tasks` is 0 once every run put so far is handled."""
        self.delivered: list[str] = []

    def on_batch(self, result: BatchResult) -> None:
        for run_id, _status in result.terminal_runs:
            self.pending.put(run_id)

    def run(self, stop: threading.Event) -> None:
        next_sweep = time.monotonic()  # at once: ends applied while no sender was listening
        while not stop.is_set():
            if time.monotonic() >= next_sweep:
                self.sweep()
                next_sweep = time.monotonic() + self.sweep_seconds
            try:
                run_ids = [self.pending.get(timeout=0.2)]
            except queue.Empty:
                continue
            stop.wait(GATHER_SECONDS)
            while len(run_ids) < MAX_CHECK_BATCH:
                try:
                    run_ids.append(self.pending.get_nowait())
                except queue.Empty:
                    break
            try:
                self._deliver_all(run_ids, stop)
            finally:
                for _ in run_ids:
                    self.pending.task_done()

    def sweep(self) -> int:
        """Queue every registered callback whose run has ended; returns how many. Members whose callback expired
        are removed. A failure (an outage) is logged; the next sweep tries again."""
        queued = 0
        try:
            for run_ids in self._registered():
                for run_id in self._ended(run_ids):
                    self.pending.put(run_id)
                    queued += 1
        except Exception:
            log.exception("execution.finished: could not look through the registered callbacks; trying again in "
                          "%.0f s", self.sweep_seconds)
        return queued

    def _registered(self) -> Iterator[list[str]]:
        """The runs with a registered callback, a batch at a time (members whose callback expired are removed)."""
        keys = self.handles.keys
        client = self.handles.client
        batch: list[str] = []
        members = client.zscan_iter(keys.run_callbacks, count=MAX_CHECK_BATCH)
        for member, _score in members:
            batch.append(member.decode() if isinstance(member, bytes) else str(member))
            if len(batch) == MAX_CHECK_BATCH:
                yield self._still_registered(batch)
                batch = []
        if batch:
            yield self._still_registered(batch)

    def _still_registered(self, run_ids: list[str]) -> list[str]:
        keys = self.handles.keys
        pipe = self.handles.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.exists(keys.run_callback(run_id))
        found = pipe.execute()
        expired = [run_id for run_id, has in zip(run_ids, found, strict=True) if not has]
        if expired:
            self.handles.client.zrem(keys.run_callbacks, *expired)
        return [run_id for run_id, has in zip(run_ids, found, strict=True) if has]

    def _ended(self, run_ids: list[str]) -> list[str]:
        if not run_ids:
            return []
        with reading(self.handles.sql) as conn:
            rows = conn.execute(sa.select(RUNS.c.id).where(RUNS.c.id.in_(run_ids), RUNS.c.status.in_(TERMINAL)))
            return [str(row[0]) for row in rows]

    def _deliver_all(self, run_ids: list[str], stop: threading.Event) -> None:
        try:
            waiting = self._with_callback(run_ids)
        except Exception:
            log.exception("execution.finished: could not look up callbacks of %d runs; continuing", len(run_ids))
            return
        for run_id in waiting:
            try:
                self.deliver(run_id, stop)
            except Exception:
                log.exception("execution.finished for run %s failed; continuing", run_id)

    def _with_callback(self, run_ids: list[str]) -> list[str]:
        """The runs among `run_ids` that have a callback, in one round trip (most runs have none)."""
        pipe = self.handles.held.pipeline()
        for run_id in run_ids:
            pipe.exists(self.handles.keys.run_callback(run_id))
        found = self.handles.held.execute(pipe, retry=True)
        return [run_id for run_id, has in zip(run_ids, found, strict=True) if has]

    def _claim(self, run_id: str) -> dict[str, str] | None:
        """The run's callback, claimed for `claim_seconds`; None when another process holds it or it is gone."""
        keys = self.handles.keys
        client = self.handles.client
        if not client.set(keys.run_callback_claim(run_id), "1", nx=True, px=int(self.claim_seconds * 1000)):
            return None
        stored = client.hgetall(keys.run_callback(run_id))
        if not stored:
            self._done(run_id)
            return None
        return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                for k, v in stored.items()}

    def _done(self, run_id: str) -> None:
        """Remove the run's callback with its claim: delivered, refused to the end, or gone."""
        keys = self.handles.keys
        pipe = self.handles.client.pipeline(transaction=True)
        pipe.delete(keys.run_callback(run_id), keys.run_callback_claim(run_id))
        pipe.zrem(keys.run_callbacks, run_id)
        pipe.execute()

    def deliver(self, run_id: str, stop: threading.Event | None = None) -> bool:
        """Push the run's end to its callback if it has one and no other process holds it; True when delivered.
        Stopped between attempts, the claim is let go and the callback kept for the next sender."""
        callback = self._claim(run_id)
        if callback is None:
            return False
        run = queries.get_run(self.handles.sql, run_id, with_steps=False)
        if run is None:
            self.handles.client.delete(self.handles.keys.run_callback_claim(run_id))
            return False
        crashpoints.reached("callback.claimed")
        body = finished_body(run)
        headers = {"content-type": "application/json", "x-lockgate-event": EVENT_NAME,
                   "x-hub-signature-256": signature_of(body, callback["secret"])}
        waits = (0.0, *self.retry_delays)
        for attempt, delay in enumerate(waits, start=1):
            if delay and (stop.wait(delay) if stop is not None else threading.Event().wait(delay)):
                self.handles.client.delete(self.handles.keys.run_callback_claim(run_id))
                return False
            try:
                answer = httpx.post(callback["url"], content=body, headers=headers, timeout=TIMEOUT_SECONDS)
                if answer.status_code < 300:
                    self._done(run_id)
                    self.delivered.append(run_id)
                    return True
                problem = f"answered {answer.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            log.warning("execution.finished for run %s to %s, attempt %d/%d: %s", run_id, callback["url"],
                        attempt, len(waits), problem)
        self._done(run_id)
        count(self.handles.client, self.handles.keys, "callback_failed")
        return False
