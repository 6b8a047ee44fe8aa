"""A template's value before publishing: evaluated in the engine's own sandbox (`engine.templates`) against
the selected run's state, or against the declared inputs' defaults when no run of this flow is selected."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from jinja2 import Undefined

from app.readable import short_run_id
from engine.flow import Flow
from engine.read_models import Run
from engine.templates import TemplateProblem, evaluate, is_template, template_input_refs, template_names

PREVIEW_CHARS = 240
DELIVERY_NAME = "request"
"""What a webhook trigger's dedupe key reads: the delivery, which only exists once one arrives."""


@dataclass(frozen=True)
class PreviewContext:
    """What a template sees (`inputs`, `state`, `errors`, `run`) and where those values came from."""

    names: dict[str, object] = field(default_factory=dict)
    source: str = ""
    """`run 50843f0e` or `input defaults`: said next to the value."""
    from_defaults: bool = False
    """The inputs are the declared defaults (no run selected): an input without one has no value to preview."""


def context_for(flow: Flow, run: Run | None) -> PreviewContext:
    """The selected run's state when it is a run of `flow`; else the inputs' defaults and an empty state."""
    if run is not None and run.flow_id == flow.id:
        facts = {"id": run.id, "flow": run.flow_id, "version": run.version, "trigger": run.trigger}
        names: dict[str, object] = {"inputs": _object(run.inputs), "state": _object(run.state),
                                    "errors": _object(run.errors), "run": facts}
        return PreviewContext(names, f"run {short_run_id(run.id)}")
    inputs = {name: spec.default for name, spec in flow.inputs.items()}
    names = {"inputs": inputs, "state": {}, "errors": {},
             "run": {"id": "preview", "flow": flow.id, "version": None, "trigger": "manual"}}
    return PreviewContext(names, "input defaults", from_defaults=True)


def _inputs_without_value(source: str, context: PreviewContext) -> list[str]:
    """Declared inputs the template reads that the context holds no value for (no default, previewing without a
    run), in order."""
    inputs = context.names.get("inputs")
    if not context.from_defaults or not isinstance(inputs, dict):
        return []
    try:
        read = template_input_refs(source)
    except TemplateProblem:
        return []
    return sorted(name for name in read if name in inputs and inputs[name] is None)


def _names_missing(source: str, context: PreviewContext) -> frozenset[str]:
    """Top-level names the template reads that the preview context does not hold."""
    try:
        return template_names(source) - context.names.keys()
    except TemplateProblem:
        return frozenset()


def _plain(message: str) -> str:
    """The sandbox's undefined-value message said plainly: `UndefinedError: 'dict object' has no attribute 'tickt'`
    is `nothing named "tickt" there`; any other message as it is."""
    found = re.search(r"UndefinedError: '[^']*' has no attribute '([^']+)'", message)
    return f'nothing named "{found.group(1)}" there' if found else message


def _object(value: object) -> dict[str, object]:
    """A copy of a stored JSON object (inputs, state, errors); {} for none."""
    return dict(value) if isinstance(value, dict) else {}


def preview_text(source: str, context: PreviewContext) -> tuple[str, bool]:
    """(what the field would hold, whether that is a problem) for `source` in `context`."""
    if not is_template(source):
        return "", False
    if DELIVERY_NAME in _names_missing(source, context):
        return (f"worked out for each webhook delivery from {DELIVERY_NAME}.headers, .body and .json; no preview "
                "before one arrives"), False
    unset = _inputs_without_value(source, context)
    if unset:  # nothing wrong with the template: the preview has no value to show it with
        names = ", ".join(f"inputs.{name}" for name in unset)
        return (f"no preview: {names} {'has' if len(unset) == 1 else 'have'} no default; select a run of this "
                "flow to see it with that run's values"), False
    try:
        value = evaluate(source, context.names)
        if isinstance(value, Undefined):  # a lone `{{ state.x }}` nobody wrote: say why, as a run would fail
            value._fail_with_undefined_error()
        shown = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    except Exception as problem:  # TemplateProblem, and what the sandbox raises past evaluate (unserialisable values)
        said = str(problem) if isinstance(problem, TemplateProblem) else f"{type(problem).__name__}: {problem}"
        return f"cannot be worked out with {context.source}: {_plain(said)}", True
    if len(shown) > PREVIEW_CHARS:
        shown = shown[:PREVIEW_CHARS] + "…"
    return f"= {shown!r} with {context.source}" if isinstance(value, str) else f"= {shown} with {context.source}", \
        False
