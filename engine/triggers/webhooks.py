"""`POST /webhooks/<token>`: signature check, dedupe, inputs from the JSON body, one run per delivery.

Inputs mapping: the body must be a JSON object; each key naming one of the flow's declared inputs
becomes that input (`{"ticket": {...}}` for ticket-triage); other keys are ignored, since senders
post more than a flow declares. Refused requests (no/bad signature, unknown token) leave nothing
but a counter in `Keyspace.trigger_counters`; a signed delivery that starts no run counts under its trigger,
`<flow>/<node>:disabled` or `:refused` (a duplicate starts none by design and is not counted).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import string
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.publish import UnknownFlowVersion, get_version
from engine.runtime.create import LatestVersions, RunRefused, StartsRuns
from engine.runtime.handles import EngineHandles
from engine.runtime.inputs import InputError
from engine.templates import TemplateProblem, render
from engine.triggers.settings import count, setting_of, trigger_idempotency_key, webhook_target

log = logging.getLogger("lockgate.webhooks")
SIGNATURE_HEADER = "x-hub-signature-256"
DEFAULT_DEDUPE_HEADER = "X-Delivery-Id"
DISABLED_CODES = frozenset({"flow_disabled", "webhook_disabled"})
"""Answers counted as `<flow>/<node>:disabled`; every other signed delivery that starts no run is `:refused`."""


@dataclass(frozen=True)
class WebhookAnswer:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


def _error(status: int, code: str, message: str) -> WebhookAnswer:
    return WebhookAnswer(status, {"error": {"code": code, "message": message}})


def signature_of(body: bytes, token: str) -> str:
    """The `X-Hub-Signature-256` value a sender puts on `body`."""
    return "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


SHA256_HEX_DIGITS = 64


def signature_ok(body: bytes, token: str, presented: str | None) -> bool:
    """`presented` is `sha256=<hex>` of the body's HMAC (hex in either case; the digest is the same)."""
    if presented is None:
        return False
    scheme, _, digest = presented.strip().partition("=")
    expected = hmac.new(token.encode(), body, hashlib.sha256).hexdigest()
    return scheme == "sha256" and hmac.compare_digest(expected.encode(), digest.lower().encode("utf-8", "replace"))


def template_headers(headers: dict[str, str]) -> dict[str, str]:
    """Headers under the name as sent, in lower case and in Title-Case, so templates need not guess."""
    shown: dict[str, str] = {}
    for name, value in headers.items():
        for variant in (name, name.lower(), "-".join(part.capitalize() for part in name.split("-"))):
            shown[variant] = value
    return shown


class RequestHeaders(dict[str, str]):
    """`request.headers` in a template: any spelling of a name finds its header (HTTP header names are
    case-insensitive), and the headers a template reads but the request lacks are noted."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__(template_headers(headers))
        self._by_lower = {name.lower(): value for name, value in headers.items()}
        self._missing: list[str] = []

    def __missing__(self, name: str) -> str:
        if isinstance(name, str) and name.lower() in self._by_lower:
            return self._by_lower[name.lower()]
        if isinstance(name, str) and not hasattr(dict, name):  # templates look `headers.get` up as a key first
            self._missing.append(name)
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_lower

    def get(self, name: str, default: Any = None, /) -> Any:
        return self._by_lower.get(name.lower(), default)

    def missing(self) -> list[str]:
        return list(self._missing)


def dedupe_key(template: str | None, headers: dict[str, str], body: bytes, data: Any) -> str:
    """The delivery's dedupe key; empty (no dedupe) when it is, or reads, a header the request lacks."""
    shown = RequestHeaders(headers)
    if template is None:
        return str(shown.get(DEFAULT_DEDUPE_HEADER, ""))
    context = {"request": {"headers": shown, "body": body.decode("utf-8", "replace"), "json": data}}
    try:
        return render(template, context).strip()
    except TemplateProblem:
        if shown.missing():
            return ""
        raise


def handle_webhook(handles: EngineHandles, create_run: StartsRuns, token: str, headers: dict[str, str],
                   body: bytes, latest: LatestVersions | None = None) -> WebhookAnswer:
    """Answer one webhook delivery; `create_run` is the engine's, `latest` its version cache."""
    target = _signed_target(handles, token, headers, body)
    if isinstance(target, WebhookAnswer):
        return target
    flow_id, node_id = target
    answer = _deliver(handles, create_run, flow_id, node_id, headers, body, latest)
    if answer.status >= 400:
        # Where the app's Triggers view and `lockgate webhooks list` find a signed delivery that started nothing.
        kind = "disabled" if answer.body["error"]["code"] in DISABLED_CODES else "refused"
        count(handles.client, handles.keys, f"{flow_id}/{node_id}:{kind}")
    return answer


def _signed_target(handles: EngineHandles, token: str, headers: dict[str, str],
                   body: bytes) -> tuple[str, str] | WebhookAnswer:
    """(flow id, node id) of a delivery signed with its webhook's token, or the 401 answer."""
    lower = {name.lower(): value for name, value in headers.items()}
    target = webhook_target(handles.client, handles.keys, token)
    if target is None:
        count(handles.client, handles.keys, "webhook_unknown_token")
        return _error(401, "unknown_webhook", "no webhook has this token; copy the URL again from "
                      "`lockgate webhooks list FLOW`")
    presented = lower.get(SIGNATURE_HEADER)
    if presented is None:
        count(handles.client, handles.keys, "webhook_unsigned")
        return _error(401, "unsigned", "the request has no X-Hub-Signature-256 header; sign the raw body with "
                      "HMAC-SHA256 keyed by the webhook token and send sha256=<hex>")
    if not signature_ok(body, token, presented):
        count(handles.client, handles.keys, "webhook_bad_signature")
        return _error(401, "bad_signature", signature_problem(presented))
    return target


def signature_problem(presented: str) -> str:
    """Why a signature was refused: its shape when that is wrong (what a client can fix without the body),
    else that its digest does not match."""
    scheme, equals, digest = presented.strip().partition("=")
    if not equals or scheme != "sha256":
        return ("X-Hub-Signature-256 must be sha256=<hex digest> (HMAC-SHA256 of the raw body keyed by the webhook "
                f"token); it does not start with sha256= ({len(presented)} characters sent)")
    if len(digest) != SHA256_HEX_DIGITS or any(c not in string.hexdigits for c in digest):
        return (f"X-Hub-Signature-256's digest must be {SHA256_HEX_DIGITS} hex digits; {len(digest)} characters "
                "came after sha256=")
    return ("X-Hub-Signature-256 does not match HMAC-SHA256 of the raw body keyed by the webhook token; sign the "
            "exact bytes sent")


def _deliver(handles: EngineHandles, create_run: StartsRuns, flow_id: str, node_id: str, headers: dict[str, str],
             body: bytes, latest: LatestVersions | None) -> WebhookAnswer:
    try:
        published, flow = latest.resolve(handles.sql, flow_id) if latest else get_version(handles.sql, flow_id)
    except UnknownFlowVersion as exc:
        return _error(404, "unknown_flow", str(exc))
    setting = setting_of(handles.client, handles.keys, flow_id, node_id, "trigger.webhook")
    if not flow.enabled:
        return _error(409, "flow_disabled", f'flow "{flow_id}" (version {published.version}) is disabled, so '
                      "this webhook starts nothing; enable the flow and publish it again")
    if not setting.enabled:
        return _error(409, "webhook_disabled", f'the webhook "{node_id}" of flow "{flow_id}" is disabled; '
                      f"enable it with `lockgate webhooks enable {flow_id}`")
    node = next((n for n in flow.nodes if n.id == node_id and n.type == "trigger.webhook"), None)
    if node is None:
        return _error(409, "webhook_removed", f'flow "{flow_id}" version {published.version} has no webhook '
                      f'trigger "{node_id}" any more; add it back or use the new trigger\'s URL')
    try:
        data = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError as exc:
        return _error(400, "bad_json", f"the request body is not JSON ({exc}); send a JSON object")
    if not isinstance(data, dict):
        return _error(422, "bad_body", "the request body must be a JSON object whose keys name the flow's "
                      f"inputs ({', '.join(flow.inputs) or 'none declared'})")
    try:
        dedupe = dedupe_key(node.config.get("dedupe_key"), headers, body, data)
    except TemplateProblem as exc:
        return _error(422, "bad_dedupe_key", f'the dedupe_key template of "{node_id}" failed on this request '
                      f"({exc}); make it render for every delivery, e.g. end a read the request may lack with "
                      "`| default('')` (no key, no dedupe), and publish the flow again")
    inputs = {name: value for name, value in data.items() if name in flow.inputs}
    idempotency = trigger_idempotency_key("webhook", flow_id, node_id, dedupe) if dedupe else None
    try:
        created = create_run(flow_id, inputs, trigger=node_id, idempotency_key=idempotency)
    except InputError as exc:
        return _error(422, "refused_inputs", "; ".join(exc.problems))
    except RunRefused as exc:
        return _error(402 if exc.reason == "budget_exhausted" else 409, exc.reason, str(exc))
    if created.duplicate:
        return WebhookAnswer(200, {"run_id": created.run_id, "status": created.status, "duplicate": True})
    return WebhookAnswer(202, {"run_id": created.run_id, "status": "queued", "duplicate": False})
