"""The commands that wait on a run (`lockgate run FILE`, `lockgate runs rerun`): Ctrl-C ends the wait like
`lockgate runs watch` (exit 130, one line saying the run goes on, no traceback), and the wait reads the store when
the run changes (the projector's live channel), not every few milliseconds."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.main import main
from engine.facade import EngineApi
from engine.read_models import Run
from tests.cli import LOCKGATE
from tests.cli_commands.conftest import GATE, TRIGGER, Served, serve, write_flow
from tests.engine.conftest import make_flow

EXIT_INTERRUPTED = 130
PAUSED = make_flow("paused", [TRIGGER, {"id": "pause", "type": "queue", "config": {"delay": "2s"}},
                              {"id": "done", "type": "terminal", "config": {"output": "{{ 'done' }}"}}],
                   [("start", "pause"), ("pause", "done")])
WAITED_SECONDS = 2.0
MOST_READS = 15
"""Reads of the run in a wait of WAITED_SECONDS: a few a change (polling every 50 ms made 40 and more)."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_prefix: str) -> Iterator[Served]:
    engine = serve(tmp_path_factory.mktemp("serve"), redis_url, module_prefix)
    try:
        with engine.http() as http:
            assert http.post("/api/v1/flows", json=GATE).status_code == 201
        yield engine
    finally:
        code, stderr = engine.stop(signal.SIGTERM)
    assert code == 0, stderr


def _waiting(served: Served, args: list[str], said: str) -> tuple[subprocess.Popen[str], str]:
    """`lockgate *args` started, once its stderr has a line with `said`; that line."""
    process = subprocess.Popen([*LOCKGATE, *args], env=served.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if said in line:
            return process, line
    process.kill()
    raise AssertionError(f"lockgate {' '.join(args)} ended before saying {said!r}: {''.join(seen)}")


def _interrupted(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C to the process; its stdout and the rest of its stderr once it ended with exit code 130."""
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == EXIT_INTERRUPTED and "Traceback" not in err, err
    return out, err


def test_ctrl_c_ends_a_wait_and_the_run_goes_on(served: Served, tmp_path: Path) -> None:
    original = served.start_run("gate", {"tag": "v1"})["run_id"]
    served.wait_status(original, "waiting")
    served.decide(original, "approve")
    served.wait_status(original, "succeeded")

    rerun, queued = _waiting(served, ["runs", "rerun", original, "--from", "ask"], "queued: rerun of")
    rerun_id = queued.split()[1]
    served.wait_status(rerun_id, "waiting")
    out, err = _interrupted(rerun)
    assert f"lockgate runs rerun: interrupted; rerun {rerun_id} goes on" in err
    assert out.startswith(f"run {rerun_id} waiting (flow gate v1)\n") and "waiting on: ask (approval)" in out

    run, _ = _waiting(served, ["run", str(write_flow(tmp_path, GATE)), "--input", 'tag="v2"'], "parked at ask")
    out, err = _interrupted(run)
    assert "lockgate run: interrupted; a parked or queued run continues" in err
    run_id = out.split()[1]
    assert out.startswith(f"run {run_id} waiting (flow gate v1)\n")

    for going_on in (rerun_id, run_id):  # the runs went on: `lockgate serve` finishes them once approved
        served.decide(going_on, "approve")
        served.wait_status(going_on, "succeeded")


def test_run_and_rerun_read_the_run_when_it_changes(tmp_path: Path, redis_url: str, key_prefix: str,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in (("LOCKGATE_DATA_DIR", str(tmp_path / "data")), ("LOCKGATE_REDIS_URL", redis_url),
                        ("LOCKGATE_KEY_PREFIX", key_prefix), ("LOCKGATE_DB_URL", "")):
        monkeypatch.setenv(name, value)
    reads: list[str] = []
    get_run = EngineApi.get_run

    def counted(api: EngineApi, run_id: str) -> Run | None:
        reads.append(run_id)
        return get_run(api, run_id)

    monkeypatch.setattr(EngineApi, "get_run", counted)

    def waited(*argv: str) -> str:
        """`lockgate *argv` in this process, which waits out the queue node's delay; the run it printed."""
        reads.clear()
        started = time.monotonic()
        assert main(list(argv)) == 0
        assert time.monotonic() - started >= WAITED_SECONDS
        assert len(reads) <= MOST_READS, (argv, len(reads))
        run: str = json.loads(capsys.readouterr().out)["id"]
        return run

    run_id = waited("run", str(write_flow(tmp_path, PAUSED)), "--json")
    waited("runs", "rerun", run_id, "--from", "pause", "--json")
