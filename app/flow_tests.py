"""Flow ▸ Run tests: the open flow's `*.flowtest.json` files beside its file, replayed against the flow as it
is now (unsaved edits included); each failing test becomes a problem in the Problems panel until the next run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QInputDialog, QLineEdit, QMessageBox, QWidget

from canvas.document import FlowDocument
from engine.flow import Flow
from engine.flowtest.model import valid_name
from engine.flowtest.report import SuiteReport, TestReport, summary
from engine.flowtest.suite import flow_tests_beside, run_files
from engine.validation import Diagnostic

TEST_FAILED = "flow_test_failed"
TEST_ERROR = "flow_test_error"


@dataclass(frozen=True)
class FlowTestDiagnostic(Diagnostic):
    """A test of the flow that failed (or could not run) when the tests last ran."""

    file: str = ""


def _divergence(report: TestReport) -> tuple[str | None, str]:
    """(the node where the replay's path leaves the recorded one, a sentence saying how), or (None, "")."""
    path = next((d for d in report.differences if d.aspect == "path"), None)
    if path is None:
        return None, ""
    expected, actual = [str(n) for n in path.expected or []], [str(n) for n in path.actual or []]
    for want, got in zip(expected, actual, strict=False):
        if want != got:
            return got, f"; the recording went on to {want}, the flow now goes to {got}"
    if len(actual) < len(expected):
        stop = actual[-1] if actual else None
        return stop, f"; the flow now stops at {stop}, the recording went on to {expected[len(actual)]}"
    return actual[len(expected)], f"; the flow now goes on past {expected[-1] if expected else 'the start'}"


def failing_test_problems(suite: SuiteReport) -> list[Diagnostic]:
    """One warning per test that did not pass (tests never block publishing)."""
    found: list[Diagnostic] = []
    for report in suite.tests:
        if report.verdict == "passed":
            continue
        name = report.name or Path(report.file).name
        code = TEST_ERROR if report.verdict == "error" else TEST_FAILED
        node, how = _divergence(report)
        message = (
            f"test {name}: {summary(report)}{how} ({Path(report.file).name}; see the whole diff with "
            "`lockgate test FILE`)"
        )
        found.append(FlowTestDiagnostic(code, "warning", node, message, report.file))
    return found


@dataclass
class FlowTestResults:
    """The last run of one document's tests, kept as a check of the document, so validation keeps showing it."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __call__(self, _flow: Flow) -> list[Diagnostic]:
        return list(self.diagnostics)


def run_tests_of(flow: Flow, flow_file: Path) -> SuiteReport:
    """Replay every test of `flow` found beside `flow_file` against `flow`."""
    return run_files(flow_tests_beside(flow_file, flow.id), flow)


def run_document_tests(document: FlowDocument) -> tuple[str, SuiteReport | None]:
    """Run the document's tests, put their failures in its problems (validated again); the status message."""
    if document.path is None:
        return "Save the flow first: its tests are the *.flowtest.json files beside its file.", None
    flow = document.flow_ref()
    suite = run_tests_of(flow, Path(document.path))
    results = next((c for c in document.extra_checks if isinstance(c, FlowTestResults)), None)
    if results is None:
        results = FlowTestResults()
        document.extra_checks.append(results)
    results.diagnostics = failing_test_problems(suite)
    document.validate_now()
    if not suite.tests:
        return (
            f"No tests of {flow.id} beside {Path(document.path).name}: save a finished run as a test "
            "(Save as test… in the run's window)."
        ), suite
    failed = sum(1 for r in suite.tests if r.verdict != "passed")
    took = f"in {suite.seconds * 1000:.0f} ms"
    if failed:
        return f"{failed} of {len(suite.tests)} tests of {flow.id} failed {took}: see Problems.", suite
    return f"{len(suite.tests)} tests of {flow.id} passed {took}.", suite


def flow_folder(documents: list[FlowDocument], flow_id: str) -> Path | None:
    """The folder of an open, saved flow with id `flow_id`: where its tests belong."""
    for document in documents:
        if document.path is not None and document.flow_ref().id == flow_id:
            return Path(document.path).parent
    return None


def ask_test_target(parent: QWidget, flow_id: str, folder: Path | None) -> tuple[str, Path] | None:
    """Ask the test's name (and, when no open flow file says where, its folder); None when cancelled."""
    name, accepted = QInputDialog.getText(
        parent,
        "Save as test",
        f"Test name ({flow_id}.<name>.flowtest.json, beside the flow):",
        QLineEdit.EchoMode.Normal,
        "case-1",
    )
    if not accepted or not valid_name(name.strip()):
        return None
    if folder is None:
        chosen = QFileDialog.getExistingDirectory(parent, f"Folder of {flow_id}.flow.json")
        if not chosen:
            return None
        folder = Path(chosen)
    return name.strip(), folder


def ask_replace_test(parent: QWidget, path: Path) -> bool:
    """Whether to replace the test file at `path` with the new recording (Cancel is the default)."""
    answer = QMessageBox.question(
        parent,
        "Replace test?",
        f"{path.name} exists already in {path.parent}.\n\nReplace it with a recording of this run? Its "
        "recorded answers and expectations are overwritten.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    return answer == QMessageBox.StandardButton.Yes
