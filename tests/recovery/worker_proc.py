"""A real worker process for the recovery tests: one worker thread, no projector and no reaper.

Usage: python -m tests.recovery.worker_proc DATA_DIR REDIS_URL DB_URL KEY_PREFIX
Prints `ready` once it serves; logs (fenced writes among them) go to stderr; SIGTERM stops it.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

from engine.config import EngineConfig
from engine.host import EngineServices


def main() -> int:
    data_dir, redis_url, db_url, prefix = sys.argv[1:5]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    config = EngineConfig(data_dir=Path(data_dir), redis_url=redis_url, db_url=db_url, key_prefix=prefix)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    services = EngineServices(config, workers=1, projector=False, due_waker=False, reaper=False, scheduler=False,
                              block_ms=100, heartbeat_seconds=0.2)
    with services:
        print("ready", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
