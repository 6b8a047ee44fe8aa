"""How a run waiting out a retry's backoff reads in live mode, the Runs panel and the timeline."""

from __future__ import annotations

from app.live import run_row, waiting_text
from app.panels.timeline import bars_of
from app.waiting import Waiting
from engine.read_models import Run, RunSummary, Step

NOW = 1_800_000_000.0


def test_a_retry_backoff_names_the_attempt_it_waits_for() -> None:
    waiting = {"node": "call", "reason": "retry_backoff", "attempt": 3, "due_at": NOW + 600}
    assert waiting_text(Waiting("call", "retry_backoff", NOW + 600, attempt=3), NOW) == (
        "retry backoff, attempt 3 · 10m left")
    assert waiting_text(Waiting("wait", "queue_delay", NOW + 60), NOW) == "delay · 1m left"
    row = run_row(RunSummary(id="r1", flow_id="f", version=1, status="waiting", waiting_on=waiting,
                             current_node="call"))
    assert row.waiting_reason == "retry backoff" and row.waiting_until is not None


def test_the_timeline_labels_a_retried_steps_gap_as_its_backoff() -> None:
    step = Step(step="call", node="call", type="http.request", status="succeeded", attempts=3, duration_ms=50,
                started_at="2027-01-15T08:00:00+00:00", finished_at="2027-01-15T08:30:00+00:00")
    run = Run(id="r1", flow_id="f", version=1, status="succeeded", steps=[step])
    [bar] = bars_of(run, NOW)
    assert bar.park_reason == "retry_backoff" and round(bar.parked_s) == 30 * 60
    [once] = bars_of(run.model_copy(update={"steps": [step.model_copy(update={"attempts": 1})]}), NOW)
    assert once.park_reason is None
