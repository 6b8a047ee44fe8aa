"""The repository's own rules, enforced by the suite: layer contracts, ruff, mypy, the validation benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

BIN = Path(sys.executable).parent


def run(*command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def test_layer_contracts_hold() -> None:
    result = run(str(BIN / "lint-imports"), "--no-cache")
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = len(pyproject["tool"]["importlinter"]["contracts"])
    assert declared >= 6
    assert f"Contracts: {declared} kept, 0 broken." in report


def test_ruff_is_clean() -> None:
    result = run(str(BIN / "ruff"), "check", ".", "--output-format", "concise", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)  # a cold check of ~270 files: minutes on a busy 2-core machine; only a hang guard
def test_mypy_is_clean(tmp_path: Path) -> None:
    result = run(str(BIN / "mypy"), "--cache-dir", str(tmp_path / "mypy-cache"), "engine", "canvas", "app")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_validation_benchmark_runs_and_prints_json() -> None:
    result = run(sys.executable, "tests/bench/validate_scale.py", "--sizes", "40,120", "--repeat", "2", timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["benchmark"] == "validate_scale"
    sizes = report["sizes"]
    assert [s["nodes"] >= n for s, n in zip(sizes, (40, 120), strict=True)] == [True, True]
    for size in sizes:
        assert size["median_ms"] > 0 and size["runs"] == 2 and size["edges"] >= size["nodes"] - 1
        assert size["diagnostics"] == {}  # the generated flows are realistic: they publish cleanly
    shapes = report["shapes"]
    assert sorted(shapes) == ["canvas", "parallel", "routers"]
    for results in shapes.values():
        assert [r["nodes"] >= n and r["median_ms"] > 0 for r, n in zip(results, (40, 120), strict=True)] == [True] * 2
    # Exclusive branches never race, however many write one key; unreduced parallel writers do.
    assert [r["diagnostics"] for r in shapes["routers"]] == [{}, {}]
    assert all(r["diagnostics"].get("write_conflict") for r in shapes["parallel"])
