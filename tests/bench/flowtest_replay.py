"""Benchmark: `lockgate test` on the ticket-triage example's recorded tests, with their 24 h waits.

Records three runs of the example on a real embedded engine (the machine's Redis, SQLite in a temp folder, the
provider simulator, a manual clock moved by hand): a question ticket (its follow-up waits 24 h), a refund whose
approval times out after 24 h, and a refund approved after 2 h (its refund call fails: the example posts to a
closed port). Saves them beside a copy of the flow, then times `lockgate test FOLDER` as a new process (start-up
and imports included; median of --repeats) and the in-process replay of each test; `lockgate --help` is timed
too, as the process start-up floor. Prints one JSON object. Target: the replay itself well under a second.

    .venv/bin/python tests/bench/flowtest_replay.py [--repeats 5] [--redis-url redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.approvals.body import approval_id_for
from engine.approvals.decide import decide
from engine.clock import ManualClock
from engine.config import EngineConfig
from engine.flowtest.model import save_test
from engine.flowtest.record import record_test
from engine.flowtest.suite import run_files
from engine.host import EngineServices
from engine.providers.simulator import ProviderSimulator, SimulatorSettings
from tests.conftest import EXAMPLES
from tests.money.conftest import START, MoneyEngine, provider_file, triage_document

LOCKGATE = [sys.executable, "-m", "app.main"]
DAY = 24 * 3600
QUESTION = {"ticket": {"id": "T-7", "body": "How do I export my invoices?"}}
REFUND = {"ticket": {"id": "T-8", "body": "I was charged twice, please refund me"}}


def _record(folder: Path, redis_url: str) -> list[str]:
    clock = ManualClock(START)
    sim = ProviderSimulator(port=0, settings=SimulatorSettings(), clock=clock).start()
    data = folder / "data"
    data.mkdir()
    (data / "providers.json").write_text(json.dumps(provider_file(sim.url)))
    config = EngineConfig(
        data_dir=data,
        redis_url=redis_url,
        db_url=f"sqlite:///{folder / 'bench.db'}",
        key_prefix=f"lgflowtest-{uuid.uuid4().hex[:10]}",
    )
    services = EngineServices(config, clock=clock, workers=2, block_ms=100).start()
    try:
        engine = MoneyEngine(services, clock, sim)
        engine.set_budget("default", 1, "month")
        engine.publish(triage_document())
        names = []
        question = engine.start("ticket-triage", QUESTION, trigger="hook")
        engine.wait_parked(question, "queue_delay")
        engine.advance(DAY)
        engine.wait(question)
        timed_out = engine.start("ticket-triage", REFUND, trigger="hook")
        engine.wait_parked(timed_out, "approval")
        engine.advance(DAY)
        engine.wait(timed_out)
        approved = engine.start("ticket-triage", REFUND, trigger="hook")
        engine.wait_parked(approved, "approval")
        engine.advance(2 * 3600)
        assert services.handles is not None
        assert decide(services.handles, approval_id_for(approved, "approve"), "approve", "ada", "ok").accepted
        engine.wait(approved)
        assert services.sql is not None
        for run_id, name in ((question, "question"), (timed_out, "refund-timeout"), (approved, "refund-approved")):
            save_test(record_test(services.sql, run_id, name), folder / "flows")
            names.append(name)
        return names
    finally:
        services.stop()
        sim.stop()


def bench(repeats: int, redis_url: str) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lockgate-flowtest-bench-"))
    try:
        (folder / "flows").mkdir()
        shutil.copy(EXAMPLES / "ticket-triage.flow.json", folder / "flows" / "ticket-triage.flow.json")
        names = _record(folder, redis_url)
        tests = sorted((folder / "flows").glob("*.flowtest.json"))
        env = {**os.environ, "LOCKGATE_DATA_DIR": str(folder / "cli-data")}
        timings = []
        for _ in range(repeats):
            began = time.perf_counter()
            done = subprocess.run(
                [*LOCKGATE, "test", str(folder / "flows")], env=env, capture_output=True, text=True, timeout=120
            )
            timings.append(time.perf_counter() - began)
            assert done.returncode == 0, done.stdout + done.stderr
        baseline = []
        for _ in range(repeats):
            began = time.perf_counter()
            subprocess.run([*LOCKGATE, "--help"], env=env, capture_output=True, text=True, timeout=120, check=True)
            baseline.append(time.perf_counter() - began)
        run_files(tests)  # imports and body table warm
        suite = run_files(tests)
        assert suite.passed
        return {
            "benchmark": "flowtest_replay",
            "tests": names,
            "simulated_hours": {
                r.name: round((r.actual.simulated_seconds if r.actual else 0) / 3600, 3) for r in suite.tests
            },
            "cli_seconds_median": round(statistics.median(timings), 3),
            "cli_seconds_max": round(max(timings), 3),
            "cli_help_seconds_median": round(statistics.median(baseline), 3),
            "repeats": repeats,
            "in_process_ms": {r.name: round(r.seconds * 1000, 2) for r in suite.tests},
            "in_process_total_ms": round(suite.seconds * 1000, 2),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--redis-url", default=os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    print(json.dumps(bench(args.repeats, args.redis_url), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
