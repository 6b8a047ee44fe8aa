"""The `http.request` body (httpx): a non-2xx status, a timeout or a refused connection fails the step."""

from __future__ import annotations

from typing import Any

import httpx

from engine.durations import parse_duration
from engine.runtime.bodies import StepCall, StepError, StepResult, register_body
from engine.templates import TemplateProblem, render

_client: httpx.Client | None = None


def _shared_client() -> httpx.Client:
    global _client
    if _client is None:
        _client = httpx.Client(follow_redirects=True)
    return _client


def _render(call: StepCall, source: str, where: str) -> str:
    try:
        return render(source, call.names())
    except TemplateProblem as exc:
        raise StepError(f'node "{call.node.id}" (http.request): {where}: {exc}', "template_error") from None


def _http_given(call: StepCall) -> dict[str, Any]:
    config = call.config
    return {
        "method": config["method"],
        "url": _render(call, config["url"], "url"),
        "headers": {key: _render(call, value, f"headers.{key}") for key, value in config.get("headers", {}).items()},
        "body": _render(call, config["body"], "body") if config.get("body") is not None else None,
        "timeout": config.get("timeout", "30s"),
    }


@register_body("http.request", blocking=True, prepare=_http_given)
def http_request_body(call: StepCall) -> StepResult:
    config, given = call.config, call.given
    method, url, headers, body = given["method"], given["url"], given["headers"], given["body"]
    timeout = parse_duration(given["timeout"])
    shown_url = call.ctx.redact(url)
    try:
        response = _shared_client().request(method, url, headers=headers, content=body, timeout=timeout)
    except httpx.TimeoutException:
        raise StepError(f'node "{call.node.id}" (http.request): {method} {shown_url} timed out after {timeout:g}s; '
                        "raise `timeout` or check the server", "http_timeout") from None
    except httpx.HTTPError as exc:
        raise StepError(f'node "{call.node.id}" (http.request): {method} {shown_url} failed: '
                        f"{type(exc).__name__}: {exc}", "http_error") from None
    if response.status_code >= 400:
        raise StepError(f'node "{call.node.id}" (http.request): {method} {shown_url} answered HTTP '
                        f"{response.status_code} {response.reason_phrase}", "http_status")
    payload: Any
    if "json" in response.headers.get("content-type", ""):
        try:
            payload = response.json()
        except ValueError:
            payload = response.text
    else:
        payload = response.text
    output = {"status": response.status_code, "headers": dict(response.headers), "body": payload}
    return StepResult(ports=("out",), writes={config.get("output_key") or call.node.id: output})
