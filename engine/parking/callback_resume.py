"""`POST /callbacks/{token}`: resume a run parked on a `wait.callback` node with the request's JSON body.

`resume_callback()` is the whole request, transport aside: the body limit, the token, the JSON, the one
winner (a Redis SET NX, `callback_claims`) and the resume job. Only the winner writes anything; a refusal
(unknown token, bad body, a second POST) leaves Redis and SQL as they were. The winner's run gets its
resume job at once; its park token makes the due waker's timeout job for the same park a no-op.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any, Literal, cast

import orjson
import sqlalchemy as sa

from engine.json_bounds import json_problems
from engine.parking.callback_claims import (
    CLAIM_TTL_SECONDS,
    CallbackClaim,
    decode_claim,
    encode_claim,
    read_callback_claim,
)
from engine.parking.callback_links import token_node, token_run_id
from engine.parking.limits import park_token
from engine.publish import UnknownFlowVersion, get_version
from engine.runtime.handles import EngineHandles
from engine.runtime.jobs import encode_job, resume_job
from engine.store.db import reading
from engine.store.models import Run

RUNS = cast(sa.Table, Run.__table__)
MAX_CALLBACK_BODY_BYTES = 1 << 20
"""The HTTP API's body limit: a larger callback body is refused (`413 too_large`)."""
ACTIVE_RUN_STATUSES = frozenset({"queued", "running", "waiting"})
MAX_CONCURRENT_RESUMES = 16
"""Callbacks handled at once per process; a burst beyond waits its turn instead of exhausting the Redis and
SQL connection pools the rest of the engine shares (each allows about 100 and 20)."""
_IN_FLIGHT = threading.BoundedSemaphore(MAX_CONCURRENT_RESUMES)

CallbackCode = Literal["resumed", "too_large", "unknown_callback", "bad_json", "bad_body", "already_resumed",
                       "run_not_waiting"]


@dataclass(frozen=True)
class CallbackOutcome:
    """What became of one callback POST: its HTTP status and code, and the run and node it was for."""

    status: int
    code: CallbackCode
    message: str
    run_id: str | None = None
    node: str | None = None

    @property
    def accepted(self) -> bool:
        return self.code == "resumed"

    def to_data(self) -> dict[str, Any]:
        """The JSON answer: the run and node for the winner, the API's error shape otherwise."""
        if self.accepted:
            return {"run_id": self.run_id, "node": self.node, "status": "resumed", "message": self.message}
        return {"error": {"code": self.code, "message": self.message}}


def _unknown() -> CallbackOutcome:
    return CallbackOutcome(404, "unknown_callback", "no wait.callback node has this URL on this engine (mistyped, "
                           "or made by another deployment); use the URL callback_url() gave the run")


_WAITS: weakref.WeakKeyDictionary[sa.Engine, dict[tuple[str, int], tuple[str, ...]]] = weakref.WeakKeyDictionary()
"""The wait.callback node ids of each published version, per store (versions never change once published)."""
_WAITS_LOCK = threading.Lock()


def _callback_nodes(sql: sa.Engine, flow_id: str, version: int) -> tuple[str, ...]:
    with _WAITS_LOCK:
        known = _WAITS.setdefault(sql, {}).get((flow_id, version))
    if known is not None:
        return known
    try:
        _published, flow = get_version(sql, flow_id, version)
    except UnknownFlowVersion:
        return ()
    waits = tuple(node.id for node in flow.nodes if node.type == "wait.callback")
    with _WAITS_LOCK:
        _WAITS.setdefault(sql, {})[(flow_id, version)] = waits
    return waits


def _find(handles: EngineHandles, token: str) -> tuple[Any, str] | None:
    """The run row and node a token is for, or None when it is not one of ours."""
    if handles.box is None:
        return None
    run_id = token_run_id(token)
    if run_id is None:
        return None
    with reading(handles.sql) as conn:
        run = conn.execute(sa.select(RUNS.c.id, RUNS.c.flow_id, RUNS.c.version, RUNS.c.status)
                           .where(RUNS.c.id == run_id)).first()
    if run is None:
        return None
    node = token_node(handles.box, token, run_id, _callback_nodes(handles.sql, run.flow_id, run.version))
    return (run, node) if node is not None else None


def _body(raw_body: bytes, max_depth: int) -> tuple[Any, CallbackOutcome | None]:
    try:
        value = orjson.loads(raw_body)
    except orjson.JSONDecodeError as exc:
        return None, CallbackOutcome(400, "bad_json", f"the callback body is not JSON ({exc}); send a JSON value "
                                     "with Content-Type: application/json")
    problems = json_problems(value, max_depth)
    if problems:
        listed = "; ".join(f"{p.path}: {p.message}" for p in problems)
        return None, CallbackOutcome(422, "bad_body", f"the callback body cannot be kept as run state: {listed}")
    return value, None


def _taken(claim: CallbackClaim, run_id: str, node: str) -> CallbackOutcome:
    if claim.outcome == "timed_out":
        why = "its timeout passed first and the run went on through timed_out"
    else:
        why = "an earlier POST resumed it; only the first one counts"
    return CallbackOutcome(409, "already_resumed", f'node "{node}" of run "{run_id}" was already resumed: {why}; '
                           "nothing changed", run_id, node)


def resume_callback(handles: EngineHandles, token: str, raw_body: bytes,
                    max_body_bytes: int = MAX_CALLBACK_BODY_BYTES) -> CallbackOutcome:
    """Resume the `wait.callback` node `token` names with the JSON `raw_body`; never raises for a refusal."""
    if len(raw_body) > max_body_bytes:
        return CallbackOutcome(413, "too_large", f"the callback body has {len(raw_body)} bytes; it may have at most "
                               f"{max_body_bytes}: send less, or a reference to the data")
    with _IN_FLIGHT:
        return _resume(handles, token, raw_body)


def _resume(handles: EngineHandles, token: str, raw_body: bytes) -> CallbackOutcome:
    found = _find(handles, token)
    if found is None:
        return _unknown()
    run, node = found
    body, refused = _body(raw_body, handles.limits.max_depth)
    if refused is not None:
        return CallbackOutcome(refused.status, refused.code, refused.message, run.id, node)
    if run.status not in ACTIVE_RUN_STATUSES:
        earlier = read_callback_claim(handles.client, handles.keys, run.id, node)
        if earlier is not None:
            return _taken(earlier, run.id, node)
        return CallbackOutcome(409, "run_not_waiting", f'run "{run.id}" is {run.status}; it no longer waits for '
                               f'node "{node}", so the callback changes nothing', run.id, node)
    claim = CallbackClaim("received", handles.clock.now(), body)
    # One round trip: the claim first, then what holds it now and the run's park (read after the claim is set,
    # which the worker's check after writing a park relies on).
    pipe = handles.client.pipeline(transaction=False)
    pipe.set(handles.keys.callback_claim(run.id, node), encode_claim(claim), nx=True, ex=CLAIM_TTL_SECONDS)
    pipe.get(handles.keys.callback_claim(run.id, node))
    pipe.get(handles.keys.run_checkpoint(run.id))
    won, held, checkpoint = pipe.execute()
    if not won:
        return _taken(decode_claim(held) if held is not None else claim, run.id, node)
    if checkpoint is not None:
        _resume_if_parked(handles, run.id, node, orjson.loads(checkpoint))
    return CallbackOutcome(200, "resumed", f'run "{run.id}" continues from node "{node}" through "received"',
                           run.id, node)


def _resume_if_parked(handles: EngineHandles, run_id: str, node: str, checkpoint: dict[str, Any]) -> None:
    """Queue the resume of the run's park on `node`, if it is parked there.

    Otherwise the run meets the claim when its node runs, or, when it was sealing its park there just now,
    the worker finds the claim right after writing the park and queues the resume itself (`Worker`): the
    claim is set before this checkpoint was read and the park written before that check, so one of the two
    sees the other."""
    if checkpoint.get("parked_node") != node:
        return
    pipe = handles.client.pipeline(transaction=False)
    # The timeout's due entry is replaced by this resume; its park token makes any duplicate a no-op.
    pipe.zrem(handles.keys.due, run_id)
    pipe.xadd(handles.keys.jobs, encode_job(resume_job(run_id, park_token(checkpoint))))
    pipe.execute()
