"""The body registry: what a node of each type does, keyed by node type.

A leaf: body modules import it to register (`register_body`), it imports none of them;
`engine.runtime.body_table` imports every body module. The scheduler knows kinds only; adding a node
type means registering a body (in the part that owns it), listing its module in the body table, and
never touching the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.clock import Clock
from engine.events import EventBase, EventStamper
from engine.flow import Node
from engine.runtime.context import RunContext
from engine.transport.keys import Keyspace


@dataclass(frozen=True)
class StepServices:
    """Shared stores a body may read (an approval reads its decision claim); None in pure executor tests."""

    client: Any
    """The worker's `redis.Redis` client."""
    keys: Keyspace


@dataclass(frozen=True)
class TokenUsage:
    """Tokens a model call used: the prompt's (`tokens_in`) and the answer's (`tokens_out`)."""

    tokens_in: int
    tokens_out: int


@dataclass(frozen=True)
class StepResult:
    """A body's outcome: the ports it delivers (None: every output port), state writes, a terminal result."""

    ports: tuple[str, ...] | None = None
    writes: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    items: list[Any] | None = None
    """foreach only: the items to iterate."""
    tokens: TokenUsage | None = None
    """ai.model only: what the answered call used (recorded on `step_completed`)."""
    cost_micros: int | None = None
    """ai.model only: the answered call's cost when no budget hold charged it (recorded on `step_completed`, added
    to the run's cost)."""


@dataclass(frozen=True)
class Park:
    """A body that must wait: the run parks on this node and resumes here (issue 4 fills the waits)."""

    reason: str
    due_at: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    wake_on_key: str | None = None
    """A Redis key whose presence wakes the park: set before the park is sealed, the run resumes at once
    (the sealing write checks it atomically); set after, whoever sets it enqueues the resume."""
    child_run_id: str | None = None
    """`child_run` only: the run waited for (shown in `waiting_on`)."""


@dataclass
class StepCall:
    """Everything a body may read for one step."""

    node: Node
    ctx: RunContext
    clock: Clock
    extra_names: dict[str, Any] = field(default_factory=dict)
    """Template names beyond the state container (`item`, `index` inside a foreach)."""
    resumed: bool = False
    """True when the run parked on this node and is now resuming it."""
    branch_writes: list[dict[str, Any]] = field(default_factory=list)
    """join only: state writes of each delivered branch, in completion order."""
    services: StepServices | None = None
    """Redis and its keyspace, given by the worker."""
    emit: Callable[[Callable[[EventStamper], EventBase]], None] = lambda make: None
    """Emit an event of this run in sequence (hold events): `call.emit(lambda s: s.hold_placed(...))`."""
    given: dict[str, Any] = field(default_factory=dict)
    """The config as this attempt rendered it (unredacted): the type's `prepare` fills it before the body
    runs, and the body reads its rendered values from here instead of rendering again."""
    items: list[Any] | None = None
    """foreach only: the items its `prepare` evaluated."""
    attempt: int = 1
    """The attempt of this step running now (1, then 2, ... under a `retry` policy)."""
    cancelled: Callable[[], bool] = lambda: False
    """True once the run's cancel was asked: a body that may run long (a script) stops and raises
    `StepCancelled` instead of running on until its timeout."""

    @property
    def config(self) -> dict[str, Any]:
        return self.node.config

    def names(self) -> dict[str, Any]:
        return self.ctx.template_context(self.extra_names)


class StepCancelled(Exception):
    """A body stopped because its run was cancelled while it ran (`StepCall.cancelled`); the message says what
    it stopped. The step fails with `cancelled` and the run ends cancelled at it."""


class StepError(Exception):
    """A step failure with a short type (`http_status`, `template_error`, ...) for the run record."""

    def __init__(self, message: str, error_type: str = "error") -> None:
        super().__init__(message)
        self.error_type = error_type


Body = Callable[[StepCall], StepResult | Park]
Prepare = Callable[[StepCall], dict[str, Any]]
"""Renders a node's config against the run state of this moment: what the step is given."""


@dataclass(frozen=True)
class BodySpec:
    body: Body
    blocking: bool = False
    """True for bodies that wait on I/O: buffered events are flushed before they run (live progress)."""
    prepare: Prepare | None = None
    """None: the step is given its config as written (no templates in it)."""


_REGISTRY: dict[str, BodySpec] = {}


def register_body(type_name: str, *, blocking: bool = False,
                  prepare: Prepare | None = None) -> Callable[[Body], Body]:
    """Decorator: register `fn` as the body of node type `type_name` (replacing any earlier one); `prepare`
    renders what the step is given (recorded in `step_started.given`, read by the body as `call.given`)."""

    def decorate(fn: Body) -> Body:
        _REGISTRY[type_name] = BodySpec(fn, blocking, prepare)
        return fn

    return decorate


def body_for(type_name: str) -> BodySpec | None:
    """The registered body of a node type, or None (`engine.runtime.body_table` registers them all)."""
    return _REGISTRY.get(type_name)


def registered_types() -> tuple[str, ...]:
    return tuple(_REGISTRY)
