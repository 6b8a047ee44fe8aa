"""`lockgate worker` pointed at a Redis that does not answer says so in one line and exits 1: not a refusal, so a
supervisor starts it again, and nothing is left behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def test_a_redis_that_does_not_answer_is_one_line_not_a_traceback(tmp_path: Path, key_prefix: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        env = dict(os.environ, LOCKGATE_DATA_DIR=str(tmp_path / "data"),
                   LOCKGATE_REDIS_URL=f"redis://127.0.0.1:{port}/0", LOCKGATE_KEY_PREFIX=key_prefix)
        done = subprocess.run([sys.executable, "-m", "app", "worker"], env=env, capture_output=True, text=True,
                              timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"lockgate worker: cannot start: Redis at redis://127.0.0.1:{port}/0 does not answer (")
    assert lines[0].endswith("; check that it runs and that LOCKGATE_REDIS_URL names it")
