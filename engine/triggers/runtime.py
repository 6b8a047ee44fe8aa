"""The trigger threads of one engine process: the scheduler, the event-trigger starter and the
`execution.finished` callback sender."""

from __future__ import annotations

from engine.api.callbacks import CallbackSender
from engine.parts import PartContext
from engine.runtime.change_outbox import CLAIM_SECONDS
from engine.triggers.events import EventTriggers
from engine.triggers.schedules import TICK_SECONDS, Scheduler


class TriggerRuntime:
    def __init__(self, scheduler: Scheduler, events: EventTriggers, callbacks: CallbackSender) -> None:
        self.scheduler = scheduler
        self.events = events
        self.callbacks = callbacks

    @classmethod
    def start(cls, parts: PartContext, *, tick_seconds: float = TICK_SECONDS, scheduler_thread: bool = True,
              claim_seconds: float = CLAIM_SECONDS) -> TriggerRuntime:
        """`claim_seconds`: how long an event trigger's change or a callback stays with a process that took it."""
        handles = parts.handles
        runtime = cls(Scheduler(handles, parts.create_run, handles.clock),
                      EventTriggers(handles, parts.create_run, claim_seconds),
                      CallbackSender(handles, claim_seconds=claim_seconds))
        if parts.add_batch_listener is not None:
            # Only a process running a projector writes the changes (with each batch it applies) and reads them.
            assert parts.add_ack_filler is not None
            parts.add_ack_filler(runtime.events.fill_ack)
            parts.add_batch_listener(runtime.callbacks.on_batch)
            parts.spawn("lockgate-event-triggers", runtime.events.changes.run)
            parts.spawn("lockgate-callbacks", runtime.callbacks.run)
        if scheduler_thread:
            parts.spawn("lockgate-scheduler", lambda stop: runtime.scheduler.run(stop, tick_seconds))
        return runtime
