"""The `script` body: the run's state container in on stdin, stdout out under `output_key`.

Templates reach a script only through `env` (rendered here) and the state container on stdin (secret
inputs redacted); the code itself is never rendered, so no template can build a command line.
"""

from __future__ import annotations

import json
from typing import Any

from engine.config import DEFAULT_MAX_INPUT_DEPTH
from engine.durations import parse_duration
from engine.json_bounds import json_problems, loads
from engine.runtime.bodies import StepCall, StepCancelled, StepError, StepResult, register_body
from engine.runtime.script_runner import (
    MAX_OUTPUT_BYTES,
    STDERR_TAIL_BYTES,
    ScriptOutcome,
    ScriptRequest,
    run_script,
)
from engine.templates import TemplateProblem, render

SCRIPT_FAILED = "script_failed"
"""The script exited with a non-zero status (or could not start)."""
SCRIPT_KILLED = "script_killed"
"""A signal ended the script (its own, the memory limit's, another process's)."""
SCRIPT_TIMEOUT = "script_timeout"
OUTPUT_TOO_LARGE = "output_too_large"
OUTPUT_UNFIT = "output_unfit"
"""stdout parsed as JSON the engine cannot carry (nested too deep, NaN, a huge integer)."""
SCRIPT_ERROR_TYPES = (SCRIPT_FAILED, SCRIPT_KILLED, SCRIPT_TIMEOUT, OUTPUT_TOO_LARGE, OUTPUT_UNFIT)
_LOOP_NAMES = ("item", "index")


def _where(call: StepCall) -> str:
    return f'node "{call.node.id}" (script)'


def _script_given(call: StepCall) -> dict[str, Any]:
    config = call.config
    env: dict[str, str] = {}
    names = call.names()
    for name, source in config.get("env", {}).items():
        try:
            env[name] = render(source, names)
        except TemplateProblem as exc:
            raise StepError(f"{_where(call)}: env.{name}: {exc}", "template_error") from None
    return {"language": config["language"], "code": config["code"], "timeout": config.get("timeout", "60s"),
            "memory_mb": int(config.get("memory_mb", 512)), "env": env}


def _stdin(call: StepCall) -> bytes:
    """The state container the script reads: inputs, state and run facts (and item, index in a foreach)."""
    container: dict[str, Any] = {"inputs": call.ctx.plain(call.ctx.inputs),
                                 "state": call.ctx.plain(call.extra_names.get("state", call.ctx.state)),
                                 "run": call.ctx.run_facts}
    for name in _LOOP_NAMES:
        if name in call.extra_names:
            container[name] = call.ctx.plain(call.extra_names[name])
    return json.dumps(call.ctx.redact(container), default=str, ensure_ascii=False).encode("utf-8")


def _stderr_part(outcome: ScriptOutcome) -> str:
    tail = outcome.stderr_tail.rstrip()
    return f"; stderr (last {STDERR_TAIL_BYTES // 1024} KB): {tail}" if tail else "; stderr was empty"


def _failure(call: StepCall, outcome: ScriptOutcome, language: str, timeout: float) -> StepError | None:
    where = _where(call)
    if outcome.output_too_large:
        return StepError(f"{where}: the script wrote more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MB to stdout, "
                         "so it was stopped; write large results to a store and print a reference to them",
                         OUTPUT_TOO_LARGE)
    if outcome.timed_out:
        return StepError(f"{where}: the script was still running at its timeout ({timeout:g}s) and was killed "
                         f"with every process it started{_stderr_part(outcome)}", SCRIPT_TIMEOUT)
    if outcome.returncode < 0:
        return StepError(f"{where}: {language} was killed by {outcome.signal_name} "
                         f"(exit status {outcome.returncode}){_stderr_part(outcome)}", SCRIPT_KILLED)
    if outcome.returncode != 0:
        return StepError(f"{where}: {language} exited with status {outcome.returncode}{_stderr_part(outcome)}",
                         SCRIPT_FAILED)
    return None


def _output(call: StepCall, stdout: bytes) -> Any:
    """stdout as JSON when it parses, else as text without its trailing newline."""
    text = stdout.decode("utf-8", errors="replace")
    try:
        value = loads(text)
    except (ValueError, RecursionError):
        return text[:-1] if text.endswith("\n") else text
    problems = json_problems(value, DEFAULT_MAX_INPUT_DEPTH, "$", limit=1)
    if problems:
        raise StepError(f"{_where(call)}: stdout is JSON the engine cannot store: {problems[0].path}: "
                        f"{problems[0].message}", OUTPUT_UNFIT)
    return value


@register_body("script", blocking=True, prepare=_script_given)
def script_body(call: StepCall) -> StepResult:
    given = call.given
    timeout = parse_duration(given["timeout"])
    request = ScriptRequest(language=given["language"], code=given["code"], stdin=_stdin(call),
                            env=dict(given["env"]), timeout=timeout, memory_mb=given["memory_mb"])
    try:
        outcome = run_script(request, should_stop=call.cancelled)
    except (OSError, ValueError) as exc:  # ValueError: an env value with a NUL character
        raise StepError(f"{_where(call)}: the script could not start: {exc}", SCRIPT_FAILED) from None
    if outcome.stopped:
        raise StepCancelled(f"{_where(call)}: the run was cancelled while its script ran, so the script was stopped "
                            f"with every process it started{_stderr_part(outcome)}")
    failure = _failure(call, outcome, given["language"], timeout)
    if failure is not None:
        raise failure
    key = call.config.get("output_key") or call.node.id
    return StepResult(ports=("out",), writes={key: _output(call, outcome.stdout)})
