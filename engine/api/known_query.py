"""Query parameters a route does not take are refused: `GET /api/v1/runs?flow=x` (meant: `flow_id`) is a `422
bad_request` naming the parameter, the one it most likely meant, and those the route takes, not a list of every
flow's runs.

`KnownQuery` is ASGI middleware in front of the routes. A request without a query string goes straight on (the
hot path pays one test of `query_string`); one with a query finds its route as the router does and is refused
when it names a parameter the route does not declare. A route's parameters are those of its FastAPI dependant
(the endpoint's and every dependency's, the router's included); a Starlette route of its own (`/openapi.json`)
takes none. A path no route takes, or a method its routes do not, goes on to the application's `404` / `405`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import UnionType
from typing import Any, Union, get_args, get_origin
from urllib.parse import parse_qsl

import orjson
from pydantic import AliasChoices, BaseModel
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.api.allowed_methods import route_contexts

MAX_PROBLEMS = 10
MAX_NAME_CHARS = 100


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model of a query parameter declared as one (`Annotated[Filters, Query()]`, optional or not)."""
    if get_origin(annotation) in (Union, UnionType):
        others = [arg for arg in get_args(annotation) if arg is not type(None)]
        annotation = others[0] if len(others) == 1 else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _names_of(alias: str, validation_alias: Any) -> Iterator[str]:
    if isinstance(validation_alias, str):
        yield validation_alias
    elif isinstance(validation_alias, AliasChoices):
        yield from (choice for choice in validation_alias.choices if isinstance(choice, str))
    yield alias


def declared_query(route: Any) -> tuple[str, ...] | None:
    """The query parameters `route` takes, in the order it declares them; None when any are taken (a parameter
    model allowing extra fields) or the route is one this check cannot read (e.g. a mount)."""
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return () if isinstance(getattr(route, "original_route", route), Route) else None
    names: dict[str, None] = {}
    pending, seen = [dependant], set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        for field in current.query_params:
            model = _model_of(field.field_info.annotation)
            if model is None:
                names.update(dict.fromkeys(_names_of(field.alias, field.field_info.validation_alias)))
                continue
            if model.model_config.get("extra") == "allow":
                return None
            for name, info in model.model_fields.items():
                names.update(dict.fromkeys(_names_of(info.alias or name, info.validation_alias)))
        pending.extend(current.dependencies)
    return tuple(names)


def meant(name: str, taken: Sequence[str]) -> str:
    """`did you mean 'x'?` naming the taken name a typo of `name` most likely meant, or "" when none is close."""
    close = difflib.get_close_matches(name, taken, n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def refusal(given: Iterable[str], taken: Sequence[str]) -> str | None:
    """The message refusing the names in `given` that are not in `taken` (each with the taken one it most likely
    meant, then what the route takes), or None when the route takes them all."""
    problems: list[str] = []
    for name in dict.fromkeys(given):
        if name in taken:
            continue
        hint = f"; {meant(name, taken)}".rstrip()
        problems.append(f"{name[:MAX_NAME_CHARS] or repr(name)}: not a parameter of this request{hint}")
        if len(problems) == MAX_PROBLEMS:
            break
    if not problems:
        return None
    return " ".join(problems) + (f" it takes {', '.join(taken)}" if taken else " it takes no query parameters")


class KnownQuery:
    """ASGI middleware over the application whose routes are `routes` (its router's `routes`, read when a first
    request with a query comes)."""

    def __init__(self, app: ASGIApp, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self.app = app
        self.routes = routes
        self._table: list[tuple[Any, tuple[str, ...] | None]] | None = None

    def _declared(self, scope: Scope) -> tuple[str, ...] | None:
        """The query parameters of the route the request goes to; None to let the application answer it."""
        if self._table is None:
            self._table = [(route, declared_query(route)) for route in route_contexts(self.routes())]
        for route, taken in self._table:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return taken
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("query_string"):
            await self.app(scope, receive, send)
            return
        given = [name for name, _ in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)]
        taken = self._declared(scope) if given else None
        message = refusal(given, taken) if taken is not None else None
        if message is None:
            await self.app(scope, receive, send)
            return
        body = orjson.dumps({"error": {"code": "bad_request", "message": message}})
        await send({"type": "http.response.start", "status": 422,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
