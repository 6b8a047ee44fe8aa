"""The watchdog: a running run whose worker heartbeat is older than `heartbeat_timeout` is an
interrupted-candidate; its job message is claimed from the silent worker and reclaimed
(`Reclaimer`: the next attempt continues it, or past the retry cap the run is interrupted).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import orjson

from engine.runtime.reclaim import RECLAIMER_CONSUMER, Reclaimed, Reclaimer

log = logging.getLogger("lockgate.watchdog")


class Watchdog:
    """Checks heartbeats against the injected clock; `tick()` is one pass, `run()` loops until `stop`."""

    def __init__(self, reclaimer: Reclaimer) -> None:
        self.reclaimer = reclaimer
        self.client = reclaimer.client
        self.keys = reclaimer.keys

    def stale_jobs(self) -> dict[str, float]:
        """Job origin -> heartbeat age (seconds) of jobs whose heartbeat is older than the threshold."""
        now = self.reclaimer.clock.now()
        limit = self.reclaimer.thresholds.heartbeat_timeout
        beats: Any = self.client.hgetall(self.keys.heartbeats)
        ages = {origin.decode(): now - float(beat) for origin, beat in beats.items()}
        return {origin: age for origin, age in ages.items() if age > limit}

    def tick(self) -> list[Reclaimed]:
        stale = self.stale_jobs()
        if not stale:
            return []
        origins = list(stale)
        entries: Any = self.client.hmget(self.keys.running_jobs, origins)
        handled: list[Reclaimed] = []
        for origin, raw in zip(origins, entries, strict=True):
            if raw is None:  # the job ended between the two reads, or left only its heartbeat behind
                self.client.hdel(self.keys.heartbeats, origin)
                continue
            message_id = orjson.loads(raw)["message"]
            # The PEL idle guard (same threshold) skips a message whose worker refreshed it meanwhile.
            min_idle_ms = int(self.reclaimer.thresholds.heartbeat_timeout * 1000)
            claimed: Any = self.client.xclaim(self.keys.jobs, self.keys.jobs_group, RECLAIMER_CONSUMER,
                                              min_idle_time=min_idle_ms, message_ids=[message_id])
            for claimed_id, fields in claimed or []:
                if not fields:
                    continue
                why = f"its worker's heartbeat is {stale[origin]:.1f}s old (threshold " \
                      f"{self.reclaimer.thresholds.heartbeat_timeout:g}s)"
                handled.append(self.reclaimer.reclaim(claimed_id, fields, why))
        return handled

    def run(self, stop: threading.Event) -> None:
        self.reclaimer.every_tick(stop, self.tick, log, "watchdog")
