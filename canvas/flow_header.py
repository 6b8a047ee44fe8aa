"""A flow's own properties (id, name, description, enabled, inputs, settings) as one value, and the pure
changes the flow panel makes to it. No Qt here: the document wraps these in undoable commands."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from engine.flow import FLOW_ID_PATTERN, Flow, FlowSettings, InputSpec

INPUT_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
SETTING_KEYS = ("max_delay", "max_wait", "suspended_step_timeout")
MAX_ID_LENGTH = 64


@dataclass(frozen=True)
class FlowHeader:
    """Everything of a flow but its nodes and edges. `inputs` keeps the file's order; treat it as read-only."""

    id: str
    name: str
    description: str
    enabled: bool
    inputs: Mapping[str, InputSpec]
    settings: FlowSettings

    @classmethod
    def of(cls, flow: Flow) -> FlowHeader:
        return cls(flow.id, flow.name, flow.description, flow.enabled, dict(flow.inputs), flow.settings)

    def same_as(self, other: FlowHeader) -> bool:
        """Equal, with the inputs in the same order (dicts compare without order)."""
        return self == other and list(self.inputs) == list(other.inputs) and all(
            has_default(spec) == has_default(other.inputs[name]) for name, spec in self.inputs.items())

    def with_(self, **changes: Any) -> FlowHeader:
        return replace(self, **changes)

    def with_setting(self, key: str, value: str | int | float | None) -> FlowHeader:
        if key not in SETTING_KEYS:
            raise KeyError(f"{key!r} is not a flow setting the panel edits ({', '.join(SETTING_KEYS)})")
        data = self.settings.model_dump(exclude_unset=True)
        data.pop(key, None)
        if value is not None:
            data[key] = value
        return self.with_(settings=FlowSettings(**data))


def slug(name: str) -> str:
    """A flow id made from a name: `Refund approvals!` -> `refund-approvals` (always matches the id pattern)."""
    text = re.sub(r"[^a-z0-9_-]+", "-", name.strip().lower())
    text = re.sub(r"-{2,}", "-", text).strip("-_")[:MAX_ID_LENGTH].strip("-_")
    return text or "flow"


def unique_id(stem: str, taken: Collection[str]) -> str:
    """`stem` if free, else `stem-2`, `stem-3`, ... (cut so the id stays within 64 characters)."""
    if stem not in taken:
        return stem
    base = re.sub(r"-\d+$", "", stem) or "flow"
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = base[: MAX_ID_LENGTH - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        number += 1


def flow_id_problem(flow_id: str) -> str | None:
    """Why `flow_id` cannot be a flow id, or None."""
    if not flow_id:
        return "the id is empty; type one such as refund-approvals"
    if re.fullmatch(FLOW_ID_PATTERN, flow_id) is None:
        return (f"{flow_id!r} is not a flow id: use lower-case letters, digits, '-' and '_', starting with a "
                f"letter or digit, at most {MAX_ID_LENGTH} characters (e.g. {slug(flow_id)})")
    return None


def input_name_problem(name: str, inputs: Mapping[str, InputSpec], current: str | None = None) -> str | None:
    """Why `name` cannot name an input (templates read it as `inputs.<name>`), or None."""
    if not name:
        return "the input name is empty"
    if re.fullmatch(INPUT_NAME_PATTERN, name) is None:
        return f"{name!r} is not a name templates can read as inputs.{name}: use letters, digits and '_'"
    if name != current and name in inputs:
        return f"an input named {name!r} exists already"
    return None


def unique_input_name(inputs: Mapping[str, InputSpec], stem: str = "input") -> str:
    number = 1
    while f"{stem}{number}" in inputs:
        number += 1
    return f"{stem}{number}"


def renamed(inputs: Mapping[str, InputSpec], old: str, new: str) -> dict[str, InputSpec]:
    """The inputs with `old` renamed to `new`, in the same place."""
    return {new if name == old else name: spec for name, spec in inputs.items()}


def moved(inputs: Mapping[str, InputSpec], name: str, offset: int) -> dict[str, InputSpec]:
    """The inputs with `name` moved `offset` places (clamped to the ends)."""
    names = list(inputs)
    index = names.index(name)
    target = max(0, min(len(names) - 1, index + offset))
    names.remove(name)
    names.insert(target, name)
    return {n: inputs[n] for n in names}


def input_spec(type_: str, required: bool, secret: bool, description: str | None,
               default: Any = None, has_default: bool = False) -> InputSpec:
    """An InputSpec that saves only what was set (no `"default": null` unless a null default was chosen)."""
    fields: dict[str, Any] = {"type": type_}
    if required:
        fields["required"] = True
    if secret:
        fields["secret"] = True
    if description is not None:
        fields["description"] = description
    if has_default:
        fields["default"] = default
    return InputSpec.model_validate(fields)


def has_default(spec: InputSpec) -> bool:
    return "default" in spec.model_fields_set
