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
