"""The `flow.call` side of a running engine: the run services bodies use, and the child-run waker."""

from __future__ import annotations

from engine.calls.waker import ChildRunWaker
from engine.calls.wiring import CallServices, install, uninstall
from engine.parts import PartContext


class CallRuntime:
    def __init__(self, services: CallServices, waker: ChildRunWaker) -> None:
        self.services = services
        self.waker = waker

    @classmethod
    def start(cls, parts: PartContext, max_depth: int) -> CallRuntime:
        services = CallServices(parts.handles, parts.preflight, parts.latest_versions, max_depth)
        install(services)
        waker = ChildRunWaker(parts.handles)
        if parts.add_batch_listener is not None:
            parts.add_batch_listener(waker.on_batch)
            waker.sweep()
        return cls(services, waker)

    def stop(self) -> None:
        uninstall(self.services)
