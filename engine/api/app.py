"""The ASGI application: `/api/v1/...` (API key in `Authorization: Bearer`), `/webhooks/<token>` and
`/openapi.json`, on FastAPI over `EngineApi`.

Every answer that is not a success is `{"error": {"code", "message"}}` (`Error`). Handlers that touch the
engine are plain `def`s, so FastAPI runs them on its thread pool, off the event loop; `POST /api/v1/runs` is
`async`: one trip there for its key check and the start together (`LaterKey`), then the wait for its run on the
event loop, holding no thread, and a trip for each read of the run (`start_answer`). A query parameter its route
does not declare is refused before the route runs (`engine.api.known_query`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio.to_thread
import orjson
from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.api.allowed_methods import allowed_methods
from engine.api.body_limit import BodyLimit
from engine.api.errors import ApiError, http_hinted, key_refused, missing_key, unknown
from engine.api.known_query import KnownQuery, meant
from engine.api.loop_event import LoopEvent
from engine.api.rerun import rerun_answer
from engine.api.start_threads import StartThreads
from engine.approvals.keys import DECIDE_SCOPE, PUBLISH_SCOPE, READ_SCOPE, START_SCOPE
from engine.facade import BadCursor, EngineApi, PendingStart, StartAnswer
from engine.flowtest.model import FlowTest
from engine.flowtest.record import RecordRefused
from engine.read_models import (
    MAX_LIST_LIMIT,
    ApprovalList,
    CallbackResumed,
    CancelledRun,
    Decision,
    DecisionRequest,
    Error,
    FlowList,
    FlowVersions,
    PublishedFlow,
    PublishRefusal,
    RerunRequest,
    RerunStarted,
    Run,
    RunList,
    RunStatus,
    StartedRun,
    StartRun,
    TestRecordingRequest,
    WebhookAccepted,
)

log = logging.getLogger("lockgate.api")
MAX_BODY_BYTES = 1 << 20
THREADS = 200
"""Blocking engine calls at once (a sync start's wait is not one: it waits on the event loop)."""
START_THREADS = 4
"""Threads sync starts hand their calls to (key checks, starts and reads), fewer than `THREADS`: a call is short,
and a burst of them on as many threads (a batch of runs ending wakes each one's request) costs more in threads
taking the GIL from one another than it gains. On 2 cores, the engine with one http child under 32 connections of
sync starts: 1.2-1.5× the starts a second of a thread held by each start (616-775 against 498-528), at two thirds
of the http process's CPU a start; 2, 3 and 8 threads did less well than 4."""
_START_THREADS = StartThreads(START_THREADS)
API_TITLE = "Lockgate engine API"
API_VERSION = "1"
RUN_ID = r"^[A-Za-z0-9_-]{1,64}$"
FLOW_ID = r"^[A-Za-z0-9_.-]{1,128}$"
APPROVAL_ID = r"^[A-Za-z0-9_.:-]{1,64}$"
TOKEN = r"^[A-Za-z0-9_-]{1,128}$"
CALLBACK_TOKEN = r"^[A-Za-z0-9_.-]{1,200}$"
"""`<run id>.<base64url HMAC>` (`engine.parking.callback_links`)."""
STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "not_allowed", 404: "not_found",
                405: "method_not_allowed", 408: "read_timeout", 413: "too_large", 414: "uri_too_long",
                415: "unsupported_media_type", 422: "bad_request", 431: "headers_too_large"}
REFUSAL_STATUS = {"unknown_approval": 404, "bad_decision": 422, "not_allowed": 403, "key_without_rights": 403,
                  "self_decision": 403, "malformed_key": 401, "unknown_key": 401, "revoked_key": 401}
"""Refused decisions by reason; any other refusal is a conflict with the approval's state (409)."""
RECORD_REFUSAL_STATUS = {"unknown_run": 404, "bad_name": 422, "run_not_finished": 409, "run_not_replayable": 409}


HTTP_CANCEL_REASON = "cancelled through the HTTP API"
"""The reason a cancel without one records (the CLI's is "cancelled from the command line")."""


class CancelRequest(BaseModel):
    """The body of `POST /api/v1/runs/{id}/cancel`, which may be left out."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, min_length=1, max_length=1000,
                               description="recorded with the cancel, as `lockgate runs cancel --reason` records it: "
                               f"the cancelled run's `error` (default: {HTTP_CANCEL_REASON})")


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": Error} for status in statuses}


def json_answer(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(model.model_dump_json(), status, headers,
                    media_type="application/json")


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps({"error": {"code": code, "message": message}}), status, headers,
                    media_type="application/json")


class _OrjsonRequest(Request):
    async def json(self) -> Any:
        # orjson refuses NaN and nesting past 1024 levels with a JSONDecodeError, which FastAPI answers as
        # `json_invalid`, where the standard library would accept NaN or overflow the stack.
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())
        return self._json


class _OrjsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_OrjsonRequest(request.scope, request.receive))

        return route


bearer = HTTPBearer(auto_error=False, description="an API key from `lockgate keys create NAME`")


# Dependencies that do not touch the engine are `async def`: a plain `def` dependency costs a hop to the
# thread pool and back on every request.
async def engine_of(request: Request) -> EngineApi:
    api: EngineApi = request.app.state.engine
    return api


Engine = Annotated[EngineApi, Depends(engine_of)]


@dataclass(frozen=True)
class Caller:
    """The API key a request came with, checked once for the request."""

    key: str
    name: str | None


def _checked(engine: EngineApi, key: str, scope: str | None) -> Caller:
    """The caller `key` names: 401 for a key that is not valid, 403 for one without the `scope` right. `scope`
    None: any valid key (a decision checks its own right, and records a refusal)."""
    check = engine.check_key(key, scope or DECIDE_SCOPE)
    if check.refusal is not None and (scope is not None or check.refusal != "key_without_rights"):
        raise key_refused(check.refusal, check.message)
    return Caller(key, check.name)


def _key_with(scope: str | None) -> Callable[..., Awaitable[Caller]]:
    """The dependency checking a request's key for `scope` (see `_checked`)."""

    async def api_key(request: Request, engine: Engine,
                      credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Caller:
        if credentials is None or not credentials.credentials.strip():
            raise missing_key(request.headers.get("authorization"))
        return await run_in_threadpool(_checked, engine, credentials.credentials.strip(), scope)

    return api_key


Reader = Annotated[Caller, Depends(_key_with(READ_SCOPE))]
"""A key with the `read` right: runs, flows and approvals as they are."""
Starter = Annotated[Caller, Depends(_key_with(START_SCOPE))]
"""A key with the `start` right: starting, cancelling and rerunning runs."""
Publisher = Annotated[Caller, Depends(_key_with(PUBLISH_SCOPE))]
AnyKey = Annotated[Caller, Depends(_key_with(None))]

UNCHECKED_KEY = "lockgate.unchecked_key"
"""Request scope entry: the key a `LaterKey` route has not checked yet."""


async def later_key(request: Request,
                    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> str:
    """The presented key, checked by the route in the same trip to the thread pool as its engine call (`_checked`);
    a request refused by validation has its key checked first, so a bad key is still a 401 whatever the body."""
    if credentials is None or not credentials.credentials.strip():
        raise missing_key(request.headers.get("authorization"))
    key = request.scope[UNCHECKED_KEY] = credentials.credentials.strip()
    return key


LaterKey = Annotated[str, Depends(later_key)]


async def single_valued_query(request: Request) -> None:
    """No route takes a list in its query: `?flow_id=a&flow_id=b` is refused, not read as its last value."""
    for name in request.query_params:
        given = len(request.query_params.getlist(name))
        if given > 1:
            raise ApiError(422, "bad_request", f"query parameter {name!r} is given {given} times; give it once")


def _is_json(content_type: str | None) -> bool:
    """Whether a body of `content_type` is read as JSON, as FastAPI reads a body parameter with
    `strict_content_type=False`: no type at all, `application/json`, or `application/<anything>+json`."""
    if content_type is None:
        return True
    maintype, _, subtype = content_type.partition(";")[0].strip().lower().partition("/")
    return maintype == "application" and (subtype == "json" or subtype.endswith("+json"))


def start_run_body(raw: bytes, content_type: str | None) -> StartRun:
    """The body of a start, or the `RequestValidationError` FastAPI would raise for it (errors located under
    "body"), which `_validation_answer` answers like any other route's."""
    if not raw:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    if not _is_json(content_type):
        raise RequestValidationError([{"type": "model_attributes_type", "loc": ("body",),
                                       "msg": "Input should be a valid dictionary or object", "input": None}])
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": exc.msg}}]) from None
    try:
        return StartRun.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError([{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]) from None


class _StartRunRoute(APIRoute):
    """`POST /api/v1/runs`, every sync start's route, with its arguments solved here instead of by FastAPI's
    dependency machinery (a fifth of the busy http process's time): the router's query check, the engine, the
    presented key (`later_key`) and the body, read as FastAPI reads a JSON body. The route is declared like any
    other, so its OpenAPI entry comes from the endpoint's signature as before."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint

        async def route(request: Request) -> Response:
            await single_valued_query(request)
            engine = await engine_of(request)
            key = await later_key(request, await bearer(request))
            try:
                raw = await request.body()
            except StarletteHTTPException:
                raise
            except Exception as exc:  # as FastAPI answers a body it could not read (e.g. the client went away)
                raise StarletteHTTPException(400, "There was an error parsing the body") from exc
            body = start_run_body(raw, request.headers.get("content-type"))
            answer: Response = await endpoint(body=body, engine=engine, key=key)
            return answer

        return route


Answer = tuple[int, bytes, list[tuple[bytes, bytes]]]
"""(status, JSON body, headers besides the content's type and length)."""


async def start_answer(engine: EngineApi, key: str, body: StartRun) -> Answer:
    """The answer to a start by the holder of `key` (ApiError when it is refused). The key check and the start take
    one trip to the start threads, each read of the run another; the wait between holds no thread."""
    woken = LoopEvent(asyncio.get_running_loop())
    pending, answer = await _START_THREADS.run(lambda: _begin_start(engine, key, body, woken),
                                               abandoned=_close_started)
    try:
        while answer is None:
            timeout = pending.timeout()
            was_woken = await woken.wait(timeout) if timeout is not None else False
            woken.clear()
            answer = await _START_THREADS.run(functools.partial(pending.read, was_woken))
    finally:
        pending.close()
    headers = [(b"retry-after", str(answer.retry_after_seconds).encode())] \
        if answer.retry_after_seconds is not None else []
    return answer.status, answer.json, headers


def _close_started(started: tuple[PendingStart, StartAnswer | None]) -> None:
    """Stop watching the run of a start whose request was cancelled while it started."""
    started[0].close()


def _begin_start(engine: EngineApi, key: str, body: StartRun, woken: LoopEvent) -> tuple[PendingStart,
                                                                                          StartAnswer | None]:
    """The start, and its answer when it is to be read at once (a duplicate, `wait: 0`, a run heard of late)."""
    caller = _checked(engine, key, START_SCOPE)
    pending = engine.begin_start(body, woken, f"key:{caller.name}" if caller.name else None)
    try:
        return pending, (pending.read(False) if pending.timeout() is None else None)
    except BaseException:
        pending.close()
        raise


def failure_answer(exc: Exception, method: str, path: str) -> Answer:
    """The answer to an exception out of a route, as the application's handlers give it (`_api_error`,
    `_internal`) to a route that met it."""
    if isinstance(exc, ApiError):
        return exc.status, orjson.dumps(exc.body()), []
    log.error("API %s %s failed", method, path, exc_info=exc)
    return 500, _internal_body(exc), []


async def _start_run(engine: EngineApi, key: str, body: StartRun) -> Response:
    status, payload, headers = await start_answer(engine, key, body)
    return Response(payload, status, {name.decode(): value.decode() for name, value in headers},
                    media_type="application/json")


def api_routes() -> APIRouter:
    router = APIRouter(prefix="/api/v1", responses=_errors(400, 401, 403, 422), route_class=_OrjsonRoute,
                       dependencies=[Depends(single_valued_query)])

    async def start_run(body: StartRun, engine: Engine, key: LaterKey) -> Response:
        return await _start_run(engine, key, body)

    router.add_api_route("/runs", start_run, methods=["POST"], route_class_override=_StartRunRoute,
                         response_model=StartedRun, status_code=201, tags=["runs"],
                         responses={200: {"model": StartedRun, "description": "the idempotency key had created it"},
                                    202: {"model": StartedRun, "description": "parked, or still running when `wait` "
                                          "ran out", "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
                                    **_errors(402, 404, 409)})

    @router.get("/runs", response_model=RunList, tags=["runs"], responses=_errors(404))
    def list_runs(engine: Engine, _key: Reader, status: RunStatus | None = None,
                  flow_id: Annotated[str | None, Query(max_length=128)] = None,
                  limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 50,
                  cursor: Annotated[str | None, Query(max_length=512, pattern=r"^[A-Za-z0-9_-]+$")] = None) -> Response:
        try:
            runs = engine.list_runs(status=status, flow_id=flow_id, limit=limit, cursor=cursor)
        except BadCursor as exc:
            raise ApiError(422, "bad_cursor", str(exc)) from None
        if flow_id and not runs.runs and engine.flow_versions(flow_id) is None:  # a run's flow is always published
            raise unknown("unknown_flow", "flow", flow_id)
        return json_answer(runs)

    @router.get("/runs/{run_id}", response_model=Run, tags=["runs"], responses=_errors(404))
    def get_run(run_id: Annotated[str, Path(pattern=RUN_ID)], engine: Engine, _key: Reader) -> Response:
        run = engine.get_run(run_id)
        if run is None:
            raise unknown("unknown_run", "run", run_id)
        return json_answer(run)

    @router.post("/runs/{run_id}/cancel", response_model=CancelledRun, tags=["runs"], responses=_errors(404))
    def cancel_run(run_id: Annotated[str, Path(pattern=RUN_ID)], engine: Engine, _key: Starter,
                   body: CancelRequest | None = None) -> Response:
        reason = body.reason if body is not None and body.reason is not None else HTTP_CANCEL_REASON
        try:
            return json_answer(engine.cancel_run(run_id, reason))
        except LookupError as exc:
            raise ApiError(404, "unknown_run", http_hinted("unknown_run", str(exc))) from None

    @router.post("/runs/{run_id}/rerun", response_model=RerunStarted, status_code=201, tags=["runs"],
                 responses={200: {"model": RerunStarted, "description": "`dry_run`: what it would reuse and "
                                  "repeat"}, **_errors(402, 404, 409)})
    def rerun_run(run_id: Annotated[str, Path(pattern=RUN_ID)], body: RerunRequest, engine: Engine,
                  _key: Starter) -> Response:
        status, answer = rerun_answer(engine, run_id, body)
        return json_answer(answer, status)
    @router.post("/runs/{run_id}/test-recording", response_model=FlowTest, tags=["runs"],
                 responses=_errors(404, 409))
    def record_test(run_id: Annotated[str, Path(pattern=RUN_ID)], body: TestRecordingRequest, engine: Engine,
                    _key: Reader) -> Response:
        try:
            return json_answer(engine.record_test(run_id, body.name))
        except RecordRefused as exc:
            raise ApiError(RECORD_REFUSAL_STATUS.get(exc.reason, 409), exc.reason,
                           http_hinted(exc.reason, str(exc))) from None

    @router.get("/flows", response_model=FlowList, tags=["flows"])
    def list_flows(engine: Engine, _key: Reader) -> Response:
        return json_answer(engine.list_flows())

    @router.post("/flows", response_model=PublishedFlow, status_code=201, tags=["flows"],
                 responses={200: {"model": PublishedFlow, "description": "the same content as the flow's latest "
                                  "version: nothing stored, that version answered"},
                            422: {"model": PublishRefusal, "description": "the flow has validation errors"}},
                 openapi_extra={"requestBody": {"required": True, "description": "a flow document "
                                "(flow-format.md)", "content": {"application/json": {"schema": {"type": "object"}}}}})
    async def publish_flow(request: Request, engine: Engine, _key: Publisher) -> Response:
        status, answer = await run_in_threadpool(engine.publish_answer, await request.body())
        return json_answer(answer, status)

    @router.get("/flows/{flow_id}/versions", response_model=FlowVersions, tags=["flows"], responses=_errors(404))
    def flow_versions(flow_id: Annotated[str, Path(pattern=FLOW_ID)], engine: Engine, _key: Reader) -> Response:
        versions = engine.flow_versions(flow_id)
        if versions is None:
            raise ApiError(404, "unknown_flow", f'flow "{flow_id}" is not published; publish it first')
        return json_answer(versions)

    @router.get("/approvals", response_model=ApprovalList, tags=["approvals"])
    def list_approvals(engine: Engine, _key: Reader) -> Response:
        return json_answer(engine.pending_approvals())

    @router.post("/approvals/{approval_id}/decision", response_model=Decision, tags=["approvals"],
                 responses=_errors(403, 404, 409))
    def decide(approval_id: Annotated[str, Path(pattern=APPROVAL_ID)], body: DecisionRequest, engine: Engine,
               key: AnyKey) -> Response:
        decision = engine.decide_with_key(approval_id, body.decision, key.key, body.comment)
        if decision.accepted:
            return json_answer(decision)
        reason = decision.reason or "refused"
        raise ApiError(REFUSAL_STATUS.get(reason, 409), reason, http_hinted(reason, decision.message))

    return router


def webhook_routes() -> APIRouter:
    router = APIRouter(route_class=_OrjsonRoute)

    @router.post("/webhooks/{token}", response_model=WebhookAccepted, status_code=202, tags=["webhooks"],
                 responses={200: {"model": WebhookAccepted, "description": "a repeated delivery: no second run"},
                            **_errors(400, 401, 402, 404, 409, 413, 422)},
                 openapi_extra={"requestBody": {"required": False, "description": "a JSON object; keys naming "
                                "the flow's inputs become them", "content": {"application/json": {
                                    "schema": {"type": "object"}}}}})
    async def webhook(token: Annotated[str, Path(pattern=TOKEN)], request: Request, engine: Engine,
                      x_hub_signature_256: Annotated[str | None, Header(description="sha256=<hex HMAC-SHA256 of "
                                                                        "the raw body, keyed by the token>")] = None,
                      ) -> Response:
        raw = await request.body()
        answer = await run_in_threadpool(engine.webhook, token, dict(request.headers.items()), raw)
        return Response(orjson.dumps(answer.body), answer.status, media_type="application/json")

    @router.post("/callbacks/{token}", response_model=CallbackResumed, tags=["callbacks"],
                 responses=_errors(400, 404, 409, 413, 422),
                 openapi_extra={"requestBody": {"required": False, "description": "any JSON value: it goes under "
                                "the node's output_key", "content": {"application/json": {"schema": {}}}}})
    async def callback(token: Annotated[str, Path(pattern=CALLBACK_TOKEN)], request: Request,
                       engine: Engine) -> Response:
        raw = await request.body()
        content_type = request.headers.get("content-type")
        if content_type is not None and not _is_json(content_type):  # the token stays unused: a corrected retry wins
            return error_response(400, "bad_json", f"the callback body was sent as {content_type[:100]!r}, which "
                                  "is not read as JSON; send a JSON value with Content-Type: application/json")
        outcome = await run_in_threadpool(engine.resume_callback, token, raw)
        return Response(orjson.dumps(outcome.to_data()), outcome.status, media_type="application/json")

    return router


def _validation_answer(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    unchecked = request.scope.get(UNCHECKED_KEY)
    if unchecked is not None:  # a `LaterKey` route: the key comes first, as on every other route
        try:
            _checked(request.app.state.engine, unchecked, START_SCOPE)
        except ApiError as refused:
            return _api_error(request, refused)
    errors = exc.errors()
    if any(error.get("type") == "json_invalid" or tuple(error.get("loc", ())) == ("body",) for error in errors):
        content_type = request.headers.get("content-type")
        if content_type is not None and not _is_json(content_type):  # e.g. `curl -d` without `-H`: a form's type
            return error_response(400, "bad_json", f"the body was sent as {content_type[:100]!r}, which is not read "
                                  "as JSON; send a JSON object with Content-Type: application/json")
        invalid = next((error for error in errors if error.get("type") == "json_invalid"), None)
        if invalid is not None:
            problem = str((invalid.get("ctx") or {}).get("error", "unreadable"))[:200]
            return error_response(400, "bad_json", f"the request body is not valid JSON ({problem}); send a JSON "
                                  "object")
        return error_response(400, "bad_json", "the request body is not a JSON object; send one")
    unknown = _unknown_by_id(errors)
    if unknown is not None:
        return unknown
    problems: list[str] = []
    for error in errors[:10]:
        parts = [str(part) for part in error.get("loc", ()) if part != "body"]
        if len(parts) > 1 and parts[0] in ONE_OF_MEANS:  # each member of a union refused it: what it may be, once
            problem = f"{parts[0]}: must be {ONE_OF_MEANS[parts[0]]}"
            if problem not in problems:
                problems.append(problem)
            continue
        where = ".".join(parts)
        if error.get("type") == "extra_forbidden":
            problems.append(f"{where}: {_not_a_field(request, str(error.get('loc', ('',))[-1]))}")
            continue
        meant = PATTERN_MEANS.get(str(error.get("loc", ("",))[-1]).lower()) \
            if error.get("type") == "string_pattern_mismatch" else None
        problems.append(f"{where or 'body'}: {f'must be {meant}' if meant else error.get('msg', 'invalid')}")
    code = "bad_decision" if any("decision" in error.get("loc", ()) for error in errors) else "bad_request"
    return error_response(422, code, "; ".join(problems))


def _not_a_field(request: Request, name: str) -> str:
    """Why a body field was refused: the fields the route's body takes, and the one a typo most likely meant."""
    route = request.scope.get("route")
    body = getattr(getattr(route, "body_field", None), "field_info", None)
    model = getattr(body, "annotation", None)
    model = next((arg for arg in getattr(model, "__args__", ()) if arg is not type(None)), model)  # an optional body
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return "not a field of this request"
    fields = list(model.model_fields)
    hint = meant(name, fields)
    return f"not a field of this request; {hint + ' ' if hint else ''}it takes {', '.join(fields)}"


PATTERN_MEANS = {
    "callback_url": "an http:// or https:// URL the engine can POST the run's execution.finished webhook to",
    "last-event-id": "the id of an event of this stream, a sequence number",
    "cursor": "the next_cursor of a page, as it was given",
    "name": "a test name: letters, digits, '-' and '_' (at most 64), starting with a letter or digit",
}
"""What a value refused for its pattern must be, by the field's name, said instead of the pattern."""
ONE_OF_MEANS = {
    "version": 'a version number (1 or more), "original" or "current"',
}
"""What a body field of several types (a rerun's `version`) must be, said once instead of each type's refusal
under pydantic's names for them (`version.constrained-int`, `version.literal['original','current']`)."""
UNKNOWN_BY_ID = {
    "run_id": ("unknown_run", "run"),
    "flow_id": ("unknown_flow", "flow"),
    "approval_id": ("unknown_approval", "approval"),
}
"""A path's id no such thing can have: the 404 its lookup would give, by the path parameter's name."""


def _unknown_by_id(errors: Sequence[Any]) -> Response | None:
    """The 404 for a path whose only fault is an id that cannot exist (wrong characters, too long)."""
    if len(errors) != 1 or errors[0].get("type") not in ("string_pattern_mismatch", "string_too_long"):
        return None
    location = tuple(errors[0].get("loc", ()))
    known = UNKNOWN_BY_ID.get(str(location[-1])) if len(location) == 2 and location[0] == "path" else None
    if known is None:
        return None
    code, noun = known
    return error_response(404, code, http_hinted(code, f'{noun} "{str(errors[0].get("input"))[:100]}" does not exist'))


def _http_answer(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status == 405:
        return _method_not_allowed(request, exc)
    code = STATUS_CODES.get(status, "bad_request" if status < 500 else "internal")
    if status == 404:
        message = f"no route {request.method} {request.url.path}; see /openapi.json for the routes"
    elif status == 413:
        message = f"bodies are limited to {MAX_BODY_BYTES} bytes; send less"
    else:
        message = str(exc.detail)
    return error_response(status, code, message, dict(exc.headers) if exc.headers else None)


def _method_not_allowed(request: Request, exc: StarletteHTTPException) -> Response:
    """A 405 naming every method the path takes (Starlette's `Allow` names only the first matching route's)."""
    headers = dict(exc.headers or {})
    message = f"{request.url.path} does not take {request.method}"
    methods = allowed_methods(request)
    if methods:
        headers = {name: value for name, value in headers.items() if name.lower() != "allow"}
        headers["Allow"] = ", ".join(methods)
        message += f"; it takes {headers['Allow']}"
    return error_response(405, STATUS_CODES[405], message, headers or None)


def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return Response(orjson.dumps(exc.body()), exc.status, media_type="application/json")


def _internal_body(exc: Exception) -> bytes:
    return orjson.dumps({"error": {"code": "internal", "message": f"{type(exc).__name__}: {exc}; see the engine log"}})


def _internal(request: Request, exc: Exception) -> Response:
    log.error("API %s %s failed", request.method, request.url.path, exc_info=exc)
    return Response(_internal_body(exc), 500, media_type="application/json")


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
    yield
    for close in app.state.closers:
        await close()


def build_app(engine: EngineApi | None, routers: Sequence[APIRouter] = (),
              closers: Sequence[Callable[[], Awaitable[None]]] = ()) -> FastAPI:
    """The application over `engine` (None: only for writing the OpenAPI document), with `routers` added;
    `closers` run when the server shuts down."""
    app = FastAPI(title=API_TITLE, version=API_VERSION, openapi_url="/openapi.json", docs_url=None,
                  redoc_url=None, lifespan=_lifespan, strict_content_type=False,
                  responses=_errors(404, 405, 408, 413, 414, 431))
    app.state.engine = engine
    app.state.closers = list(closers)
    app.include_router(api_routes())
    app.include_router(webhook_routes())
    for router in routers:
        app.include_router(router)
    app.add_middleware(KnownQuery, routes=lambda: app.routes)  # inside BodyLimit: an oversized body is a 413 first
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_answer)
    app.add_exception_handler(StarletteHTTPException, _http_answer)
    app.add_exception_handler(Exception, _internal)
    return app
