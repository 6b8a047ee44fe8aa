"""Every Redis key, stream, consumer group and channel name the engine uses, in one place.

Each name is built from a prefix (`EngineConfig.key_prefix`, default ``lg``) so several engines
(or tests) can share one server. Each entry says its Redis type and which service writes it.
To add a key: add a property or method here, with its type and owner; never format key names
elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "lg"


def prefix_problem(prefix: str) -> str | None:
    """Why `prefix` cannot name a keyspace (said after what names it), or None when it can."""
    if not prefix or any(ch in prefix for ch in " :*?[]{}"):
        return (f"{prefix!r} is not usable: it must be non-empty and contain no spaces, ':' or glob characters; "
                "pick a plain word such as 'lg'")
    return None


@dataclass(frozen=True)
class Keyspace:
    """The names of everything the engine keeps in Redis, under one prefix."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        problem = prefix_problem(self.prefix)
        if problem is not None:
            raise ValueError(f"key prefix {problem}")

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    # --- runs: jobs, events, live updates -------------------------------------------------

    @property
    def jobs(self) -> str:
        """Stream of job messages (start/resume a run). Written by `create_run()` and the due waker;
        read by workers through group `jobs_group`."""
        return self._key("jobs")

    @property
    def jobs_group(self) -> str:
        """Consumer group of workers on `jobs`."""
        return "workers"

    @property
    def jobs_dead(self) -> str:
        """Stream of job messages the reaper gave up on (retry cap reached). Written by the reaper."""
        return self._key("jobs", "dead")

    @property
    def events(self) -> str:
        """Stream of typed run events. Written by workers (and decision/approval services);
        read by the projector through group `events_group`."""
        return self._key("events")

    @property
    def events_group(self) -> str:
        """Consumer group of the projector on `events`."""
        return "projector"

    @property
    def live(self) -> str:
        """Pub/sub channel: each change the projector applied, for the canvas live mode and panels.
        Published by the projector."""
        return self._key("live")

    @property
    def live_batches(self) -> str:
        """Pub/sub channel: per projector batch, one message listing each changed run's latest change as
        `[run_id, seq, status]` (orjson; `engine.runtime.projector.batch_summary`). For listeners that only need to
        know which runs changed and how they stand (a sync start's wait): one message a batch and one entry a run,
        instead of one message a change. Published by the projector, after that batch's `live`."""
        return self._key("live", "batches")

    @property
    def logs(self) -> str:
        """Pub/sub channel: WARNING and worse log records of engine processes, JSON (`engine.log_channel`).
        Published by every `lockgate worker`; read by the app for its Log dock."""
        return self._key("logs")

    @property
    def projector_lease(self) -> str:
        """String with TTL: holder id of the one active projector. Set (NX, PX) and renewed by the
        projector holding it."""
        return self._key("projector", "lease")

    @property
    def events_journal(self) -> str:
        """Stream (capped, optional): a copy of every event the projector applied, in order, for audits and for
        rebuilding the projection (`LOCKGATE_EVENT_JOURNAL` entries kept; off by default). Written by the
        projector with each batch's acknowledgement."""
        return self._key("events", "journal")

    @property
    def heartbeats(self) -> str:
        """Hash job origin -> last heartbeat (epoch seconds) of the worker executing that job. Written by workers;
        read by the watchdog. Keyed by job, not run, so a duplicate job of a run never touches the live one's."""
        return self._key("heartbeats")

    def consumer_slot(self, host: str, index: int) -> str:
        """String with TTL: "pid:nonce" of the process using worker consumer name `host:w<index>`. Set (CAS) by
        `engine.runtime.consumers` at start and refreshed with each heartbeat; a process restarting on the same
        host takes a dead predecessor's name and reclaims its pending jobs at once."""
        return self._key("workers", "slot", host, str(index))

    def process_entry(self, host: str, pid: int) -> str:
        """String with TTL: JSON {host, pid, role, workers, started_at, seen_at} of one engine process, refreshed
        with each heartbeat (`engine.runtime.process_registry`); `lockgate admin status` lists them."""
        return self._key("processes", host, str(pid))

    @property
    def process_entries(self) -> str:
        """SCAN pattern matching every `process_entry` key."""
        return self._key("processes", "*")

    @property
    def consumer_slots(self) -> str:
        """SCAN pattern matching every `consumer_slot` key."""
        return self._key("workers", "slot", "*")

    def run_cancel(self, run_id: str) -> str:
        """String flag with TTL: cancel requested for a running run. Set by the cancel API; read by
        workers at each step boundary."""
        return self._key("run", run_id, "cancel")

    def run_checkpoint(self, run_id: str) -> str:
        """String (JSON): a parked run's context (state, scheduling, sequence) until it resumes; for a run with
        secrets its run data is sealed (`engine.runtime.sealed`). Written by the worker that parks it; read
        and deleted by the worker that resumes it."""
        return self._key("run", run_id, "checkpoint")

    def run_secrets(self, run_id: str) -> str:
        """String (sealed blob, `engine.secret_box`): a run's secret input values, kept only here (events and
        SQL hold `***`). Set by `create_run()`; read by workers; deleted when the run ends."""
        return self._key("run", run_id, "secrets")

    def run_progress(self, run_id: str, origin: str) -> str:
        """String (JSON): a running run's context as of its last flushed events (state, scheduling, the
        step in flight; run data sealed for a run with secrets), so a reclaimed job continues from the last
        completed step. One per job (its origin message id): only that job's attempts read, write or delete it.
        Written by workers with every flush (fenced); read by the worker of the next attempt; deleted when the
        job ends or parks."""
        return self._key("run", run_id, "progress", origin)

    def job_attempt(self, origin: str) -> str:
        """String with TTL: the current attempt of one job message (by its first message id). Set by the
        reaper/watchdog when they redeliver it; workers of an older attempt are refused (fencing).
        Missing means attempt 1."""
        return self._key("job", origin, "attempt")

    def job_losses(self, origin: str) -> str:
        """String with TTL: how many times one job lost its worker (counted against the retry cap; a batch cut
        short by a Redis outage is redelivered without counting). Set by the reaper/watchdog and start-up drain."""
        return self._key("job", origin, "losses")

    @property
    def running_jobs(self) -> str:
        """Hash job origin -> JSON {run, message, attempt, worker} of jobs being executed. Written by workers
        when a job starts, deleted when it ends; read by the watchdog to reclaim a silent worker's job."""
        return self._key("jobs", "running")

    def idempotency(self, key: str) -> str:
        """String with TTL: run id already created for this idempotency key (fast duplicate guard in
        front of the SQL unique constraint). Set (NX) by `create_run()`."""
        return self._key("idem", key)

    # --- parking ---------------------------------------------------------------------------

    @property
    def due(self) -> str:
        """Sorted set member -> due time (epoch seconds) of parked runs. Written by the projector /
        parking code (`DueSet.schedule`); claimed atomically by due wakers."""
        return self._key("due")

    @property
    def due_claims(self) -> str:
        """Sorted set member -> when its claim lapses: due members a waker took (`DueSet.claim_due`) and has
        not settled yet. A lapsed claim is handed out again."""
        return self._key("due", "claims")

    @property
    def due_nudge(self) -> str:
        """Pub/sub channel: 'an earlier due time was scheduled, recompute your sleep'. Published by
        `DueSet.schedule` (only when the new member became the earliest) and `DueSet.nudge`;
        subscribed by due wakers."""
        return self._key("due", "nudge")

    def run_resume_claim(self, run_id: str, park: str) -> str:
        """String with TTL: the job message id that won the resume of one park of a run (SET NX), so
        duplicate resume jobs never run a step twice. Set by workers (`engine.parking.resume`)."""
        return self._key("run", run_id, "resumed", park)

    def run_ended(self, run_id: str) -> str:
        """String with TTL: this child run has ended (its final status). Set by the child-run waker once the
        projector applied the end; a `flow.call` parent's park is woken by it (`Park.wake_on_key`)."""
        return self._key("run", run_id, "ended")

    def approval_decision(self, approval_id: str) -> str:
        """String (NX) holding the winning decision of an approval, so exactly one decision wins
        among concurrent attempts. Set by the approvals service."""
        return self._key("approval", approval_id, "decision")

    def approval_votes(self, approval_id: str) -> str:
        """Hash (TTL) of an approval's votes: actor -> its vote's JSON, and `#approved` counting approvals, so
        a quorum is counted once per distinct approver. Written only by `engine.approvals.claims`' script."""
        return self._key("approval", approval_id, "votes")

    def approval_timers(self, approval_id: str) -> str:
        """Hash (TTL) of an approval's timers: `timeout_at`, and the reminders and escalation announced so far
        (`reminders`, `escalated`). Written by the `approval` body."""
        return self._key("approval", approval_id, "timers")

    @property
    def approval_notify_secret(self) -> str:
        """String: the secret that signs approvals' `notify_url` notices (made on first use, kept)."""
        return self._key("approval", "notify_secret")

    @property
    def approval_notices(self) -> str:
        """Stream of the approval changes to notice (field `change`: the live change's JSON), written with the
        acknowledgement of the projector's batch that applied them; read through group `approval_notices_group`
        by `engine.approvals.notices`, each entry deleted once its notice was sent or refused to the end."""
        return self._key("approval", "notices")

    @property
    def approval_notices_group(self) -> str:
        """Consumer group of the notice senders on `approval_notices`."""
        return "notices"

    def approval_notice_written(self, run_id: str, notice: str) -> str:
        """String with TTL: the run's notice `notice` (what it announces, e.g. "ask:approval_requested") was written
        to `approval_notices` once; a batch applied again, or a step run again after a crash, writes it no second
        time. Set by `engine.approvals.notices`."""
        return self._key("approval", "noticed", run_id, notice)

    def callback_claim(self, run_id: str, node: str) -> str:
        """String (NX, TTL) holding what resumed a `wait.callback` node of a run: the first POST's JSON body,
        or its timeout, so exactly one wins. Set by `engine.parking.callback_resume` and the node's body."""
        return self._key("run", run_id, "wait_callback", node)

    # --- money and provider concurrency ----------------------------------------------------

    def budget(self, name: str) -> str:
        """Hash (limit, spent, held) mirror of a budget used for atomic reservation. Written by the
        money service (Lua)."""
        return self._key("budget", name)

    @property
    def concurrency_cap(self) -> str:
        """String with TTL: current global cap on concurrent model calls. Set by the concurrency
        control loop; when it expires workers fall back to the static setting."""
        return self._key("concurrency", "cap")

    @property
    def call_slots(self) -> str:
        """Sorted set slot holder -> lease expiry: model calls in flight under `concurrency_cap`.
        Written by workers (acquire/release)."""
        return self._key("concurrency", "slots")

    def provider_telemetry(self, provider: str) -> str:
        """Hash of the latest rate-limit telemetry of one provider (remaining requests/tokens, resets,
        429 count). Written by model calls; read by the concurrency control loop."""
        return self._key("provider", provider, "telemetry")

    @property
    def budget_names(self) -> str:
        """Set of every budget name in the ledger. Written by the money ledger (`set_budget`)."""
        return self._key("budgets")

    def hold(self, hold_id: str) -> str:
        """Hash of one budget hold (budget, amount, state placed/charged/released, expires_at, run,
        node). Written by the money ledger (Lua), each transition exactly once."""
        return self._key("hold", hold_id)

    @property
    def holds_expiring(self) -> str:
        """Sorted set hold_id -> expires_at of holds still `placed`. Written by the money ledger;
        read by its expired-hold sweep."""
        return self._key("holds", "expiring")

    def connection_slots(self, provider: str, connection: str) -> str:
        """Sorted set lease id -> lease expiry: calls in flight on one provider connection (its
        capacity bounds them). Written by workers through the provider pool (Lua)."""
        return self._key("provider", provider, "conn", connection, "slots")

    def provider_blocked_until(self, provider: str) -> str:
        """String with TTL: epoch seconds before which no call should go to this provider (its last
        429's retry-after, or its request window being used up). Set by the telemetry sink."""
        return self._key("provider", provider, "blocked")

    @property
    def concurrency_control(self) -> str:
        """Hash of the control loop's own state (last tick, last target, last cut). Written by the
        concurrency control loop and the telemetry sink's 429 cut."""
        return self._key("concurrency", "control")

    # --- triggers (engine/triggers) --------------------------------------------------------

    @property
    def trigger_settings(self) -> str:
        """Hash "flow_id/node_id" -> JSON {enabled, token, enabled_at} of webhook and schedule triggers.
        Written by `engine.triggers.settings` on enable/disable (CLI, API)."""
        return self._key("triggers", "settings")

    @property
    def schedule_last_fire(self) -> str:
        """Hash "flow_id/node_id" -> epoch seconds of the last fire time a scheduler started. Written by
        `engine.triggers.schedules` (a key of its own, so a tick never overwrites an enable/disable)."""
        return self._key("triggers", "schedule", "last_fire")

    @property
    def webhook_tokens(self) -> str:
        """Hash webhook token -> "flow_id/node_id". Written by `engine.triggers.settings` on first enable."""
        return self._key("triggers", "webhook", "tokens")

    @property
    def trigger_counters(self) -> str:
        """Hash counter name -> count: refused webhook requests (`webhook_unsigned`, `webhook_bad_signature`,
        `webhook_unknown_token`) and triggers that fired on a disabled flow or loop guard
        (`<flow_id>/<node_id>:disabled`, `...:loop_guard`). Incremented by `engine.triggers`."""
        return self._key("triggers", "counters")

    @property
    def event_trigger_changes(self) -> str:
        """Stream of the applied changes that may fire an event trigger (field `change`: the live change's JSON),
        written with the acknowledgement of the projector's batch that applied them; read through group
        `event_trigger_group` by `engine.triggers.events`, each entry deleted once its runs were started."""
        return self._key("triggers", "event", "changes")

    def event_trigger_written(self, run_id: str, occurrence: str) -> str:
        """String with TTL: the run's approval change `occurrence` (`engine.approvals.projection.occurrence`) was
        written to `event_trigger_changes` once; a request a crashed worker's next attempt makes again fires no
        trigger again. Set by `engine.triggers.events`."""
        return self._key("triggers", "event", "written", run_id, occurrence)

    @property
    def event_trigger_group(self) -> str:
        """Consumer group of the event trigger starters on `event_trigger_changes`."""
        return "event_triggers"

    def run_callback(self, run_id: str) -> str:
        """Hash {url, secret} with TTL: where to push the run's `execution.finished` webhook. Written by
        `POST /api/v1/runs` with `callback_url`; deleted by the process that delivered it, or gave up
        (`engine.api.callbacks`)."""
        return self._key("run", run_id, "callback")

    def run_callback_claim(self, run_id: str) -> str:
        """String with TTL (the claim's lease): the process delivering the run's callback holds it, so no other
        starts the same delivery; one that dies mid-delivery leaves it to expire. Written and deleted by
        `engine.api.callbacks`."""
        return self._key("run", run_id, "callback_claim")

    @property
    def run_callbacks(self) -> str:
        """Sorted set run id -> epoch seconds it was registered: the runs whose callback is not delivered yet, read
        by every callback sender's sweep (a run that ended while no sender heard it is pushed from there). Written
        by `POST /api/v1/runs` with `callback_url`; a member is removed with its callback (`engine.api.callbacks`)."""
        return self._key("run_callbacks")

    def run_event_chain(self, run_id: str) -> str:
        """String with TTL: how many event triggers in a row led to this run ("depth flow_id"). Written by
        `engine.triggers.events` when it starts a run; read when that run's own events fire triggers."""
        return self._key("run", run_id, "event_chain")

    def all_keys_pattern(self) -> str:
        """SCAN pattern matching every key of this keyspace (for cleanup in tests and tools)."""
        return f"{self.prefix}:*"
