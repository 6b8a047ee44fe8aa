"""The reaper: job messages left pending by a dead consumer are claimed (`XAUTOCLAIM`) and redelivered.

A message counts as abandoned when it stayed pending longer than `idle_timeout`: live workers refresh
the idle time of every message they hold with each heartbeat, so only a dead (or frozen) consumer's
messages age. Each claimed message goes through `Reclaimer` (next attempt, or dead letter past the cap).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from engine.runtime.reclaim import RECLAIMER_CONSUMER, Reclaimed, Reclaimer
from engine.transport.streams import ensure_group

log = logging.getLogger("lockgate.reaper")

CLAIM_BATCH = 100
FORGET_CONSUMER_AFTER_SECONDS = 3600.0
"""A consumer with nothing pending and no read for this long is removed from the group (each worker process
has its own consumer names, so dead processes would otherwise accumulate there)."""


class Reaper:
    """Claims abandoned job messages; `tick()` is one pass, `run()` loops until `stop` is set."""

    def __init__(self, reclaimer: Reclaimer) -> None:
        self.reclaimer = reclaimer
        self.client = reclaimer.client
        self.keys = reclaimer.keys

    def tick(self) -> list[Reclaimed]:
        # Idle time is the Redis server's own measure of each pending entry, so no clock is compared here.
        min_idle_ms = int(self.reclaimer.thresholds.idle_timeout * 1000)
        handled: list[Reclaimed] = []
        cursor: Any = "0-0"
        while True:
            reply: Any = self.client.xautoclaim(self.keys.jobs, self.keys.jobs_group, RECLAIMER_CONSUMER,
                                                min_idle_time=min_idle_ms, start_id=cursor, count=CLAIM_BATCH)
            cursor, entries = reply[0], reply[1]
            for message_id, fields in entries:
                if not fields:  # deleted from the stream while pending: nothing to redeliver
                    self.client.xack(self.keys.jobs, self.keys.jobs_group, message_id)
                    continue
                why = f"its job stayed pending over {self.reclaimer.thresholds.idle_timeout:g}s (worker gone)"
                handled.append(self.reclaimer.reclaim(message_id, fields, why))
            if cursor in (b"0-0", "0-0"):
                self.forget_idle_consumers()
                return handled

    def forget_idle_consumers(self) -> list[str]:
        """Remove consumers of the jobs group with no pending message that have not read for an hour; a live one
        removed by mistake loses nothing (its next read creates it again)."""
        consumers: Any = self.client.xinfo_consumers(self.keys.jobs, self.keys.jobs_group)
        forgotten = []
        for consumer in consumers:
            name = consumer["name"].decode() if isinstance(consumer["name"], bytes) else consumer["name"]
            if consumer["pending"] == 0 and consumer.get("inactive", consumer["idle"]) > \
                    FORGET_CONSUMER_AFTER_SECONDS * 1000:
                self.client.xgroup_delconsumer(self.keys.jobs, self.keys.jobs_group, name)
                forgotten.append(name)
        return forgotten

    def run(self, stop: threading.Event) -> None:
        ensure_group(self.client, self.keys.jobs, self.keys.jobs_group)
        self.reclaimer.every_tick(stop, self.tick, log, "reaper")
