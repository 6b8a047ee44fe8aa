"""The pure scheduler: dead-path elimination, joins, triggers that did not fire."""

from __future__ import annotations

from engine.flow import flow_from_data
from engine.runtime.plan import FlowPlan
from engine.runtime.scheduler import Scheduler
from tests.engine.conftest import make_flow


def _plan() -> FlowPlan:
    doc = make_flow("dpe", [
        {"id": "go", "type": "trigger.manual"},
        {"id": "hook", "type": "trigger.webhook"},
        {"id": "route", "type": "router", "config": {"branches": [{"port": "hot", "when": "{{ true }}"}]}},
        {"id": "hot", "type": "set", "config": {"values": {"a": "1"}}},
        {"id": "cold", "type": "set", "config": {"values": {"b": "1"}}},
        {"id": "after_cold", "type": "set", "config": {"values": {"c": "1"}}},
        {"id": "both", "type": "join", "config": {"mode": "all"}},
        {"id": "only_hook", "type": "set", "config": {"values": {"d": "1"}}},
        {"id": "end", "type": "terminal"},
    ], [("go", "route"), ("route", "hot", "hot"), ("route", "default", "cold"), ("cold", "after_cold"),
        ("hot", "both"), ("after_cold", "both"), ("both", "end"), ("hook", "only_hook")])
    return FlowPlan(flow_from_data(doc))


def _drive(plan: FlowPlan, scheduler: Scheduler, ports: dict[str, tuple[str, ...]]) -> tuple[list[str], list[str]]:
    ran: list[str] = []
    skipped: list[str] = []
    while True:
        ready, newly_skipped = scheduler.advance()
        skipped += newly_skipped
        if not ready:
            return ran, skipped
        for node in ready:
            scheduler.start(node)
            scheduler.complete(node, ports.get(node, plan.ports[node]))
            ran.append(node)


def test_router_port_not_taken_is_skipped_with_everything_only_behind_it() -> None:
    plan = _plan()
    scheduler = Scheduler(plan, plan.trigger_scope("go"), "go")
    ran, skipped = _drive(plan, scheduler, {"route": ("hot",)})
    assert ran == ["go", "route", "hot", "both", "end"]
    assert set(skipped) == {"cold", "after_cold"}
    assert "only_hook" not in scheduler.status and "hook" not in scheduler.status  # other trigger: ignored
    assert scheduler.finished()


def test_join_all_waits_for_every_branch_to_resolve() -> None:
    plan = _plan()
    scheduler = Scheduler(plan, plan.trigger_scope("go"), "go")
    for node in ("go", "route"):
        scheduler.advance()
        scheduler.start(node)
        scheduler.complete(node, ("hot", "default") if node == "route" else ("out",))
    ready, _ = scheduler.advance()
    assert ready == ["hot", "cold"]
    scheduler.complete("hot", ("out",))
    ready, _ = scheduler.advance()
    assert "both" not in ready  # the cold branch is still pending


def test_join_any_runs_on_first_delivered_branch() -> None:
    doc = make_flow("any", [
        {"id": "go", "type": "trigger.manual"},
        {"id": "a", "type": "set", "config": {"values": {"a": "1"}}},
        {"id": "b", "type": "set", "config": {"values": {"b": "1"}}},
        {"id": "first", "type": "join", "config": {"mode": "any"}},
    ], [("go", "a"), ("go", "b"), ("a", "first"), ("b", "first")])
    plan = FlowPlan(flow_from_data(doc))
    scheduler = Scheduler(plan, plan.trigger_scope("go"), "go")
    scheduler.advance()
    scheduler.complete("go", ("out",))
    assert scheduler.advance()[0] == ["a", "b"]
    scheduler.start("a")
    scheduler.start("b")
    scheduler.complete("a", ("out",))
    assert scheduler.advance()[0] == ["first"]


def test_a_node_whose_inputs_are_all_skipped_is_skipped() -> None:
    plan = _plan()
    scheduler = Scheduler(plan, plan.trigger_scope("go"), "go")
    _ran, skipped = _drive(plan, scheduler, {"route": ()})
    assert set(skipped) == {"hot", "cold", "after_cold", "both", "end"}


def test_webhook_trigger_runs_only_its_own_reach() -> None:
    plan = _plan()
    scheduler = Scheduler(plan, plan.trigger_scope("hook"), "hook")
    ran, skipped = _drive(plan, scheduler, {})
    assert ran == ["hook", "only_hook"] and skipped == []
