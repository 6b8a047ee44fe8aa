"""`POST /api/v1/runs`: start a run and answer within `wait` seconds (spec engine.md §3 "Answer to the caller").

- finished within `wait`: `201` with the run (`200` when the idempotency key had already created it);
- parked: `202` with `status: "waiting"`, `waiting_on: {node, reason}` and `retry_after_seconds`;
- still queued/running when `wait` runs out, or `wait: 0` (async): `202` with the run's status then.
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING, Any

import orjson

from engine.api.callbacks import register_callback
from engine.api.errors import ApiError
from engine.api.run_watch import RunWatch, Wakeable
from engine.publish import UnknownFlowVersion
from engine.read_models import InputIssue, StartedRun, Step
from engine.runtime import queries
from engine.runtime.create import RunRefused
from engine.runtime.inputs import InputError, body_hint, hinted
from engine.runtime.transitions import TERMINAL

if TYPE_CHECKING:
    from engine.parts import RunningEngine

DEFAULT_WAIT_SECONDS = 10.0
MAX_WAIT_SECONDS = 60.0
RETRY_WHILE_RUNNING_SECONDS = 1
RETRY_APPROVAL_SECONDS = 30
RESERVED_KEY_PREFIXES = ("webhook:", "schedule:", "event:")
"""Idempotency keys of trigger-started runs; a caller's key must not collide with them."""
ANSWERED = TERMINAL | {"waiting"}
"""Statuses a start answers on; a change leaving its run in another does not wake the request."""
REFUSED_RUN_STATUS = {"budget_exhausted": 402}
"""HTTP status of a refused start by its reason; every other refusal (`flow_disabled`, `unknown_budget`, ...) is 409."""


def refused_run_error(exc: RunRefused) -> ApiError:
    """The answer to a start `create_run()` refused, named by the refusal's reason."""
    return ApiError(REFUSED_RUN_STATUS.get(exc.reason, 409), exc.reason, str(exc))


def input_error(exc: InputError, sent_in_body: bool = True) -> ApiError:
    """The 422 answer to inputs a flow refuses, each also as data; with how to send each in the body when the
    request sent them (a rerun's come from its original run)."""
    issues = [InputIssue(name=issue.name, problem=issue.kind, type=issue.declared_type).model_dump()
              for issue in exc.issues]
    message = hinted(exc, body_hint) if sent_in_body else str(exc)
    return ApiError(422, exc.kind, message, {"inputs": issues} if issues else None)


def _number(body: dict[str, Any], name: str, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ApiError(422, "bad_request", f'"{name}" must be a number of seconds, zero or more (got {value!r})')
    return float(value)


def start_run(services: RunningEngine, body: dict[str, Any],
              watch: RunWatch | None = None, started_by: str | None = None) -> tuple[int, dict[str, Any]]:
    """Start a run and wait for it on this thread."""
    woken = threading.Event()
    pending = begin_start(services, body, watch or RunWatch(), woken, started_by)
    try:
        while True:
            timeout = pending.timeout()
            was_woken = woken.wait(timeout) if timeout is not None else False
            woken.clear()
            answer = pending.read(was_woken)
            if answer is not None:
                return answer
    finally:
        pending.close()


def begin_start(services: RunningEngine, body: dict[str, Any], watch: RunWatch, woken: Wakeable,
                started_by: str | None = None) -> StartWait:
    """Start the run `body` asks for and watch it, `woken` set on its changes; the caller waits (see `StartWait`).
    Blocks on the store and Redis: call it off any event loop. ApiError when the start is refused."""
    flow_id = body.get("flow_id", body.get("flow"))
    if not isinstance(flow_id, str) or not flow_id:
        raise ApiError(422, "bad_request", 'the body needs "flow_id": the id of a published flow')
    inputs = body.get("inputs", {})
    if not isinstance(inputs, dict):
        raise ApiError(422, "bad_request", '"inputs" must be a JSON object of input name -> value')
    key = body.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or not key or len(key) > 200):
        raise ApiError(422, "bad_request", '"idempotency_key" must be a non-empty string of at most 200 characters')
    if key is not None and key.startswith(RESERVED_KEY_PREFIXES):
        reserved = ", ".join(f'"{prefix}"' for prefix in RESERVED_KEY_PREFIXES)
        raise ApiError(422, "bad_request", f'"idempotency_key" may not start with {reserved} (the engine\'s '
                       "triggers use those); pick another key")
    version = body.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise ApiError(422, "bad_request", '"version" must be a published version number')
    wait = min(_number(body, "wait", DEFAULT_WAIT_SECONDS), MAX_WAIT_SECONDS)
    callback_url = body.get("callback_url")
    if callback_url is not None and (not isinstance(callback_url, str)
                                     or not callback_url.startswith(("http://", "https://"))):
        raise ApiError(422, "bad_request", '"callback_url" must be an http:// or https:// URL the engine can POST '
                       "the run's execution.finished webhook to")
    mark = watch.live_since()
    try:
        created = services.create_run(flow_id, inputs, version=version, idempotency_key=key,
                                      mode="async" if wait == 0 else "sync", started_by=started_by)
    except UnknownFlowVersion as exc:
        raise ApiError(404, exc.kind, str(exc)) from None
    except InputError as exc:
        raise input_error(exc) from None
    except RunRefused as exc:
        raise refused_run_error(exc) from None
    callback = None
    if callback_url is not None and not created.duplicate:
        secret = register_callback(services.require_handles(), created.run_id, callback_url)
        _deliver_if_already_finished(services, created.run_id)
        callback = {"url": callback_url, "secret": secret}
    # While the channel is unbroken since before the run was created, the watch hears every change of the new
    # run, so the store is read only once it has ended or parked.
    unread = not created.duplicate and wait > 0 and mark is not None and watch.unbroken_since(mark)
    return StartWait(services, watch, created.run_id, wait, woken, duplicate=created.duplicate, unread=unread,
                     callback=callback)


def _deliver_if_already_finished(services: RunningEngine, run_id: str) -> None:
    """A run that ended before its callback was stored was passed over by the sender; push it from here."""
    run = queries.get_run(services.require_handles().sql, run_id, with_steps=False)
    if run is not None and run["status"] in TERMINAL:
        sender = services.callback_sender()
        threading.Thread(target=sender.deliver, args=(run_id,), name="lockgate-callback-late", daemon=True).start()


def retry_after(waiting_on: dict[str, Any] | None, now: float) -> int:
    """Seconds until asking again is worthwhile: the park's due time, but at most 30 s for an approval, since a
    person may decide long before it times out."""
    waiting = waiting_on or {}
    due_at = waiting.get("due_at")
    until_due = max(1, math.ceil(float(due_at) - now)) if due_at is not None else RETRY_APPROVAL_SECONDS
    if "approval" in str(waiting.get("reason", "")):
        return min(until_due, RETRY_APPROVAL_SECONDS)
    return until_due


class StartWait:
    """A started run's wait for the answer, a step at a time, so that the caller waits where it likes (a thread on
    a `threading.Event`, a request on its event loop): wait up to `timeout()` seconds for `woken` (None: not at
    all), clear it, then `read()`; again until `read()` answers. `close()` at the end, however it ends."""

    def __init__(self, services: RunningEngine, watch: RunWatch, run_id: str, wait: float, woken: Wakeable, *,
                 duplicate: bool, unread: bool, callback: dict[str, str] | None) -> None:
        self.run_id = run_id
        self._services = services
        self._watch = watch
        self._deadline = time.monotonic() + wait
        self._duplicate = duplicate
        self._unread = unread
        """Nothing to read before the first wake: a new run has not ended or parked until the watch says so."""
        self._has_read = False
        self._callback = callback
        self._unwatch = watch.watch(run_id, woken, ANSWERED)

    def timeout(self) -> float | None:
        """Seconds to wait for `woken` before the next read; None: read now."""
        if self._watch.released:
            return None
        left = max(0.0, self._deadline - time.monotonic())
        if not self._has_read:
            return left if self._unread else None
        poll = self._watch.poll_seconds
        return left if poll is None else min(left, poll)

    def read(self, woken: bool) -> tuple[int, dict[str, Any]] | None:
        """The answer, once the run has ended or parked or the wait has run out; None: wait again. `woken`: whether
        the last wait ended on a change (the run has most likely ended: its steps are read with it). Blocks on
        the store: call it off any event loop."""
        self._has_read = True
        sql = self._services.require_handles().sql
        run_id, duplicate = self.run_id, self._duplicate
        run = queries.get_run(sql, run_id, with_steps=woken) or {"id": run_id, "status": "queued"}
        status = run["status"]
        answer: tuple[int, dict[str, Any]] | None = None
        if status in TERMINAL:
            full = run if woken else queries.get_run(sql, run_id) or run
            answer = (200 if duplicate else 201), {"run_id": run_id, "duplicate": duplicate, **full}
        elif status == "waiting":
            waiting = run.get("waiting_on") or {}
            answer = 202, {"run_id": run_id, "status": "waiting", "duplicate": duplicate,
                           "waiting_on": {"node": waiting.get("node"), "reason": waiting.get("reason")},
                           "retry_after_seconds": retry_after(waiting, self._services.require_handles().clock.now())}
        elif self._deadline - time.monotonic() <= 0 or self._watch.released:
            answer = 202, {"run_id": run_id, "status": status, "duplicate": duplicate,
                           "retry_after_seconds": RETRY_WHILE_RUNNING_SECONDS}
        if answer is not None and self._callback is not None:
            answer[1]["callback"] = self._callback
        return answer

    def close(self) -> None:
        """Stop watching the run (quick: safe on an event loop)."""
        self._unwatch()


_STARTED_FIELDS = tuple(StartedRun.model_fields)
_STEP_FIELDS = tuple(Step.model_fields)


def started_json(answer: dict[str, Any]) -> bytes:
    """`answer` (`start_run`'s) as `StartedRun(**answer).model_dump_json(exclude_unset=True)` writes it, in half
    the time (no trip into the model and back): the store's reads give each field its model's JSON type already,
    so the fields the model has are written in its order and the others left out."""
    shown = {name: answer[name] for name in _STARTED_FIELDS if name in answer}
    steps = shown.get("steps")
    if steps is not None:
        shown["steps"] = [{name: step[name] for name in _STEP_FIELDS if name in step} for step in steps]
    return orjson.dumps(shown)
