"""The money and provider benchmarks run and print JSON (small sizes; the full runs are in tests/bench)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def bench(script: str, redis_url: str, *args: str) -> dict[str, object]:
    env = {**os.environ, "LOCKGATE_TEST_REDIS_URL": redis_url}
    done = subprocess.run([sys.executable, f"tests/bench/{script}", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_budget_race_reserves_exactly_what_fits(redis_url: str) -> None:
    report = bench("budget_race.py", redis_url, "--processes", "3", "--attempts", "60", "--fits", "15")
    assert report["reserved"] == 15 and report["refused"] == 45
    assert report["never_above_limit"] is True and report["settled_exactly_once"] is True
    assert report["final_held_usd"] == 0


def test_provider_cap_completes_every_call_near_the_limit(redis_url: str) -> None:
    report = bench("provider_cap.py", redis_url, "--calls", "90", "--rps", "30", "--workers", "8")
    assert report["calls"] == 90
    assert report["simulator_requests"] == 90 + report["rate_limited_429s"]  # type: ignore[operator]
    # 30 answers per 1 s window: 90 answers reach into a third window, so more than 2 s pass.
    assert report["seconds"] >= 1.99  # type: ignore[operator]
    assert report["telemetry_failures"] == 0
