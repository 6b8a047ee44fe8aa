"""A run as the CLI shows it to people and pipes: its header lines, its steps' rows, its one-line state."""

from __future__ import annotations

import json

from engine.read_models import Run, RunSummary

STEP_COLUMNS = ("STEP", "NODE", "TYPE", "STATUS", "ATTEMPTS", "MS", "TOKENS IN", "TOKENS OUT", "ERROR")


def waiting_label(run: RunSummary) -> str | None:
    """`node (reason)`, with the child run a `flow.call` waits on; None when the run waits on nothing."""
    waiting = run.waiting_on
    if not isinstance(waiting, dict) or not waiting:
        return None
    child = waiting.get("child_run_id")
    return f"{waiting.get('node')} ({waiting.get('reason')}{f' {child}' if child else ''})"


def text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def header_lines(run: RunSummary) -> list[str]:
    """What `runs show` prints above the steps."""
    from engine.money.amounts import format_usd

    asked = " (cancel requested)" if isinstance(run, Run) and run.cancel_requested else ""
    lines = [f"run {run.id} {run.status}{asked} (flow {run.flow_id} v{run.version})"]
    if run.current_node:
        lines.append(f"current node: {run.current_node}")
    waiting = waiting_label(run)
    if waiting:
        lines.append(f"waiting on: {waiting}")
    if run.result is not None:
        lines.append(f"result: {text(run.result)}")
    if run.error:
        lines.append(f"error: {text(run.error)}")
    lines.append(
        f"cost: {format_usd(run.cost_micros or 0)}, tokens: {run.tokens_in or 0:,} in, {run.tokens_out or 0:,} out"
    )
    if isinstance(run.errors, dict):
        for step, failure in run.errors.items():
            kind, message = (
                (failure.get("type"), failure.get("message")) if isinstance(failure, dict) else ("", failure)
            )
            lines.append(f"went on past {step}: {kind}: {message}")
    if run.parent_run_id:
        lines.append(f"called by run {run.parent_run_id}")
    if run.rerun_of:
        lines.append(f"rerun of run {run.rerun_of} from node {run.from_node}")
    if run.child_run_ids:
        lines.append(f"child runs: {', '.join(run.child_run_ids)}")
    lines.append(f"created {run.created_at}" + (f", finished {run.finished_at}" if run.finished_at else ""))
    return lines


def reused_label(status: str) -> str:
    """A rerun's step taken from the run it reruns: `reused`, or `reused (failed)` for a failure gone past."""
    return "reused" if status == "succeeded" else f"reused ({status})"


def step_rows(run: Run) -> list[tuple[str | int | float | None, ...]]:
    return [
        (
            s.step,
            s.node,
            s.type,
            s.status if s.reused_from is None else reused_label(s.status),
            s.attempts if s.reused_from is None else None,
            None if s.duration_ms is None else round(s.duration_ms, 1),
            s.tokens_in,
            s.tokens_out,
            None if s.error is None else text(s.error),
        )
        for s in run.steps
    ]


def state_line(run: RunSummary) -> str:
    """`runs watch`'s line per change when piped: id, status, current node, what it waits on."""
    return "\t".join((run.id, run.status, run.current_node or "", waiting_label(run) or ""))
