"""Ids the engine makes for rows it inserts by the thousand: runs and events.

A time-ordered id (48 bits of Unix milliseconds, then 80 random bits, as 32 hex digits, the layout of a
UUIDv7 without its version bits) lands next to the ids made just before it in every index keyed by it, so a
batch of new rows touches a few pages at the right edge of each B-tree instead of one page each anywhere in it.
"""

from __future__ import annotations

import os
import random
import time

_random = random.Random()  # seeded from os.urandom; never the module's shared generator, which tests may seed
os.register_at_fork(after_in_child=_random.seed)  # a forked child draws its own ids, never its parent's


def time_ordered_id() -> str:
    """32 hex digits: the current Unix time in milliseconds (12), then 80 random bits (20).

    The random part comes from a generator seeded with the system's entropy, not os.urandom per id: that is a
    system call which releases the GIL, and in a busy engine process the thread then waits to get it back (up
    to the switch interval), a dozen times a run."""
    return f"{time.time_ns() // 1_000_000:012x}{_random.getrandbits(80):020x}"
