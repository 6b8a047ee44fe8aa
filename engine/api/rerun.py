"""`POST /api/v1/runs/{id}/rerun`: a rerun's refusals as error answers (`engine.runtime.rerun`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.api.errors import ApiError, http_hinted
from engine.api.runs import input_error, refused_run_error
from engine.read_models import RerunRequest, RerunStarted
from engine.runtime.create import RunRefused
from engine.runtime.inputs import InputError
from engine.runtime.rerun import RerunRefused

if TYPE_CHECKING:
    from engine.facade import EngineApi

REFUSAL_STATUS = {"unknown_run": 404, "unknown_version": 404, "unknown_node": 422, "node_in_foreach": 422,
                  "run_not_finished": 409, "node_not_run": 409, "upstream_changed": 409, "secret_inputs_gone": 409,
                  "callback_url_reused": 409, "repeats_effects": 409}


def rerun_answer(engine: EngineApi, run_id: str, body: RerunRequest) -> tuple[int, RerunStarted]:
    """(HTTP status, answer): 201 with the started rerun, 200 for a dry run; ApiError for a refusal."""
    try:
        answer = engine.rerun(run_id, body)
    except RerunRefused as exc:
        extra: dict[str, Any] = {}
        if exc.nodes:
            extra["nodes"] = list(exc.nodes)
        if exc.original_version is not None:
            extra["original_version"] = exc.original_version
        raise ApiError(REFUSAL_STATUS.get(exc.kind, 409), exc.kind, http_hinted(exc.kind, str(exc)), extra) from None
    except InputError as exc:
        raise input_error(exc, sent_in_body=False) from None
    except RunRefused as exc:
        raise refused_run_error(exc) from None
    return (200 if body.dry_run else 201), answer
