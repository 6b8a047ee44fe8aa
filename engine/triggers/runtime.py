"""The trigger threads of one engine process: the scheduler, the event-trigger starter and the
`execution.finished` callback sender."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from engine.api.callbacks import CallbackSender
from engine.triggers.events import EventTriggers
from engine.triggers.schedules import TICK_SECONDS, Scheduler

if TYPE_CHECKING:
    from engine.runtime.services import EngineServices


class TriggerRuntime:
    def __init__(self, scheduler: Scheduler, events: EventTriggers, callbacks: CallbackSender) -> None:
        self.scheduler = scheduler
        self.events = events
        self.callbacks = callbacks

    @classmethod
    def start(cls, engine: EngineServices, stop: threading.Event, *, tick_seconds: float = TICK_SECONDS,
              scheduler_thread: bool = True) -> TriggerRuntime:
        handles = engine._api()
        runtime = cls(Scheduler(handles, engine.create_run, engine.clock), EventTriggers(handles, engine.create_run),
                      CallbackSender(handles))
        if engine.run_projector:
            # Only the process applying events sees them; a standby projector's process fires nothing.
            engine.batch_listeners.append(runtime.events.on_batch)
            engine.batch_listeners.append(runtime.callbacks.on_batch)
            threading.Thread(target=runtime.events.run, args=(stop,), name="lockgate-event-triggers",
                             daemon=True).start()
            threading.Thread(target=runtime.callbacks.run, args=(stop,), name="lockgate-callbacks",
                             daemon=True).start()
        if scheduler_thread:
            threading.Thread(target=runtime.scheduler.run, args=(stop, tick_seconds), name="lockgate-scheduler",
                             daemon=True).start()
        return runtime
