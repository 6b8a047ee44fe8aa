"""Validation runs on the GUI thread after every edit: each benchmark shape at 2,000 nodes stays well under a frame
budget's worth of stall. Before the write-conflict rework the parallel and canvas shapes took 0.6-0.8 s of CPU here.

The full figures (5,000 nodes under 200 ms) come from tests/bench/validate_scale.py; this guards against a
return to pairwise graph walks, with room for a loaded machine.
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

CPU_SECONDS_AT_2000 = 0.3


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_validates_2000_nodes_quickly(shape: str) -> None:
    flow = flow_from_data(SHAPES[shape](2000, 7))
    validate(flow)  # warm the template cache, as after the first edit
    timings = []
    for _ in range(3):
        started = time.process_time()
        found = validate(flow)
        timings.append(time.process_time() - started)
    assert min(timings) < CPU_SECONDS_AT_2000, f"{shape}: {min(timings):.3f} s of CPU"
    assert len(flow.nodes) >= 2000 and isinstance(found, list)


@pytest.mark.parametrize("shape", sorted(HOSTILE_SHAPES))
def test_hostile_shapes_validate_2000_nodes_quickly(shape: str) -> None:
    flow = flow_from_data(HOSTILE_SHAPES[shape](2000))
    validate(flow)
    timings = []
    for _ in range(3):
        started = time.process_time()
        validate(flow)
        timings.append(time.process_time() - started)
    assert min(timings) < CPU_SECONDS_AT_2000, f"{shape}: {min(timings):.3f} s of CPU"
