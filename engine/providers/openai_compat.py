"""The OpenAI-compatible chat-completions adapter over httpx (OpenAI, local servers, the bundled simulator)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from engine.clock import Clock, SystemClock
from engine.money.amounts import cost_micros
from engine.providers.base import (
    BackgroundCall,
    BadResponse,
    ChatRequest,
    ChatResult,
    ConnectionLost,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    RateLimitTelemetry,
    TelemetrySink,
)
from engine.providers.config import ConnectionConfig, ProviderConfig
from engine.providers.tokens import count_tokens, parse_reset, prompt_tokens

DEFAULT_RETRY_AFTER_SECONDS = 1.0


def telemetry_from_headers(headers: httpx.Headers) -> RateLimitTelemetry:
    """The `x-ratelimit-*` headers of a response; unreadable values count as absent."""

    def integer(name: str) -> int | None:
        value = headers.get(name)
        try:
            return int(float(value)) if value is not None else None
        except ValueError:
            return None

    return RateLimitTelemetry(
        limit_requests=integer("x-ratelimit-limit-requests"),
        remaining_requests=integer("x-ratelimit-remaining-requests"),
        reset_requests_s=parse_reset(headers.get("x-ratelimit-reset-requests")),
        limit_tokens=integer("x-ratelimit-limit-tokens"),
        remaining_tokens=integer("x-ratelimit-remaining-tokens"),
        reset_tokens_s=parse_reset(headers.get("x-ratelimit-reset-tokens")),
    )


def retry_after_seconds(headers: httpx.Headers, telemetry: RateLimitTelemetry) -> float:
    """When a 429 says to come back: `retry-after-ms`, `retry-after`, the reset header, else a second."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                pass
    if telemetry.reset_requests_s is not None:
        return telemetry.reset_requests_s
    return DEFAULT_RETRY_AFTER_SECONDS


def _prompt_estimate(request: ChatRequest) -> int:
    return prompt_tokens(m.content for m in request.messages)


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error", {})
        return str(error.get("message") or error) if isinstance(error, dict) else str(error)
    except (ValueError, AttributeError):
        return response.text[:200]


class OpenAICompatAdapter:
    """Calls one connection of a provider; prices come from the provider's table (USD per 1M tokens)."""

    def __init__(self, provider: ProviderConfig, connection: str | ConnectionConfig | None = None, *,
                 telemetry: TelemetrySink | None = None, timeout_seconds: float | None = None,
                 extra_headers: dict[str, str] | None = None, clock: Clock | None = None) -> None:
        if connection is None:
            connection = provider.connections[0]
        self._provider = provider
        self._connection = provider.connection(connection) if isinstance(connection, str) else connection
        self._telemetry = telemetry
        self._clock: Clock = clock or SystemClock()
        self._timeout = httpx.Timeout(timeout_seconds if timeout_seconds is not None else provider.timeout_seconds)
        self._headers = {"content-type": "application/json", **(extra_headers or {})}
        if self._connection.api_key:
            self._headers["authorization"] = f"Bearer {self._connection.api_key}"
        self._base_url = self._connection.base_url.rstrip("/")
        self._client: httpx.Client | None = None
        self.provider = provider.name
        self.connection = self._connection.name

    # -- money ---------------------------------------------------------------------------------

    def cost_micros(self, model: str, prompt_tokens_used: int, completion_tokens_used: int) -> int:
        """What tokens of `model` cost, in micro-dollars rounded up."""
        price = self._provider.price(model)
        return (cost_micros(prompt_tokens_used, price.prompt_per_1m)
                + cost_micros(completion_tokens_used, price.completion_per_1m))

    def estimate_cost_micros(self, request: ChatRequest) -> int:
        """Most the call can cost: estimated prompt tokens plus `max_tokens` (or the provider default)."""
        prompt = _prompt_estimate(request)
        completion = request.max_tokens or self._provider.default_max_tokens
        return self.cost_micros(request.model, prompt, completion)

    # -- calls -----------------------------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatResult:
        self._provider.price(request.model)  # an unpriced model fails before any money is spent
        response = self._send("POST", "/chat/completions", self._body(request))
        return self._result(request, response)

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        self._provider.price(request.model)
        async with httpx.AsyncClient(timeout=self._timeout, headers=self._headers) as client:
            try:
                response = await client.post(self._base_url + "/chat/completions", json=self._body(request))
            except httpx.HTTPError as exc:
                raise self._transport_error(exc) from exc
        return self._result(request, response)

    def start_background(self, request: ChatRequest) -> BackgroundCall:
        self._provider.price(request.model)
        started_at = self._clock.now()
        response = self._send("POST", "/chat/completions", {**self._body(request), "background": True})
        self._check_status(response)
        data = self._json(response)
        if "choices" in data:  # the server ignored `background` and answered at once
            result = self._parse(request.model, data, response, _prompt_estimate(request))
            return BackgroundCall(str(data.get("id") or ""), request.model, self.connection, started_at,
                                  _prompt_estimate(request), result)
        call_id = data.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise BadResponse(f"provider {self.provider!r} started a background call without an id: {data!r:.200}",
                              provider=self.provider)
        return BackgroundCall(call_id, request.model, self.connection, started_at, _prompt_estimate(request))

    def poll_background(self, call: BackgroundCall) -> ChatResult | None:
        if call.immediate is not None:
            return call.immediate
        response = self._send("GET", f"/responses/{call.call_id}", None)
        if response.status_code == 404:
            raise ProviderError(f"provider {self.provider!r} no longer knows background call {call.call_id!r}; "
                                "start the call again", provider=self.provider, status_code=404, retryable=False)
        self._check_status(response)
        data = self._json(response)
        status = data.get("status")
        if status in ("in_progress", "queued"):
            return None
        if status == "completed" and isinstance(data.get("output"), dict):
            return self._parse(call.model, data["output"], response, call.estimated_prompt_tokens)
        raise ProviderError(f"provider {self.provider!r} background call {call.call_id!r} ended {status!r}: "
                            f"{data.get('error') or data!r:.200}", provider=self.provider, retryable=False)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- plumbing --------------------------------------------------------------------------------

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        return body

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        if self._client is None:
            self._client = httpx.Client(timeout=self._timeout, headers=self._headers)
        try:
            return self._client.request(method, self._base_url + path, json=body)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc

    def _transport_error(self, exc: httpx.HTTPError) -> ProviderError:
        where = f"provider {self.provider!r} connection {self.connection!r} ({self._base_url})"
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(f"{where} did not answer within {self._timeout.read}s ({type(exc).__name__}); "
                                   "retry later or raise the provider's timeout_seconds", provider=self.provider)
        return ConnectionLost(f"{where}: connection failed or dropped mid-response ({type(exc).__name__}: {exc}); "
                              "retry later", provider=self.provider)

    def _result(self, request: ChatRequest, response: httpx.Response) -> ChatResult:
        self._check_status(response)
        return self._parse(request.model, self._json(response), response, _prompt_estimate(request))

    def _check_status(self, response: httpx.Response) -> None:
        telemetry = telemetry_from_headers(response.headers)
        if response.status_code == 429:
            retry_after = retry_after_seconds(response.headers, telemetry)
            if self._telemetry is not None:
                self._telemetry.record_rate_limited(self.provider, self.connection, retry_after, telemetry)
            raise RateLimited(f"provider {self.provider!r} connection {self.connection!r} is rate limited: "
                              f"{_error_message(response)}; retry after {retry_after:g}s",
                              retry_after=retry_after, provider=self.provider, telemetry=telemetry)
        if self._telemetry is not None and not telemetry.is_empty:
            self._telemetry.record_response(self.provider, self.connection, telemetry)
        if response.status_code == 408:
            raise ProviderTimeout(f"provider {self.provider!r} timed out the call (408): {_error_message(response)}",
                                  provider=self.provider, status_code=408)
        if response.status_code >= 400:
            server_side = response.status_code >= 500
            raise ProviderError(
                f"provider {self.provider!r} answered {response.status_code}: {_error_message(response)}"
                + ("; retry later" if server_side else "; check the model name, API key and request"),
                provider=self.provider, status_code=response.status_code, retryable=server_side)

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = json.loads(response.content)
        except ValueError:
            raise BadResponse(f"provider {self.provider!r} answered {response.status_code} with a body that is not "
                              f"JSON: {response.text[:120]!r}", provider=self.provider) from None
        if not isinstance(data, dict):
            raise BadResponse(f"provider {self.provider!r} answered JSON that is not an object: {data!r:.120}",
                              provider=self.provider)
        return data

    def _parse(self, model: str, data: dict[str, Any], response: httpx.Response,
               estimated_prompt_tokens: int) -> ChatResult:
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"]
            if not isinstance(text, str):
                raise TypeError("content is not text")
        except (KeyError, IndexError, TypeError) as exc:
            raise BadResponse(f"provider {self.provider!r} answered without choices[0].message.content ({exc}): "
                              f"{data!r:.200}", provider=self.provider) from None
        raw_usage = data.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        used_prompt = usage.get("prompt_tokens")
        used_completion = usage.get("completion_tokens")
        if not isinstance(used_prompt, int) or used_prompt < 0:
            used_prompt = estimated_prompt_tokens  # servers without `usage` are charged our estimate
        if not isinstance(used_completion, int) or used_completion < 0:
            used_completion = count_tokens(text)
        return ChatResult(
            text=text,
            model=str(data.get("model") or model),
            prompt_tokens=used_prompt,
            completion_tokens=used_completion,
            cost_micros=self.cost_micros(model, used_prompt, used_completion),
            finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
            response_id=str(data["id"]) if data.get("id") else None,
            connection=self.connection,
            telemetry=telemetry_from_headers(response.headers),
        )
