"""The node catalog v1: one typed config model per node type, with kind, ports and defaults.

Bodies (what a node does at run time) are registered by the runtime under the
same type names; the scheduler only ever looks at `kind`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from engine.durations import DurationError, parse_duration
from engine.templates import TemplateProblem, check_template

Kind = Literal["trigger", "listen", "join", "router", "forEach", "terminal"]

EVENT_TYPES: tuple[str, ...] = (
    "run.succeeded",
    "run.failed",
    "run.cancelled",
    "run.interrupted",
    "run.parked",
    "approval.requested",
    "approval.decided",
    "approval.expired",
    "approval.reminded",
    "approval.escalated",
    "budget.exhausted",
    "hold.expired",
    "flow.published",
)
"""The closed set of engine events a `trigger.event` may listen to."""


def _duration(value: Any) -> Any:
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise PydanticCustomError("bad_duration", str(exc)) from None
    if seconds < 0:
        raise PydanticCustomError("bad_duration", f"{value!r} is negative; durations are zero or more")
    return value


def _template(value: str) -> str:
    try:
        check_template(value)
    except TemplateProblem as exc:
        raise PydanticCustomError("bad_template", "template does not parse: {problem}", {"problem": str(exc)}) from None
    return value


Duration = Annotated[str | int | float, AfterValidator(_duration)]
def _filled(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "is empty")
    return value


Template = Annotated[str, AfterValidator(_template)]
FilledTemplate = Annotated[str, AfterValidator(_filled), AfterValidator(_template)]
"""A template a node cannot do without (a URL, a prompt, a condition): empty or only spaces is refused."""
Money = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class NodeConfig(BaseModel):
    """Base of every node type's config: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", strict=False)


class ManualTriggerConfig(NodeConfig):
    pass


class ScheduleTriggerConfig(NodeConfig):
    cron: str | None = None
    every: str | int | float | None = None
    timezone: str = "UTC"


class WebhookTriggerConfig(NodeConfig):
    dedupe_key: Template | None = None


class EventTriggerConfig(NodeConfig):
    event_type: str


class QueueConfig(NodeConfig):
    delay: Duration


class ApprovalConfig(NodeConfig):
    timeout: Duration
    approvers: Literal["any"] | list[str] = "any"
    message: Template = ""
    required: int = Field(default=1, ge=1, le=100)
    forbid_self: bool = False
    remind_every: Duration | None = None
    notify_url: Template | None = None
    escalate_after: Duration | None = None
    escalate_to: list[str] | Literal["any"] | None = None


class WaitCallbackConfig(NodeConfig):
    timeout: Duration
    output_key: str | None = None


class BudgetReserveConfig(NodeConfig):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    for_: str = Field(alias="for", min_length=1)
    amount: Money
    budget: str = "default"


class ModelConfig(NodeConfig):
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    prompt: FilledTemplate
    output_key: str = Field(min_length=1)
    system: Template | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    pool_wait: bool = False
    max_pool_waits: int = Field(default=3, ge=0)
    background: bool = False
    hold_ttl: Duration = "30m"
    overspend: Literal["fail", "approve", "allow"] = "fail"


class RouterBranch(NodeConfig):
    port: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")
    when: FilledTemplate


class RouterConfig(NodeConfig):
    branches: list[RouterBranch] = Field(min_length=1)


class JoinConfig(NodeConfig):
    mode: Literal["all", "any"] = "all"
    reduce: dict[str, Literal["last", "append", "merge", "sum"]] = Field(default_factory=dict)


class ForeachConfig(NodeConfig):
    items: FilledTemplate
    concurrency: int = Field(default=4, ge=1, le=1000)
    output_key: str | None = None


class SetConfig(NodeConfig):
    values: dict[str, Template] = Field(min_length=1)


class HttpRequestConfig(NodeConfig):
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    url: FilledTemplate
    headers: dict[str, Template] = Field(default_factory=dict)
    body: Template | None = None
    output_key: str | None = None
    timeout: Duration = "30s"


SCRIPT_MAX_TIMEOUT_SECONDS = 3600.0
"""The longest `script` timeout validation accepts (`script_timeout_too_long` above it)."""

EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class ScriptConfig(NodeConfig):
    language: Literal["python", "shell"]
    code: str = Field(min_length=1)
    timeout: Duration = "60s"
    memory_mb: int = Field(default=512, ge=16, le=1_048_576)
    env: dict[EnvName, Template] = Field(default_factory=dict)
    output_key: str | None = None


FlowId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]


class FlowCallConfig(NodeConfig):
    flow: FlowId
    version: int | None = Field(default=None, ge=1)
    inputs: dict[str, Template] = Field(default_factory=dict)
    output_key: str | None = None


class TerminalConfig(NodeConfig):
    output: Template | None = None


Ports = Callable[[dict[str, Any]], tuple[str, ...]]


def _fixed(*ports: str) -> Ports:
    return lambda _config: ports


def _router_ports(config: dict[str, Any]) -> tuple[str, ...]:
    branches = config.get("branches")
    names: list[str] = []
    if isinstance(branches, list):
        for branch in branches:
            if isinstance(branch, dict) and isinstance(branch.get("port"), str) and branch["port"] not in names:
                names.append(branch["port"])
    return (*names, "default") if "default" not in names else tuple(names)


def _http_idempotent(config: dict[str, Any]) -> bool:
    return str(config.get("method", "")).upper() in ("GET", "HEAD")


@dataclass(frozen=True)
class NodeType:
    """What the catalog knows of one node type."""

    type: str
    kind: Kind
    title: str
    category: str
    config_model: builtins.type[NodeConfig]
    ports: Ports
    park_reasons: tuple[str, ...] = ()
    idempotent: bool | Callable[[dict[str, Any]], bool] = True
    summary_keys: tuple[str, ...] = field(default=())
    description: str = ""
    """One sentence saying what the node does (the palette's tooltip)."""

    def output_ports(self, config: dict[str, Any]) -> tuple[str, ...]:
        """Output port names for a node with this config."""
        return self.ports(config)

    def default_idempotent(self, config: dict[str, Any]) -> bool:
        """Whether a step of this type may run again after a crash, unless the node says."""
        return self.idempotent(config) if callable(self.idempotent) else self.idempotent

    @property
    def has_input(self) -> bool:
        return self.kind != "trigger"

    @property
    def parks(self) -> bool:
        return bool(self.park_reasons)


CATALOG: dict[str, NodeType] = {
    spec.type: spec
    for spec in (
        NodeType("trigger.manual", "trigger", "Manual trigger", "Triggers", ManualTriggerConfig, _fixed("out"),
                 description="Starts a run when you press Run or call the API with inputs."),
        NodeType("trigger.schedule", "trigger", "Schedule", "Triggers", ScheduleTriggerConfig, _fixed("out"),
                 summary_keys=("cron", "every"),
                 description="Starts a run on a cron schedule or at a fixed interval."),
        NodeType("trigger.webhook", "trigger", "Webhook", "Triggers", WebhookTriggerConfig, _fixed("out"),
                 description="Starts a run when an HTTP request arrives at the flow's webhook URL."),
        NodeType("trigger.event", "trigger", "Engine event", "Triggers", EventTriggerConfig, _fixed("out"),
                 summary_keys=("event_type",),
                 description="Starts a run when the engine reports an event, such as another run failing."),
        NodeType("queue", "listen", "Queue (delay)", "Waiting", QueueConfig, _fixed("default"),
                 park_reasons=("queue_delay",), summary_keys=("delay",),
                 description="Parks the run for a delay without holding a worker, then continues."),
        NodeType("approval", "listen", "Approval", "Waiting", ApprovalConfig, _fixed("approved", "rejected"),
                 park_reasons=("approval",), summary_keys=("timeout",),
                 description="Parks the run until a person approves or rejects it, or the timeout passes."),
        NodeType("wait.callback", "listen", "Wait for callback", "Waiting", WaitCallbackConfig,
                 _fixed("received", "timed_out"), park_reasons=("callback",), summary_keys=("timeout",),
                 description="Parks the run until an outside system POSTs to its callback URL, or its timeout."),
        NodeType("budget.reserve", "listen", "Budget reserve", "Money & AI", BudgetReserveConfig, _fixed("out"),
                 summary_keys=("amount", "for"),
                 description="Holds money from a budget for the model call it names, so spending cannot overrun "
                             "the budget."),
        NodeType("ai.model", "listen", "AI model", "Money & AI", ModelConfig, _fixed("out"),
                 park_reasons=("pool_capacity", "provider_response", "overspend_approval"),
                 summary_keys=("model",),
                 description="Sends a prompt to a language model and stores its answer in the run's state."),
        NodeType("router", "router", "Router", "Logic", RouterConfig, _router_ports,
                 description="Sends the run down the first branch whose condition is true, else down default."),
        NodeType("join", "join", "Join", "Logic", JoinConfig, _fixed("out"), summary_keys=("mode",),
                 description="Waits for all (or the first) of the branches leading into it and merges their values."),
        NodeType("foreach", "forEach", "For each", "Logic", ForeachConfig, _fixed("item", "done"),
                 summary_keys=("concurrency",),
                 description="Runs the item branch once for each element of a list, then continues on done."),
        NodeType("set", "listen", "Set values", "Data", SetConfig, _fixed("out"),
                 description="Writes values (templates over inputs and state) into the run's state."),
        NodeType("http.request", "listen", "HTTP request", "Data", HttpRequestConfig, _fixed("out"),
                 idempotent=_http_idempotent, summary_keys=("method", "url"),
                 description="Calls a URL over HTTP and stores the response in the run's state."),
        NodeType("script", "listen", "Script", "Data", ScriptConfig, _fixed("out"), idempotent=False,
                 summary_keys=("language", "timeout"),
                 description="Runs a short Python or shell script in its own process and stores what it prints."),
        NodeType("flow.call", "listen", "Call flow", "Flows", FlowCallConfig, _fixed("out"),
                 park_reasons=("child_run",), summary_keys=("flow", "version"),
                 description="Starts a run of another published flow and waits for its result."),
        NodeType("terminal", "terminal", "End", "Logic", TerminalConfig, _fixed(),
                 description="Ends the run here; its output template, if set, becomes the run's result."),
    )
}

RETRY_PARK_REASON = "retry_backoff"
"""Any node with a `retry` policy parks with this reason while it waits out its backoff."""

PARK_REASONS: tuple[str, ...] = (*(r for spec in CATALOG.values() for r in spec.park_reasons), RETRY_PARK_REASON)


def node_type(type_name: str) -> NodeType | None:
    """The catalog entry for `type_name`, or None."""
    return CATALOG.get(type_name)


def categories() -> dict[str, list[NodeType]]:
    """Node types grouped by palette category, in catalog order."""
    grouped: dict[str, list[NodeType]] = {}
    for spec in CATALOG.values():
        grouped.setdefault(spec.category, []).append(spec)
    return grouped


def written_keys(type_name: str, node_id: str, config: dict[str, Any]) -> tuple[str, ...]:
    """Top-level `state` keys a node of this type writes when it runs."""
    if type_name == "set":
        values = config.get("values")
        return tuple(k for k in values if isinstance(k, str)) if isinstance(values, dict) else ()
    if type_name in ("ai.model", "http.request", "foreach", "script", "flow.call"):
        key = config.get("output_key")
        return (key if isinstance(key, str) and key else node_id,)
    if type_name == "approval":
        return (node_id,)
    if type_name == "wait.callback":
        key = config.get("output_key")
        return (key if isinstance(key, str) and key else node_id,)
    return ()


def template_fields(type_name: str, config: dict[str, Any]) -> list[tuple[str, str]]:
    """(config path, template source) pairs a node's config holds."""
    found: list[tuple[str, str]] = []

    def add(path: str, value: Any) -> None:
        if isinstance(value, str):
            found.append((path, value))

    if type_name == "set" and isinstance(config.get("values"), dict):
        for key, value in config["values"].items():
            add(f"values.{key}", value)
    elif type_name == "router" and isinstance(config.get("branches"), list):
        for index, branch in enumerate(config["branches"]):
            if isinstance(branch, dict):
                add(f"branches[{index}].when", branch.get("when"))
    elif type_name == "http.request":
        add("url", config.get("url"))
        add("body", config.get("body"))
        if isinstance(config.get("headers"), dict):
            for key, value in config["headers"].items():
                add(f"headers.{key}", value)
    elif type_name == "flow.call":
        if isinstance(config.get("inputs"), dict):
            for key, value in config["inputs"].items():
                add(f"inputs.{key}", value)
    elif type_name == "approval":
        add("message", config.get("message"))
        add("notify_url", config.get("notify_url"))
    elif type_name == "script":
        if isinstance(config.get("env"), dict):
            for key, value in config["env"].items():
                add(f"env.{key}", value)
    else:
        for key in ("prompt", "system", "message", "items", "output", "dedupe_key"):
            add(key, config.get(key))
    return found
