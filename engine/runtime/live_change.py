"""`LiveChange`: one applied change as the projector's live channel publishes it (no SQL, so the app can read it
without loading the store)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass
class LiveChange:
    """One applied change, as the live channel publishes it."""

    run_id: str
    flow_id: str
    version: int
    status: str
    seq: int
    event: str
    node: str | None = None
    step: str | None = None
    step_status: str | None = None
    waiting_on: dict[str, Any] | None = None
    reason: str | None = None
    """Why a hold was returned (`hold_released`: `expired`, `run_ended`, ...); None for other events."""

    def to_data(self) -> dict[str, Any]:
        return self.__dict__.copy()

    @classmethod
    def from_json(cls, text: str | bytes) -> LiveChange:
        """The change `orjson.dumps(change.to_data())` wrote (the live channel's message, `applied_events.change`)."""
        return cls(**orjson.loads(text))
