"""A real HTTP server speaking the OpenAI chat-completions subset Lockgate uses, for the demo and the tests.

Deterministic answers, token usage, `x-ratelimit-*` headers, request/token limits per window answering 429,
latency, background calls with a poll endpoint, and faults chosen per model name or `x-sim-fault` header.
It also stands in for a payments API at `POST /demo/refunds`, so the bundled triage example runs offline.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engine.clock import Clock, SystemClock
from engine.providers.sim_answers import answer_for
from engine.providers.tokens import count_tokens, format_reset, prompt_tokens

FAULTS = ("garbage", "500", "hang", "drop", "429")
FAULT_MODEL_PREFIX = "sim-fault-"
"""A model named `sim-fault-<fault>` always answers with that fault."""
ANSWER_MODELS = ("sim-small", "sim-large")
DEMO_REFUNDS_PATH = "/demo/refunds"


@dataclass
class SimulatorSettings:
    """How the simulator behaves; None limits mean unlimited."""

    requests_per_window: int | None = None
    tokens_per_window: int | None = None
    window_seconds: float = 60.0
    latency_ms: float = 0.0
    background_seconds: float = 5.0
    """How long (on the simulator's clock) a background call stays in progress."""
    hang_seconds: float = 30.0
    api_keys: tuple[str, ...] = ()
    """Accepted bearer keys; empty accepts any. Limits are counted per key."""


@dataclass
class SimulatorCounters:
    """What the simulator saw; read them under `lock` for consistent totals."""

    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    requests: int = 0
    completed: int = 0
    rate_limited: int = 0
    faults: int = 0
    background_started: int = 0
    polls: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    demo_refunds: int = 0
    by_model: dict[str, int] = field(default_factory=dict)


@dataclass
class _Window:
    started_at: float
    requests: int = 0
    tokens: int = 0


@dataclass
class _BackgroundJob:
    ready_at: float
    completion: dict[str, Any]


class _Limits:
    """Fixed windows per API key; admission is checked and counted atomically."""

    def __init__(self, settings: SimulatorSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def _window(self, key: str, now: float) -> _Window:
        window = self._windows.get(key)
        period = self._settings.window_seconds
        if window is None or now >= window.started_at + period:
            # Windows are aligned to multiples of the period so every key resets at a predictable instant.
            window = _Window(started_at=math.floor(now / period) * period)
            self._windows[key] = window
        return window

    def admit(self, key: str, tokens: int) -> tuple[bool, dict[str, str], float]:
        """(admitted, rate-limit headers, seconds until the window resets)."""
        settings = self._settings
        with self._lock:
            now = self._clock.now()
            window = self._window(key, now)
            reset = max(0.0, window.started_at + settings.window_seconds - now)
            request_limit, token_limit = settings.requests_per_window, settings.tokens_per_window
            over_requests = request_limit is not None and window.requests + 1 > request_limit
            over_tokens = token_limit is not None and window.tokens + tokens > token_limit
            admitted = not (over_requests or over_tokens)
            if admitted:
                window.requests += 1
                window.tokens += tokens
            headers: dict[str, str] = {}
            if settings.requests_per_window is not None:
                headers["x-ratelimit-limit-requests"] = str(settings.requests_per_window)
                headers["x-ratelimit-remaining-requests"] = str(max(0, settings.requests_per_window - window.requests))
                headers["x-ratelimit-reset-requests"] = format_reset(reset)
            if settings.tokens_per_window is not None:
                headers["x-ratelimit-limit-tokens"] = str(settings.tokens_per_window)
                headers["x-ratelimit-remaining-tokens"] = str(max(0, settings.tokens_per_window - window.tokens))
                headers["x-ratelimit-reset-tokens"] = format_reset(reset)
            return admitted, headers, reset


def completion_body(model: str, messages: list[dict[str, Any]], max_tokens: int | None) -> dict[str, Any]:
    """The chat-completion JSON the simulator answers `messages` with."""
    contents = [str(m.get("content", "")) for m in messages]
    user_text = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    text = answer_for(user_text)
    finish_reason = "stop"
    if max_tokens is not None and count_tokens(text) > max_tokens:
        text, finish_reason = text[: max_tokens * 4], "length"
    digest = uuid.uuid5(uuid.NAMESPACE_URL, model + "\x00" + "\x00".join(contents)).hex[:24]
    used_prompt = prompt_tokens(contents)
    used_completion = count_tokens(text)
    return {
        "id": f"chatcmpl-{digest}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": used_prompt, "completion_tokens": used_completion,
                  "total_tokens": used_prompt + used_completion},
    }


class ProviderSimulator:
    """The simulator server. `ProviderSimulator(port=0).start()` picks a free port; `.url` ends in `/v1`."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", settings: SimulatorSettings | None = None,
                 clock: Clock | None = None) -> None:
        self.settings = settings or SimulatorSettings()
        self.clock: Clock = clock or SystemClock()
        self.counters = SimulatorCounters()
        self._limits = _Limits(self.settings, self.clock)
        self._jobs: dict[str, _BackgroundJob] = {}
        self._jobs_lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, port), _make_handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for adapters, including `/v1`."""
        host = self._server.server_address[0]
        return f"http://{host if isinstance(host, str) else host.decode()}:{self.port}/v1"

    def start(self) -> ProviderSimulator:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="provider-sim",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging requests are released at once."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (the CLI's mode)."""
        try:
            self._server.serve_forever()
        finally:
            self._stopping.set()
            self._server.server_close()

    def __enter__(self) -> ProviderSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling, called from handler threads -------------------------------------------

    def _count(self, **changes: int) -> None:
        with self.counters.lock:
            for name, delta in changes.items():
                setattr(self.counters, name, getattr(self.counters, name) + delta)
            self.counters.max_in_flight = max(self.counters.max_in_flight, self.counters.in_flight)

    def _add_job(self, completion: dict[str, Any], seconds: float) -> str:
        job_id = f"resp_{uuid.uuid4().hex[:20]}"
        with self._jobs_lock:
            self._jobs[job_id] = _BackgroundJob(ready_at=self.clock.now() + seconds, completion=completion)
        return job_id

    def _job(self, job_id: str) -> _BackgroundJob | None:
        with self._jobs_lock:
            return self._jobs.get(job_id)


def _make_handler(sim: ProviderSimulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in one segment; split writes meet delayed ACKs and cost ~40 ms a request.
        wbufsize = 1 << 16
        disable_nagle_algorithm = True
        server_version = "LockgateProviderSim/1"

        def log_message(self, format: str, *args: Any) -> None:  # the tests and the demo want quiet
            return

        def _send_json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
            self._send_json(status, {"error": {"message": message, "type": kind}}, headers)

        def _api_key(self) -> str | None:
            auth = self.headers.get("authorization", "")
            key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
            if sim.settings.api_keys and key not in sim.settings.api_keys:
                self._error(401, "invalid API key; send 'Authorization: Bearer <key>' with a configured key",
                            "invalid_request_error")
                return None
            return key

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                models = [*ANSWER_MODELS, *(FAULT_MODEL_PREFIX + f for f in FAULTS)]
                self._send_json(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "owned_by": "lockgate-sim"} for m in models]})
                return
            if self.path.startswith("/v1/responses/"):
                if self._api_key() is None:
                    return
                sim._count(polls=1)
                job_id = self.path.rsplit("/", 1)[1]
                job = sim._job(job_id)
                if job is None:
                    self._error(404, f"no background response {job_id!r}", "not_found_error")
                elif sim.clock.now() < job.ready_at:
                    self._send_json(200, {"id": job_id, "object": "response", "status": "in_progress"})
                else:
                    self._send_json(200, {"id": job_id, "object": "response", "status": "completed",
                                          "output": job.completion})
                return
            self._error(404, f"no route GET {self.path}", "not_found_error")

        def do_POST(self) -> None:
            if self.path.rstrip("/") == DEMO_REFUNDS_PATH:
                self._demo_refund()
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route POST {self.path}", "not_found_error")
                return
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            sim._count(requests=1, in_flight=1)
            try:
                self._chat(raw)
            finally:
                sim._count(in_flight=-1)

        def _demo_refund(self) -> None:
            """A refund "issued" for the JSON ticket posted (its `id` is echoed back)."""
            length = int(self.headers.get("content-length") or 0)
            try:
                ticket = json.loads(self.rfile.read(length) or b"null") if length else None
            except ValueError:
                self._error(400, "the refund body must be JSON (the ticket)", "invalid_request_error")
                return
            sim._count(demo_refunds=1)
            self._send_json(201, {"refund_id": f"rf_{uuid.uuid4().hex[:12]}", "status": "issued",
                                  "ticket": ticket.get("id") if isinstance(ticket, dict) else None})

        def _chat(self, raw: bytes) -> None:
            key = self._api_key()
            if key is None:
                return
            try:
                body = json.loads(raw or b"{}")
                model = str(body["model"])
                messages = list(body["messages"])
                max_tokens = body.get("max_tokens")
                if not all(isinstance(m, dict) for m in messages) or not isinstance(max_tokens, int | None):
                    raise TypeError("messages must be objects and max_tokens an integer")
            except (ValueError, KeyError, TypeError):
                self._error(400, "body must be JSON with 'model' and 'messages'", "invalid_request_error")
                return
            with sim.counters.lock:
                sim.counters.by_model[model] = sim.counters.by_model.get(model, 0) + 1
            fault = self.headers.get("x-sim-fault") or (
                model[len(FAULT_MODEL_PREFIX):] if model.startswith(FAULT_MODEL_PREFIX) else None)
            contents = [str(m.get("content", "")) for m in messages]
            admitted, headers, reset = sim._limits.admit(key, prompt_tokens(contents) + int(max_tokens or 0))
            if not admitted or fault == "429":
                sim._count(rate_limited=1)
                wait = max(reset, 0.001)
                headers["retry-after"] = str(max(1, math.ceil(wait)))
                headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
                self._error(429, "rate limit reached for requests; retry after the reset", "rate_limit_error", headers)
                return
            if sim.settings.latency_ms > 0:
                sim._stopping.wait(sim.settings.latency_ms / 1000)
            if fault is not None:
                sim._count(faults=1)
                self._fault(fault, headers)
                return
            completion = completion_body(model, messages, max_tokens)
            if body.get("background"):
                seconds = float(self.headers.get("x-sim-background-seconds") or sim.settings.background_seconds)
                job_id = sim._add_job(completion, seconds)
                sim._count(background_started=1)
                self._send_json(202, {"id": job_id, "object": "response", "status": "in_progress"}, headers)
                return
            sim._count(completed=1)
            self._send_json(200, completion, headers)

        def _fault(self, fault: str, headers: dict[str, str]) -> None:
            if fault == "500":
                self._error(500, "the simulated provider failed", "server_error", headers)
            elif fault == "garbage":
                data = b"<html>502 upstream hiccup</html>"
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif fault == "hang":
                sim._stopping.wait(sim.settings.hang_seconds)
                self.close_connection = True
            elif fault == "drop":
                # Promise a body, send part of it, then cut the connection mid-response.
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "4096")
                self.end_headers()
                self.wfile.write(b'{"id": "chatcmpl-drop", "choices": [{"message": {"content": "par')
                self.wfile.flush()
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.close_connection = True
            else:
                self._error(400, f"unknown fault {fault!r}; use one of {', '.join(FAULTS)}", "invalid_request_error")

    return Handler
