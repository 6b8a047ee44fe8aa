"""Job messages on the jobs stream: start a run, or resume a parked one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

JOB_FIELD = b"j"


@dataclass(frozen=True)
class Job:
    run_id: str
    action: Literal["start", "resume"]
    flow_id: str = ""
    version: int = 0
    trigger: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    """Redacted inputs; secret values live under the run's secrets key only."""
    has_secrets: bool = False
    park: str = ""
    """resume only: the park it resumes (`engine.parking.limits.park_token`); empty for a due-time resume."""
    accepted_at: float | None = None
    """Set for a run created in async mode (its acceptance time): its `max_wait` counts from then."""
    rerun: dict[str, Any] | None = None
    """start only, for a rerun (`engine.runtime.rerun.RerunSeed.to_data`): the steps reused and the node to
    start at."""


class BadJob(ValueError):
    """A job message the worker cannot read."""


def encode_job(job: Job) -> dict[Any, Any]:
    """Stream fields of a job message."""
    return {JOB_FIELD: orjson.dumps(job)}  # orjson writes a dataclass as asdict() would, without its deep copy


def decode_job(fields: dict[bytes, bytes]) -> Job:
    raw = fields.get(JOB_FIELD)
    if raw is None:
        raise BadJob(f"job message has no {JOB_FIELD.decode()!r} field (fields: {sorted(k.decode() for k in fields)})")
    try:
        data = orjson.loads(raw)
        return Job(**data)
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise BadJob(f"job message is not a job: {exc}") from None


def start_job(run_id: str, flow_id: str, version: int, trigger: str, inputs: dict[str, Any],
              has_secrets: bool, accepted_at: float | None = None, rerun: dict[str, Any] | None = None) -> Job:
    return Job(run_id, "start", flow_id, version, trigger, inputs, has_secrets, accepted_at=accepted_at, rerun=rerun)


def resume_job(run_id: str, park: str = "") -> Job:
    """A resume needs only the run id (and, from a decision, the park it is for): the checkpoint holds the rest."""
    return Job(run_id, "resume", park=park)


ATTEMPT_FIELD = b"a"
"""Set on a redelivered job message: which attempt it is (missing: 1)."""
ORIGIN_FIELD = b"o"
"""Set on a redelivered job message: the id of the job's first message (fences and resume claims use it)."""


@dataclass(frozen=True)
class Delivery:
    """Which attempt of which job a message is."""

    origin: str
    attempt: int


def delivery_of(message_id: bytes | str, fields: dict[bytes, bytes]) -> Delivery:
    mid = message_id.decode() if isinstance(message_id, bytes) else message_id
    origin = fields.get(ORIGIN_FIELD)
    attempt = fields.get(ATTEMPT_FIELD)
    return Delivery(origin.decode() if origin else mid, int(attempt) if attempt else 1)
