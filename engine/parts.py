"""What the host (`engine.host`) hands the parts it builds, and what the engine's front doors need of it.

A part (money, triggers, calls, approval notices, the HTTP server) receives these when it is built and never
imports the host: `PartContext` for the background parts, `RunningEngine` for the facade and the HTTP server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from engine.config import EngineConfig
from engine.flow import Flow
from engine.runtime.create import BudgetPreflight, CreatedRun, LatestVersions, StartsRuns
from engine.runtime.handles import EngineHandles
from engine.runtime.projection import BatchResult
from engine.transport.connection import RedisHandle
from engine.transport.keys import Keyspace

if TYPE_CHECKING:
    import redis

    from engine.api.callbacks import CallbackSender
    from engine.parking.callback_links import CallbackLinks
    from engine.publish import PublishedVersion
    from engine.runtime.rerun import RerunPlan, RerunVersion

BatchListener = Callable[[BatchResult], None]
"""Called with every batch of events the projector applied, on the projector's thread."""
AckFiller = Callable[[BatchResult, "redis.client.Pipeline"], None]
"""Adds Redis commands to the acknowledgement of each batch the projector applied, sent with it (`Projector`)."""


@dataclass(frozen=True)
class PartContext:
    """Everything a background part may use of its engine process, handed to it by the host."""

    handles: EngineHandles
    redis: RedisHandle
    """For parts that need a client of their own (other timeouts)."""
    config: EngineConfig
    create_run: StartsRuns
    latest_versions: LatestVersions
    preflight: BudgetPreflight
    """The engine's budget preflight as it is when called (the money part installs the real one)."""
    add_batch_listener: Callable[[BatchListener], None] | None
    """Subscribe to applied batches; None when this process runs no projector (it sees no events)."""
    add_ack_filler: Callable[[AckFiller], None] | None
    """Write to Redis with each applied batch's acknowledgement: what is written there survives the process dying
    at any moment after the batch's commit. None when this process runs no projector."""
    stop: threading.Event
    """Set when the engine stops; a part's threads end on it."""

    def spawn(self, name: str, target: Callable[[threading.Event], None]) -> threading.Thread:
        """Run `target(stop)` on a daemon thread named `name`."""
        thread = threading.Thread(target=target, args=(self.stop,), name=name, daemon=True)
        thread.start()
        return thread


class RunningEngine(Protocol):
    """What the facade (`engine.facade.EngineApi`) and the HTTP server need of started engine services."""

    @property
    def keys(self) -> Keyspace: ...

    @property
    def redis(self) -> RedisHandle | None: ...

    @property
    def latest_versions(self) -> LatestVersions: ...

    @property
    def callback_links(self) -> CallbackLinks: ...

    def require_handles(self) -> EngineHandles:
        """The started engine's handles (RuntimeError before `start()`)."""
        ...

    def add_batch_listener(self, listener: BatchListener) -> None: ...

    def remove_batch_listener(self, listener: BatchListener) -> None: ...

    def callback_sender(self) -> CallbackSender:
        """Sends runs' `execution.finished` callbacks."""
        ...

    @property
    def create_run(self) -> StartsRuns: ...

    def cancel_run(self, run_id: str, reason: str = "cancelled by request") -> str: ...

    def publish_flow(self, flow: Flow) -> PublishedVersion: ...

    def plan_rerun(self, run_id: str, from_node: str, version: RerunVersion = "original") -> RerunPlan: ...

    def rerun_run(
        self, run_id: str, from_node: str, version: RerunVersion = "original", *, repeat_effects: bool = True
    ) -> tuple[CreatedRun, RerunPlan]: ...
