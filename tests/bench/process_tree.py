"""A benchmarked server's processes, read from /proc: its tree, each process's CPU time and its engine role."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree(root: int) -> list[int]:
    """`root` and every process descended from it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1])
            except OSError:
                continue
    found, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        found.extend(frontier)
    return found


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds of each process still there."""
    seen: dict[int, float] = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        seen[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return seen


def role(pid: int, root: int) -> str:
    """The part a process of `root`'s tree plays: its `--role`, `valkey` for the embedded server, `supervisor` for
    `root` itself, `gone` when it ended, else `other`."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    for flag, value in itertools.pairwise(args):
        if flag == b"--role":
            return value.decode()
    if any(b"valkey" in arg or b"redis-server" in arg for arg in args):
        return "valkey"
    return "supervisor" if pid == root else "other"
