"""The node catalog table in docs/engine.md lists every type the catalog knows, with its kind."""

from __future__ import annotations

from pathlib import Path

from engine.catalog import CATALOG

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


def test_every_catalog_type_has_a_row_with_its_kind() -> None:
    section = DOC.read_text(encoding="utf-8").split("## Node catalog", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`"): line.split("|")[2].strip()
            for line in section.splitlines() if line.startswith("| `")}
    assert rows == {name: spec.kind for name, spec in CATALOG.items()}
