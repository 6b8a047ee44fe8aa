"""Benchmark: publish-time validation of realistic flows of 100, 1,000 and 5,000 nodes.

Prints JSON: per size the node and edge counts, the first (cold template cache) and the median
(warm, as on every canvas edit) time of `validate(flow)`, wall and CPU. Target: 5,000 nodes under 200 ms.

    .venv/bin/python tests/bench/validate_scale.py [--sizes 100,1000,5000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.flow import flow_from_data
from engine.templates import template_state_refs
from engine.validation import validate

TARGET_MS_AT_5000 = 200.0


class FlowBuilder:
    """Grows a flow segment by segment along a spine, the way people build long flows."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.nodes: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self.spine_keys: list[str] = []
        self.counter = 0

    def node(self, kind: str, config: dict[str, Any], prefix: str | None = None) -> str:
        self.counter += 1
        node_id = f"{prefix or kind.replace('.', '_')}_{self.counter}"
        x = 220 * (self.counter % 40)
        self.nodes.append(
            {
                "id": node_id,
                "type": kind,
                "title": node_id,
                "position": [x, 120 * (self.counter // 40)],
                "config": config,
            }
        )
        return node_id

    def edge(self, source: str, target: str, port: str | None = None) -> None:
        edge: dict[str, Any] = {"from": source, "to": target}
        if port is not None:
            edge["port"] = port
        self.edges.append(edge)

    def read_earlier(self) -> str:
        """A template reading a key some upstream node wrote (or an input, early on)."""
        if not self.spine_keys:
            return "{{ inputs.ticket.body }}"
        key = self.rng.choice(self.spine_keys[-50:])
        return f"{{{{ state.{key} }}}} #{self.counter}"

    def new_key(self, stem: str) -> str:
        key = f"{stem}_{self.counter + 1}"
        self.spine_keys.append(key)
        return key

    # Segments: each takes the node to continue from and returns the node to continue after.

    def set_step(self, entry: str) -> str:
        source = self.read_earlier()
        node = self.node("set", {"values": {self.new_key("value"): source}})
        self.edge(entry, node)
        return node

    def model_step(self, entry: str) -> str:
        prompt = f"Summarise: {self.read_earlier()}"
        model_id = f"model_{self.counter + 2}"
        reserve = self.node("budget.reserve", {"for": model_id, "amount": 0.05})
        model = self.node(
            "ai.model",
            {"provider": "local", "model": "sim-small", "prompt": prompt, "output_key": self.new_key("answer")},
            prefix="model",
        )
        assert model == model_id
        self.edge(entry, reserve)
        self.edge(reserve, model)
        return model

    def router_step(self, entry: str) -> str:
        source = self.read_earlier().split(" #")[0].removesuffix(" }}").removeprefix("{{ ")
        router = self.node(
            "router",
            {
                "branches": [
                    {"port": "high", "when": f"{{{{ {source} == 'high' }}}}"},
                    {"port": "low", "when": f"{{{{ {source} == 'low' }}}}"},
                ]
            },
        )
        self.edge(entry, router)
        join = f"join_{self.counter + 7}"
        branch_ends = []
        for port in ("high", "low", "default"):
            # Every branch writes `reply`: exclusive router ports, so no write_conflict.
            reply = self.node("set", {"values": {"reply": f"{port}: {self.read_earlier()}"}})
            call = self.node(
                "http.request", {"method": "GET", "url": f"http://127.0.0.1:9/{port}?q={{{{ state.reply }}}}"}
            )
            self.edge(router, reply, port)
            self.edge(reply, call)
            branch_ends.append(call)
        node = self.node("join", {"mode": "any"})
        assert node == join
        for end in branch_ends:
            self.edge(end, node)
        self.spine_keys.append("reply")
        return node

    def parallel_step(self, entry: str) -> str:
        left_source, right_source = self.read_earlier(), self.read_earlier()
        left = self.node("set", {"values": {"tags": "left", f"left_{self.counter + 1}": left_source}})
        right = self.node("set", {"values": {"tags": "right", f"right_{self.counter + 1}": right_source}})
        self.spine_keys += [f"left_{left.rsplit('_', 1)[1]}", f"right_{right.rsplit('_', 1)[1]}"]
        join = self.node("join", {"mode": "all", "reduce": {"tags": "append"}})
        for branch in (left, right):
            self.edge(entry, branch)
            self.edge(branch, join)
        return join

    def approval_step(self, entry: str) -> str:
        approval = self.node("approval", {"timeout": "24h", "message": f"Approve? {self.read_earlier()}"})
        declined = self.node("terminal", {"output": "declined"})
        self.spine_keys.append(approval)
        self.edge(entry, approval)
        self.edge(approval, declined, "rejected")
        after = self.node("set", {"values": {self.new_key("approved"): "yes"}})
        self.edge(approval, after, "approved")
        return after

    def queue_step(self, entry: str) -> str:
        queue = self.node("queue", {"delay": self.rng.choice(["15m", "1h", "24h", "PT2H"])})
        self.edge(entry, queue)
        return queue

    def foreach_step(self, entry: str) -> str:
        loop = self.node("foreach", {"items": self.read_earlier(), "output_key": self.new_key("items")})
        work = self.node("http.request", {"method": "POST", "url": "http://127.0.0.1:9/item", "body": "{{ item }}"})
        end = self.node("terminal", {})
        count = f"{{{{ state.{self.spine_keys[-1]} | length }}}}"
        after = self.node("set", {"values": {self.new_key("looped"): count}})
        self.edge(entry, loop)
        self.edge(loop, work, "item")
        self.edge(work, end)
        self.edge(loop, after, "done")
        return after

    def http_step(self, entry: str) -> str:
        call = self.node(
            "http.request",
            {
                "method": "POST",
                "url": "http://127.0.0.1:9/hook",
                "body": self.read_earlier(),
                "output_key": self.new_key("resp"),
            },
        )
        self.edge(entry, call)
        return call


def build_flow(node_count: int, seed: int = 7) -> dict[str, Any]:
    """A flow document of about `node_count` nodes with a realistic mix of types and branching."""
    builder = FlowBuilder(seed)
    manual = builder.node("trigger.manual", {})
    hook = builder.node("trigger.webhook", {})
    first = builder.node("set", {"values": {builder.new_key("start"): "{{ inputs.ticket.id }}"}})
    builder.edge(manual, first)
    builder.edge(hook, first)
    steps: list[tuple[Callable[[str], str], int]] = [
        (builder.set_step, 5),
        (builder.model_step, 3),
        (builder.router_step, 2),
        (builder.parallel_step, 2),
        (builder.approval_step, 1),
        (builder.queue_step, 1),
        (builder.foreach_step, 1),
        (builder.http_step, 2),
    ]
    choices = [step for step, weight in steps for _ in range(weight)]
    current = first
    while len(builder.nodes) < node_count - 1:
        current = builder.rng.choice(choices)(current)
        if builder.rng.random() < 0.01:
            # Now and then a second path out of the spine that ends on its own.
            side = builder.set_step(current)
            builder.spine_keys.pop()  # written off the spine: later spine nodes must not read it
            builder.edge(side, builder.node("terminal", {}))
    builder.edge(current, builder.node("terminal", {"output": builder.read_earlier()}))
    return {
        "format": "lockgate.flow/1",
        "id": f"bench-{node_count}",
        "name": f"Benchmark flow of {node_count} nodes",
        "inputs": {"ticket": {"type": "object", "required": True}},
        "nodes": builder.nodes,
        "edges": builder.edges,
    }


def measure(node_count: int, repeat: int) -> dict[str, Any]:
    """Time validate() on one generated flow: the first call cold, then the median of `repeat` warm calls."""
    flow = flow_from_data(build_flow(node_count))
    template_state_refs.cache_clear()
    start = time.perf_counter()
    diagnostics = validate(flow)
    first_ms = (time.perf_counter() - start) * 1000
    timings, cpu_timings = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        validate(flow)
        timings.append((time.perf_counter() - start) * 1000)
        cpu_timings.append((time.process_time() - start_cpu) * 1000)
    codes: dict[str, int] = {}
    for d in diagnostics:
        codes[d.code] = codes.get(d.code, 0) + 1
    return {
        "nodes": len(flow.nodes),
        "edges": len(flow.edges),
        "first_ms": round(first_ms, 2),
        "median_ms": round(statistics.median(timings), 2),
        # CPU time of this process: steadier than wall time when other work shares the cores.
        "median_cpu_ms": round(statistics.median(cpu_timings), 2),
        "runs": repeat,
        "diagnostics": codes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100,1000,5000", help="comma-separated node counts")
    parser.add_argument("--repeat", type=int, default=7, help="warm runs per size (median reported)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = [measure(size, max(1, args.repeat)) for size in sizes]
    report: dict[str, Any] = {
        "benchmark": "validate_scale",
        "python": platform.python_version(),
        "target_ms_at_5000": TARGET_MS_AT_5000,
        "sizes": results,
    }
    if len(results) > 1 and results[0]["median_ms"] > 0:
        base = results[0]
        report["growth"] = [
            {
                "nodes": r["nodes"],
                "time_ratio": round(r["median_ms"] / base["median_ms"], 2),
                "size_ratio": round(r["nodes"] / base["nodes"], 2),
            }
            for r in results[1:]
        ]
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
