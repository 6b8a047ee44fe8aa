"""Consumer groups of the engine's Redis streams."""

from __future__ import annotations

import redis


def ensure_group(client: redis.Redis, stream: str, group: str) -> None:
    """Create the consumer group (and the stream) if missing."""
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
