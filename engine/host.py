"""The engine's composition root. `EngineServices` builds every part — Redis (embedded or configured), the SQL
store, workers, the projector, heartbeats, the due waker, money, triggers, flow calls, approval notices — and
hands each what it needs (`engine.parts.PartContext`); no part imports this module. The app runs it in a
background thread, `lockgate worker` in the foreground; the facade (`engine.facade.EngineApi`) is its front door.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
import sqlalchemy as sa

from engine.api.callbacks import CallbackSender
from engine.approvals.notices import NoticeSender
from engine.calls.runtime import CallRuntime
from engine.clock import Clock, SystemClock
from engine.config import EngineConfig, InputLimits
from engine.flow import Flow
from engine.money.engine_loop import MoneyRuntime
from engine.outages import OutageReport, outage
from engine.parking.callback_links import CallbackLinks
from engine.parking.rebuild import rebuild_due_set
from engine.parts import AckFiller, BatchListener, PartContext
from engine.publish import PublishedVersion, publish
from engine.runtime import cancel as cancel_module
from engine.runtime import create as create_module
from engine.runtime import queries
from engine.runtime import rerun as rerun_module
from engine.runtime.consumers import ConsumerSlots, drain_predecessors
from engine.runtime.create import (
    BudgetPreflight,
    CreatedRun,
    LatestVersions,
    RerunStart,
    RunMode,
    no_budget_preflight,
)
from engine.runtime.handles import EngineHandles
from engine.runtime.jobs import encode_job, resume_job
from engine.runtime.orphans import OrphanSweep
from engine.runtime.process_registry import ProcessEntry
from engine.runtime.projection import BatchResult
from engine.runtime.projector import Projector
from engine.runtime.reaper import Reaper
from engine.runtime.reclaim import Reclaimer, RecoveryThresholds
from engine.runtime.transitions import TERMINAL
from engine.runtime.watchdog import Watchdog
from engine.runtime.worker import PlanCache, Worker
from engine.secret_box import SecretBox, box_for
from engine.settings import LockgateSettings, load_settings
from engine.store.db import init_db, make_engine
from engine.store.schema_check import require_current_schema
from engine.transport.connection import RedisHandle, open_redis
from engine.transport.due import DueItem, DueSet, DueWaker
from engine.transport.keys import Keyspace
from engine.transport.streams import ensure_group
from engine.triggers.runtime import TriggerRuntime

log = logging.getLogger("lockgate.services")

_BEAT_RUNNING = """
for i = 2, #ARGV do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
  end
end
"""
"""Beat (KEYS[1]: heartbeats, time ARGV[1]) for each job origin (ARGV[2:]) still in KEYS[2] (running_jobs): a job
that ended after the beat's list was taken is not given a heartbeat again."""

HEARTBEAT_SECONDS = 2.0
SQLITE_POOL = 24
"""SQLite connections kept open, and as many more opened at busy moments (QueuePool size and overflow)."""


class EngineServices:
    """The engine's moving parts in one process. `start()` then the API; `stop()` ends everything cleanly."""

    def __init__(self, config: EngineConfig, clock: Clock | None = None, workers: int = 2, *,
                 projector: bool = True, due_waker: bool = True, sleep: Callable[[float], None] = time.sleep,
                 budget_preflight: BudgetPreflight = no_budget_preflight, block_ms: int = 500,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, scheduler: bool = True,
                 recovery: RecoveryThresholds | None = None, reaper: bool = True,
                 max_call_depth: int | None = None, migrate: bool = True, role: str = "all",
                 settings: LockgateSettings | None = None, concurrency_control: bool = True) -> None:
        self.config = config
        self.settings = settings if settings is not None else load_settings()
        """The `LOCKGATE_*` settings this engine runs with: the caller's, else the environment's, read here once
        (`config` carries the locations; these the limits, thresholds, key and URLs)."""
        self.input_limits = InputLimits.from_settings(self.settings)
        """How large a run's inputs may be (`LOCKGATE_MAX_INPUT_DEPTH`, `LOCKGATE_MAX_INPUT_BYTES`)."""
        self.migrate = migrate
        """Upgrade the schema at start (the default); False: refuse a schema that is not current
        (`SchemaMismatch`), as workers on a shared database do."""
        self.role = role
        """What this process is in a process layout (`all`, `executor`, `projector`, `http`); `lockgate admin status`
        shows it."""
        self.clock: Clock = clock or SystemClock()
        self.worker_count = workers
        self.run_projector = projector
        self.run_due_waker = due_waker
        self.run_scheduler = scheduler
        self.run_concurrency_control = concurrency_control
        """Run the money part's concurrency control loop (one per Redis holds its lease; an http process runs none)."""
        self.sleep = sleep
        self.budget_preflight = budget_preflight
        self.block_ms = block_ms
        self.heartbeat_seconds = heartbeat_seconds
        self.recovery = recovery or RecoveryThresholds.from_settings(self.settings)
        """Watchdog and reaper thresholds (heartbeat timeout, pending idle time, retry cap)."""
        self.run_reaper = reaper
        self.reaper: Reaper | None = None
        self.watchdog: Watchdog | None = None
        """Longest blocking stream read; bounds how long stop() waits for a worker."""
        self.keys = Keyspace(config.key_prefix)
        self.box: SecretBox = box_for(config.data_dir, self.settings)
        """Seals secret inputs and the run data of runs that have them; its key is read at first use."""
        self.callback_links = CallbackLinks(self.box, self.settings.public_url, self.settings.http_url)
        """Makes `wait.callback` resume URLs; an HTTP server started on these services tells it its URL."""
        self.redis: RedisHandle | None = None
        self.sql: sa.Engine | None = None
        self.handles: EngineHandles | None = None
        self.workers: list[Worker] = []
        self.projector: Projector | None = None
        self.due: DueSet | None = None
        self.waker: DueWaker | None = None
        self._batch_listeners: list[Callable[[BatchResult], None]] = []
        self._ack_fillers: list[AckFiller] = []
        self.money: MoneyRuntime | None = None
        self.triggers: TriggerRuntime | None = None
        """Schedules, event triggers and outgoing run callbacks, once started."""
        self.latest_versions = LatestVersions()
        self.max_call_depth = max_call_depth if max_call_depth is not None else self.settings.max_call_depth
        """How deep `flow.call` child runs may nest (default: `LOCKGATE_MAX_CALL_DEPTH`)."""
        self.calls: CallRuntime | None = None
        """flow.call child runs, once started."""
        self.approval_notices: NoticeSender | None = None
        """Approvals' notify_url notices, once started."""
        self.consumers: ConsumerSlots | None = None
        self.process_entry: ProcessEntry | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> EngineServices:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.redis = open_redis(self.config)
        # SQLite: connections are cheap to keep and dear to open (a file and four PRAGMAs), and one closed for
        # being past the pool's size is opened again by the next busy moment: keep as many as threads read at once.
        self.sql = make_engine(self.config.sql_url, pool_size=10, max_overflow=10) if not \
            self.config.sql_url.startswith("sqlite") else make_engine(self.config.sql_url, pool_size=SQLITE_POOL,
                                                                     max_overflow=SQLITE_POOL)
        if self.migrate:
            init_db(self.sql)
        else:
            require_current_schema(self.sql, self.sql.url.render_as_string(hide_password=True))
        client = self.redis.client()
        self.handles = EngineHandles(client, self.keys, self.sql, self.clock, self.box, self.input_limits)
        ensure_group(client, self.keys.jobs, self.keys.jobs_group)
        ensure_group(client, self.keys.events, self.keys.events_group)
        self.due = DueSet(client, self.keys)
        self.money = MoneyRuntime.start(self._part_context(), control_loop=self.run_concurrency_control)
        if self.budget_preflight is no_budget_preflight:
            self.budget_preflight = self.money.preflight
        reclaimer = Reclaimer(self.redis.client(), self.keys, self.sql, self.clock, self.recovery)
        self.consumers = ConsumerSlots(client, self.keys)
        names = self.consumers.acquire(self.worker_count)
        # Before the rebuild: the jobs reclaimed here are live again, so the rebuild gives their runs no second job.
        drain_predecessors(reclaimer, names)
        rebuild_due_set(self.sql, client, self.keys)
        parts = self._part_context()
        self.triggers = TriggerRuntime.start(parts, scheduler_thread=self.run_scheduler,
                                             claim_seconds=self.settings.delivery_claim_timeout)
        self.calls = CallRuntime.start(parts, self.max_call_depth)
        self.approval_notices = NoticeSender.start(parts, self.settings.delivery_claim_timeout)
        plans = PlanCache(self.sql)
        for index, name in enumerate(names):
            worker = Worker(self.redis.client(), self.keys, plans, self.clock, name,
                            on_lost_batch=functools.partial(self._redeliver, reclaimer), sleep=self.sleep,
                            block_ms=self.block_ms,
                            box=self.box, links=self.callback_links)
            self.workers.append(worker)
            self._spawn(f"lockgate-worker-{index}", worker.run)
        if self.run_projector:
            self.projector = Projector(self.redis.client(), self.keys, self.sql, on_batch=self._on_batch,
                                       fill_ack=self._fill_ack,
                                       block_ms=min(self.block_ms, 200), journal=self.config.event_journal)
            self._spawn("lockgate-projector", self.projector.run)
        self._spawn("lockgate-heartbeat", self._heartbeat_loop)
        if self.run_reaper:
            self.reaper = Reaper(reclaimer)
            self.watchdog = Watchdog(reclaimer)
            self._spawn("lockgate-reaper", self.reaper.run)
            self._spawn("lockgate-watchdog", self.watchdog.run)
            orphans = OrphanSweep(self.redis.client(), self.keys, self.sql, self.clock)
            self._spawn("lockgate-orphans", lambda stop: reclaimer.every_tick(stop, orphans.tick, log, "orphan sweep"))
        if self.run_due_waker:
            self.waker = DueWaker(DueSet(self.redis.client(), self.keys), self._resume_due, self.clock).start()
        # Announced last: a start that failed part-way has no entry to take back.
        self.process_entry = ProcessEntry(self.role, self.worker_count)
        self.process_entry.refresh(client, self.keys)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self.waker is not None:
            self.waker.stop(timeout)
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        self.workers.clear()
        if self.consumers is not None:
            try:
                self.consumers.release()
            except Exception:
                log.warning("could not release this process's worker consumer names; they lapse on their own")
            self.consumers = None
        if self.calls is not None:
            self.calls.stop()
            self.calls = None
        if self.process_entry is not None and self.redis is not None:
            try:
                self.process_entry.forget(self.redis.client(), self.keys)
            except Exception:
                log.warning("could not remove this process from the process list; its entry lapses on its own")
            self.process_entry = None
        if self.money is not None:
            self.money.stop(timeout)
            self.money = None
        if self.redis is not None:
            self.redis.close()
            self.redis = None
        if self.sql is not None:
            self.sql.dispose()

    def __enter__(self) -> EngineServices:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, target: Callable[[threading.Event], None]) -> None:
        thread = threading.Thread(target=target, args=(self._stop,), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _heartbeat_loop(self, stop: threading.Event) -> None:
        client = self.redis.client() if self.redis else None
        report = OutageReport(log, "heartbeat")
        while client is not None and not stop.wait(self.heartbeat_seconds):
            active = {origin for worker in self.workers for origin in list(worker.active)}
            try:
                pipe = client.pipeline(transaction=False)
                if self.consumers is not None:
                    self.consumers.refresh(pipe)
                if self.process_entry is not None:
                    self.process_entry.refresh(pipe, self.keys)
                if active:
                    pipe.eval(_BEAT_RUNNING, 2, self.keys.heartbeats, self.keys.running_jobs, self.clock.now(),
                              *sorted(active))
                for worker in self.workers:
                    held = worker.holding
                    if held:
                        # Claiming its own messages again resets their idle time, so the reaper leaves them.
                        pipe.xclaim(self.keys.jobs, self.keys.jobs_group, worker.name, 0, list(held), justid=True)
                pipe.execute()
                report.worked()
            except Exception:
                report.failed("heartbeat: Redis write failed; retrying every beat until it works")

    @staticmethod
    def _redeliver(reclaimer: Reclaimer, consumer: str) -> None:
        drain_predecessors(reclaimer, [consumer], why="its batch was cut short by a Redis or database failure",
                           counted=False)

    def _resume_due(self, items: list[DueItem]) -> None:
        pipe = self.require_handles().client.pipeline(transaction=False)
        for item in items:
            pipe.xadd(self.keys.jobs, encode_job(resume_job(item.member)))
        pipe.execute()

    def _part_context(self) -> PartContext:
        assert self.redis is not None
        return PartContext(handles=self.require_handles(), redis=self.redis, config=self.config,
                           create_run=self.create_run, latest_versions=self.latest_versions,
                           preflight=self._preflight,
                           add_batch_listener=self.add_batch_listener if self.run_projector else None,
                           add_ack_filler=self._ack_fillers.append if self.run_projector else None,
                           stop=self._stop)

    def _preflight(self, flow: Flow, inputs: dict[str, Any]) -> None:
        self.budget_preflight(flow, inputs)

    def add_batch_listener(self, listener: BatchListener) -> None:
        """Call `listener` with every batch this process's projector applies (nothing if it runs none)."""
        self._batch_listeners.append(listener)

    def remove_batch_listener(self, listener: BatchListener) -> None:
        if listener in self._batch_listeners:
            self._batch_listeners.remove(listener)

    def callback_sender(self) -> CallbackSender:
        """The sender of runs' `execution.finished` callbacks (the trigger part's, once started)."""
        if self.triggers is not None:
            return self.triggers.callbacks
        return CallbackSender(self.require_handles())

    def _on_batch(self, result: BatchResult) -> None:
        for listener in list(self._batch_listeners):
            listener(result)

    def _fill_ack(self, result: BatchResult, pipe: redis.client.Pipeline) -> None:
        """An outage raises (the batch is applied again, and its changes replayed); any other error of a filler is
        logged and that filler passed over, so no part can stop the projection."""
        for filler in self._ack_fillers:
            try:
                filler(result, pipe)
            except Exception as exc:
                if outage(exc):
                    raise
                log.exception("the projector's batch: %s failed; its changes are not written", filler)

    def require_handles(self) -> EngineHandles:
        if self.handles is None:
            raise RuntimeError("the engine services are not started; call EngineServices.start() first")
        return self.handles

    # --- Python API -------------------------------------------------------------------------------

    def publish_flow(self, flow: Flow) -> PublishedVersion:
        """Validate and store `flow` as its next version (PublishRefused on validation errors)."""
        published = publish(self.require_handles().sql, flow)
        self.latest_versions.invalidate(flow.id)
        if self.triggers is not None:
            try:
                self.triggers.events.flow_published(published.flow_id, published.version)
            except Exception:  # the flow is published; a listener that cannot start must not undo that
                log.exception('flow.published listeners of flow "%s" version %d failed to start', published.flow_id,
                              published.version)
        return published

    def create_run(self, flow_id: str, inputs: dict[str, Any] | None = None, *, version: int | None = None,
                   trigger: str | None = None, idempotency_key: str | None = None, mode: RunMode = "sync",
                   parent_run_id: str | None = None, call_depth: int = 0, rerun: RerunStart | None = None,
                   started_by: str | None = None, limits: InputLimits | None = None) -> CreatedRun:
        """See `engine.runtime.create.create_run` (with this engine's budget preflight and latest versions)."""
        return create_module.create_run(self.require_handles(), flow_id, inputs, version=version, trigger=trigger,
                                        idempotency_key=idempotency_key, budget_preflight=self.budget_preflight,
                                        latest=self.latest_versions, mode=mode, limits=limits,
                                        parent_run_id=parent_run_id, call_depth=call_depth, rerun=rerun,
                                        started_by=started_by)

    def plan_rerun(self, run_id: str, from_node: str,
                   version: rerun_module.RerunVersion = "original") -> rerun_module.RerunPlan:
        """See `engine.runtime.rerun.plan_rerun`."""
        return rerun_module.plan_rerun(self.require_handles().sql, run_id, from_node, version)

    def rerun_run(self, run_id: str, from_node: str, version: rerun_module.RerunVersion = "original", *,
                  repeat_effects: bool = True) -> tuple[CreatedRun, rerun_module.RerunPlan]:
        """See `engine.runtime.rerun.rerun_run` (with this engine's budget preflight)."""
        return rerun_module.rerun_run(self.require_handles(), run_id, from_node, version,
                                      repeat_effects=repeat_effects, budget_preflight=self.budget_preflight)

    def cancel_run(self, run_id: str, reason: str = "cancelled by request") -> str:
        return cancel_module.cancel_run(self.require_handles(), run_id, reason)

    def get_run(self, run_id: str, with_steps: bool = True) -> dict[str, Any] | None:
        """The run's stored row as `engine.runtime.queries` reads it, for in-process scripts and tests; the app,
        the CLI and the HTTP API read runs through `engine.facade.EngineApi` (typed `Run` read models)."""
        return queries.get_run(self.require_handles().sql, run_id, with_steps=with_steps)

    def list_runs(self, **filters: Any) -> list[dict[str, Any]]:
        """See `get_run`: stored rows; `EngineApi.list_runs` answers the typed `RunList`."""
        return queries.list_runs(self.require_handles().sql, **filters)

    def wait_for_run(self, run_id: str, timeout: float = 30.0, statuses: frozenset[str] = TERMINAL,
                     on_change: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Poll the store until the run reaches one of `statuses`; returns the run (TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        last: tuple[Any, ...] | None = None
        while True:
            run = self.get_run(run_id, with_steps=on_change is not None)
            if run is None:
                raise LookupError(f'run "{run_id}" does not exist')
            if on_change is not None:
                signature = (run["status"], tuple((s["step"], s["status"]) for s in run["steps"]))
                if signature != last:
                    last = signature
                    on_change(run)
            if run["status"] in statuses:
                return self.get_run(run_id) or run
            if time.monotonic() > deadline:
                raise TimeoutError(f'run "{run_id}" is still {run["status"]} after {timeout:g}s')
            time.sleep(0.01)
