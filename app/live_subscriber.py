"""Reads the projector's live channel (Redis pub/sub) in a thread and hands the GUI one batch per frame.

Parsing and gathering happen on this thread. The GUI is told "changes are ready" at most once per
frame and never again until it has taken them (`take()` returns everything gathered so far), so
however fast the projector publishes, at most one hand-off is queued on the GUI thread at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from engine.runtime.live_change import LiveChange

if TYPE_CHECKING:
    import redis

POLL_S = 0.25
FRAME_S = 0.016
"""Least time between two hand-offs to the GUI (one screen frame)."""
MAX_BURST = 500


class LiveSubscriber:
    """Calls `on_ready()` from its own thread when changes wait; the GUI then calls `take()` for them."""

    def __init__(self, client: redis.Redis, channel: str, on_ready: Callable[[], None],
                 frame_s: float = FRAME_S) -> None:
        self.client = client
        self.channel = channel
        self.on_ready = on_ready
        self.frame_s = frame_s
        self.handoffs = 0
        """How many times the GUI was told changes were ready (for tests and benchmarks)."""
        self._pending: list[LiveChange] = []
        self._handed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._subscribed = threading.Event()

    def start(self) -> LiveSubscriber:
        self._thread = threading.Thread(target=self._run, name="lockgate-live", daemon=True)
        self._thread.start()
        self._subscribed.wait(5.0)
        return self

    def take(self) -> list[LiveChange]:
        """Every change gathered since the last call, oldest first (call it on the GUI thread)."""
        with self._lock:
            changes, self._pending = self._pending, []
            self._handed = False
        return changes

    def _run(self) -> None:
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(self.channel)
        self._subscribed.set()
        next_handoff = 0.0
        try:
            while not self._stop.is_set():
                with self._lock:
                    due = bool(self._pending) and not self._handed
                wait = max(0.0, next_handoff - time.monotonic()) if due else POLL_S
                message = pubsub.get_message(timeout=wait)
                if message is not None:
                    self._gather(pubsub, message)
                now = time.monotonic()
                if now < next_handoff:
                    continue
                with self._lock:
                    ready = bool(self._pending) and not self._handed
                    if ready:
                        self._handed = True
                if ready:
                    next_handoff = now + self.frame_s
                    self.handoffs += 1
                    self.on_ready()
        finally:
            pubsub.close()

    def _gather(self, pubsub: Any, first: dict[str, Any]) -> None:
        burst = [first]
        while len(burst) < MAX_BURST:
            more = pubsub.get_message(timeout=0)
            if more is None:
                break
            burst.append(more)
        changes = [LiveChange(**orjson.loads(m["data"])) for m in burst if m.get("type") == "message"]
        if changes:
            with self._lock:
                self._pending.extend(changes)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(POLL_S * 8)
            self._thread = None
