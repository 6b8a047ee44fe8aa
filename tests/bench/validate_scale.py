"""Benchmark: publish-time validation of flows of 100, 1,000 and 5,000 nodes, in four shapes.

Prints JSON: per size the node and edge counts, the first (cold template cache) and the median
(warm, as on every canvas edit) time of `validate(flow)`, wall and CPU. "sizes" holds the realistic
mixed flow; "shapes" the parallel-heavy (forks, joins, shared keys), router-heavy (nested exclusive
branches writing one key) and canvas-benchmark (random grid) shapes. Target: every shape at 5,000
nodes under 200 ms.

    .venv/bin/python tests/bench/validate_scale.py [--sizes 100,1000,5000] [--repeat 7] [--shapes parallel,canvas]
    .venv/bin/python tests/bench/validate_scale.py --sizes 2000 --hostile all   # the write-conflict stress shapes
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine.flow import flow_from_data
from engine.templates import template_reads
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


def _document(builder: FlowBuilder, name: str, node_count: int) -> dict[str, Any]:
    return {
        "format": "lockgate.flow/1",
        "id": f"bench-{name}-{node_count}",
        "name": f"Benchmark {name} flow of {node_count} nodes",
        "inputs": {"ticket": {"type": "object", "required": True}},
        "nodes": builder.nodes,
        "edges": builder.edges,
    }


def build_parallel_flow(node_count: int, seed: int = 7) -> dict[str, Any]:
    """Forks of 2-8 branches, some nested, joined again; every writer writes the shared keys.

    `tags` is reduced by each block's join; `status` is not, so parallel writers of it race (write_conflict);
    now and then a branch leaves its block and ends on its own, racing every later writer.
    """
    builder = FlowBuilder(seed)
    rng = builder.rng
    trigger = builder.node("trigger.manual", {})
    current = builder.node("set", {"values": {builder.new_key("start"): "{{ inputs.ticket.id }}"}})
    builder.edge(trigger, current)

    def writer(entry: str, status: bool) -> str:
        values = {"tags": builder.read_earlier(), builder.new_key("part"): "x"}
        if status:
            values["status"] = "busy"
        node = builder.node("set", {"values": values})
        builder.edge(entry, node)
        return node

    def block(entry: str, depth: int) -> str:
        # A branch reads what was written before the fork or earlier on its own branch, never a sibling's keys.
        known, joined = builder.spine_keys, []
        ends = []
        for _ in range(rng.randint(2, 8 if depth == 0 else 3)):
            builder.spine_keys = list(known)
            end = entry
            for _ in range(rng.randint(1, 3)):
                nested = depth == 0 and rng.random() < 0.1
                end = block(end, depth + 1) if nested else writer(end, rng.random() < 0.3)
            if rng.random() < 0.01:
                builder.edge(end, builder.node("terminal", {}))
            else:
                ends.append(end)
                joined += builder.spine_keys[len(known) :]
        builder.spine_keys = known + joined
        join = builder.node("join", {"mode": "all", "reduce": {"tags": "append"}})
        for end in ends or [entry]:
            builder.edge(end, join)
        return join

    while len(builder.nodes) < node_count - 1:
        current = block(current, 0) if rng.random() < 0.7 else writer(current, True)
    builder.edge(current, builder.node("terminal", {}))
    return _document(builder, "parallel", node_count)


def build_router_flow(node_count: int, seed: int = 7) -> dict[str, Any]:
    """Routers of 2-8 ports, nested up to three deep, and approvals; every branch writes `reply`.

    Exclusive branches never race, so thousands of writers of one key give no write_conflict.
    """
    builder = FlowBuilder(seed)
    rng = builder.rng
    trigger = builder.node("trigger.manual", {})
    current = builder.node("set", {"values": {builder.new_key("start"): "{{ inputs.ticket.id }}"}})
    builder.edge(trigger, current)

    def choice(entry: str, port: str | None, depth: int) -> str:
        """A router or approval below `entry`, its branches merged by a join; returns the join."""
        ends = []
        if rng.random() < 0.2:
            decision = builder.node("approval", {"timeout": "24h", "message": "Approve?"})
            builder.edge(entry, decision, port)
            ports: tuple[str, ...] = ("approved", "rejected")
        else:
            names = tuple(f"p{i}" for i in range(rng.randint(1, 7)))
            branches = [{"port": name, "when": f"{{{{ inputs.ticket.kind == '{name}' }}}}"} for name in names]
            decision = builder.node("router", {"branches": branches})
            builder.edge(entry, decision, port)
            ports = (*names, "default")
        for branch in ports:
            if depth < 2 and rng.random() < 0.25:
                ends.append(choice(decision, branch, depth + 1))
                continue
            reply = builder.node("set", {"values": {"reply": f"{branch}: {builder.read_earlier()}"}})
            builder.edge(decision, reply, branch)
            ends.append(reply)
        join = builder.node("join", {"mode": "any"})
        for end in ends:
            builder.edge(end, join)
        return join

    while len(builder.nodes) < node_count - 1:
        current = choice(current, None, 0)
    builder.edge(current, builder.node("terminal", {"output": "{{ state.reply }}"}))
    return _document(builder, "routers", node_count)


def build_canvas_flow(node_count: int, seed: int = 7) -> dict[str, Any]:
    """The canvas benchmark's grid of random edges: many unreachable nodes, writers of two keys everywhere."""
    from canvas_frames import generated_flow

    return generated_flow(node_count, node_count * 6 // 5, seed)


# Flow shapes by name: (node count, seed) -> document. "realistic" is the spine of mixed segments above.
SHAPES: dict[str, Callable[[int, int], dict[str, Any]]] = {
    "realistic": build_flow,
    "parallel": build_parallel_flow,
    "routers": build_router_flow,
    "canvas": build_canvas_flow,
}


def _hostile(name: str) -> Callable[[int, int], dict[str, Any]]:
    from tests.foundation.graph_shapes import HOSTILE_SHAPES

    return lambda node_count, _seed: HOSTILE_SHAPES[name](node_count)


def _hostile_names() -> list[str]:
    from tests.foundation.graph_shapes import HOSTILE_SHAPES

    return sorted(HOSTILE_SHAPES)


def measure(node_count: int, repeat: int, shape: str = "realistic") -> dict[str, Any]:
    """Time validate() on one generated flow: the first call cold, then the median of `repeat` warm calls."""
    build = SHAPES[shape] if shape in SHAPES else _hostile(shape)
    flow = flow_from_data(build(node_count, 7))
    template_reads.cache_clear()
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
    parser.add_argument(
        "--shapes", default="parallel,routers,canvas", help=f"other shapes to time too, of: {', '.join(SHAPES)}"
    )
    parser.add_argument(
        "--hostile", default="", help="hostile write-conflict shapes of tests/foundation/graph_shapes.py to time too "
        "(comma-separated, or all)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = [measure(size, max(1, args.repeat)) for size in sizes]
    report: dict[str, Any] = {
        "benchmark": "validate_scale",
        "python": platform.python_version(),
        "target_ms_at_5000": TARGET_MS_AT_5000,
        "sizes": results,
        # The other shapes, each at the same sizes: median wall and CPU ms (and what they report).
        "shapes": {
            shape: [measure(size, max(1, args.repeat), shape) for size in sizes]
            for shape in args.shapes.split(",")
            if shape.strip()
        },
    }
    hostile = _hostile_names() if args.hostile == "all" else [h for h in args.hostile.split(",") if h.strip()]
    if hostile:
        report["hostile"] = {shape: [measure(size, max(1, args.repeat), shape) for size in sizes] for shape in hostile}
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
