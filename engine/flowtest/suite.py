"""Run flow test files: each against the flow beside it (or the flow given), into one `SuiteReport`."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from engine.flow import Flow, FlowLoadError, load_flow
from engine.flowtest.model import SUFFIX, FlowTest, FlowTestLoadError, load_test
from engine.flowtest.replay import replay
from engine.flowtest.report import SuiteReport, TestReport, differences

FLOW_SUFFIX = ".flow.json"


def flow_beside(test_file: Path, flow_id: str) -> Path | None:
    """The `*.flow.json` in the test's folder whose id is `flow_id` (`<flow_id>.flow.json` looked at first)."""
    preferred = test_file.parent / f"{flow_id}{FLOW_SUFFIX}"
    others = sorted(p for p in test_file.parent.glob(f"*{FLOW_SUFFIX}") if p != preferred)
    for candidate in [preferred, *others] if preferred.is_file() else others:
        try:
            if load_flow(candidate).id == flow_id:
                return candidate
        except (OSError, FlowLoadError):
            continue
    return None


def flow_tests_beside(flow_file: Path, flow_id: str) -> list[Path]:
    """The flow's test files in its folder: `<flow_id>.<name>.flowtest.json`."""
    return sorted(flow_file.parent.glob(f"{flow_id}.*{SUFFIX}"))


def run_test(test: FlowTest, flow: Flow, file: str) -> TestReport:
    if test.flow_id != flow.id:
        return TestReport(
            file=file,
            name=test.name,
            flow_id=test.flow_id,
            verdict="error",
            problem=f'the test is of flow "{test.flow_id}", not "{flow.id}"',
        )
    began = time.perf_counter()
    actual = replay(flow, test)
    found = differences(test.expected, actual)
    return TestReport(
        file=file,
        name=test.name,
        flow_id=test.flow_id,
        verdict="failed" if found else "passed",
        differences=found,
        actual=actual,
        seconds=time.perf_counter() - began,
    )


def run_file(path: Path, flow: Flow | None = None) -> TestReport:
    """One test file against `flow`, or (None) the flow beside it."""
    try:
        test = load_test(path)
    except OSError as exc:
        return TestReport(file=str(path), verdict="error", problem=f"cannot be read ({exc.strerror or exc})")
    except FlowTestLoadError as exc:
        return TestReport(file=str(path), verdict="error", problem=f"not a flow test: {exc}")
    if flow is None:
        flow_file = flow_beside(path, test.flow_id)
        if flow_file is None:
            return TestReport(
                file=str(path),
                name=test.name,
                flow_id=test.flow_id,
                verdict="error",
                problem=f'no {test.flow_id}{FLOW_SUFFIX} (a flow with id "{test.flow_id}") beside '
                "the test; keep tests in the flow's folder or pass --flow FILE",
            )
        flow = load_flow(flow_file)
    return run_test(test, flow, str(path))


def run_files(paths: Iterable[Path], flow: Flow | None = None) -> SuiteReport:
    began = time.perf_counter()
    reports = [run_file(Path(path), flow) for path in paths]
    return SuiteReport(
        passed=all(r.verdict == "passed" for r in reports), tests=reports, seconds=time.perf_counter() - began
    )
