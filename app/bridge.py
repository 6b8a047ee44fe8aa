"""The seam between the window and the embedded engine.

`EngineBridge` owns the engine thread: `EngineServices` (Redis, SQL store, the engine's parts)
starts there, and its typed facade (`engine.facade.EngineApi`) is called there, never on the GUI thread;
every request answers the facade's read models. By default the workers, projector and due
waker run in a child process (`EngineProcess`) so their hot loops never hold the GUI's GIL; the
projector's live channel comes back through a pub/sub thread. Results arrive as callbacks on the
GUI thread, live changes as the `live_changes` signal. It never invents data: when the engine
cannot start, it says why and the panels show that.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine_process import (
    DEFAULT_HTTP_URL,
    EngineProcess,
    SimulatorProcess,
    http_address,
    port_accepts,
    port_is_free,
)
from app.engine_thread import EngineThread
from app.live_subscriber import LiveSubscriber
from app.settings import BudgetSetting
from engine.config import EngineConfig
from engine.logs import RecordBuffer, log_folder
from engine.settings import LockgateSettings, load_settings

if TYPE_CHECKING:
    from engine.approvals.keys import KeyInfo
    from engine.clock import Clock
    from engine.facade import EngineApi
    from engine.flow import Flow
    from engine.flowtest.model import FlowTest
    from engine.host import EngineServices
    from engine.log_channel import LogReceiver
    from engine.money.ledger import BudgetState
    from engine.read_models import (
        Approval,
        CancelledRun,
        Decision,
        FlowVersion,
        Hold,
        PublishedFlow,
        Run,
        RunSummary,
        StartedRun,
    )
    from engine.runtime.live_change import LiveChange
    from engine.runtime.projection import BatchResult
    from engine.triggers.settings import TriggerSetting
    from engine.triggers.status import TriggerStatus

EngineState = Literal["stopped", "starting", "running", "stopping", "unavailable", "failed"]
HOST_MODULE = "engine.host"
FACADE_MODULE = "engine.facade"
RUNS_LISTED = 200
HOLDS_LISTED = 200
WATCHDOG_MS = 2000
HTTP_PROBE_MS = 100
T = TypeVar("T")
Answer: TypeAlias = Callable[[T | None, BaseException | None], None]
"""Called on the GUI thread with a request's result, or None and the error."""


class EngineBridge(QObject):
    """Starts and stops the engine off the GUI thread and relays what it reports."""

    state_changed = Signal(str)
    runs_changed = Signal()
    run_updated = Signal(object)
    """One run's latest `LiveChange` of a batch (run id, flow, version, status, node, waiting_on)."""
    approvals_changed = Signal()
    holds_changed = Signal()
    log_message = Signal(str)
    live_changes = Signal(list)
    """Projector changes (`LiveChange`s, oldest first), delivered on the GUI thread, one list per batch."""
    _batch_from_projector = Signal(list)
    _live_ready = Signal()

    def __init__(self, config: EngineConfig, budgets: Iterable[BudgetSetting] = (), workers: int = 2,
                 parent: QObject | None = None, out_of_process: bool = True,
                 log_records: RecordBuffer | None = None, clock: Clock | None = None,
                 settings: LockgateSettings | None = None) -> None:
        super().__init__(parent)
        self.settings = settings if settings is not None else load_settings()
        """The `LOCKGATE_*` settings of the app's engine: the caller's, else the environment's, read here once."""
        if clock is not None and out_of_process:
            raise ValueError("an injected clock needs the engine in this process (out_of_process=False): a worker "
                             "child process keeps its own time")
        self.clock = clock
        """The engine's time when injected (tests move a manual clock); None: the system clock."""
        self.config = config
        self.budgets = list(budgets)
        self.workers = workers
        self.out_of_process = out_of_process
        self.engine_thread = EngineThread()
        self.services: EngineServices | None = None
        """The running engine's services (lifecycle and live channel); requests go through `api`."""
        self.api: EngineApi | None = None
        self.engine_process: EngineProcess | None = None
        self.http_url: str | None = None
        self.http_problem = ""
        self._started_services: EngineServices | None = None
        self.simulator: SimulatorProcess | None = None
        self.subscriber: LiveSubscriber | None = None
        self.log_records = log_records
        """Where the engine child's warnings and errors go (the Log dock's buffer); None: nowhere but its log file."""
        self.log_receiver: LogReceiver | None = None
        self._watchdog = QTimer(self)
        self._watchdog.setInterval(WATCHDOG_MS)
        self._watchdog.timeout.connect(self._check_engine_process)
        self.http_listening = False
        """True once the engine child accepts connections on `http_url` (announced in the log then)."""
        self._http_probe = QTimer(self)
        self._http_probe.setInterval(HTTP_PROBE_MS)
        self._http_probe.timeout.connect(self._probe_http)
        self.state: EngineState = "stopped"
        self.unavailable_reason = ""
        # Emitted from the projector's thread; the queued connection lands it on the GUI thread.
        self._batch_from_projector.connect(self._deliver_batch)
        self._live_ready.connect(self._take_live)

    @property
    def webhook_base_url(self) -> str:
        """Where the app's engine serves the HTTP API and webhooks: `LOCKGATE_HTTP_URL`, else the default."""
        return self.settings.http_url or DEFAULT_HTTP_URL

    @property
    def available(self) -> bool:
        return self.state == "running" and self.api is not None

    def _set_state(self, state: EngineState, message: str = "") -> None:
        self.state = state
        self.state_changed.emit(state)
        if message:
            self.log_message.emit(message)

    # ----- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine in its thread; `state_changed` says how it went."""
        if self.state in ("starting", "running"):
            return
        self.unavailable_reason = "the engine is still starting"
        self._set_state("starting", f"Starting the engine (data folder {self.config.data_dir})")
        self.engine_thread.start()

        def start_services() -> EngineApi:
            # Imported here, on the engine thread: SQLAlchemy and friends stay off the GUI's startup path.
            host = importlib.import_module(HOST_MODULE)
            facade = importlib.import_module(FACADE_MODULE)
            services: EngineServices
            if self.out_of_process:
                services = host.EngineServices(self.config, workers=0, projector=False, due_waker=False,
                                               settings=self.settings)
            else:
                services = host.EngineServices(self.config, clock=self.clock, workers=self.workers,
                                               settings=self.settings)
                services.add_batch_listener(self._on_projector_batch)
            # Known to stop() even if the app quits before the GUI hears that the start finished.
            self._started_services = services
            try:
                # First: it writes the `local` provider's URL into providers.json, which the engine reads at start.
                self.simulator = SimulatorProcess(self.config.data_dir, settings=self.settings).start()
                services.start()
                api: EngineApi = facade.EngineApi(services)
                for budget in self.budgets:
                    api.set_budget(budget.name, budget.limit_usd, budget.period)
                if self.out_of_process:
                    assert services.redis is not None
                    if self.log_records is not None:
                        from engine.log_channel import LogReceiver

                        self.log_receiver = LogReceiver(services.redis.client(socket_timeout=10), services.keys.logs,
                                                        self.log_records).start()
                    self.subscriber = LiveSubscriber(services.redis.client(socket_timeout=10), services.keys.live,
                                                     self._live_ready.emit).start()
                    self.http_url, self.http_problem = _http_url_for_engine(self.webhook_base_url)
                    self.engine_process = EngineProcess(self.config, services.redis.url, self.workers,
                                                        self.http_url, log_dir=log_folder(self.settings)).start()
            except BaseException:
                self._stop_parts(services)  # what did start must not outlive a failed start
                raise
            return api

        def started(api: EngineApi | None, error: BaseException | None) -> None:
            if isinstance(error, ImportError):
                self.unavailable_reason = (f"the embedded engine is not part of this build ({error}); "
                                           "editing, validation and saving work, runs do not")
                self._set_state("unavailable", f"Engine unavailable: {self.unavailable_reason}")
                return
            if error is not None or api is None:
                self.services = None
                self.api = None
                self.unavailable_reason = f"the engine did not start: {error}"
                self._set_state("failed", f"Engine failed to start: {error}; check the data folder, Redis URL and "
                                          "database URL in Settings")
                return
            self.api = api
            self.services = self._started_services
            self.unavailable_reason = ""
            if self.engine_process is not None:
                self._watchdog.start()
            where = self.config.redis_url or "embedded Redis"
            self._set_state("running", f"Engine running ({where}, {self.config.sql_url.split(':')[0]})")
            if self.http_url is not None:
                self.http_listening = False
                self._http_probe.start()
            elif self.http_problem:
                self.log_message.emit(f"HTTP API and webhooks are off: {self.http_problem}")
            if self.simulator is not None and self.simulator.wanted:
                how = "already running, reused" if self.simulator.reused else "started"
                self.log_message.emit(f"Provider simulator for the demo's `local` provider: {how} at "
                                      f"{self.simulator.url}")
            self.runs_changed.emit()
            self.approvals_changed.emit()
            self.holds_changed.emit()

        self.engine_thread.call(_sync(start_services), started)

    def stop(self) -> None:
        """Stop the engine cleanly (parked runs stay parked) and end its thread; blocks until done."""
        self._watchdog.stop()
        self._http_probe.stop()
        if not self.engine_thread.running:
            if self.state not in ("unavailable", "failed"):
                self._set_state("stopped")
            return
        self.services = None
        self.api = None
        self._set_state("stopping", "Stopping the engine; parked runs stay parked")
        # Runs after any start still queued on the engine loop, so it sees what that start made.
        self.engine_thread.stop(_sync(lambda: self._stop_parts(self._started_services)))
        if self.state != "unavailable":
            self._set_state("stopped")

    def _stop_parts(self, services: EngineServices | None) -> None:
        if self.subscriber is not None:
            self.subscriber.stop()
            self.subscriber = None
        if self.engine_process is not None:
            self.engine_process.stop()
            self.engine_process = None
        if self.log_receiver is not None:  # after the child: what it says while stopping still arrives
            self.log_receiver.stop()
            self.log_receiver = None
        if self.simulator is not None:
            self.simulator.stop()
            self.simulator = None
        if services is not None:
            services.stop()
        self._started_services = None

    def _probe_http(self) -> None:
        """Announce the HTTP API once the engine child has bound its port (it does so after the app's engine
        reports running), so a URL the log shows answers."""
        if self.http_url is None or self.state != "running":
            self._http_probe.stop()
            return
        if port_accepts(*http_address(self.http_url)):
            self._http_probe.stop()
            self.http_listening = True
            self.log_message.emit(f"HTTP API and webhooks on {self.http_url}")

    def _check_engine_process(self) -> None:
        process = self.engine_process
        code = process.exit_code() if process is not None else None
        if process is not None and code is not None and self.state == "running":
            self._watchdog.stop()
            self.unavailable_reason = (f"the engine's worker process exited (code {code}); see {process.log_path} "
                                       f"and {log_folder(self.settings) / 'worker.log'}")
            self._set_state("failed", f"Engine failed: {self.unavailable_reason}")

    # ----- requests (run on the engine thread, answered on the GUI thread) ---------------

    def request(self, work: Callable[[EngineApi], T], on_done: Answer[T]) -> None:
        """Call `work(api)` on the engine thread; `on_done(result, error)` on the GUI thread."""
        api = self.api
        if api is None or not self.engine_thread.running:
            on_done(None, RuntimeError(f"the engine is not running: {self.unavailable_reason or self.state}"))
            return
        self.engine_thread.call(_sync(lambda: work(api)), on_done)

    def publish(self, flow: Flow, on_done: Answer[PublishedFlow]) -> None:
        """Store the flow's next version (`engine.publish.PublishRefused`, with its diagnostics, when refused)."""
        self.request(lambda api: api.publish(flow), on_done)

    def create_run(self, flow_id: str, inputs: dict[str, object], on_done: Answer[StartedRun],
                   started_by: str | None = None) -> None:
        """`started_by`: the app's user (Settings ▸ General ▸ Your name), whom `forbid_self` approvals refuse."""
        self.request(lambda api: api.create_run(flow_id, inputs, started_by=started_by), on_done)

    def cancel_run(self, run_id: str, on_done: Answer[CancelledRun]) -> None:
        self.request(lambda api: api.cancel_run(run_id), on_done)

    def list_runs(self, on_done: Answer[list[RunSummary]]) -> None:
        """The newest runs, each with its `cost_micros`, current node and `waiting_on`."""
        self.request(lambda api: api.list_runs(limit=RUNS_LISTED).runs, on_done)

    def get_run(self, run_id: str, on_done: Answer[Run]) -> None:
        """A run with its steps, each step with `started_at` / `finished_at` (for the timeline); None: no such run."""
        self.request(lambda api: api.get_run(run_id), on_done)

    def record_test(self, run_id: str, name: str, on_done: Answer[FlowTest]) -> None:
        """The flow test of a finished run, read from the store."""
        self.request(lambda api: api.record_test(run_id, name), on_done)

    def money(self, on_done: Answer[tuple[list[BudgetState], list[Hold]]]) -> None:
        """`(budgets, holds)`: every budget from the ledger (live), and the newest holds from the store
        (placed ones first, then charged and released)."""
        self.request(lambda api: (api.budgets(), api.holds(HOLDS_LISTED)), on_done)

    def list_budgets(self, on_done: Answer[list[BudgetState]]) -> None:
        """Every budget in the ledger."""
        self.request(lambda api: api.budgets(), on_done)

    def flow_version(self, flow_id: str, version: int, on_done: Answer[tuple[PublishedFlow, Flow]]) -> None:
        """One published version and its flow."""
        self.request(lambda api: api.flow(flow_id, version), on_done)

    def list_flow_ids(self, on_done: Answer[set[str]]) -> None:
        """The ids of every published flow."""
        self.request(lambda api: api.flow_ids(), on_done)

    def list_versions(self, flow_id: str, on_done: Answer[list[FlowVersion]]) -> None:
        """Every published version of a flow, oldest first (none: never published)."""

        def read(api: EngineApi) -> list[FlowVersion]:
            versions = api.flow_versions(flow_id)
            return list(versions.versions) if versions is not None else []

        self.request(read, on_done)

    def get_version(self, flow_id: str, version: int, on_done: Answer[Flow]) -> None:
        """The flow document of one published version."""
        self.request(lambda api: api.flow(flow_id, version)[1], on_done)

    def apply_budgets(self, budgets: list[BudgetSetting], on_done: Answer[int]) -> None:
        """Create or change budgets in the engine's ledger (limits and periods; spent and held are kept)."""
        self.budgets = list(budgets)

        def write(api: EngineApi) -> int:
            for budget in budgets:
                api.set_budget(budget.name, budget.limit_usd, budget.period)
            return len(budgets)

        self.request(write, on_done)

    def list_approval_keys(self, on_done: Answer[list[KeyInfo]]) -> None:
        """Every API key by name with its scopes (never the key or its hash)."""
        self.request(lambda api: api.approval_keys(), on_done)

    def create_approval_key(self, name: str, scopes: tuple[str, ...], on_done: Answer[str]) -> None:
        """A new API key named `name` with `scopes` (`engine.approvals.keys.RIGHTS`); the result is the key, the
        only time it exists in full."""
        self.request(lambda api: api.create_approval_key(name, scopes), on_done)

    def revoke_approval_key(self, name: str, on_done: Answer[None]) -> None:
        self.request(lambda api: api.revoke_approval_key(name), on_done)

    def pending_approvals(self, on_done: Answer[list[Approval]]) -> None:
        """Approvals still open, soonest to expire first."""
        self.request(lambda api: api.pending_approvals().approvals, on_done)

    def decide_approval(self, approval_id: str, approved: bool, actor: str, comment: str,
                        on_done: Answer[Decision]) -> None:
        """Approve or reject as `actor`; the result says whether the decision was taken or why not."""
        decision = "approve" if approved else "reject"
        self.request(lambda api: api.decide(approval_id, decision, actor=actor, comment=comment or None), on_done)

    def trigger_status(self, flow_id: str, on_done: Answer[TriggerStatus]) -> None:
        """The triggers of the flow's latest published version (settings, counters, runs)."""
        self.request(lambda api: api.trigger_status(flow_id), on_done)

    def set_trigger_enabled(self, flow_id: str, node_id: str, trigger_type: str, enabled: bool,
                            on_done: Answer[list[TriggerSetting]]) -> None:
        """Enable or disable one webhook/schedule trigger of the latest published version (a webhook gets its
        token on first enable)."""
        self.request(lambda api: api.set_trigger_enabled(flow_id, node_id, trigger_type, enabled), on_done)

    # ----- live channel ------------------------------------------------------------------

    def _on_projector_batch(self, result: BatchResult) -> None:
        if result.changes:
            self._batch_from_projector.emit(list(result.changes))

    def _take_live(self) -> None:
        subscriber = self.subscriber
        changes = subscriber.take() if subscriber is not None else []
        if changes:
            self._deliver_batch(changes)

    def _deliver_batch(self, changes: list[LiveChange]) -> None:
        # Runs whose rows need the store (new ones, ended ones) are the controller's call: live changes
        # already say where every run is, so a list of runs per batch would be SQL for nothing.
        self.live_changes.emit(changes)
        latest = {change.run_id: change for change in changes}
        for change in latest.values():
            self.run_updated.emit(change)
        # Holds and budgets move with steps (reserve, model call, run end); the panel refresh is coalesced.
        self.holds_changed.emit()


async def _sync(call: Callable[[], T]) -> T:
    """Run a blocking engine call on the engine thread's loop (it is that thread's only job)."""
    return call()


def _http_url_for_engine(url: str) -> tuple[str | None, str]:
    """`url` if the engine child can serve the HTTP API on it, or None and why not."""
    try:
        host, port = http_address(url)
    except ValueError as exc:
        return None, str(exc)
    if not port_is_free(host, port):
        return None, f"{host}:{port} is in use; set LOCKGATE_HTTP_URL to a free http://HOST:PORT"
    return url, ""
