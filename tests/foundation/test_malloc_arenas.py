"""`one_malloc_arena()`: on glibc, threads of an engine process allocate from the one C heap instead of arenas of
their own (each a 64 MiB-aligned mapping, keeping what it once held)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys, threading
from engine.malloc_arenas import one_malloc_arena
if sys.argv[1] == "one":
    assert one_malloc_arena()
together = threading.Barrier(6)
def allocate():
    blocks = [bytearray(200_000) for _ in range(20)]
    together.wait()
    del blocks
threads = [threading.Thread(target=allocate) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ARENA = 64 << 20
print(sum(1 for line in open("/proc/self/maps")
          if len(line.split()) == 5 and int(line.split("-")[0], 16) % ARENA == 0 and line.split()[1] == "rw-p"))
"""


def _arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(sys.platform != "linux" or os.confstr("CS_GNU_LIBC_VERSION") is None,
                    reason="glibc on Linux only: elsewhere one_malloc_arena() does nothing")
def test_threads_share_one_arena() -> None:
    assert _arenas("many") >= 3  # each thread alive at once took an arena of its own
    assert _arenas("one") == 0
