"""Keep the garbage collector's full passes short in a long-running process.

A full collection walks every object the collector tracks, and after start-up that is mostly what the imports
made (SQLAlchemy, pydantic, redis-py and the engine: a few hundred thousand objects): 40-80 ms a pass on the
project's machine, during which the process runs nothing else (1-3 ms once frozen). A pass in the projector or in
a process creating runs holds up every run behind it. Freezing what start-up made moves it out of the collector's
reach, so later passes walk only what was allocated since.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Collect once, then exempt everything alive from later collections. Call once a process is up (its
    imports done, its services started); objects frozen are never freed, so not from a loop."""
    gc.collect()
    gc.freeze()
