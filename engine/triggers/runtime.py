"""The trigger threads of one engine process: the scheduler, the event-trigger starter and the
`execution.finished` callback sender."""

from __future__ import annotations

from engine.api.callbacks import CallbackSender
from engine.parts import PartContext
from engine.triggers.events import EventTriggers
from engine.triggers.schedules import TICK_SECONDS, Scheduler


class TriggerRuntime:
    def __init__(self, scheduler: Scheduler, events: EventTriggers, callbacks: CallbackSender) -> None:
        self.scheduler = scheduler
        self.events = events
        self.callbacks = callbacks

    @classmethod
    def start(cls, parts: PartContext, *, tick_seconds: float = TICK_SECONDS,
              scheduler_thread: bool = True) -> TriggerRuntime:
        handles = parts.handles
        runtime = cls(Scheduler(handles, parts.create_run, handles.clock), EventTriggers(handles, parts.create_run),
                      CallbackSender(handles))
        if parts.add_batch_listener is not None:
            # Only the process applying events sees them; a standby projector's process fires nothing.
            parts.add_batch_listener(runtime.events.on_batch)
            parts.add_batch_listener(runtime.callbacks.on_batch)
            parts.spawn("lockgate-event-triggers", runtime.events.changes.run)
            parts.spawn("lockgate-callbacks", runtime.callbacks.run)
        if scheduler_thread:
            parts.spawn("lockgate-scheduler", lambda stop: runtime.scheduler.run(stop, tick_seconds))
        return runtime
