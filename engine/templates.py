"""Sandboxed `{{ }}` templates: parse checks, state references and rendering."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, meta, nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment


class _KeysFirstEnvironment(ImmutableSandboxedEnvironment):
    """`a.b` reads the key `b` of a mapping before any attribute: an input named `items` is the user's value,
    not the mapping's method."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping):
            try:
                return obj[attribute]
            except (KeyError, TypeError):
                pass
        return super().getattr(obj, attribute)


_env = _KeysFirstEnvironment(undefined=StrictUndefined, autoescape=False)

CALLBACK_URL = "callback_url"
"""The template function giving a `wait.callback` node's resume URL; a run's context supplies it
(`RunContext.template_context`), bound to the run."""


def _callback_url_outside_a_run(node: str) -> str:
    raise TemplateProblem(f'callback_url("{node}") has a URL only inside a run (it is unique to the run and node)')


_env.globals[CALLBACK_URL] = _callback_url_outside_a_run


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


class TemplateReads(NamedTuple):
    """What a template reaches for: top-level state keys, and names the sandbox refuses (dunder attributes)."""

    state_keys: frozenset[str]
    unsafe: tuple[str, ...]


_NOTHING = TemplateReads(frozenset(), ())
# Mapping methods a template may call on `state` when no key of that name exists: `state.get("k")` reads `k`.
_MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})


def _is_unsafe_name(name: str) -> bool:
    return name.startswith("__")


def _simple_reads(source: str) -> TemplateReads | None:
    """The reads of a template made only of text and simple holes; None when it needs the real parser."""
    refs: set[str] = set()
    unsafe: list[str] = []
    for match in _SIMPLE_HOLE.finditer(source):
        parts = match.group(1).split(".")
        if not _OPERATOR_WORDS.isdisjoint(parts):
            return None
        unsafe.extend(part for part in parts if _is_unsafe_name(part))
        if parts[0] == "state" and len(parts) > 1:
            refs.add(parts[1])
    if is_template(_SIMPLE_HOLE.sub("", source)):
        return None
    return TemplateReads(frozenset(refs), tuple(dict.fromkeys(unsafe)))



def _parsed(source: str) -> nodes.Template:
    """The template's syntax tree; raises TemplateProblem naming the line of a syntax error."""
    try:
        return _env.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"line {exc.lineno}: {(exc.message or 'syntax error').rstrip('.')}") from None

@lru_cache(maxsize=8192)
def template_reads(source: str) -> TemplateReads:
    """The state keys and unsafe names of a template; raises TemplateProblem when it does not parse."""
    if not is_template(source):
        return _NOTHING
    simple = _simple_reads(source)
    if simple is not None:
        return simple
    tree = _parsed(source)
    refs: set[str] = set()
    unsafe: list[str] = []
    called = {id(call.node): call for call in tree.find_all(nodes.Call) if isinstance(call.node, nodes.Getattr)}
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Name, nodes.Filter)):
        if isinstance(node, nodes.Name):
            if _is_unsafe_name(node.name):
                unsafe.append(node.name)
        elif isinstance(node, nodes.Filter):
            first = node.args[0] if node.name == "attr" and node.args else None
            if isinstance(first, nodes.Const) and isinstance(first.value, str) and _is_unsafe_name(first.value):
                unsafe.append(first.value)
        elif isinstance(node, nodes.Getattr):
            if _is_unsafe_name(node.attr):
                unsafe.append(node.attr)
            if _is_state(node.node):
                call = called.get(id(node))
                if call is None or node.attr not in _MAPPING_METHODS:
                    refs.add(node.attr)
                elif node.attr == "get" and call.args:
                    key = call.args[0].value if isinstance(call.args[0], nodes.Const) else None
                    if isinstance(key, str):
                        refs.add(key)
        elif isinstance(node, nodes.Getitem):
            key = node.arg.value if isinstance(node.arg, nodes.Const) else None
            if isinstance(key, str):
                if _is_unsafe_name(key):
                    unsafe.append(key)
                if _is_state(node.node):
                    refs.add(key)
    return TemplateReads(frozenset(refs), tuple(dict.fromkeys(unsafe)))


def template_state_refs(source: str) -> frozenset[str]:
    """Top-level `state.X` / `state['X']` keys a template reads; raises TemplateProblem."""
    return template_reads(source).state_keys


def _is_state(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "state"


def check_template(source: str) -> None:
    """Raise TemplateProblem when `source` does not parse."""
    template_reads(source)


class _Compiled:
    """A template compiled once, and its globals flattened once: Jinja's own `render` and expression call copy the
    globals out of a ChainMap on every call (most of a small template's cost). Each call gets its own context
    with the same names Jinja's would hold; the environment's globals are all set when this module loads."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.globals = dict(template.globals)
        self.global_names = set(self.globals)

    def context(self, names: dict[str, Any]) -> Context:
        template = self.template
        context = template.environment.context_class(template.environment, {**self.globals, **names}, template.name,
                                                     template.blocks)
        context.globals_keys = self.global_names
        return context

    def render(self, names: dict[str, Any]) -> str:
        return str(self.template.environment.concat(self.template.root_render_func(self.context(names))))

    def value(self, names: dict[str, Any]) -> Any:
        """The value of a template compiled from an expression (`Environment.compile_expression`)."""
        context = self.context(names)
        for _chunk in self.template.root_render_func(context):
            pass
        return context.vars["result"]


@lru_cache(maxsize=4096)
def _compiled(source: str) -> _Compiled:
    return _Compiled(_env.from_string(source))


def render(source: str, context: dict[str, Any]) -> str:
    """Render a text template against a run's state container."""
    if not is_template(source):
        return source
    try:
        return _compiled(source).render(context)
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
            return _compiled_expression(expression).value(context)
        except TemplateSyntaxError as exc:
            raise TemplateProblem(f"line {exc.lineno}: {exc.message}") from None
        except Exception as exc:
            raise TemplateProblem(f"{type(exc).__name__}: {exc}") from None
    return render(source, context)


@lru_cache(maxsize=4096)
def _compiled_expression(expression: str) -> _Compiled:
    return _Compiled(_env.compile_expression(expression, undefined_to_none=False)._template)


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
    tree = _parsed(source)
    refs: set[str] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr) and _is_inputs(node.node):
            refs.add(node.attr)
        elif isinstance(node, nodes.Getitem) and _is_inputs(node.node):
            key = node.arg.value if isinstance(node.arg, nodes.Const) else None
            if isinstance(key, str):
                refs.add(key)
    return frozenset(refs)


@lru_cache(maxsize=2048)
def template_names(source: str) -> frozenset[str]:
    """The top-level names a template reads (`inputs`, `state`, `request`, ...) other than the engine's own
    globals; raises TemplateProblem."""
    if not is_template(source):
        return frozenset()
    tree = _parsed(source)
    return frozenset(meta.find_undeclared_variables(tree) - _env.globals.keys())


def _is_inputs(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "inputs"


class CallbackRefs(NamedTuple):
    """The `callback_url(...)` calls of a template: node ids named by a constant, and whether any is not."""

    nodes: frozenset[str]
    dynamic: bool


_NO_CALLBACKS = CallbackRefs(frozenset(), False)


@lru_cache(maxsize=8192)
def template_callback_refs(source: str) -> CallbackRefs:
    """The node ids a template's `callback_url("<node>")` calls name; raises TemplateProblem."""
    if CALLBACK_URL not in source or not is_template(source):
        return _NO_CALLBACKS
    tree = _parsed(source)
    named: set[str] = set()
    dynamic = False
    for call in tree.find_all(nodes.Call):
        if not (isinstance(call.node, nodes.Name) and call.node.name == CALLBACK_URL):
            continue
        first = call.args[0] if call.args else None
        if isinstance(first, nodes.Const) and isinstance(first.value, str) and len(call.args) == 1:
            named.add(first.value)
        else:
            dynamic = True
    return CallbackRefs(frozenset(named), dynamic)
