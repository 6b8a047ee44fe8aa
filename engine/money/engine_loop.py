"""The money side of a running engine: ledger restore at start, the budget preflight, the expired-hold
sweep, the concurrency control loop, and returning whatever a finished run still holds.

The host (`engine.host`) calls `MoneyRuntime.start(parts)` and installs its `preflight`; `stop()` ends it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

import redis
import sqlalchemy as sa

from engine.concurrency.control import ControlLoop, sql_pool_limit
from engine.concurrency.telemetry import FAIL_SOFT_TIMEOUT_SECONDS
from engine.events import ExternalStamper, encode_event
from engine.flow import Flow
from engine.money.amounts import micros_to_usd
from engine.money.bodies import HOLDING_NODE_TYPES
from engine.money.ledger import Settled, UnknownBudget, UnknownHold
from engine.money.preflight import BudgetExhausted, ledger_preflight
from engine.money.sql_sync import restore_ledger
from engine.money.wiring import MoneyServices, build_money_services, install, uninstall
from engine.outages import OutageReport, described, outage
from engine.parts import PartContext
from engine.publish import UnknownFlowVersion, get_version
from engine.runtime.create import RunRefused
from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.projection import BatchResult
from engine.store.db import reading
from engine.store.models import Run

log = logging.getLogger("lockgate.money")

SWEEP_SECONDS = 5.0
"""How often placed holds past their `expires_at` are returned (hold_ttl is minutes, so seconds is plenty)."""


class BudgetRefused(RunRefused):
    """create_run refused: the flow's budget is exhausted (`budget_exhausted`) or unknown (`unknown_budget`)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class MoneyRuntime:
    """Owns the money threads of one engine process."""

    def __init__(self, services: MoneyServices, *, sweep_seconds: float = SWEEP_SECONDS) -> None:
        self.services = services
        self.sweep_seconds = sweep_seconds
        self.control: ControlLoop | None = None
        self._threads: list[threading.Thread] = []
        self._holding_versions: dict[tuple[str, int], bool] = {}
        """(flow id, version) -> whether it has a node that places holds; published versions never change."""

    @classmethod
    def start(cls, parts: PartContext, *, control_loop: bool = True) -> MoneyRuntime:
        """Restore the ledger, install the money services bodies use, and start the sweep and control loops."""
        handles = parts.handles
        telemetry = parts.redis.client(socket_timeout=FAIL_SOFT_TIMEOUT_SECONDS,
                                       socket_connect_timeout=FAIL_SOFT_TIMEOUT_SECONDS, retry_on_timeout=False)
        services = build_money_services(parts.redis.client(), handles.keys, handles.sql, handles.clock,
                                        parts.config.data_dir, telemetry)
        runtime = cls(services)
        restored = restore_ledger(handles.sql, services.ledger)
        if restored.budgets or restored.holds:
            log.info("money: restored %d budgets and %d holds from SQL", restored.budgets, restored.holds)
        install(services)
        if parts.add_batch_listener is not None:
            parts.add_batch_listener(runtime.on_batch)
        runtime._threads.append(parts.spawn("lockgate-hold-sweep", runtime._sweep_loop))
        if control_loop:
            runtime.control = ControlLoop(services.client, services.keys, services.registry.configs(),
                                          clock=handles.clock, db_pool_limit=sql_pool_limit(handles.sql))
            runtime._threads.append(parts.spawn("lockgate-concurrency-control", runtime._control_loop))
        return runtime

    def stop(self, timeout: float = 5.0) -> None:
        for thread in self._threads:
            thread.join(timeout)
        uninstall(self.services)
        self.services.close()

    # --- create_run's preflight ------------------------------------------------------------------

    def preflight(self, flow: Flow, inputs: dict[str, Any]) -> None:
        try:
            ledger_preflight(self.services.ledger)(flow, inputs)
        except BudgetExhausted as exc:
            raise BudgetRefused(str(exc), "budget_exhausted") from None
        except UnknownBudget as exc:
            raise BudgetRefused(str(exc), "unknown_budget") from None

    # --- returning holds ---------------------------------------------------------------------------

    def sweep_once(self) -> list[Settled]:
        """Return placed holds past their expiry, each with its run's `hold_released` event."""
        released = self.services.ledger.sweep_expired()
        self._emit_releases(released)
        return released

    def release_for_finished(self, run_ids: list[str]) -> list[Settled]:
        """Return every hold the finished runs still have placed; forget their money state."""
        released: list[Settled] = []
        # One round trip for the whole batch (not one per run): the projector calls this for every batch. Only
        # runs that have money state have any to forget (a second round trip); most runs never had any.
        states = self.services.state.placed_hold_ids_of(run_ids)
        for holds in states.values():
            for hold_id in holds:
                try:
                    settled = self.services.ledger.release(hold_id, reason="run_ended")
                except UnknownHold:
                    continue
                if settled.applied:
                    released.append(settled)
        self.services.state.forget_all(list(states))
        self._emit_releases(released)
        return released

    def on_batch(self, result: BatchResult) -> None:
        if not result.terminal_runs:
            return
        try:
            holding = self._may_hold(result)
            if holding:
                self.release_for_finished(holding)
        except Exception as exc:  # the sweep returns what this misses, at the hold's expiry
            if not outage(exc):
                log.exception("money: returning the holds of finished runs failed; the sweep will return them")
            else:
                log.warning("money: returning the holds of finished runs failed (%s); the sweep will return them",
                            described(exc))

    def _may_hold(self, result: BatchResult) -> list[str]:
        """The runs that ended in `result` whose flow version has a node that places holds (or whose version is not
        known here): the others never had money state, so they cost no round trip."""
        ended = {run_id for run_id, _status in result.terminal_runs}
        versions = {change.run_id: (change.flow_id, change.version) for change in result.changes
                    if change.run_id in ended}
        return [run_id for run_id, _status in result.terminal_runs
                if run_id not in versions or self._version_holds(*versions[run_id])]

    def _version_holds(self, flow_id: str, version: int) -> bool:
        known = self._holding_versions.get((flow_id, version))
        if known is None:
            try:
                _published, flow = get_version(self.services.sql, flow_id, version)
            except UnknownFlowVersion:
                return True
            known = self._holding_versions[(flow_id, version)] = any(
                node.type in HOLDING_NODE_TYPES for node in flow.nodes)
        return known

    def _emit_releases(self, released: list[Settled]) -> None:
        if not released:
            return
        with reading(self.services.sql) as conn:
            seqs = dict(conn.execute(sa.select(Run.id, Run.last_seq)
                                     .where(Run.id.in_({s.run_id for s in released if s.run_id}))).all())
        pipe = self.services.client.pipeline(transaction=False)
        for settled in released:
            if not settled.run_id or settled.run_id not in seqs:
                continue
            event = ExternalStamper(settled.run_id, self.services.clock, seqs[settled.run_id] or 0).hold_released(
                settled.node_id, settled.hold_id, float(micros_to_usd(settled.released_micros)), settled.reason,
                settled.budget)
            pipe.xadd(self.services.keys.events, {EVENT_FIELD: encode_event(event)})
        pipe.execute()

    def _control_loop(self, stop: threading.Event) -> None:
        """Tick the cap while this process holds the control lease: one loop per Redis, however many
        engines (several ticking loops would raise the cap several steps a tick)."""
        assert self.control is not None
        client, key = self.services.client, f"{self.services.keys.concurrency_control}:lease"
        owner = uuid.uuid4().hex
        lease_ms = int(self.control.settings.tick_seconds * 3000)
        report = OutageReport(log, "concurrency control")
        while not stop.is_set():
            try:
                held = client.set(key, owner, nx=True, px=lease_ms) or (
                    client.get(key) == owner.encode() and client.pexpire(key, lease_ms))
                if held:
                    self.control.tick()
                report.worked()
            except redis.RedisError as exc:
                report.failed("concurrency control tick failed (%s); workers use the static cap if this lasts", exc)
            stop.wait(self.control.settings.tick_seconds)

    def _sweep_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.sweep_seconds):
            try:
                self.sweep_once()
            except Exception as exc:
                if not outage(exc):
                    log.exception("money: expired-hold sweep failed; trying again in %.0fs", self.sweep_seconds)
                else:
                    log.warning("money: expired-hold sweep failed (%s); trying again in %.0fs", described(exc),
                                self.sweep_seconds)
