"""Engine answers as the app says them: what to do next points at the app's own controls, not at CLI commands
(the engine writes its messages for the terminal too)."""

from __future__ import annotations

import re
from collections.abc import Collection

from engine.flow import Flow
from engine.money.preflight import budgets_used

# "; create it with `lockgate budgets set …`", "(lockgate run publishes it)": the terminal's way to fix it.
_CLI_CLAUSE = re.compile(r"\s*[;,]\s*[^;,()]*`lockgate [^`]*`[^;()]*|\s*\((?:[^()]*`)?lockgate [^)]*\)")


def without_cli_hints(text: str) -> str:
    """`text` with its clauses that tell the user to run a `lockgate …` command removed."""
    return _CLI_CLAUSE.sub("", text).strip()


def run_refusal(flow: Flow, error: BaseException, known_budgets: Collection[str] | None) -> str:
    """Why a run of `flow` did not start, and which control in the app fixes it."""
    reason = getattr(error, "reason", None)
    if isinstance(error, LookupError) and reason is None:
        return f"{flow.id} is not published yet: publish it first (Flow ▸ Publish, Ctrl+Shift+P)"
    if reason == "unknown_budget":
        missing = [n for n in budgets_used(flow) if known_budgets is None or n not in known_budgets]
        named = ", ".join(f'"{n}"' for n in missing) or "it reserves from"
        return f"{flow.id} reserves from budget {named}, which the engine does not have: add it in Settings ▸ Budgets"
    if reason == "budget_exhausted":
        return f"{without_cli_hints(str(error))}; raise its limit in Settings ▸ Budgets, or wait for the next period"
    return without_cli_hints(str(error))
