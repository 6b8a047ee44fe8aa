"""Which editor each config field gets, read from the catalog's typed config models (no Qt here)."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

from engine.catalog import CATALOG, EVENT_TYPES

FieldKind = Literal[
    "text",  # a plain string
    "duration",  # "24h", validated with parse_duration
    "money",  # USD
    "template",  # Jinja2 text, syntax-checked live
    "choice",  # Literal values
    "bool",
    "int",
    "mapping",  # dict[str, X]: a key/value table
    "branches",  # router branches: a port/when table
    "approvers",  # "any" or a list of names
    "node_ref",  # the id of another node (budget.reserve.for -> ai.model)
    "flow_ref",  # the id of a published flow (flow.call.flow), typed or picked
    "code",  # program text (never a template), highlighted in the language a sibling key names
]


@dataclass(frozen=True)
class FieldSpec:
    """How the properties panel edits one config key."""

    key: str
    """The key in the node's JSON config (`for`, not the Python name `for_`)."""
    label: str
    kind: FieldKind
    required: bool
    default: Any = None
    choices: tuple[str, ...] = ()
    """Allowed values of a choice field, or of a mapping's values when they are Literals."""
    value_kind: FieldKind | None = None
    """For mappings: the kind of each value."""
    ref_type: str | None = None
    """For node references: the node type they may point at."""
    minimum: float | None = None
    maximum: float | None = None
    language_key: str | None = None
    """For code: the sibling config key that names its language."""


# Config keys whose meaning the type alone does not say.
NODE_REFERENCES: dict[tuple[str, str], str] = {("budget.reserve", "for"): "ai.model"}
CHOICES_FROM_CATALOG: dict[tuple[str, str], tuple[str, ...]] = {("trigger.event", "event_type"): EVENT_TYPES}
CODE_FIELDS: dict[tuple[str, str], str] = {("script", "code"): "language"}
FLOW_REFERENCES: set[tuple[str, str]] = {("flow.call", "flow")}
LABELS: dict[tuple[str, str], str] = {("script", "memory_mb"): "Memory (MB)", ("script", "env"): "Environment",
                                      ("approval", "required"): "Approvals required",
                                      ("approval", "forbid_self"): "Starter may not decide"}
NODE_HINTS: dict[str, str] = {
    "wait.callback": 'Send its resume URL from an earlier step: {{{{ callback_url("{node}") }}}}. The first POST '
                     "of a JSON body there continues through received, with the body under the output key.",
}
"""A line under a node type's configuration saying how it is used (`{node}`: the node's id)."""
DURATION_LIKE: set[tuple[str, str]] = {("trigger.schedule", "every")}


def _validator_names(metadata: list[Any]) -> set[str]:
    return {getattr(getattr(item, "func", None), "__name__", "") for item in metadata}


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    """(annotation without None, whether None was allowed)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) < len(get_args(annotation)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True  # noqa: UP007
    return annotation, False


def _annotated_validators(annotation: Any) -> set[str]:
    if get_origin(annotation) is Annotated:
        return _validator_names(list(get_args(annotation)[1:]))
    return set()


def _bounds(info: FieldInfo) -> tuple[float | None, float | None]:
    low = high = None
    for item in info.metadata:
        if hasattr(item, "ge"):
            low = item.ge
        if hasattr(item, "le"):
            high = item.le
    return low, high


ACRONYMS: frozenset[str] = frozenset({"ai", "api", "html", "http", "https", "id", "json", "mb", "sql", "ttl", "uri",
                                      "url", "utc"})
"""Words a label spells in capitals: `notify_url` reads "Notify URL", `hold_ttl` "Hold TTL"."""


def field_label(key: str) -> str:
    """A config key as a label: words spaced, the first capitalised, acronyms in capitals (`url` -> "URL")."""
    words = key.replace("_", " ").split()
    shown = [word.upper() if word.lower() in ACRONYMS else word.lower() for word in words]
    if shown and shown[0].islower():
        shown[0] = shown[0].capitalize()
    return " ".join(shown)


def field_spec(type_name: str, name: str, info: FieldInfo) -> FieldSpec:
    key = info.alias or name
    required = info.is_required()
    default = None if required else info.get_default(call_default_factory=True)
    annotation, _optional = _strip_optional(info.annotation)
    validators = _validator_names(info.metadata) | _annotated_validators(annotation)
    low, high = _bounds(info)
    label = LABELS.get((type_name, key), field_label(key))
    common: dict[str, Any] = {"key": key, "label": label, "required": required, "default": default}

    if (type_name, key) in NODE_REFERENCES:
        return FieldSpec(kind="node_ref", ref_type=NODE_REFERENCES[(type_name, key)], **common)
    if (type_name, key) in FLOW_REFERENCES:
        return FieldSpec(kind="flow_ref", **common)
    if (type_name, key) in CODE_FIELDS:
        return FieldSpec(kind="code", language_key=CODE_FIELDS[(type_name, key)], **common)
    if (type_name, key) in CHOICES_FROM_CATALOG:
        return FieldSpec(kind="choice", choices=CHOICES_FROM_CATALOG[(type_name, key)], **common)
    if "_duration" in validators or (type_name, key) in DURATION_LIKE:
        return FieldSpec(kind="duration", **common)
    if "_template" in validators:
        return FieldSpec(kind="template", **common)
    if annotation is bool:
        return FieldSpec(kind="bool", **common)
    if annotation is int:
        return FieldSpec(kind="int", minimum=low, maximum=high, **common)
    if annotation is float:
        return FieldSpec(kind="money", minimum=low, **common)
    if get_origin(annotation) is Literal:
        return FieldSpec(kind="choice", choices=tuple(str(v) for v in get_args(annotation)), **common)
    if key in ("approvers", "escalate_to"):
        return FieldSpec(kind="approvers", **common)
    if get_origin(annotation) is list and key == "branches":
        return FieldSpec(kind="branches", **common)
    if get_origin(annotation) is dict:
        value_type = get_args(annotation)[1]
        if get_origin(value_type) is Literal:
            return FieldSpec(kind="mapping", value_kind="choice",
                             choices=tuple(str(v) for v in get_args(value_type)), **common)
        value_kind: FieldKind = "template" if "_template" in _annotated_validators(value_type) else "text"
        return FieldSpec(kind="mapping", value_kind=value_kind, **common)
    return FieldSpec(kind="text", **common)


def config_fields(type_name: str) -> list[FieldSpec]:
    """Editors for every config key of `type_name`, in the model's order; [] for an unknown type."""
    spec = CATALOG.get(type_name)
    if spec is None:
        return []
    return [field_spec(type_name, name, info) for name, info in spec.config_model.model_fields.items()]
