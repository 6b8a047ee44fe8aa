"""The example flows shipped as package data (`resources/examples/*.flow.json`)."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from engine.providers.simulator import DEMO_REFUNDS_PATH

if TYPE_CHECKING:
    from engine.flow import Flow

EXAMPLES_PACKAGE = "resources.examples"
FIRST_START_EXAMPLE = "ticket-triage.flow.json"
STARTER_BUDGET = ("default", 5.0)
"""The budget a fresh install starts with (name, USD a month): the first-start example reserves its model call on
"default", so without one its runs are refused. Settings ▸ Budgets changes or removes it."""
FIRST_START_HINT = (
    "Try it: click “Classify” to edit its prompt on the right, press F7 to validate, "
    "then Publish (Ctrl+Shift+P) and Run (F5)."
)


def example_names() -> list[str]:
    """File names of the bundled examples, sorted."""
    folder = resources.files(EXAMPLES_PACKAGE)
    return sorted(item.name for item in folder.iterdir() if item.name.endswith(".flow.json"))


def example_bytes(name: str) -> bytes:
    """The bytes of one bundled example; raises FileNotFoundError naming the ones that exist."""
    item = resources.files(EXAMPLES_PACKAGE).joinpath(name)
    if not item.is_file():
        raise FileNotFoundError(f"no bundled example {name!r}; the examples are {', '.join(example_names())}")
    return item.read_bytes()


OFFLINE_STAND_INS: dict[str, str] = {"http://127.0.0.1:9/refunds": DEMO_REFUNDS_PATH}
"""Outside services the shared examples call on the discard port (where nothing answers), and the path of the
stand-in the app's provider simulator serves for each: an opened example then runs offline end to end."""


def example_flow(name: str, simulator_root: str) -> Flow:
    """A bundled example as the app opens it: its outside calls pointed at the stand-ins of the simulator at
    `simulator_root` (`http://127.0.0.1:8765`)."""
    from engine.flow import load_flow_text

    flow = load_flow_text(example_bytes(name))
    nodes = []
    for node in flow.nodes:
        path = OFFLINE_STAND_INS.get(node.config.get("url", "")) if node.type == "http.request" else None
        if path is not None:
            node = node.model_copy(update={"config": {**node.config, "url": simulator_root.rstrip("/") + path}})
        nodes.append(node)
    return flow.model_copy(update={"nodes": nodes})
