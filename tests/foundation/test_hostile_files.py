"""Flow files built to break the reader: huge integers, lone surrogates, deep nesting, NaN, very long chains,
durations that do not parse. Each is a diagnostic with its JSON path (or a validation code), exit 1, never a
traceback, from `validate`, `validate --json` and `run` alike."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.durations import DurationError, parse_duration
from engine.validation import validate_document
from tests.cli import LOCKGATE
from tests.foundation.builders import chain, flow_doc, node, of_code

TRACEBACK = "Traceback (most recent call last)"


def _base(**top: Any) -> dict[str, Any]:
    return flow_doc([node("start", "trigger.manual"), node("done", "terminal", {"output": "ok"})],
                    chain("start", "done"), **top)


def _text_with(placeholder_value: str, **top: Any) -> str:
    """The base flow's JSON with the string "@@" replaced by raw JSON text (which json.dumps cannot write)."""
    return json.dumps(_base(**top)).replace('"@@"', placeholder_value)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


HUGE = "9" * 5000
HOSTILE_TEXTS: dict[str, tuple[str, str]] = {
    # name: (file text, the JSON path the diagnostic names)
    "huge-int-in-position": (json.dumps(_base()).replace('"output": "ok"}', '"output": "ok"}, "position": [0, '
                                                          + HUGE + "]"), "$.nodes[1].position[1]"),
    "huge-int-in-config": (_text_with(HUGE, description="@@"), "$.description"),
    "surrogate-in-name": (json.dumps(_base(name="\ud800")), "$.name"),
    "surrogate-in-output": (json.dumps(_base()).replace('"output": "ok"', '"output": "\\udc01 ok"'),
                            "$.nodes[1].config.output"),
    "surrogate-in-key": (json.dumps(_base(inputs={"\ud800": {"type": "string"}})), "$.inputs["),
    "default-300-deep": (_text_with(_nested(300), inputs={"x": {"type": "any", "default": "@@"}}),
                         "$.inputs.x.default[0]"),
    "default-900-deep": (_text_with(_nested(900), inputs={"x": {"type": "any", "default": "@@"}}),
                         "$.inputs.x.default[0]"),
    "default-5000-deep": (_text_with(_nested(5000), inputs={"x": {"type": "any", "default": "@@"}}),
                          "$.inputs.x.default[0]"),
    "nan-default": (_text_with("NaN", inputs={"x": {"type": "any", "default": "@@"}}), "$.inputs.x.default"),
    "overflowing-float": (_text_with("1e999", inputs={"x": {"type": "number", "default": "@@"}}),
                          "$.inputs.x.default"),
    "nan-base-delay": (json.dumps(_base()).replace('"output": "ok"}', '"output": "ok"}, "retry": {"base_delay": '
                                                   "NaN}"), "$.nodes[1].retry.base_delay"),
}


def _write(tmp_path: Path, text: str, name: str = "hostile.flow.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def _lockgate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # An unreachable Redis: validation must not need one, and a refused `run` must stop before starting the engine.
    env = {"LOCKGATE_DATA_DIR": str(tmp_path / "data"), "LOCKGATE_REDIS_URL": "redis://127.0.0.1:1/0",
           "LOCKGATE_DB_URL": "", "PYTHONIOENCODING": "utf-8"}
    import os

    return subprocess.run([*LOCKGATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
                          encoding="utf-8", errors="replace")


@pytest.mark.parametrize("name", sorted(HOSTILE_TEXTS))
def test_a_hostile_file_is_invalid_document_naming_its_path(name: str) -> None:
    text, path = HOSTILE_TEXTS[name]
    flow, found = validate_document(text.encode("utf-8", "surrogatepass"))
    assert flow is None
    assert {d.code for d in found} == {"invalid_document"}, found
    assert any(d.message.startswith(path) for d in found), [d.message for d in found]
    for d in found:
        d.message.encode("utf-8")  # printable: no lone surrogate in the message itself


@pytest.mark.parametrize("name", sorted(HOSTILE_TEXTS))
def test_validate_and_run_refuse_a_hostile_file_without_a_traceback(name: str, tmp_path: Path) -> None:
    path = _write(tmp_path, HOSTILE_TEXTS[name][0])
    human = _lockgate(tmp_path, "validate", str(path))
    assert human.returncode == 1, human.stderr
    assert "invalid_document" in human.stdout and TRACEBACK not in human.stderr
    as_json = _lockgate(tmp_path, "validate", "--json", str(path))
    assert as_json.returncode == 1 and TRACEBACK not in as_json.stderr
    report = json.loads(as_json.stdout)
    assert {d["code"] for d in report["diagnostics"]} == {"invalid_document"}
    ran = _lockgate(tmp_path, "run", str(path))
    assert ran.returncode == 1, ran.stderr
    assert "was not published" in ran.stderr and "invalid_document" in ran.stderr
    assert TRACEBACK not in ran.stderr


BAD_DURATIONS: dict[str, dict[str, Any]] = {
    "retry-soon": _base(),
    "retry-nan-text": _base(),
    "retry-negative": _base(),
    "setting-nan-text": _base(settings={"max_wait": "NaN"}),
    "setting-infinite": _base(settings={"max_delay": "inf"}),
    "setting-negative": _base(settings={"suspended_step_timeout": -5}),
    "queue-delay-nan-text": flow_doc([node("start", "trigger.manual"), node("wait", "queue", {"delay": "nan"}),
                                      node("done", "terminal")], chain("start", "wait", "done")),
    "http-timeout-overflow": flow_doc([node("start", "trigger.manual"),
                                       node("call", "http.request", {"method": "GET", "url": "http://x",
                                                                     "timeout": "9" * 400 + "s"}),
                                       node("done", "terminal")], chain("start", "call", "done")),
}
BAD_DURATIONS["retry-soon"]["nodes"][1]["retry"] = {"base_delay": "soon"}
BAD_DURATIONS["retry-nan-text"]["nodes"][1]["retry"] = {"base_delay": "NaN"}
BAD_DURATIONS["retry-negative"]["nodes"][1]["retry"] = {"base_delay": -1}


@pytest.mark.parametrize("name", sorted(BAD_DURATIONS))
def test_every_duration_in_a_file_is_checked_at_validate_time(name: str) -> None:
    flow, found = validate_document(json.dumps(BAD_DURATIONS[name]))
    assert flow is not None
    bad = of_code(found, "bad_duration")
    assert len(bad) == 1, found
    assert "duration" in bad[0].message or "negative" in bad[0].message


def test_a_run_of_a_file_with_a_bad_retry_delay_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps(BAD_DURATIONS["retry-soon"]))
    ran = _lockgate(tmp_path, "run", str(path))
    assert ran.returncode == 1, ran.stderr
    assert "bad_duration" in ran.stderr and "retry.base_delay" in ran.stderr and TRACEBACK not in ran.stderr


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-Infinity", "1e999", "9" * 400 + "s", "P" + "9" * 400 + "D"])
def test_parse_duration_refuses_what_is_not_a_finite_duration(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


def _long_chain(count: int) -> dict[str, Any]:
    setters = [node(f"s{i}", "set", {"values": {"k": "{{ state.k }}"}}) for i in range(count)]
    nodes = [node("start", "trigger.manual"), *setters, node("done", "terminal")]
    return flow_doc(nodes, chain(*(n["id"] for n in nodes)))


def long_chain_text(count: int = 12_000) -> bytes:
    return json.dumps(_long_chain(count)).encode()


def test_a_12000_node_chain_validates() -> None:
    """Its speed (under 1 s of CPU) is measured by tests/bench/validate_chain.py; here only a hang guard."""
    started = time.process_time()
    flow, found = validate_document(long_chain_text())
    assert time.process_time() - started < 10.0
    assert flow is not None and len(flow.nodes) == 12_002
    assert [d.code for d in found] == ["template_unknown_reference"]  # only the first setter reads an unset key


def test_validate_imports_neither_redis_nor_sql(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps(_long_chain(12_000)))
    probe = ("import sys; from app.main import main; code = main(['validate', sys.argv[1]]); "
             "print(sorted(m for m in ('redis', 'sqlalchemy', 'engine.runtime', 'engine.store') if m in sys.modules))"
             "; sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"
    assert not (tmp_path / "data").exists()
