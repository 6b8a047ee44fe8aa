"""`lockgate worker --http` on a port someone else holds says so and exits 2, leaving nothing running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def test_a_busy_http_port_is_a_clear_error(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = dict(os.environ, LOCKGATE_DATA_DIR=str(tmp_path / "data"), LOCKGATE_REDIS_URL=redis_url,
                   LOCKGATE_KEY_PREFIX=key_prefix)
        done = subprocess.run([sys.executable, "-m", "app", "worker", "--http", f"127.0.0.1:{port}"], env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"cannot serve HTTP on 127.0.0.1:{port}" in done.stderr and "pick a free port" in done.stderr
    assert "Traceback" not in done.stderr
