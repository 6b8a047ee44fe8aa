"""A worker: reads jobs from the consumer group, runs them with `RunExecutor`, reports through events.

A job is acknowledged only once the run ended or parked (its events written in the same round
trip); a worker that dies mid-run leaves the job pending in the group for the reaper/watchdog
(`reaper.py`, `watchdog.py`) or for its own successor (`consumers.py`), which redeliver it as the next
attempt. Every write for a job is fenced by its attempt (`fencing.py`), and every flush stores the run's
progress under the job's own key, so the next attempt continues from the last completed step.

Everything a job keeps in Redis while it runs (progress, heartbeat, running entry) is keyed by the job's
origin message id: a duplicate job of the same run (a start-up rebuild's, a late due waker's) that is
dropped acknowledges only itself and can never delete or overwrite the live job's state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import redis
import sqlalchemy as sa

from engine.clock import Clock
from engine.events import EventStamper
from engine.logs import run_context
from engine.outages import outage_subject
from engine.parking.callback_links import CallbackLinks
from engine.parking.limits import park_token
from engine.parking.resume import Admission, admit_resume, expire_parked, expire_queued, seal_park
from engine.publish import get_version
from engine.runtime import crashpoints
from engine.runtime.bodies import StepServices
from engine.runtime.cancel import FlagState, flag_reason, flag_state
from engine.runtime.claim import UNMARKED, Claimed, claimed, queue_claim
from engine.runtime.context import RunContext
from engine.runtime.emitter import RedisEmitter
from engine.runtime.executor import RunExecutor, RunOutcome
from engine.runtime.fencing import CommandRecorder, FencedEmitter, FencedWriter, JobFence, JobFenced
from engine.runtime.idempotency import step_is_idempotent
from engine.runtime.inputs import secret_names
from engine.runtime.jobs import ATTEMPT_FIELD, BadJob, Delivery, Job, decode_job, delivery_of, encode_job, resume_job
from engine.runtime.plan import FlowPlan
from engine.runtime.reclaim import running_entry
from engine.runtime.sealed import dump_snapshot, load_snapshot, open_secrets
from engine.secret_box import SecretBox, SecretBoxError
from engine.store.db import unavailable
from engine.transport.held import HeldConnection
from engine.transport.keys import Keyspace
from engine.transport.streams import ensure_group

log = logging.getLogger("lockgate.worker")

CLAIM_COUNT = 16
"""Most jobs one read (or claim) takes."""

CANCEL_CHECK_INTERVAL = 0.02
"""Seconds between cancel-flag checks within one run (always checked when a job starts)."""


class PlanCache:
    """Compiled plans by (flow id, version); versions are immutable so entries never go stale."""

    def __init__(self, sql: sa.Engine) -> None:
        self.sql = sql
        self._plans: dict[tuple[str, int], FlowPlan] = {}
        self._lock = threading.Lock()

    def get(self, flow_id: str, version: int) -> FlowPlan:
        key = (flow_id, version)
        with self._lock:
            plan = self._plans.get(key)
        if plan is None:
            _published, flow = get_version(self.sql, flow_id, version)
            plan = FlowPlan(flow)
            with self._lock:
                self._plans[key] = plan
        return plan


@dataclass
class _Finished:
    """A job run to its end or park, whose events and ack are still to be written."""

    run_id: str
    status: str
    origin: str
    emitter: RedisEmitter | None = None
    finish: Callable[[Any], None] | None = None
    fence: JobFence | None = None
    wake_key: str | None = None
    """A Redis key that, found set once the park is written, resumes the parked run at once (a callback
    POSTed while the run was sealing its park on the node)."""
    park: str | None = None
    """The park token of the written park (set by `finish`)."""


class Worker:
    """One consumer of the jobs stream; `run()` loops until `stop` is set."""

    def __init__(self, client: redis.Redis, keys: Keyspace, plans: PlanCache, clock: Clock, name: str, *,
                 on_lost_batch: Callable[[str], object] = lambda name: None,
                 sleep: Callable[[float], None] = time.sleep, block_ms: int = 500,
                 box: SecretBox | None = None, links: CallbackLinks | None = None) -> None:
        self.client = client
        self.keys = keys
        self.plans = plans
        self.clock = clock
        self.name = name
        self.on_lost_batch = on_lost_batch
        """Called with this consumer's name after Redis failed mid-batch: redeliver what it still has pending."""
        self._lost_batch = False
        self.sleep = sleep
        self.block_ms = block_ms
        self.active: set[str] = set()
        """Origins of the jobs this worker is executing now (the heartbeat thread reports them)."""
        self.holding: tuple[bytes, ...] = ()
        """Job messages of the batch in hand (the heartbeat thread keeps them from looking abandoned)."""
        self.writer = FencedWriter(client, keys)
        self.held = HeldConnection(client)
        """This worker thread's own connection for its reads and batch writes."""
        self.box = box
        """Opens runs' secret inputs and seals the run data of their progress and checkpoints."""
        self.links = links if links is not None else (CallbackLinks(box) if box is not None else None)
        """Makes the `callback_url()` of the runs this worker executes."""

    def run(self, stop: threading.Event) -> None:
        ensure_group(self.client, self.keys.jobs, self.keys.jobs_group)
        claim = Claimed([], [])
        """Jobs claimed with the last batch's writes; run before reading again (also while stopping: they are
        this worker's already)."""
        while not stop.is_set() or claim.entries:
            if self._lost_batch and not self._redeliver_lost_batch(stop):
                continue
            entries: list[tuple[bytes, dict[bytes, bytes]]] = claim.entries
            flags: list[int] | None = claim.flags
            if not entries:
                read = self.held.pipeline()
                read.xreadgroup(self.keys.jobs_group, self.name, {self.keys.jobs: ">"}, count=CLAIM_COUNT,
                                block=self.block_ms)
                try:
                    reply: Any = self.held.execute(read)[0]
                except redis.ConnectionError:
                    if stop.is_set():
                        return
                    log.warning("worker %s: Redis connection lost; retrying in 1s", self.name)
                    stop.wait(1.0)
                    continue
                entries = [entry for _stream, items in reply or [] for entry in items]
                flags = None
                if not entries:
                    continue
            try:
                _outcomes, claim = self._handle(entries, 1, flags, claim_next=not stop.is_set())
            except Exception as exc:
                if not (isinstance(exc, redis.RedisError) or unavailable(exc)):
                    raise
                claim = Claimed([], [])
                if stop.is_set():  # the engine stopped and closed Redis under a long batch
                    log.warning("worker %s: stopped mid-batch (%s); its jobs stay pending for the next start",
                                self.name, exc)
                    return
                log.warning("worker %s: %s failed mid-batch (%s: %s); its jobs are redelivered once it answers",
                            self.name, outage_subject(exc),
                            type(exc).__name__, exc)
                self.holding = ()
                self.active.clear()
                self._lost_batch = True
                stop.wait(1.0)

    def _redeliver_lost_batch(self, stop: threading.Event) -> bool:
        """Hand the jobs of a batch cut short by Redis or the database back as their next attempts; False while either
        is away."""
        try:
            self.on_lost_batch(self.name)
        except Exception as exc:
            if not (isinstance(exc, redis.RedisError) or unavailable(exc)):
                raise
            log.warning("worker %s: still unavailable (%s: %s); retrying in 1s", self.name, type(exc).__name__, exc)
            stop.wait(1.0)
            return False
        self._lost_batch = False
        return True

    def handle(self, message_id: bytes, fields: dict[bytes, bytes], attempt: int = 1) -> str:
        """Run one job; returns how it ended (a run outcome, `dropped` or `bad_job`)."""
        return self.handle_batch([(message_id, fields)], attempt)[0]

    def handle_batch(self, entries: list[tuple[bytes, dict[bytes, bytes]]], attempt: int = 1) -> list[str]:
        """Run the jobs of one read, then write all their events and acks in one round trip.

        Each job is marked started (heartbeat, running entry) and the cancel flags of the whole read are
        checked in one round trip first. Returns, per entry, how it ended (a run outcome, `dropped` or `bad_job`).
        """
        return self._handle(entries, attempt, None, claim_next=False)[0]

    def _handle(self, entries: list[tuple[bytes, dict[bytes, bytes]]], attempt: int, flags: list[int] | None, *,
                claim_next: bool) -> tuple[list[str], Claimed]:
        """`handle_batch`, for entries either read (`flags` None: marked here) or claimed by `CLAIM` (marked
        already; `flags` holds their cancel flags). With `claim_next`, the claim of the next batch rides in the
        round trip of this batch's writes and is returned."""
        jobs: list[tuple[bytes, Job | None]] = []
        deliveries: dict[bytes, Delivery] = {}
        cancelled: dict[bytes, FlagState] = {}
        """Per job, what its run's cancel flag says."""
        self.holding = tuple(message_id for message_id, _fields in entries)
        for index, (message_id, fields) in enumerate(entries):
            delivery = delivery_of(message_id, fields)
            deliveries[message_id] = delivery if ATTEMPT_FIELD in fields else Delivery(delivery.origin, attempt)
            marked = flags is not None and flags[index] != UNMARKED
            if marked:
                assert flags is not None
                cancelled[message_id] = FlagState(flags[index])
            try:
                jobs.append((message_id, decode_job(fields)))
            except BadJob as exc:
                log.error("worker %s: %s; moved to %s", self.name, exc, self.keys.jobs_dead)
                dead: dict[Any, Any] = {**fields, b"error": str(exc).encode()}
                pipe = self.client.pipeline(transaction=False)
                pipe.xadd(self.keys.jobs_dead, dead)
                if marked:  # the claim marked it started: take its marks back with it
                    self._forget(pipe, delivery.origin, message_id)
                else:
                    self._ack(pipe, message_id)
                pipe.execute()
                jobs.append((message_id, None))
        check = self.held.pipeline()
        now = self.clock.now()
        unchecked = [(message_id, job.run_id) for message_id, job in jobs
                     if job is not None and message_id not in cancelled]
        for message_id, run_id in unchecked:
            delivery = deliveries[message_id]
            check.hset(self.keys.heartbeats, delivery.origin, now)
            check.hset(self.keys.running_jobs, delivery.origin,
                       running_entry(message_id, run_id, delivery.attempt, self.name))
            check.get(self.keys.run_cancel(run_id))
        if unchecked:
            for (message_id, _run_id), flag in zip(unchecked, self.held.execute(check)[2::3], strict=True):
                cancelled[message_id] = flag_state(flag)
        outcomes: list[str] = []
        finals: list[_Finished] = []
        writes: list[tuple[int, int, _Finished]] = []
        """(index in outcomes, index of the fenced write's reply, the job) per job written."""
        out = self.held.pipeline()
        for message_id, job in jobs:
            if job is None:
                outcomes.append("bad_job")
                continue
            delivery = deliveries[message_id]
            if cancelled[message_id] == FlagState.ENDED:  # its cancel ended the run: nothing is left to do
                self._forget(out, delivery.origin, message_id)
                outcomes.append("dropped")
                continue
            self.active.add(delivery.origin)
            fence = JobFence(delivery.origin, delivery.attempt)
            try:
                with run_context(job.run_id):
                    log.debug("worker %s: run %s, attempt %d", self.name, job.run_id, delivery.attempt)
                    if cancelled[message_id] == FlagState.TO_END:
                        finished = self._cancelled_at_claim(job, message_id, delivery)
                    else:
                        finished = self._execute(job, message_id, delivery, self.keys.run_cancel(job.run_id))
            except JobFenced as exc:
                log.warning("worker %s: %s", self.name, exc)
                finished = _Finished(job.run_id, "fenced", delivery.origin)
            except redis.RedisError:
                raise
            except Exception as exc:  # e.g. the flow version is not published: fail the run, keep the worker
                if unavailable(exc):  # the database did not answer: the batch is handed back, as for Redis
                    raise
                finished = self._unrunnable(job, message_id, delivery, exc)
            finished.fence = fence
            outcomes.append(finished.status)
            finals.append(finished)
            if finished.emitter is None and finished.finish is None:
                continue
            recorder = CommandRecorder()
            if finished.emitter is not None:
                finished.emitter.drain_into(recorder)
            if finished.finish is not None:
                finished.finish(recorder)
            writes.append((len(outcomes) - 1, len(out.command_stack), finished))
            self.writer.write(fence, recorder, pipe=out)
        if claim_next:
            queue_claim(out, self.keys, self.name, CLAIM_COUNT, self.clock.now())
        crashpoints.reached("worker.before_ack")
        replies = self.held.execute(out)
        crashpoints.reached("worker.after_ack")
        claim = claimed(replies[-1]) if claim_next else Claimed([], [])
        self.holding = ()
        for outcome_index, reply_index, finished in writes:
            if not replies[reply_index]:
                assert finished.fence is not None
                log.warning("worker %s: run %s: attempt %d of its job was reclaimed; this worker's result was "
                            "refused (fenced)", self.name, finished.run_id, finished.fence.attempt)
                outcomes[outcome_index] = "fenced"
        for finished in finals:
            self.active.discard(finished.origin)
        self._wake_claimed_parks(finished for index, _reply, finished in writes if outcomes[index] == "parked")
        return outcomes, claim

    def _wake_claimed_parks(self, parked: Iterable[_Finished]) -> None:
        """Resume parks whose wake key was set before their park was written (its setter saw no park yet)."""
        due = [(f, f.wake_key) for f in parked if f.wake_key is not None and f.park is not None]
        if not due:
            return
        check = self.client.pipeline(transaction=False)
        for _finished, wake_key in due:
            check.exists(wake_key)
        wake = self.client.pipeline(transaction=False)
        for (finished, _key), found in zip(due, check.execute(), strict=True):
            if found:
                assert finished.park is not None
                wake.zrem(self.keys.due, finished.run_id)
                wake.xadd(self.keys.jobs, encode_job(resume_job(finished.run_id, finished.park)))
        if wake.command_stack:
            wake.execute()

    def _cancelled_at_claim(self, job: Job, message_id: bytes, delivery: Delivery) -> _Finished:
        """End a run whose cancel left it to the worker that runs its job next (its holder then, since lost)."""
        cancel_key = self.keys.run_cancel(job.run_id)
        reason = flag_reason(self.client.get(cancel_key))  # type: ignore[arg-type]
        log.info("worker %s: run %s was cancelled while its job was held; it ends here (%s)", self.name,
                 job.run_id, reason)
        emitter = RedisEmitter(self.client, self.keys.events)
        emitter.emit(EventStamper(job.run_id, self.clock, attempt=delivery.attempt).run_cancelled(reason))

        def finish(pipe: Any) -> None:
            pipe.delete(self.keys.run_checkpoint(job.run_id), self.keys.run_secrets(job.run_id), cancel_key)
            self._release(pipe, job.run_id, delivery.origin, message_id)

        return _Finished(job.run_id, "cancelled", delivery.origin, emitter, finish)

    def _unrunnable(self, job: Job, message_id: bytes, delivery: Delivery, exc: Exception) -> _Finished:
        stamper = EventStamper(job.run_id, self.clock, attempt=delivery.attempt)
        emitter = RedisEmitter(self.client, self.keys.events)
        if isinstance(exc, SecretBoxError):
            log.error("worker %s: run %s cannot be executed: %s (%s)", self.name, job.run_id, exc, exc.kind)
            emitter.emit(stamper.run_failed(f"the worker cannot open this run's secret inputs: {exc}",
                                            "secret_unreadable"))
        else:
            log.exception("worker %s: run %s cannot be executed", self.name, job.run_id)
            emitter.emit(stamper.run_failed(f"engine error: the worker could not start this run: "
                                            f"{type(exc).__name__}: {exc}", "engine_error"))

        def finish(pipe: Any) -> None:
            pipe.delete(self.keys.run_checkpoint(job.run_id), self.keys.run_secrets(job.run_id))
            self._release(pipe, job.run_id, delivery.origin, message_id)

        return _Finished(job.run_id, "failed", delivery.origin, emitter, finish)

    def _ack(self, pipe: Any, message_id: bytes) -> None:
        pipe.xack(self.keys.jobs, self.keys.jobs_group, message_id)
        pipe.xdel(self.keys.jobs, message_id)

    def _forget(self, pipe: Any, origin: str, message_id: bytes) -> None:
        """Ack this job's message and forget its own liveness entries (keyed by its origin, never another job's):
        its running entry first, so a heartbeat written meanwhile (only for a running entry) is deleted after it."""
        pipe.hdel(self.keys.running_jobs, origin)
        pipe.hdel(self.keys.heartbeats, origin)
        self._ack(pipe, message_id)

    def _release(self, pipe: Any, run_id: str, origin: str, message_id: bytes) -> None:
        """The job ended or parked: ack it and forget its liveness and its own progress."""
        pipe.delete(self.keys.run_progress(run_id, origin))
        self._forget(pipe, origin, message_id)

    def _dropped(self, run_id: str, origin: str, message_id: bytes) -> _Finished:
        """A duplicate or stale job: it acknowledges itself and nothing else; the run's checkpoint, claims and
        other jobs' progress stay as they are."""
        crashpoints.reached("worker.in_drop")
        return _Finished(run_id, "dropped", origin, finish=lambda pipe: self._forget(pipe, origin, message_id))

    def _execute(self, job: Job, message_id: bytes, delivery: Delivery, cancel_key: str) -> _Finished:
        checkpoint: dict[str, Any] | None = None
        progress: dict[str, Any] | None = None
        admission = Admission("resume")
        if delivery.attempt > 1:
            # A redelivered job: continue from what the lost attempt flushed, if it flushed anything.
            raw_progress = self.client.get(self.keys.run_progress(job.run_id, delivery.origin))
            progress = load_snapshot(self.box, job.run_id, raw_progress) if raw_progress else None
        if progress is not None:
            raw_park = self.client.get(self.keys.run_checkpoint(job.run_id))
            checkpoint = load_snapshot(self.box, job.run_id, raw_park) if raw_park else None
            job = Job(**progress["job"])
        elif job.action == "resume":
            raw = self.client.get(self.keys.run_checkpoint(job.run_id))
            if raw is None:
                log.error("worker %s: run %s has no checkpoint to resume from; job dropped", self.name, job.run_id)
                return self._dropped(job.run_id, delivery.origin, message_id)
            checkpoint = load_snapshot(self.box, job.run_id, raw)
            admission = admit_resume(self.client, self.keys, job, delivery.origin.encode(), checkpoint,
                                     self.clock.now())
            if admission.action == "drop":
                log.info("worker %s: run %s: resume dropped: %s", self.name, job.run_id, admission.reason)
                return self._dropped(job.run_id, delivery.origin, message_id)
            job = Job(**checkpoint["job"])
        plan = self.plans.get(job.flow_id, job.version)
        inputs = dict(job.inputs)
        if job.has_secrets:
            secret_raw = self.client.get(self.keys.run_secrets(job.run_id))
            if secret_raw:
                inputs.update(open_secrets(self.box, job.run_id, secret_raw))
        ctx = RunContext(job.run_id, job.flow_id, job.version, job.trigger, inputs, secret_names(plan.flow),
                         tuple(plan.flow.inputs),
                         callback_url=self.links.for_run(job.run_id) if self.links is not None else None)
        restored_from = progress or checkpoint
        stamper = EventStamper(job.run_id, self.clock, attempt=delivery.attempt,
                               last_seq=restored_from["seq"] if restored_from else 0)
        emitter = FencedEmitter(self.client, self.keys, self.writer, JobFence(delivery.origin, delivery.attempt),
                                job.run_id)
        last_check = [time.monotonic()]

        def cancel_requested() -> bool:
            now = time.monotonic()
            if now - last_check[0] < CANCEL_CHECK_INTERVAL:
                return False
            last_check[0] = now
            return bool(self.client.exists(cancel_key))

        executor = RunExecutor(plan, ctx, stamper, emitter, self.clock, cancel_requested=cancel_requested,
                               sleep=self.sleep, worker=self.name, services=StepServices(self.client, self.keys))
        sealing = self.box if job.has_secrets else None
        emitter.progress = lambda: dump_snapshot(sealing, job.run_id, {**executor.progress(), "job": asdict(job)},
                                                 ctx.plain)
        # A flush precedes every slow step (blocking body, retry wait), so the next boundary always checks the
        # cancel flag: a cancel sent while the step ran is never skipped by the check interval.
        emitter.after_flush = lambda: last_check.__setitem__(0, float("-inf"))
        if progress is not None:
            log.warning("worker %s: run %s: attempt %d continues after step %s", self.name, job.run_id,
                        delivery.attempt, progress.get("in_flight"))
            outcome = executor.recover(progress, lambda node: step_is_idempotent(plan, node))
        elif checkpoint is not None:
            executor.restore(checkpoint)
            if admission.action == "expire":
                expire_parked(stamper, emitter, checkpoint, plan.flow.settings, self.name)
                outcome = RunOutcome("failed")
            else:
                outcome = executor.resume(checkpoint["parked_node"])
        elif expire_queued(stamper, emitter, job.accepted_at, self.clock.now(), plan.flow.settings, job.trigger):
            outcome = RunOutcome("failed")
        elif job.rerun is not None:
            outcome = executor.rerun(job.inputs, job.rerun)
        else:
            outcome = executor.start(job.inputs)

        parked = seal_park(self.client, self.keys, checkpoint, outcome.park, self.clock.now(), plan.flow.settings,
                           job.accepted_at, node=outcome.parked_node) if outcome.park is not None else None

        wake_key = outcome.park.detail.get("callback_claim") if outcome.park is not None else None
        finished = _Finished(job.run_id, outcome.status, delivery.origin, emitter,
                             wake_key=str(wake_key) if wake_key else None)

        def finish(pipe: Any) -> None:
            if outcome.status == "parked":
                assert outcome.parked_node is not None
                sealed = executor.checkpoint(outcome.parked_node)
                sealed["job"] = asdict(job)
                sealed.update(parked or {})
                finished.park = park_token(sealed)
                pipe.set(self.keys.run_checkpoint(job.run_id), dump_snapshot(sealing, job.run_id, sealed, ctx.plain))
                if parked is not None:  # in the same fenced write: a parked run never lacks its wake-up
                    pipe.zadd(self.keys.due, job.run_id, parked["wake_at"])
                    pipe.publish(self.keys.due_nudge, repr(float(parked["wake_at"])))
                    if parked.get("wake_on_key"):  # woken already (a child run ended, an approval decided): resume now
                        pipe.xadd_if_exists(parked["wake_on_key"], self.keys.jobs,
                                            encode_job(resume_job(job.run_id, park_token(sealed))))
            else:
                pipe.delete(self.keys.run_checkpoint(job.run_id), self.keys.run_secrets(job.run_id), cancel_key)
            self._release(pipe, job.run_id, delivery.origin, message_id)

        finished.finish = finish
        return finished
