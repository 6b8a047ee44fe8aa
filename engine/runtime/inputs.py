"""Run inputs checked against the flow's declared inputs before any run exists."""

from __future__ import annotations

import copy
from typing import Any

from engine.flow import Flow, InputSpec

REDACTED = "***"


class InputError(ValueError):
    """Inputs a flow refuses; `problems` lists one message per input."""

    def __init__(self, flow_id: str, problems: list[str]):
        self.flow_id = flow_id
        self.problems = problems
        super().__init__(f'flow "{flow_id}" refuses these inputs: ' + "; ".join(problems))


def json_type_of(value: Any) -> str:
    """The JSON type name of a Python value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _matches(spec: InputSpec, value: Any) -> bool:
    actual = json_type_of(value)
    if spec.type == "any":
        return actual in ("null", "boolean", "integer", "number", "string", "array", "object")
    if spec.type == "number":
        return actual in ("number", "integer")
    if spec.type == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == spec.type


def check_inputs(flow: Flow, given: dict[str, Any]) -> dict[str, Any]:
    """The inputs a run starts with (declared defaults filled in); raises InputError listing every problem."""
    problems: list[str] = []
    resolved: dict[str, Any] = {}
    for name in given:
        if name not in flow.inputs:
            declared = ", ".join(sorted(flow.inputs)) or "none"
            problems.append(f'"{name}" is not a declared input (declared: {declared}); remove it or declare it')
    for name, spec in flow.inputs.items():
        if name in given:
            value = given[name]
            if not _matches(spec, value):
                problems.append(
                    f'"{name}" must be of JSON type {spec.type}, got {json_type_of(value)}; '
                    f"pass it as JSON, e.g. --input {name}={_example(spec.type)}"
                )
                continue
            resolved[name] = copy.deepcopy(value)
        elif "default" in spec.model_fields_set:
            resolved[name] = copy.deepcopy(spec.default)
        elif spec.required:
            problems.append(f'required input "{name}" ({spec.type}) is missing; pass it with --input {name}=<json>')
    if problems:
        raise InputError(flow.id, problems)
    return resolved


def _example(json_type: str) -> str:
    return {"string": "'\"text\"'", "number": "1.5", "integer": "3", "boolean": "true", "object": "'{\"k\": 1}'",
            "array": "'[1, 2]'", "null": "null"}.get(json_type, "'\"text\"'")


def secret_names(flow: Flow) -> frozenset[str]:
    return frozenset(name for name, spec in flow.inputs.items() if spec.secret)


def redacted_inputs(flow: Flow, inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs as they may be stored or shown: secret values replaced by `***`."""
    secrets = secret_names(flow)
    return {name: (REDACTED if name in secrets else value) for name, value in inputs.items()}
