"""Reclaiming a job from a dead or silent worker: redeliver it as the next attempt, or give up.

Shared by the reaper (pending too long) and the watchdog (heartbeat lost). One Lua script acks and
deletes the claimed message, bumps the job's attempt key (which fences the old worker off), and
either adds the job back as attempt N+1 or, past the retry cap, moves it to the dead-letter jobs
stream. A run given up on is marked `interrupted` through a `run_interrupted` event, so the
projector stays the only writer of run state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.clock import Clock
from engine.events import ExternalStamper, encode_event
from engine.outages import described, outage
from engine.runtime import crashpoints
from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.jobs import JOB_FIELD, BadJob, decode_job, delivery_of
from engine.settings import LockgateSettings
from engine.store.db import reading
from engine.store.models import Run
from engine.transport.keys import Keyspace

log = logging.getLogger("lockgate.reclaim")

RECLAIMER_CONSUMER = "reaper"
"""Consumer name reclaimed messages are claimed to, for the moment between claim and redelivery."""
ATTEMPT_KEY_TTL_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class RecoveryThresholds:
    """When a job counts as abandoned, and how often it is tried."""

    heartbeat_timeout: float = 15.0
    """Seconds without a heartbeat after which the watchdog reclaims a running run's job."""
    idle_timeout: float = 30.0
    """Seconds a job message may stay pending (delivered, not acknowledged, not refreshed) before the reaper
    claims it. Live workers refresh their pending messages with every heartbeat."""
    retry_cap: int = 3
    """Redeliveries of one job; the next loss moves it to the dead-letter stream and interrupts the run."""
    tick: float = 1.0
    """Seconds between reaper and watchdog passes."""

    @classmethod
    def from_settings(cls, settings: LockgateSettings) -> RecoveryThresholds:
        """`LOCKGATE_HEARTBEAT_TIMEOUT`, `LOCKGATE_JOB_IDLE_TIMEOUT` (seconds) and `LOCKGATE_JOB_RETRY_CAP`."""
        return cls(heartbeat_timeout=settings.heartbeat_timeout, idle_timeout=settings.job_idle_timeout,
                   retry_cap=settings.job_retry_cap)

    def __post_init__(self) -> None:
        if self.heartbeat_timeout <= 0 or self.idle_timeout <= 0 or self.tick <= 0 or self.retry_cap < 0:
            raise ValueError(f"recovery thresholds {self} are not usable: timeouts and tick must be > 0 and "
                             "retry_cap >= 0")


_REQUEUE = """
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return {-1, 0}
end
redis.call('XDEL', KEYS[1], ARGV[2])
local current = tonumber(redis.call('GET', KEYS[2]) or '1')
local next_attempt = current + 1
redis.call('SET', KEYS[2], next_attempt, 'EX', ARGV[7])
redis.call('HDEL', KEYS[4], ARGV[6])
redis.call('HDEL', KEYS[5], ARGV[6])
local losses = tonumber(redis.call('GET', KEYS[6]) or '0')
if ARGV[9] == '1' then
  losses = losses + 1
  redis.call('SET', KEYS[6], losses, 'EX', ARGV[7])
end
if losses > tonumber(ARGV[5]) then
  redis.call('XADD', KEYS[3], '*', 'j', ARGV[3], 'a', current, 'o', ARGV[4], 'error', ARGV[8])
  return {0, current}
end
redis.call('XADD', KEYS[1], '*', 'j', ARGV[3], 'a', next_attempt, 'o', ARGV[4])
return {1, next_attempt}
"""


@dataclass(frozen=True)
class Reclaimed:
    run_id: str
    outcome: str
    """`redelivered`, `dead` (retry cap reached, run interrupted) or `gone` (someone else handled it)."""
    attempt: int


class Reclaimer:
    """Turns a claimed job message into its next attempt, or into a dead letter and an interrupted run."""

    def __init__(self, client: redis.Redis, keys: Keyspace, sql: sa.Engine, clock: Clock,
                 thresholds: RecoveryThresholds) -> None:
        self.client = client
        self.keys = keys
        self.sql = sql
        self.clock = clock
        self.thresholds = thresholds
        self._requeue = client.register_script(_REQUEUE)

    def every_tick(self, stop: threading.Event, tick: Callable[[], object], logger: logging.Logger,
                   name: str) -> None:
        """Call `tick` every `thresholds.tick` seconds until `stop` (the reaper's and watchdog's loop); a failed
        pass is logged and tried again at the next tick."""
        while not stop.wait(self.thresholds.tick):
            try:
                tick()
            except Exception as exc:
                if outage(exc):
                    logger.warning("%s: Redis or the database did not answer (%s); retrying next tick", name,
                                   described(exc))
                elif isinstance(exc, redis.RedisError):
                    logger.warning("%s: Redis failed (%s); retrying next tick", name, exc)
                else:
                    logger.exception("%s: pass failed; retrying next tick", name)

    def reclaim(self, message_id: bytes, fields: dict[bytes, bytes], why: str, counted: bool = True) -> Reclaimed:
        """Handle one message already claimed to `RECLAIMER_CONSUMER`. `counted`: the loss counts against the retry
        cap (a worker died or went silent); not for a batch a Redis outage cut short, which says nothing of the job."""
        delivery = delivery_of(message_id, fields)
        try:
            run_id = decode_job(fields).run_id
        except BadJob:
            run_id = ""
        reason = (f"job of run {run_id or '?'} lost its worker (attempt {delivery.attempt}, "
                  f"retry cap {self.thresholds.retry_cap}); last: {why}")
        crashpoints.reached("reclaim.before_requeue")
        reply: Any = self._requeue(
            keys=[self.keys.jobs, self.keys.job_attempt(delivery.origin), self.keys.jobs_dead, self.keys.heartbeats,
                  self.keys.running_jobs, self.keys.job_losses(delivery.origin)],
            args=[self.keys.jobs_group, message_id, fields.get(JOB_FIELD, b""), delivery.origin,
                  self.thresholds.retry_cap, delivery.origin, ATTEMPT_KEY_TTL_SECONDS, reason, int(counted)])
        crashpoints.reached("reclaim.after_requeue")
        status, attempt = int(reply[0]), int(reply[1])
        if status < 0:
            return Reclaimed(run_id, "gone", delivery.attempt)
        if status == 1:
            log.warning("run %s: %s; redelivered as attempt %d", run_id, why, attempt)
            return Reclaimed(run_id, "redelivered", attempt)
        log.error("run %s: %s", run_id, reason)
        if run_id:
            self._interrupt(run_id, delivery.origin, reason)
        return Reclaimed(run_id, "dead", attempt)

    def _interrupt(self, run_id: str, origin: str, reason: str) -> None:
        with reading(self.sql) as conn:
            last_seq = conn.execute(sa.select(Run.last_seq).where(Run.id == run_id)).scalar()
        event = ExternalStamper(run_id, self.clock, int(last_seq or 0)).run_interrupted(
            f"{reason}. The job is in {self.keys.jobs_dead}; start the run again once the cause is fixed")
        pipe = self.client.pipeline(transaction=False)
        pipe.xadd(self.keys.events, {EVENT_FIELD: encode_event(event)})
        pipe.delete(self.keys.run_progress(run_id, origin), self.keys.run_checkpoint(run_id),
                    self.keys.run_secrets(run_id))
        pipe.execute()


def running_entry(message_id: bytes, run_id: str, attempt: int, worker: str) -> bytes:
    """The `running_jobs` hash value (under the job's origin) of a job a worker executes."""
    return orjson.dumps({"message": message_id.decode(), "run": run_id, "attempt": attempt, "worker": worker})
