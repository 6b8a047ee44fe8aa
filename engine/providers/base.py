"""The one interface every model provider adapter offers, its request/result types and its typed errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal, Protocol

from engine.money.amounts import micros_to_usd

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call: the model, its messages and the most tokens it may answer with."""

    model: str
    messages: tuple[ChatMessage, ...]
    max_tokens: int | None = None

    @classmethod
    def from_prompt(cls, model: str, prompt: str, system: str | None = None,
                    max_tokens: int | None = None) -> ChatRequest:
        """A request from an `ai.model` node's rendered prompt and optional system text."""
        messages = ((ChatMessage("system", system),) if system else ()) + (ChatMessage("user", prompt),)
        return cls(model=model, messages=messages, max_tokens=max_tokens)


@dataclass(frozen=True)
class RateLimitTelemetry:
    """What a response said about the provider's rate limits (None where a header was absent)."""

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests_s: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens_s: float | None = None

    @property
    def is_empty(self) -> bool:
        return all(value is None for value in self.__dict__.values())


@dataclass(frozen=True)
class ChatResult:
    """A finished call: the answer, its token usage and what it cost (micro-dollars, rounded up)."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
    finish_reason: str | None = None
    response_id: str | None = None
    connection: str | None = None
    telemetry: RateLimitTelemetry = field(default_factory=RateLimitTelemetry)

    @property
    def cost_usd(self) -> Decimal:
        return micros_to_usd(self.cost_micros)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class BackgroundCall:
    """A started background call: poll it by `call_id` on the connection that started it."""

    call_id: str
    model: str
    connection: str
    started_at: float
    estimated_prompt_tokens: int = 0
    immediate: ChatResult | None = None
    """Set when the provider ignored `background` and answered at once."""


class ProviderError(Exception):
    """A model call failed; `retryable` says whether the same call may succeed later."""

    retryable: bool = False

    def __init__(self, message: str, *, provider: str = "", status_code: int | None = None,
                 retryable: bool | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        if retryable is not None:
            self.retryable = retryable


class RateLimited(ProviderError):
    """The provider answered 429; `retry_after` seconds is when it said to come back."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float, provider: str = "",
                 telemetry: RateLimitTelemetry | None = None) -> None:
        super().__init__(message, provider=provider, status_code=429)
        self.retry_after = retry_after
        self.telemetry = telemetry or RateLimitTelemetry()


class ProviderTimeout(ProviderError):
    """No (complete) answer within the adapter's timeout."""

    retryable = True


class ConnectionLost(ProviderError):
    """The connection failed or was dropped before the answer was complete."""

    retryable = True


class BadResponse(ProviderError):
    """The provider answered 2xx but the body is not a chat completion we can read."""


class ProviderAdapter(Protocol):
    """What the `ai.model` node body calls; one adapter instance speaks to one connection of a provider."""

    provider: str
    connection: str

    def estimate_cost_micros(self, request: ChatRequest) -> int:
        """Most the call can cost: estimated prompt tokens plus `max_tokens` at the model's prices."""
        ...

    def complete(self, request: ChatRequest) -> ChatResult:
        """Make the call and wait for the answer; raises a `ProviderError` subclass on failure."""
        ...

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """`complete` for asyncio callers."""
        ...

    def start_background(self, request: ChatRequest) -> BackgroundCall:
        """Start the call without waiting for its answer."""
        ...

    def poll_background(self, call: BackgroundCall) -> ChatResult | None:
        """The answer when the background call finished, None while it is still in progress."""
        ...


class TelemetrySink(Protocol):
    """Where adapters drop each response's rate-limit telemetry; implementations must never raise."""

    def record_response(self, provider: str, connection: str, telemetry: RateLimitTelemetry) -> None:
        ...

    def record_rate_limited(self, provider: str, connection: str, retry_after: float,
                            telemetry: RateLimitTelemetry) -> None:
        ...
