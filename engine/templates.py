"""Sandboxed `{{ }}` templates: parse checks, state references and rendering."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

_env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


def _plain_json(value: Any) -> Any:
    # Run inputs are frozen (read-only mappings, tuples); `tojson` must still see them as JSON.
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, default=_plain_json, **kwargs)


_env.policies["json.dumps_function"] = _dumps


class TemplateProblem(ValueError):
    """A template that does not parse or does not render."""


def is_template(text: str) -> bool:
    """True when `text` holds template syntax."""
    return "{{" in text or "{%" in text or "{#" in text


# `{{ name.attr.attr }}` holes: most templates are only these, and answering them without Jinja's parser keeps
# validating a freshly opened 5,000-node flow fast. Anything else goes through the parser.
_SIMPLE_HOLE = re.compile(r"(?<!\{)\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}")
_OPERATOR_WORDS = frozenset({"and", "or", "not", "in", "is", "if", "else"})


def _simple_state_refs(source: str) -> frozenset[str] | None:
    """State keys of a template made only of text and simple holes; None when it needs the real parser."""
    refs: set[str] = set()
    for match in _SIMPLE_HOLE.finditer(source):
        parts = match.group(1).split(".")
        if not _OPERATOR_WORDS.isdisjoint(parts):
            return None
        if parts[0] == "state" and len(parts) > 1:
            refs.add(parts[1])
    if is_template(_SIMPLE_HOLE.sub("", source)):
        return None
    return frozenset(refs)


@lru_cache(maxsize=8192)
def template_state_refs(source: str) -> frozenset[str]:
    """Top-level `state.X` / `state['X']` keys a template reads; raises TemplateProblem."""
    if not is_template(source):
        return frozenset()
    simple = _simple_state_refs(source)
    if simple is not None:
        return simple
    try:
        tree = _env.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"line {exc.lineno}: {(exc.message or 'syntax error').rstrip('.')}") from None
    refs: set[str] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr) and _is_state(node.node):
            refs.add(node.attr)
        elif isinstance(node, nodes.Getitem) and _is_state(node.node):
            key = node.arg.value if isinstance(node.arg, nodes.Const) else None
            if isinstance(key, str):
                refs.add(key)
    return frozenset(refs)


def _is_state(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "state"


def check_template(source: str) -> None:
    """Raise TemplateProblem when `source` does not parse."""
    template_state_refs(source)


@lru_cache(maxsize=4096)
def _compiled(source: str) -> Any:
    return _env.from_string(source)


def render(source: str, context: dict[str, Any]) -> str:
    """Render a text template against a run's state container."""
    if not is_template(source):
        return source
    try:
        return str(_compiled(source).render(context))
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"line {exc.lineno}: {exc.message}") from None
    except Exception as exc:  # sandbox violations, undefined names, type errors
        raise TemplateProblem(f"{type(exc).__name__}: {exc}") from None


def evaluate(source: str, context: dict[str, Any]) -> Any:
    """The value of a single-expression template (`{{ x }}`), typed; text otherwise."""
    stripped = source.strip()
    if stripped.startswith("{{") and stripped.endswith("}}") and stripped.count("{{") == 1:
        expression = stripped[2:-2].strip()
        try:
            return _compiled_expression(expression)(**context)
        except TemplateSyntaxError as exc:
            raise TemplateProblem(f"line {exc.lineno}: {exc.message}") from None
        except Exception as exc:
            raise TemplateProblem(f"{type(exc).__name__}: {exc}") from None
    return render(source, context)


@lru_cache(maxsize=4096)
def _compiled_expression(expression: str) -> Any:
    return _env.compile_expression(expression, undefined_to_none=False)


def truthy(source: str, context: dict[str, Any]) -> bool:
    """A router condition's truth; the text forms `false`, `0` and empty are false."""
    value = evaluate(source, context)
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "0", "none", "no")
    return bool(value)


@lru_cache(maxsize=8192)
def template_input_refs(source: str) -> frozenset[str]:
    """Top-level `inputs.X` / `inputs['X']` names a template reads; raises TemplateProblem."""
    if "inputs" not in source or not is_template(source):
        return frozenset()
    try:
        tree = _env.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"line {exc.lineno}: {(exc.message or 'syntax error').rstrip('.')}") from None
    refs: set[str] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr) and _is_inputs(node.node):
            refs.add(node.attr)
        elif isinstance(node, nodes.Getitem) and _is_inputs(node.node):
            key = node.arg.value if isinstance(node.arg, nodes.Const) else None
            if isinstance(key, str):
                refs.add(key)
    return frozenset(refs)


def _is_inputs(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "inputs"
