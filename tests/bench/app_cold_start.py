"""Cold start of `lockgate` (no arguments) to a shown, idle main window; prints JSON.

Each start is a fresh process with its own settings and data folder; the app prints
`ready <s>` from its first idle moment after show (LOCKGATE_EXIT_WHEN_READY) and quits.
The figure that counts is the wall time from spawning the process to that line.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STARTS = int(os.environ.get("LOCKGATE_BENCH_STARTS", "5"))
TARGET_S = 2.0


def one_start(folder: Path, first: bool, engine: bool = False) -> tuple[float, float]:
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
               LOCKGATE_EXIT_WHEN_READY="1",
               XDG_CONFIG_HOME=str(folder / ("config-first" if first else "config")),
               LOCKGATE_DATA_DIR=str(folder / "data"))
    if not engine:
        env["LOCKGATE_NO_ENGINE"] = "1"
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "app"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    wall = time.perf_counter() - started
    process.wait(timeout=30)
    if not line.startswith("ready "):
        raise RuntimeError(f"the app did not report ready (got {line!r}, exit {process.returncode})")
    return wall, float(line.split()[1])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        one_start(folder, first=False)  # warm the OS file cache, as a second launch of the day would be
        walls, inside = [], []
        for index in range(STARTS):
            wall, in_process = one_start(folder, first=index == 0)
            walls.append(wall)
            inside.append(in_process)
        # With the embedded engine (Valkey + SQLite) starting in its thread right after the window shows.
        with_engine = [one_start(folder, first=False, engine=True)[0] for _ in range(STARTS)]
    print(json.dumps({
        "benchmark": "app_cold_start",
        "starts": STARTS,
        "process_spawn_to_ready_s": {"median": round(statistics.median(walls), 3), "max": round(max(walls), 3),
                                     "min": round(min(walls), 3)},
        "app_import_to_ready_s": {"median": round(statistics.median(inside), 3)},
        "first_start_with_example_s": round(walls[0], 3),
        "with_embedded_engine_starting_s": {"median": round(statistics.median(with_engine), 3),
                                            "max": round(max(with_engine), 3)},
        "target_s": TARGET_S,
        "meets_target": max(walls + with_engine) < TARGET_S,
    }, indent=2))


if __name__ == "__main__":
    main()
