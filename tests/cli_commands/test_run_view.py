"""`runs show`'s header for people: a run whose cancel waits for the worker holding it says so."""

from __future__ import annotations

from engine.cli.run_view import header_lines
from engine.read_models import Run


def test_a_run_with_a_cancel_requested_says_so_until_it_stops() -> None:
    held = Run(id="r1", flow_id="slow", version=2, status="running", current_node="call", cancel_requested=True)
    assert header_lines(held)[:2] == ["run r1 running (cancel requested) (flow slow v2)", "current node: call"]
    plain = held.model_copy(update={"cancel_requested": False})
    assert header_lines(plain)[0] == "run r1 running (flow slow v2)"
