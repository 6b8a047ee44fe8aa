"""The trigger nodes of each flow's latest published version, reloading only flows published since last look.

The scheduler (every tick) and the event triggers (every applied batch) read this; one small query
of `flows` per refresh, and a flow's document is parsed again only when its latest version changed.
"""

from __future__ import annotations

import threading

import sqlalchemy as sa

from engine.flow import Flow
from engine.publish import UnknownFlowVersion, get_version
from engine.store.db import reading
from engine.store.models import FlowRecord


class LatestFlows:
    def __init__(self, sql: sa.Engine) -> None:
        self.sql = sql
        self._flows: dict[str, tuple[int, Flow]] = {}
        self._lock = threading.Lock()

    def with_trigger(self, trigger_type: str) -> list[Flow]:
        """Latest versions of flows holding a node of `trigger_type`."""
        with reading(self.sql) as conn:
            rows = conn.execute(sa.select(FlowRecord.id, FlowRecord.latest_version)).all()
        found: list[Flow] = []
        with self._lock:
            for flow_id, version in rows:
                known = self._flows.get(flow_id)
                if known is None or known[0] != version:
                    try:
                        published, flow = get_version(self.sql, flow_id)
                    except UnknownFlowVersion:
                        continue
                    known = (published.version, flow)
                    self._flows[flow_id] = known
                if any(node.type == trigger_type for node in known[1].nodes):
                    found.append(known[1])
        return found
