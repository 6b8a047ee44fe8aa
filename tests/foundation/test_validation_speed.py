"""Validation runs on the GUI thread after every edit: each benchmark shape and each hostile shape validates at
2,000 nodes. About 0.05 s of CPU each here; the bound below is ten times that, a guard against a hang only.

How fast (5,000 nodes under 200 ms, and the hostile shapes, which once took 0.6-0.8 s at 2,000 nodes) is
measured by tests/bench/validate_scale.py (`--hostile all`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from engine.flow import flow_from_data
from engine.validation import validate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from validate_scale import SHAPES

from .graph_shapes import HOSTILE_SHAPES

EXPECTED_CPU_SECONDS_AT_2000 = 0.1
HANG_GUARD_CPU_SECONDS = 10 * EXPECTED_CPU_SECONDS_AT_2000


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_validates_2000_nodes(shape: str) -> None:
    flow = flow_from_data(SHAPES[shape](2000, 7))
    validate(flow)  # warm the template cache, as after the first edit
    timings = []
    for _ in range(3):
        started = time.process_time()
        found = validate(flow)
        timings.append(time.process_time() - started)
    assert min(timings) < HANG_GUARD_CPU_SECONDS, f"{shape}: {min(timings):.3f} s of CPU"
    assert len(flow.nodes) >= 2000 and isinstance(found, list)


@pytest.mark.parametrize("shape", sorted(HOSTILE_SHAPES))
def test_hostile_shapes_validate_2000_nodes(shape: str) -> None:
    flow = flow_from_data(HOSTILE_SHAPES[shape](2000))
    validate(flow)
    timings = []
    for _ in range(3):
        started = time.process_time()
        validate(flow)
        timings.append(time.process_time() - started)
    assert min(timings) < HANG_GUARD_CPU_SECONDS, f"{shape}: {min(timings):.3f} s of CPU"
