"""Reads the projector's live channel (Redis pub/sub) in a thread and hands over one list per burst."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import redis

POLL_S = 0.25
MAX_BURST = 500


class LiveSubscriber:
    """Calls `on_changes(list_of_change_dicts)` from its own thread for each burst of messages."""

    def __init__(self, client: redis.Redis, channel: str, on_changes: Callable[[list[dict[str, Any]]], None]) -> None:
        self.client = client
        self.channel = channel
        self.on_changes = on_changes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._subscribed = threading.Event()

    def start(self) -> LiveSubscriber:
        self._thread = threading.Thread(target=self._run, name="lockgate-live", daemon=True)
        self._thread.start()
        self._subscribed.wait(5.0)
        return self

    def _run(self) -> None:
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(self.channel)
        self._subscribed.set()
        try:
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=POLL_S)
                if message is None:
                    continue
                burst = [message]
                while len(burst) < MAX_BURST:
                    more = pubsub.get_message(timeout=0)
                    if more is None:
                        break
                    burst.append(more)
                changes = [orjson.loads(m["data"]) for m in burst if m.get("type") == "message"]
                if changes:
                    self.on_changes(changes)
        finally:
            pubsub.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(POLL_S * 8)
            self._thread = None
