"""A rerun parks and resumes like any run: its checkpoint keeps the reused state, and the resume repeats no
upstream effect (the counting server), on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.engine.conftest import Site, make_flow
from tests.parking.conftest import HOUR, TRIGGER, Parked


def test_a_rerun_from_a_queue_parks_and_resumes_with_the_reused_state(parked_any_db: Parked, site: Site) -> None:
    parked = parked_any_db
    parked.publish(make_flow("later", [
        TRIGGER,
        {"id": "charge", "type": "http.request", "config": {"method": "POST", "url": site.url + "/charge",
                                                             "output_key": "charged"}},
        {"id": "pause", "type": "queue", "config": {"delay": "1h"}},
        {"id": "done", "type": "terminal", "config": {"output": "#{{ state.charged.body.count }}"}},
    ], [("start", "charge"), ("charge", "pause"), ("pause", "done")]))
    first = parked.start("later")
    parked.waiting_on(first, "pause")
    parked.advance(HOUR)
    assert parked.wait_status(first, "succeeded", "failed")["result"] == "#1"
    created, _plan = parked.services.rerun_run(first, "pause")
    parked.waiting_on(created.run_id, "pause")
    parked.still_waiting(created.run_id, "pause")
    parked.advance(HOUR)
    rerun = parked.wait_status(created.run_id, "succeeded", "failed")
    assert (rerun["status"], rerun["result"], rerun["rerun_of"]) == ("succeeded", "#1", first)
    assert site.hits == {"/charge": 1}
    assert [(s["step"], s["reused_from"]) for s in rerun["steps"]] == [
        ("start", first), ("charge", first), ("pause", None), ("done", None)]
