"""The pure scheduler: dead-path elimination, joins, triggers that did not fire."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

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


class _Rescanning(Scheduler):
    """The scheduler's verdicts as first written: every pending node of the scope looked at, pass after pass."""

    def advance(self) -> tuple[list[str], list[str]]:
        ready: list[str] = []
        skipped: list[str] = []
        changed = True
        while changed:
            changed = False
            for node_id in self.plan.nodes:
                if node_id not in self.scope or self.status[node_id] != "pending" or node_id in ready:
                    continue
                verdict = self._verdict(node_id)
                if verdict == "ready":
                    ready.append(node_id)
                elif verdict == "skip":
                    self.status[node_id] = "skipped"
                    skipped.append(node_id)
                    changed = True
        return ready, skipped


def _random_flow(rng: random.Random, size: int) -> FlowPlan:
    """A random DAG of routers, joins (all / any) and setters under two triggers, nodes listed out of order."""
    nodes: list[dict[str, Any]] = [{"id": "go", "type": "trigger.manual"}, {"id": "hook", "type": "trigger.webhook"}]
    edges: list[tuple[str, str] | tuple[str, str, str]] = []
    for index in range(size):
        node_id = f"n{index}"
        kind = rng.choice(["set", "set", "router", "join", "join_any"])
        if kind == "router":
            nodes.append({"id": node_id, "type": "router",
                          "config": {"branches": [{"port": "a", "when": "{{ 1 }}"}, {"port": "b", "when": "{{ 1 }}"}]}})
        elif kind.startswith("join"):
            nodes.append({"id": node_id, "type": "join", "config": {"mode": "any" if kind == "join_any" else "all"}})
        else:
            nodes.append({"id": node_id, "type": "set", "config": {"values": {"k": "1"}}})
        earlier = [n["id"] for n in nodes[:-1]]
        for source in rng.sample(earlier, k=min(len(earlier), rng.choice([1, 1, 2, 3]))):
            source_type = next(n for n in nodes if n["id"] == source)["type"]
            if source_type == "router":
                edges.append((source, rng.choice(["a", "b", "default"]), node_id))
            else:
                edges.append((source, node_id))
    rng.shuffle(nodes)
    return FlowPlan(flow_from_data(make_flow("random", nodes, edges)))


@pytest.mark.parametrize("seed", range(40))
def test_advance_gives_the_verdicts_of_a_full_rescan_in_the_same_order(seed: int) -> None:
    rng = random.Random(seed)
    plan = _random_flow(rng, rng.randint(3, 40))
    routes = {node: rng.choice([("a",), ("b",), ("default",), ("a", "b")])
              for node, kind in plan.kinds.items() if kind == "router"}
    for trigger in ("go", "hook"):
        fast, slow = (cls(plan, plan.trigger_scope(trigger), trigger) for cls in (Scheduler, _Rescanning))
        pick = random.Random(seed)
        while True:
            answer = fast.advance()
            assert answer == slow.advance()
            ready = answer[0]
            if not ready:
                break
            node = ready[pick.randrange(len(ready))]  # run one, leave the others ready, as the executor does
            for scheduler in (fast, slow):
                scheduler.start(node)
                scheduler.complete(node, routes.get(node, plan.ports[node]))
        assert fast.status == slow.status


class _Counting(Scheduler):
    verdicts = 0

    def _verdict(self, node_id: str) -> Any:
        self.verdicts += 1
        return super()._verdict(node_id)


def test_a_long_chain_is_scheduled_in_linear_time() -> None:
    size = 5_000
    nodes = [{"id": "go", "type": "trigger.manual"}] + [
        {"id": f"s{i}", "type": "set", "config": {"values": {"k": "1"}}} for i in range(size)]
    ids = [node["id"] for node in nodes]
    plan = FlowPlan(flow_from_data(make_flow("chain", nodes, list(itertools.pairwise(ids)))))
    scheduler = _Counting(plan, plan.trigger_scope("go"), "go")
    ran = 0
    while True:
        ready, _ = scheduler.advance()
        if not ready:
            break
        scheduler.start(ready[0])
        scheduler.complete(ready[0], ("out",))
        ran += 1
    assert ran == size + 1
    assert scheduler.verdicts <= 3 * (size + 1)  # a full rescan per step would be about size² / 2
