"""The API's error answers: `{"error": {"code", "message"}}` with a status code."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra or {}
        """More of the error as data (`ErrorDetail`'s optional fields), e.g. an `upstream_changed`'s nodes."""

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


def missing_key() -> ApiError:
    """The answer to a request without a `Bearer` key."""
    return ApiError(401, "missing_key", "send an API key as `Authorization: Bearer lgk_...`; create one with "
                    "`lockgate keys create NAME`")


def key_refused(refusal: str, message: str) -> ApiError:
    """The answer to a key `check_key` refused: 403 for a valid key without the right, 401 otherwise."""
    return ApiError(403 if refusal == "key_without_rights" else 401, refusal, message)
