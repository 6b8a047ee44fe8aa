"""How CLI commands print: `--json` is the API's model as JSON; people at a terminal get Rich tables, and a
pipe gets plain tab-separated lines (no header), one row a line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pydantic import BaseModel

Cell = str | int | float | None
CLI_HINTS = {
    "unknown_run": "list runs with `lockgate runs list`",
    "unknown_approval": "see pending ones with `lockgate approvals list`",
}
"""What to do next about a refusal, said the command line's way, by its kind (the engine's messages name no
surface; the HTTP API adds its own, `engine.api.errors.HTTP_HINTS`)."""


def cli_hinted(kind: str | None, message: str) -> str:
    """`message` with the command line's hint for a refusal of `kind` (as it was when `kind` has none)."""
    hint = CLI_HINTS.get(kind or "")
    return f"{message}; {hint}" if hint else message


def for_people() -> bool:
    """Whether stdout is a terminal."""
    return sys.stdout.isatty()


def print_json(model: BaseModel, *, compact: bool = False) -> None:
    """The model exactly as the HTTP API answers it; `compact`: on one line (a stream of them)."""
    print(model.model_dump_json(indent=None if compact else 2), flush=True)


def cell(value: Cell) -> str:
    return "" if value is None else str(value)


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Cell]], *, title: str | None = None) -> None:
    """A Rich table at a terminal, else one tab-separated line per row."""
    if not for_people():
        for row in rows:
            print("\t".join(cell(value).replace("\t", " ").replace("\n", " ") for value in row))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")  # a narrow terminal wraps an id or URL, never cuts it
    for row in rows:
        table.add_row(*(cell(value) for value in row))
    Console().print(table)


def note(text: str) -> None:
    """A remark for people (an empty list's hint): stderr, so a pipe reads data only."""
    print(text, file=sys.stderr)
