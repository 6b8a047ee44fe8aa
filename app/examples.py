"""The example flows shipped as package data (`resources/examples/*.flow.json`)."""

from __future__ import annotations

from importlib import resources

EXAMPLES_PACKAGE = "resources.examples"
FIRST_START_EXAMPLE = "ticket-triage.flow.json"
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
