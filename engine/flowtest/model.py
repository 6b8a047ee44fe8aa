"""The `*.flowtest.json` file: a finished run's inputs, the answers of its boundary steps, what it did.

Written byte-stable: the file's own keys in the order declared here, every recorded value (inputs, writes,
state, result) with its keys sorted, 2-space indent, a trailing newline; so a test recorded again from an
equal run, on SQLite or PostgreSQL, is the same text and reviews as a small diff in git.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FORMAT: Final = "lockgate.flowtest/1"
SUFFIX = ".flowtest.json"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"

PURE_TYPES = frozenset(
    {
        "trigger.manual",
        "trigger.schedule",
        "trigger.webhook",
        "trigger.event",
        "set",
        "router",
        "join",
        "foreach",
        "terminal",
        "queue",
    }
)
"""Node types replay runs with their real bodies; every other type is a boundary step, answered from the file."""
WAITING_TYPES = frozenset({"approval", "wait.callback", "flow.call"})
"""Boundary types that park before their answer: replay parks them for the recorded wait (the clock jumps)."""

StepStatus = Literal["succeeded", "failed"]
RunEnd = Literal["succeeded", "failed"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordedFrom(_Strict):
    """The run the test was recorded from."""

    run_id: str
    version: int
    """The published flow version that run pinned."""
    started_at: float
    """When it started (epoch seconds): replay's clock starts here, so recorded times read the same."""


class RecordedAnswer(_Strict):
    """What one boundary step answered in the recorded run: its ports and writes, or its failure."""

    step: str
    """The step key: the node id, or `node[index]` inside a foreach."""
    node: str
    type: str
    status: StepStatus
    attempts: int = Field(default=1, ge=1)
    """Attempts it took: replay fails the ones before the last, so a `retry` policy is walked as recorded."""
    ports: list[str] | None = None
    writes: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    error_type: str | None = None
    waited_seconds: float | None = None
    """Waiting types only: from the step's start to its answer (an approval's decision, a callback, a child)."""
    given: dict[str, Any] | None = None
    """What the step was given (secrets redacted), for the reader; an approval's `timeout` is compared."""


class ExpectedOutcome(_Strict):
    """What the recorded run did: replay must do the same."""

    status: RunEnd
    error_type: str | None = None
    path: list[str]
    """Top-level node ids in the order their steps started."""
    state: dict[str, Any]
    result: Any = None


class FlowTest(_Strict):
    format: Literal["lockgate.flowtest/1"] = FORMAT
    name: str = Field(pattern=NAME_PATTERN)
    flow_id: str
    recorded_from: RecordedFrom
    trigger: str
    inputs: dict[str, Any]
    """The run's inputs as stored (secret inputs read `***`)."""
    answers: list[RecordedAnswer]
    expected: ExpectedOutcome


class FlowTestLoadError(ValueError):
    """A file that is not a flow test: `problems` are (JSON path, message) pairs."""

    def __init__(self, path: str, problems: list[tuple[str, str]]) -> None:
        super().__init__(f"{path}: " + "; ".join(f"{where}: {message}" for where, message in problems))
        self.problems = problems


def file_name(flow_id: str, name: str) -> str:
    """`<flow>.<name>.flowtest.json`."""
    return f"{flow_id}.{name}{SUFFIX}"


def valid_name(name: str) -> bool:
    return re.match(NAME_PATTERN, name) is not None


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


_DATA_FIELDS = frozenset({"inputs", "writes", "state", "result", "given"})


def _ordered(value: Any) -> Any:
    """The model's own keys in declared order; the recorded data under them sorted."""
    if isinstance(value, dict):
        return {key: _sorted(item) if key in _DATA_FIELDS else _ordered(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_ordered(item) for item in value]
    return value


def dump_test(test: FlowTest) -> str:
    """Byte-stable text of a flow test (fields that are null left out)."""
    return json.dumps(_ordered(test.model_dump(mode="json", exclude_none=True)), indent=2, ensure_ascii=False) + "\n"


def load_test_text(text: str | bytes, where: str = "flow test") -> FlowTest:
    try:
        return FlowTest.model_validate_json(text)
    except ValidationError as exc:
        problems = [
            ("$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]), error["msg"])
            for error in exc.errors(include_url=False)
        ]
        raise FlowTestLoadError(where, problems) from None


def load_test(path: str | Path) -> FlowTest:
    """Read a `*.flowtest.json` file; raises OSError or FlowTestLoadError."""
    return load_test_text(Path(path).read_bytes(), str(path))


def save_test(test: FlowTest, directory: str | Path, *, replace: bool = False) -> Path:
    """Write the test as `<dir>/<flow>.<name>.flowtest.json` atomically; returns its path. A file already
    there is replaced only with `replace`; otherwise FileExistsError, and it is left as it was."""
    target = Path(directory) / file_name(test.flow_id, test.name)
    if not replace and target.exists():
        raise FileExistsError(errno.EEXIST, "a flow test file is there already", str(target))
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(dump_test(test), encoding="utf-8")
    if replace:
        tmp.replace(target)
        return target
    try:
        os.link(tmp, target)  # fails, leaving the file there as it was, if one appeared meanwhile
    except FileExistsError:
        tmp.unlink(missing_ok=True)
        raise
    except OSError:  # a file system without hard links: the check above stands
        tmp.replace(target)
    else:
        tmp.unlink(missing_ok=True)
    return target
