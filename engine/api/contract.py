"""The committed OpenAPI document (`engine/api/openapi.json`): the one the server serves, generated from the
read models. After changing a route or a model, write it again: `python -m engine.api.contract`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa

from engine.api.app import build_app
from engine.api.live_feed import LiveFeed
from engine.api.live_routes import live_router

DOCUMENT = Path(__file__).with_name("openapi.json")


def generated() -> dict[str, Any]:
    # The live routes' store and feed are only called when a request comes; the document needs their shape.
    live = live_router(cast(sa.Engine, None), cast(LiveFeed, None))
    return build_app(None, [live]).openapi()


def as_text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def committed() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    return loaded


def main() -> int:
    DOCUMENT.write_text(as_text(generated()), encoding="utf-8")
    print(f"wrote {DOCUMENT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
