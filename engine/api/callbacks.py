"""The outgoing `execution.finished` webhook: pushed once to a run's `callback_url` when the run ends.

`POST /api/v1/runs` with `callback_url` stores {url, secret} under `Keyspace.run_callback` and gives
the caller the secret once. The body is signed like incoming webhooks: `X-Hub-Signature-256:
sha256=HMAC-SHA256(raw body, secret)`. Exactly one process delivers: the one whose `DEL` of the
key returns 1 (the projector's process on the run's end, or the API's when the run had already ended
when the callback was registered). Failed deliveries are retried a few times, then logged and counted
(`callback_failed` in `Keyspace.trigger_counters`).
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
from typing import Any

import httpx
import orjson

from engine.runtime import queries
from engine.runtime.handles import EngineHandles
from engine.runtime.projection import BatchResult
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


def register_callback(handles: EngineHandles, run_id: str, url: str) -> str:
    """Remember where to push `run_id`'s end; returns the signing secret (shown to the caller once)."""
    secret = "lgcb_" + secrets.token_urlsafe(24)
    key = handles.keys.run_callback(run_id)
    pipe = handles.client.pipeline(transaction=True)
    pipe.hset(key, mapping={"url": url, "secret": secret})
    pipe.expire(key, CALLBACK_TTL_SECONDS)
    pipe.execute()
    return secret


def finished_body(run: dict[str, Any]) -> bytes:
    fields = ("flow_id", "version", "status", "result", "error", "error_type", "created_at", "finished_at")
    return orjson.dumps({"event": EVENT_NAME, "run_id": run["id"], **{name: run.get(name) for name in fields}})


class CallbackSender:
    """Batch listener plus the delivery thread."""

    def __init__(self, handles: EngineHandles, retry_delays: tuple[float, ...] = RETRY_DELAYS_SECONDS) -> None:
        self.handles = handles
        self.retry_delays = retry_delays
        self.pending: queue.Queue[str] = queue.Queue()
        """Ended runs to check for a callback; `unfinished_tasks` is 0 once every run put so far is handled."""
        self.delivered: list[str] = []

    def on_batch(self, result: BatchResult) -> None:
        for run_id, _status in result.terminal_runs:
            self.pending.put(run_id)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
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
        key = self.handles.keys.run_callback(run_id)
        pipe = self.handles.client.pipeline(transaction=True)
        pipe.hgetall(key)
        pipe.delete(key)
        stored, deleted = pipe.execute()
        if not deleted or not stored:
            return None
        return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                for k, v in stored.items()}

    def deliver(self, run_id: str, stop: threading.Event | None = None) -> bool:
        """Push the run's end to its callback if it has one and nobody else took it; True when delivered."""
        callback = self._claim(run_id)
        if callback is None:
            return False
        run = queries.get_run(self.handles.sql, run_id, with_steps=False)
        if run is None:
            return False
        body = finished_body(run)
        headers = {"content-type": "application/json", "x-lockgate-event": EVENT_NAME,
                   "x-hub-signature-256": signature_of(body, callback["secret"])}
        waits = (0.0, *self.retry_delays)
        for attempt, delay in enumerate(waits, start=1):
            if delay and (stop.wait(delay) if stop is not None else threading.Event().wait(delay)):
                break
            try:
                answer = httpx.post(callback["url"], content=body, headers=headers, timeout=TIMEOUT_SECONDS)
                if answer.status_code < 300:
                    self.delivered.append(run_id)
                    return True
                problem = f"answered {answer.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            log.warning("execution.finished for run %s to %s, attempt %d/%d: %s", run_id, callback["url"],
                        attempt, len(waits), problem)
        count(self.handles.client, self.handles.keys, "callback_failed")
        return False
