"""Starting this program again, from Python or from a frozen bundle, whose `sys.executable` is the `lockgate`
program and takes no interpreter options (`engine.relaunch`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.relaunch import AS_PYTHON, lockgate_command, python_command
from engine.runtime.script_runner import ScriptRequest, run_script

ROOT = Path(__file__).resolve().parents[2]
AS_BUNDLE = [sys.executable, "-m", "app", AS_PYTHON]
"""What a bundle's `lockgate --as-python` runs: app/__main__.py, handed the interpreter's command line."""


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AS_BUNDLE, *args], cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=60)


def test_from_python_the_commands_are_the_interpreters() -> None:
    assert python_command("-c", "pass") == [sys.executable, "-c", "pass"]
    assert lockgate_command("worker") == [sys.executable, "-m", "app", "worker"]


def test_from_a_bundle_the_program_is_both_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/lockgate/lockgate")
    assert python_command("-I", "-c", "pass") == ["/opt/lockgate/lockgate", AS_PYTHON, "-I", "-c", "pass"]
    assert lockgate_command("worker", "--role", "http") == ["/opt/lockgate/lockgate", "worker", "--role", "http"]


def test_the_program_stands_in_for_python_with_code_a_module_or_a_script(tmp_path: Path) -> None:
    code = _run("-I", "-S", "-c", "import sys; print(sys.argv); sys.exit(3)", "a", "b")
    assert (code.returncode, code.stdout.strip()) == (3, "['-c', 'a', 'b']"), code.stderr
    module = _run("-m", "json.tool", stdin='{"a": [1]}')
    assert module.returncode == 0 and '"a": [' in module.stdout, module.stderr
    script = tmp_path / "main.py"
    script.write_text("import sys\nprint(__name__, sys.argv[1:])\nraise SystemExit('bad input')\n")
    ran = _run("-I", str(script), "x")
    assert (ran.returncode, ran.stdout.strip(), ran.stderr.strip()) == (1, "__main__ ['x']", "bad input")
    failed = _run("-c", "raise ValueError('no')")
    assert failed.returncode == 1 and "ValueError: no" in failed.stderr
    assert _run("-I").returncode == 2 and _run("-c").returncode == 2


def test_a_script_step_runs_in_a_bundles_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in `lockgate` program that, like a bundle, knows no interpreter options: the script's launcher and
    the script itself both run through `--as-python`."""
    boot = tmp_path / "boot.py"
    boot.write_text(f"import runpy, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                    "runpy.run_module('app', run_name='__main__')\n")
    program = tmp_path / "lockgate"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {boot} "$@"\n')
    program.chmod(0o755)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(program))
    outcome = run_script(ScriptRequest("python", "import sys\nprint(sys.stdin.read().upper())\n", b"hello", {},
                                       timeout=30, memory_mb=512))
    assert (outcome.returncode, outcome.stdout.strip()) == (0, b"HELLO"), outcome
