"""Compare a replay with what the test expects; the typed report and its readable diff."""

from __future__ import annotations

import difflib
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field
from rich.console import Console
from rich.text import Text

from engine.flowtest.model import ExpectedOutcome
from engine.flowtest.replay import ReplayResult

Aspect = Literal["status", "path", "state", "result"]
Verdict = Literal["passed", "failed", "error"]


class Difference(BaseModel):
    """One way the replay differs from the recording."""

    aspect: Aspect
    key: str | None = None
    """`state` only: the state key that differs."""
    expected: Any = None
    actual: Any = None
    missing: Literal["expected", "actual"] | None = None
    """`state` only: the side that has no such key."""


class TestReport(BaseModel):
    """One test file's outcome: passed, failed (with its differences), or error (it could not be replayed)."""

    __test__: ClassVar[bool] = False

    file: str
    name: str | None = None
    flow_id: str | None = None
    verdict: Verdict
    differences: list[Difference] = Field(default_factory=list)
    problem: str | None = None
    """`error` only: why the test could not run (unreadable file, no flow beside it)."""
    actual: ReplayResult | None = None
    seconds: float = 0.0
    """Wall time of the replay."""


class SuiteReport(BaseModel):
    """Every test given to `lockgate test` (or the app's Flow ▸ Run tests)."""

    passed: bool
    tests: list[TestReport]
    seconds: float = 0.0


def differences(expected: ExpectedOutcome, actual: ReplayResult) -> list[Difference]:
    found: list[Difference] = []
    if (expected.status, expected.error_type) != (actual.status, actual.error_type):
        found.append(
            Difference(
                aspect="status",
                expected=_status(expected.status, expected.error_type),
                actual=_status(actual.status, actual.error_type),
            )
        )
    if expected.path != actual.path:
        found.append(Difference(aspect="path", expected=expected.path, actual=actual.path))
    for key in sorted(set(expected.state) | set(actual.state)):
        if key not in actual.state:
            found.append(Difference(aspect="state", key=key, expected=expected.state[key], missing="actual"))
        elif key not in expected.state:
            found.append(Difference(aspect="state", key=key, actual=actual.state[key], missing="expected"))
        elif expected.state[key] != actual.state[key]:
            found.append(Difference(aspect="state", key=key, expected=expected.state[key], actual=actual.state[key]))
    if expected.result != actual.result:
        found.append(Difference(aspect="result", expected=expected.result, actual=actual.result))
    return found


def _status(status: str, error_type: str | None) -> str:
    return f"{status} ({error_type})" if error_type else status


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_lines(difference: Difference) -> list[tuple[str, str]]:
    """The difference as (style, line) pairs: `-` expected, `+` replayed (also the app's tooltip text)."""
    if difference.aspect == "path":
        lines = difflib.ndiff(list(difference.expected or []), list(difference.actual or []))
        return [
            ("red" if line[0] == "-" else "green" if line[0] == "+" else "dim", "    " + line)
            for line in lines
            if line[0] != "?"
        ]
    out: list[tuple[str, str]] = []
    if difference.missing != "expected":
        out.append(("red", f"    - {_json(difference.expected)}"))
    if difference.missing != "actual":
        out.append(("green", f"    + {_json(difference.actual)}"))
    return out


def headline(difference: Difference) -> str:
    if difference.aspect == "state":
        side = {"actual": " (replay did not write it)", "expected": " (the recorded run did not write it)"}
        return f"state.{difference.key}{side.get(difference.missing or '', '')}"
    return difference.aspect


def summary(report: TestReport) -> str:
    """One line: what failed, for a list row."""
    if report.verdict == "error":
        return report.problem or "could not run"
    if report.verdict == "passed":
        return "passed"
    return "differs in " + ", ".join(headline(d) for d in report.differences)


def print_report(suite: SuiteReport, console: Console) -> None:
    for report in suite.tests:
        label = report.name or report.file
        if report.verdict == "passed":
            console.print(Text.assemble(("PASS ", "bold green"), label, (f"  {report.seconds * 1000:.0f} ms", "dim")))
            continue
        if report.verdict == "error":
            console.print(Text.assemble(("ERROR ", "bold red"), label, ": ", report.problem or ""))
            continue
        console.print(Text.assemble(("FAIL ", "bold red"), label, ("  " + report.file, "dim")))
        for difference in report.differences:
            console.print(Text("  " + headline(difference), style="bold"))
            for style, line in diff_lines(difference):
                console.print(Text(line, style=style))
        if report.actual is not None and report.actual.error:
            console.print(Text(f"  replay's error: {report.actual.error}", style="yellow"))
    failed = sum(1 for r in suite.tests if r.verdict != "passed")
    tail = f"{len(suite.tests) - failed} passed, {failed} failed" if failed else f"{len(suite.tests)} passed"
    console.print(Text(f"{tail} in {suite.seconds:.2f} s", style="bold green" if suite.passed else "bold red"))
