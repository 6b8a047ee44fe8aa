"""`lockgate validate`, `--help` and `--version`: exit codes, human and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.main import main
from engine import __version__
from tests.conftest import EXAMPLES

LOCKGATE = Path(sys.executable).parent / "lockgate"
HELLO = str(EXAMPLES / "hello.flow.json")
PARKED = str(EXAMPLES / "parked-reserve.flow.json")


def run_lockgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LOCKGATE), *args], capture_output=True, text=True, timeout=60, check=False)


def test_help_lists_validate() -> None:
    result = run_lockgate("--help")
    assert result.returncode == 0
    assert "validate" in result.stdout and "usage: lockgate" in result.stdout


def test_version() -> None:
    result = run_lockgate("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"lockgate {__version__}"


def test_installed_command_validates_and_exits_by_result() -> None:
    ok = run_lockgate("validate", HELLO)
    assert ok.returncode == 0 and ok.stdout.startswith("✓ ") and ok.stderr == ""
    refused = run_lockgate("validate", "--json", PARKED)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["diagnostics"][0]["code"] == "park_inside_finance_chain"


def test_human_output_lists_each_diagnostic_then_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", HELLO, PARKED]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"✓ {HELLO}"
    assert lines[1].startswith(f'{PARKED}: error park_inside_finance_chain [wait]: node "wait"')
    assert lines[-1] == "2 files checked, 1 with errors (1 error, 0 warnings)"


def test_warnings_do_not_fail_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(Path(HELLO).read_text())
    doc["nodes"].append({"id": "orphan", "type": "terminal", "config": {}})
    path = tmp_path / "warn.flow.json"
    path.write_text(json.dumps(doc))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"✓ {path}" in out and "warning unreachable_node [orphan]" in out and "(0 errors, 1 warning)" in out


def test_json_for_one_file_is_an_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--json", PARKED]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["file"] == PARKED and report["ok"] is False
    assert report["diagnostics"] == [
        {
            "code": "park_inside_finance_chain",
            "severity": "error",
            "node": "wait",
            "message": report["diagnostics"][0]["message"],
        }
    ]


def test_json_for_several_files_is_a_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--json", HELLO, str(EXAMPLES / "ticket-triage.flow.json")]) == 0
    reports = json.loads(capsys.readouterr().out)
    assert [r["ok"] for r in reports] == [True, True]
    assert [r["diagnostics"] for r in reports] == [[], []]
    assert reports[0]["file"] == HELLO


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"\xff\xfe garbage",
        b"[]",
        b'{"format": "lockgate.flow/1", "id": "x", "nodes": [{"type": "set"}]}',
        b"[" * 100_000,
    ],
    ids=["empty", "truncated", "binary", "list", "node-without-id", "deep"],
)
def test_a_file_that_is_not_a_flow_is_invalid_document(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.flow.json"
    path.write_bytes(content)
    assert main(["validate", "--json", str(path)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert {d["code"] for d in report["diagnostics"]} == {"invalid_document"}
    assert all(d["message"].startswith("$") for d in report["diagnostics"])


def test_unreadable_paths_exit_2_naming_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.flow.json"
    assert main(["validate", HELLO, str(missing)]) == 2
    captured = capsys.readouterr()
    assert str(missing) in captured.err and "no such file" in captured.err
    assert HELLO in captured.out and "1 file checked, all ok" in captured.out  # the readable file still is
    assert main(["validate", HELLO, str(missing), "--json"]) == 2
    reports = json.loads(capsys.readouterr().out)  # the unreadable path too, so stdout is never empty
    assert [(r["file"], [d["code"] for d in r["diagnostics"]]) for r in reports] == [
        (HELLO, []), (str(missing), ["unreadable_file"])]
    assert main(["validate", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_usage_errors_exit_2() -> None:
    missing_file = run_lockgate("validate")
    assert missing_file.returncode == 2 and "FILE" in missing_file.stderr
    unknown_option = run_lockgate("validate", "--yaml", HELLO)
    assert unknown_option.returncode == 2 and "--yaml" in unknown_option.stderr
