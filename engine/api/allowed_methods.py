"""The methods a request's path takes, over every route of the application.

Starlette refuses a method with the `Allow` of the first route whose path matched, but a path can have several
routes (`GET` and `POST /api/v1/flows`): the path takes the methods of them all. A route takes what its routing
answers: FastAPI's routes only the methods they declare, Starlette's (`/openapi.json`) `HEAD` with `GET` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import fastapi.routing
from fastapi import Request
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

route_contexts: Callable[[Sequence[BaseRoute]], Iterable[Any]] = getattr(fastapi.routing, "iter_route_contexts",
                                                                          iter)
"""`app.routes` with the routes of the routers it includes (before FastAPI 0.137.2 it lists them all itself)."""


def allowed_methods(request: Request) -> list[str]:
    """The methods `request`'s path takes, in alphabetical order."""
    scope = request.scope
    # Routing from the application's top, whatever root path a mount the request went through had set.
    top = {**scope, "root_path": scope.get("app_root_path", scope.get("root_path", ""))}
    return sorted(_taken(request.app.routes, top))


def _taken(routes: Sequence[BaseRoute], scope: Scope) -> set[str]:
    methods: set[str] = set()
    for route in route_contexts(routes):
        match, child_scope = route.matches(scope)
        if match is Match.NONE:
            continue
        declared = getattr(route, "methods", None)
        if declared:
            methods |= declared
        else:  # a mount: the routes of what is mounted, at the rest of the path
            methods |= _taken(getattr(route, "routes", []), {**scope, **child_scope})
    return methods
