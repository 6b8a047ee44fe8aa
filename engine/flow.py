"""The `lockgate.flow/1` document: typed models, loading and byte-stable saving.

Node `config` stays a plain mapping here so a flow with a bad config still
loads (the canvas must open it and show the problem); the catalog's typed
config models check it during validation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, field_validator

from engine import json_bounds

FORMAT = "lockgate.flow/1"
MAX_DOCUMENT_DEPTH = 100
"""Containers a flow document may nest (the document object is level 1); deeper ones are invalid_document."""
FLOW_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
NODE_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"

JsonType = Literal["string", "number", "integer", "boolean", "object", "array", "null", "any"]


# Booleans and numbers are strict: a lax "yes" -> True would load, then save back rewritten.
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class InputSpec(_Strict):
    type: JsonType = "any"
    required: StrictBool = False
    secret: StrictBool = False
    description: str | None = None
    default: Any = None


class FlowSettings(_Strict):
    max_delay: str | int | float | None = None
    max_wait: str | int | float | None = None
    suspended_step_timeout: str | int | float | None = None
    budget: str | None = None


class RetryPolicy(_Strict):
    max_attempts: StrictInt = Field(default=3, ge=1, le=100)
    backoff: Literal["linear", "exponential"] = "exponential"
    base_delay: str | int | float = "1s"
    max_interval: str | int | float = "5m"
    """The longest single wait between attempts: exponential growth stops here."""


class Node(_Strict):
    id: str = Field(pattern=NODE_ID_PATTERN)
    type: str = Field(min_length=1)
    title: str = ""
    position: tuple[StrictFloat, StrictFloat] = (0, 0)
    config: dict[str, Any] = Field(default_factory=dict)
    retry: RetryPolicy | None = None
    continue_on_fail: StrictBool = False
    idempotent: StrictBool | None = None

    @field_validator("position", mode="before")
    @classmethod
    def _position_pair(cls, value: Any) -> Any:
        if isinstance(value, list) and len(value) == 2:
            return tuple(value)
        return value


class Edge(_Strict):
    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    port: str | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Flow(_Strict):
    format: Literal["lockgate.flow/1"]
    id: str = Field(pattern=FLOW_ID_PATTERN)
    name: str = ""
    description: str = ""
    enabled: StrictBool = True
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    settings: FlowSettings = Field(default_factory=FlowSettings)
    nodes: list[Node] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)

    def node(self, node_id: str) -> Node | None:
        """The node with `node_id`, or None."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        return None


class FlowLoadError(ValueError):
    """A document that is not a flow; `problems` holds (json_path, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))


def json_path(loc: tuple[int | str, ...]) -> str:
    """`("nodes", 2, "id")` -> `$.nodes[2].id`."""
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def parse_document(text: str | bytes) -> Any:
    """Raw JSON of a flow file; raises FlowLoadError for text that is not JSON.

    Values no part of the engine could carry (huge integers, NaN, lone surrogates, deep nesting) still parse
    here; `flow_from_data` names them.
    """
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return json_bounds.loads(text)
    except UnicodeDecodeError as exc:
        raise FlowLoadError([("$", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    except RecursionError:
        path = json_bounds.deep_path(text, MAX_DOCUMENT_DEPTH) if isinstance(text, str) else None
        raise FlowLoadError([(path or "$", f"nested deeper than {MAX_DOCUMENT_DEPTH} levels; flatten it")]) from None
    except json.JSONDecodeError as exc:
        raise FlowLoadError([("$", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")]) from None


def flow_from_data(data: Any) -> Flow:
    """A Flow from parsed JSON; raises FlowLoadError with JSON paths."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise FlowLoadError([("$", f"a flow is a JSON object, got {type(data).__name__}")])
    unfit = json_bounds.json_problems(data, MAX_DOCUMENT_DEPTH)
    if unfit:
        raise FlowLoadError([(problem.path, problem.message) for problem in unfit])
    if data.get("format") != FORMAT:
        got = data.get("format")
        shown = json.dumps(got)[:60] if got is not None else "nothing"
        raise FlowLoadError([("$.format", f"expected \"{FORMAT}\", got {shown}")])
    try:
        return Flow.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = "unknown key; remove it or check its spelling"
            elif error["type"] == "missing":
                message = "required but missing; add it"
            problems.append((json_path(loc), message))
        raise FlowLoadError(problems) from None
    except RecursionError:
        raise FlowLoadError([("$", "JSON nested too deeply")]) from None


def load_flow_text(text: str | bytes) -> Flow:
    """Parse and type a flow document."""
    return flow_from_data(parse_document(text))


def load_flow(path: str | Path) -> Flow:
    """Read a `*.flow.json` file; raises OSError or FlowLoadError."""
    return load_flow_text(Path(path).read_bytes())


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def flow_to_data(flow: Flow) -> dict[str, Any]:
    """The flow as ordered JSON data: spec key order, defaults left out."""
    data: dict[str, Any] = {"format": flow.format, "id": flow.id, "name": flow.name}
    if flow.description:
        data["description"] = flow.description
    if not flow.enabled:
        data["enabled"] = False
    if flow.inputs:
        data["inputs"] = {name: _input_data(spec) for name, spec in flow.inputs.items()}
    settings = flow.settings.model_dump(exclude_none=True)
    if settings:
        data["settings"] = settings
    data["nodes"] = [node_data(node) for node in flow.nodes]
    data["edges"] = [edge_data(edge) for edge in flow.edges]
    return data


def _input_data(spec: InputSpec) -> dict[str, Any]:
    data: dict[str, Any] = {"type": spec.type}
    if spec.required:
        data["required"] = True
    if spec.secret:
        data["secret"] = True
    if spec.description is not None:
        data["description"] = spec.description
    if "default" in spec.model_fields_set:
        data["default"] = spec.default
    return data


def node_data(node: Node) -> dict[str, Any]:
    """One node as the saved file holds it."""
    data: dict[str, Any] = {
        "id": node.id,
        "type": node.type,
        "title": node.title,
        "position": [_number(node.position[0]), _number(node.position[1])],
        "config": node.config,
    }
    if node.retry is not None:
        data["retry"] = node.retry.model_dump(exclude_unset=True)
    if node.continue_on_fail:
        data["continue_on_fail"] = True
    if node.idempotent is not None:
        data["idempotent"] = node.idempotent
    return data


def edge_data(edge: Edge) -> dict[str, Any]:
    """One edge as the saved file holds it."""
    data: dict[str, Any] = {"from": edge.from_, "to": edge.to}
    if edge.port is not None:
        data["port"] = edge.port
    return data


def dump_flow(flow: Flow) -> str:
    """Byte-stable text: spec key order, 2-space indent, trailing newline."""
    return json.dumps(flow_to_data(flow), indent=2, ensure_ascii=False) + "\n"


def save_flow(flow: Flow, path: str | Path) -> None:
    """Write the flow atomically, so a crash never leaves half a file."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(dump_flow(flow), encoding="utf-8")
    tmp.replace(target)
