"""Run inputs checked against the flow's declared inputs before any run exists."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from engine.config import InputLimits
from engine.flow import Flow, InputSpec
from engine.json_bounds import JsonProblem, json_problems, path_key

REDACTED = "***"


@dataclass(frozen=True)
class InputProblem:
    """One input a flow refuses, said the same way to every caller; each front door adds how to send it right
    (`--input NAME=JSON` on the command line, the body's `inputs` over HTTP)."""

    kind: Literal["undeclared", "wrong_type", "missing"]
    name: str
    declared_type: str | None
    """The type the flow declares for it (None for an undeclared input)."""
    message: str


class InputError(ValueError):
    """Inputs a flow refuses; `problems` lists one message per input, and `issues` the same per declared input
    as data (empty for the bounds of `InputBoundsError`)."""

    kind = "refused_inputs"

    def __init__(self, flow_id: str, problems: list[str], issues: tuple[InputProblem, ...] = ()):
        self.flow_id = flow_id
        self.problems = problems
        self.issues = issues
        super().__init__(self.said(problems))

    def said(self, problems: list[str]) -> str:
        """The error with `problems` in place of its own (each door's wording of the same problems)."""
        return f'flow "{self.flow_id}" refuses these inputs: ' + "; ".join(problems)


class InputBoundsError(InputError):
    """Inputs no part of the engine could carry to the run's end (too deep, too large, NaN, lone surrogates);
    `paths` names each place, as JSON paths from the request's `inputs`."""

    def __init__(self, flow_id: str, problems: list[str], paths: list[str]):
        super().__init__(flow_id, problems)
        self.paths = paths


def check_input_bounds(flow_id: str, inputs: dict[str, Any], limits: InputLimits) -> None:
    """Raise InputBoundsError unless every input value fits `limits` and JSON itself; secret values are never
    shown, only where the problem is."""
    found = json_problems(inputs, limits.max_depth + 1, "$.inputs")
    if found:
        problems = [f"{p.path}: {_with_setting(p, limits)}" for p in found]
        raise InputBoundsError(flow_id, problems, [p.path for p in found])
    size = len(orjson.dumps(inputs))
    if size > limits.max_bytes:
        largest = max(inputs, key=lambda name: len(orjson.dumps(inputs[name])))
        message = (f"$.inputs: {size} bytes of JSON is over the {limits.max_bytes} bytes allowed "
                   f"(LOCKGATE_MAX_INPUT_BYTES); the largest is {path_key('$.inputs', largest)}; send less, or a "
                   "reference to it")
        raise InputBoundsError(flow_id, [message], ["$.inputs"])


def _with_setting(problem: JsonProblem, limits: InputLimits) -> str:
    if problem.kind == "too_deep":  # counted from the inputs object, one level above each input's value
        return (f"nested deeper than {limits.max_depth} levels (LOCKGATE_MAX_INPUT_DEPTH={limits.max_depth}); "
                "flatten it")
    return problem.message


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
    issues: list[InputProblem] = []
    resolved: dict[str, Any] = {}
    for name in given:
        if name not in flow.inputs:
            declared = ", ".join(sorted(flow.inputs)) or "none"
            issues.append(InputProblem("undeclared", name, None, f'"{name}" is not a declared input (declared: '
                                       f"{declared}); remove it or declare it"))
    for name, spec in flow.inputs.items():
        if name in given:
            value = given[name]
            if not _matches(spec, value):
                issues.append(InputProblem("wrong_type", name, spec.type, f'"{name}" must be of JSON type '
                                           f"{spec.type}, got {json_type_of(value)}"))
                continue
            resolved[name] = copy.deepcopy(value)
        elif "default" in spec.model_fields_set:
            resolved[name] = copy.deepcopy(spec.default)
        elif spec.required:
            issues.append(InputProblem("missing", name, spec.type,
                                       f'required input "{name}" ({spec.type}) is missing'))
    if issues:
        raise InputError(flow.id, [issue.message for issue in issues], tuple(issues))
    return resolved


def cli_hint(issue: InputProblem) -> str:
    """`issue` with how to pass the input on the command line (`--input NAME=JSON`)."""
    if issue.kind == "missing":
        return f"{issue.message}; pass it with --input {issue.name}=<json>"
    if issue.kind == "wrong_type":
        return f"{issue.message}; pass it as JSON, e.g. --input {issue.name}={_example(issue.declared_type)}"
    return issue.message


def body_hint(issue: InputProblem) -> str:
    """`issue` with how to send the input in a request body's `inputs` object."""
    if issue.kind in ("missing", "wrong_type"):
        verb = "send it" if issue.kind == "missing" else f"send a JSON {issue.declared_type}"
        return (f'{issue.message}; {verb} in the body\'s "inputs", e.g. "inputs": '
                f'{{{orjson.dumps(issue.name).decode()}: {_json_example(issue.declared_type)}}}')
    return issue.message


def hinted(exc: InputError, hint: Callable[[InputProblem], str]) -> str:
    """`exc` said with `hint` added to each problem of a declared input (bounds problems as they are)."""
    return exc.said([hint(issue) for issue in exc.issues]) if exc.issues else str(exc)


_EXAMPLES = {"string": '"text"', "number": "1.5", "integer": "3", "boolean": "true", "object": '{"k": 1}',
             "array": "[1, 2]", "null": "null"}


def _json_example(json_type: str | None) -> str:
    return _EXAMPLES.get(json_type or "", '"text"')


def _example(json_type: str | None) -> str:
    """A JSON value of `json_type` as a shell argument (quoted where the shell would eat its quotes)."""
    value = _json_example(json_type)
    return f"'{value}'" if value[0] in "\"{[" else value


def secret_names(flow: Flow) -> frozenset[str]:
    return frozenset(name for name, spec in flow.inputs.items() if spec.secret)


def redacted_inputs(flow: Flow, inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs as they may be stored or shown: secret values replaced by `***`."""
    secrets = secret_names(flow)
    return {name: (REDACTED if name in secrets else value) for name, value in inputs.items()}
