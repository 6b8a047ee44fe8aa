"""A template's value before publishing: evaluated in the engine's own sandbox (`engine.templates`) against
the selected run's state, or against the declared inputs' defaults when no run of this flow is selected."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from jinja2 import Undefined

from engine.flow import Flow
from engine.read_models import Run
from engine.templates import TemplateProblem, evaluate, is_template

PREVIEW_CHARS = 240


@dataclass(frozen=True)
class PreviewContext:
    """What a template sees (`inputs`, `state`, `errors`, `run`) and where those values came from."""

    names: dict[str, object] = field(default_factory=dict)
    source: str = ""
    """`run 50843f0e` or `input defaults`: said next to the value."""


def context_for(flow: Flow, run: Run | None) -> PreviewContext:
    """The selected run's state when it is a run of `flow`; else the inputs' defaults and an empty state."""
    if run is not None and run.flow_id == flow.id:
        facts = {"id": run.id, "flow": run.flow_id, "version": run.version, "trigger": run.trigger}
        names: dict[str, object] = {"inputs": _object(run.inputs), "state": _object(run.state),
                                    "errors": _object(run.errors), "run": facts}
        return PreviewContext(names, f"run {run.id[:8]}")
    inputs = {name: spec.default for name, spec in flow.inputs.items()}
    names = {"inputs": inputs, "state": {}, "errors": {},
             "run": {"id": "preview", "flow": flow.id, "version": None, "trigger": "manual"}}
    return PreviewContext(names, "input defaults")


def _object(value: object) -> dict[str, object]:
    """A copy of a stored JSON object (inputs, state, errors); {} for none."""
    return dict(value) if isinstance(value, dict) else {}


def preview_text(source: str, context: PreviewContext) -> tuple[str, bool]:
    """(what the field would hold, whether that is a problem) for `source` in `context`."""
    if not is_template(source):
        return "", False
    try:
        value = evaluate(source, context.names)
        if isinstance(value, Undefined):  # a lone `{{ state.x }}` nobody wrote: say why, as a run would fail
            value._fail_with_undefined_error()
        shown = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    except TemplateProblem as problem:
        return f"cannot be worked out with {context.source}: {problem}", True
    except Exception as problem:  # what the sandbox raises past evaluate (undefined, unserialisable values)
        return f"cannot be worked out with {context.source}: {type(problem).__name__}: {problem}", True
    if len(shown) > PREVIEW_CHARS:
        shown = shown[:PREVIEW_CHARS] + "…"
    return f"= {shown!r} with {context.source}" if isinstance(value, str) else f"= {shown} with {context.source}", \
        False
