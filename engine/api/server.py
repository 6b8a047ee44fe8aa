"""The engine's HTTP server: `/api/v1/...` (API key in `Authorization: Bearer`) and `/webhooks/<token>`.

Stdlib `ThreadingHTTPServer`: one thread per request, no extra dependency, nothing Qt. Start it from
Python with `ApiServer(services, "127.0.0.1", 8080).start()` or `lockgate worker --http HOST:PORT`.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import orjson

from engine.api.errors import ApiError
from engine.api.run_watch import RunWatch
from engine.api.runs import start_run
from engine.approvals.decide import decide_with_key
from engine.approvals.keys import check_key
from engine.approvals.pending import list_pending
from engine.publish import list_versions
from engine.store.models import RUN_STATUSES as RUN_STATUS_FILTERS
from engine.triggers.webhooks import handle_webhook

if TYPE_CHECKING:
    from engine.runtime.services import EngineServices

log = logging.getLogger("lockgate.api")
MAX_BODY_BYTES = 1 << 20
Answer = tuple[int, Any]
Route = Callable[[Any, "Request"], Answer]


class Request:
    def __init__(self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes,
                 params: tuple[str, ...]) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.params = params
        self.key = ""
        self.watch: RunWatch | None = None

    def json(self) -> dict[str, Any]:
        try:
            data = orjson.loads(self.body) if self.body.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, "bad_json", f"the request body is not JSON ({exc}); send a JSON object") from None
        if not isinstance(data, dict):
            raise ApiError(400, "bad_json", "the request body must be a JSON object")
        return data


def _runs_create(services: EngineServices, request: Request) -> Answer:
    return start_run(services, request.json(), request.watch)


def _runs_list(services: EngineServices, request: Request) -> Answer:
    status = request.query.get("status", [None])[0]
    if status is not None and status not in RUN_STATUS_FILTERS:
        raise ApiError(422, "bad_request", f'unknown status "{status}"; use one of {", ".join(RUN_STATUS_FILTERS)}')
    flow_id = request.query.get("flow_id", [None])[0]
    try:
        limit = int(request.query.get("limit", ["50"])[0])
    except ValueError:
        raise ApiError(422, "bad_request", "limit must be a whole number of runs") from None
    return 200, {"runs": services.list_runs(status=status, flow_id=flow_id, limit=max(1, min(limit, 500)))}


def _run_get(services: EngineServices, request: Request) -> Answer:
    run = services.get_run(request.params[0])
    if run is None:
        raise ApiError(404, "unknown_run", f'run "{request.params[0]}" does not exist; list runs with GET /api/v1/runs')
    return 200, run


def _run_cancel(services: EngineServices, request: Request) -> Answer:
    try:
        status = services.cancel_run(request.params[0], "cancelled through the HTTP API")
    except LookupError as exc:
        raise ApiError(404, "unknown_run", str(exc)) from None
    return 200, {"run_id": request.params[0], "status": status}


def _approvals_list(services: EngineServices, request: Request) -> Answer:
    return 200, {"approvals": [item.to_data() for item in list_pending(services._api())]}


def _approval_decide(services: EngineServices, request: Request) -> Answer:
    body = request.json()
    decision = body.get("decision")
    comment = body.get("comment")
    if not isinstance(decision, str):
        raise ApiError(422, "bad_decision", 'the body needs "decision": "approve" or "reject"')
    result = decide_with_key(services._api(), request.params[0], decision, request.key,
                             comment if isinstance(comment, str) else None)
    if result.accepted:
        return 200, result.to_data()
    status = {"unknown_approval": 404, "bad_decision": 422, "not_allowed": 403, "key_without_rights": 403,
              "malformed_key": 401, "unknown_key": 401, "revoked_key": 401}.get(result.reason or "", 409)
    raise ApiError(status, result.reason or "refused", result.message)


def _flow_versions(services: EngineServices, request: Request) -> Answer:
    versions = list_versions(services._api().sql, request.params[0])
    if not versions:
        raise ApiError(404, "unknown_flow", f'flow "{request.params[0]}" is not published; publish it first')
    return 200, {"flow_id": request.params[0], "versions": [
        {"version": v.version, "content_hash": v.content_hash, "published_at": v.published_at.isoformat()}
        for v in versions]}


ROUTES: list[tuple[str, re.Pattern[str], Route]] = [
    ("POST", re.compile(r"^/api/v1/runs$"), _runs_create),
    ("GET", re.compile(r"^/api/v1/runs$"), _runs_list),
    ("GET", re.compile(r"^/api/v1/runs/([A-Za-z0-9_-]+)$"), _run_get),
    ("POST", re.compile(r"^/api/v1/runs/([A-Za-z0-9_-]+)/cancel$"), _run_cancel),
    ("GET", re.compile(r"^/api/v1/approvals$"), _approvals_list),
    ("POST", re.compile(r"^/api/v1/approvals/([A-Za-z0-9_.:-]+)/decision$"), _approval_decide),
    ("GET", re.compile(r"^/api/v1/flows/([A-Za-z0-9_.-]+)/versions$"), _flow_versions),
]
WEBHOOK_PATH = re.compile(r"^/webhooks/([A-Za-z0-9_-]+)$")


def _authenticate(services: EngineServices, request: Request) -> None:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(401, "missing_key", "send an API key as `Authorization: Bearer lgk_...`; create one with "
                       "`lockgate keys create NAME`")
    check = check_key(services._api().sql, key.strip())
    # Any valid key may use the API; the approvals:decide right is checked by the decision itself.
    if check.refusal not in (None, "key_without_rights"):
        raise ApiError(401, check.refusal or "bad_key", check.message)
    request.key = key.strip()


def dispatch(services: EngineServices, method: str, target: str, headers: dict[str, str], body: bytes,
             watch: RunWatch | None = None) -> Answer:
    """The answer to one request: (status, JSON-able body)."""
    parts = urlsplit(target)
    lower = {name.lower(): value for name, value in headers.items()}
    try:
        webhook = WEBHOOK_PATH.match(parts.path)
        if webhook is not None:
            if method != "POST":
                raise ApiError(405, "method_not_allowed", "webhooks take POST only")
            answer = handle_webhook(services._api(), services.create_run, webhook.group(1), headers, body,
                                    services.latest_versions)
            return answer.status, answer.body
        allowed_methods = []
        for route_method, pattern, handler in ROUTES:
            match = pattern.match(parts.path)
            if match is None:
                continue
            allowed_methods.append(route_method)
            if route_method == method:
                request = Request(method, parts.path, parse_qs(parts.query), lower, body, match.groups())
                request.watch = watch
                _authenticate(services, request)
                return handler(services, request)
        if allowed_methods:
            raise ApiError(405, "method_not_allowed", f"{parts.path} takes {', '.join(allowed_methods)}")
        raise ApiError(404, "not_found", f"no route {method} {parts.path}; see docs/api.md for the routes")
    except ApiError as exc:
        return exc.status, exc.body()
    except Exception as exc:
        log.exception("API %s %s failed", method, parts.path)
        return 500, {"error": {"code": "internal", "message": f"{type(exc).__name__}: {exc}; see the engine log"}}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; with Nagle on, the body waits for the client's delayed
        # ACK (about 40 ms on Linux) on every keep-alive answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _serve(self) -> None:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            self.close_connection = True  # the body's end is unknown, so the connection cannot be reused
            self._send(400, {"error": {"code": "bad_request", "message": "Content-Length is not a number; send the "
                                       "body's length in bytes"}})
            return
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the unread body would otherwise be taken for the next request
            self._send(413, {"error": {"code": "too_large", "message": f"bodies are limited to {MAX_BODY_BYTES} "
                                       "bytes; send less"}})
            return
        body = self.rfile.read(length) if length else b""
        status, data = dispatch(self.server.services, self.command, self.path, dict(self.headers.items()), body,
                                self.server.watch)
        self._send(status, data)

    def _send(self, status: int, data: Any) -> None:
        try:
            raw = orjson.dumps(data)
        except (orjson.JSONEncodeError, TypeError) as exc:
            log.exception("API %s %s: the answer cannot be encoded", self.command, self.path)
            status, raw = 500, orjson.dumps({"error": {"code": "internal", "message": f"the answer cannot be encoded "
                                                       f"as JSON ({exc}); see the engine log"}})
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        if status == 202 and isinstance(data, dict) and "retry_after_seconds" in data:
            self.send_header("retry-after", str(data["retry_after_seconds"]))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = _serve
    do_POST = _serve
    do_PUT = _serve
    do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    services: EngineServices
    watch: RunWatch


class ApiServer:
    """The HTTP API of started `EngineServices`; `start()` serves in a thread, `stop()` closes."""

    def __init__(self, services: EngineServices, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server = _Server((host, port), _Handler)
        self.server.services = services
        self.server.watch = RunWatch(services._api().client, services.keys.live)
        self.services = services
        services.batch_listeners.append(self.server.watch.on_batch)
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}" if isinstance(host, str) else f"http://{host.decode()}:{port}"

    def start(self) -> ApiServer:
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.2,), name="lockgate-http",
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server.watch.on_batch in self.services.batch_listeners:
            self.services.batch_listeners.remove(self.server.watch.on_batch)
        self.server.shutdown()
        self.server.server_close()
        self.server.watch.close()
        if self.thread is not None:
            self.thread.join(5)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
