"""One-line summaries of a node's key config, as the canvas prints them under the title."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from engine.durations import DurationError, format_duration, parse_duration
from engine.flow import Node


def _duration(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()  # what the author wrote (`24h`) reads better than a normalised `1d`
    try:
        return format_duration(parse_duration(value))
    except DurationError:
        return str(value)


def _money(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"${value:,.2f}"


def _url(value: Any) -> str:
    text = str(value)
    if "{{" in text:
        return text
    parts = urlsplit(text)
    return (parts.netloc + parts.path) if parts.netloc else text


def _template_body(value: Any) -> str:
    text = str(value).strip()
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        return text[2:-2].strip()
    return text


def config_summary(node: Node) -> str:
    """A compact summary such as `24h`, `$0.20 for classify`, `POST 127.0.0.1:9/refunds`; '' when nothing is key."""
    config = node.config
    kind = node.type
    if kind == "queue" and "delay" in config:
        return _duration(config["delay"])
    if kind == "approval":
        parts = [_duration(config["timeout"])] if "timeout" in config else []
        approvers = config.get("approvers", "any")
        required = config.get("required", 1)
        if isinstance(required, int) and required > 1:
            parts.append(f"{required} of {len(approvers)}" if isinstance(approvers, list) else f"{required} needed")
        elif isinstance(approvers, list):
            parts.append(f"{len(approvers)} approver" + ("s" if len(approvers) != 1 else ""))
        return " · ".join(parts)
    if kind == "wait.callback":
        parts = [_duration(config["timeout"])] if "timeout" in config else []
        return " · ".join([*parts, f"into {config.get('output_key') or node.id}"])
    if kind == "budget.reserve":
        text = _money(config["amount"]) if "amount" in config else ""
        if config.get("for"):
            text += f" for {config['for']}"
        return text.strip()
    if kind == "ai.model":
        return str(config.get("model", ""))
    if kind == "http.request":
        return " ".join(p for p in (str(config.get("method", "")), _url(config.get("url", ""))) if p)
    if kind == "script":
        lines = len(str(config.get("code", "")).splitlines())
        return f"{config.get('language', '')} · {lines} line" + ("s" if lines != 1 else "")
    if kind == "flow.call":
        target = str(config.get("flow") or "")
        if not target:
            return ""
        version = config.get("version")
        return f"calls {target}" + (f" v{version}" if isinstance(version, int) else "")
    if kind == "trigger.schedule":
        if config.get("cron"):
            return str(config["cron"])
        return f"every {_duration(config['every'])}" if "every" in config else ""
    if kind == "trigger.event":
        return str(config.get("event_type", ""))
    if kind == "join":
        return f"wait for {config.get('mode', 'all')}"
    if kind == "foreach":
        return f"×{config.get('concurrency', 4)} at a time"
    if kind == "set" and isinstance(config.get("values"), dict):
        return "sets " + ", ".join(str(k) for k in config["values"])
    if kind == "terminal":
        return f"returns {_template_body(config['output'])}" if config.get("output") else "ends the run"
    if kind == "trigger.manual":
        return "run by hand or API"
    if kind == "trigger.webhook":
        return f"dedupe: {_template_body(config['dedupe_key'])}" if config.get("dedupe_key") else "POST to start"
    if kind == "router" and isinstance(config.get("branches"), list):
        return f"{len(config['branches'])} rule" + ("s" if len(config["branches"]) != 1 else "")
    return ""
