"""Running the `lockgate` command line as a user would: a real process on the tests' Redis and data folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LOCKGATE = [sys.executable, "-m", "app.main"]


def cli_env(tmp_path: Path, redis_url: str, key_prefix: str, **extra: str) -> dict[str, str]:
    """The environment for a `lockgate` process: data in tmp_path/data, the given Redis namespace, no SQL URL."""
    return {**os.environ, "LOCKGATE_DATA_DIR": str(tmp_path / "data"), "LOCKGATE_REDIS_URL": redis_url,
            "LOCKGATE_KEY_PREFIX": key_prefix, "LOCKGATE_DB_URL": "", **extra}


def lockgate(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`lockgate *args` to its end (60 s at most), its output captured as text."""
    return subprocess.run([*LOCKGATE, *args], env=env, capture_output=True, text=True, timeout=60)
