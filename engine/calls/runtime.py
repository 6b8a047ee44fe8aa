"""The `flow.call` side of a running engine: the run services bodies use, and the child-run waker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.calls.waker import ChildRunWaker
from engine.calls.wiring import CallServices, install, max_call_depth_from_env, uninstall
from engine.flow import Flow

if TYPE_CHECKING:
    from engine.runtime.services import EngineServices


class CallRuntime:
    def __init__(self, services: CallServices, waker: ChildRunWaker) -> None:
        self.services = services
        self.waker = waker

    @classmethod
    def start(cls, engine: EngineServices, max_depth: int | None = None) -> CallRuntime:
        handles = engine._api()

        def preflight(flow: Flow, inputs: dict[str, Any]) -> None:  # the money runtime may replace it later
            engine.budget_preflight(flow, inputs)

        services = CallServices(handles, preflight, engine.latest_versions,
                                max_depth if max_depth is not None else max_call_depth_from_env())
        install(services)
        waker = ChildRunWaker(handles)
        if engine.run_projector:
            engine.batch_listeners.append(waker.on_batch)
            waker.sweep()
        return cls(services, waker)

    def stop(self) -> None:
        uninstall(self.services)
