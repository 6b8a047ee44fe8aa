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


HTTP_HINTS = {
    "unknown_run": "list runs with GET /api/v1/runs",
    "unknown_flow": "list flows with GET /api/v1/flows",
    "unknown_approval": "list pending approvals with GET /api/v1/approvals",
}
"""What to do next about a refusal, said the HTTP way, by its kind. The engine's messages name no surface; the
CLI adds its own hints (`engine.cli.output.CLI_HINTS`)."""


def http_hinted(kind: str, message: str) -> str:
    """`message` with the HTTP API's hint for a refusal of `kind` (as it was when `kind` has none)."""
    hint = HTTP_HINTS.get(kind)
    return f"{message}; {hint}" if hint else message


def unknown(kind: str, noun: str, ident: str) -> ApiError:
    """The 404 of an id that names nothing (`kind` `unknown_run`, `unknown_flow`, `unknown_approval`)."""
    what = "is not published" if kind == "unknown_flow" else "does not exist"
    return ApiError(404, kind, http_hinted(kind, f'{noun} "{ident}" {what}'))


def missing_key(authorization: str | None = None) -> ApiError:
    """The answer to a request without a `Bearer` key; `authorization`: the header as it came, if it did."""
    sent = (authorization or "").strip()
    if not sent:
        return ApiError(401, "missing_key", "send an API key as `Authorization: Bearer lgk_...`; create one with "
                        "`lockgate keys create NAME`")
    scheme, _, rest = sent.partition(" ")
    if scheme.lower() == "bearer":
        problem = "the Authorization header has no key after `Bearer`"
    elif not rest.strip():
        problem = "the Authorization header has a key without `Bearer` before it"
    else:
        problem = f"the Authorization header uses the {scheme[:20]!r} scheme, not Bearer"
    return ApiError(401, "missing_key", f"{problem}; send the key as `Authorization: Bearer <key>`")


def key_refused(refusal: str, message: str) -> ApiError:
    """The answer to a key `check_key` refused: 403 for a valid key without the right, 401 otherwise."""
    return ApiError(403 if refusal == "key_without_rights" else 401, refusal, message)
