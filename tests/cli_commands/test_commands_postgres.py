"""The front door's commands on PostgreSQL: `lockgate serve` migrates a shared database when told to, and the
commands beside it read and follow runs there; SIGINT stops the server cleanly."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_commands.conftest import GATE, Served, assert_schema, next_line, serve, watch, write_flow


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_prefix: str, module_pg_url: str
) -> Iterator[Served]:
    engine = serve(
        tmp_path_factory.mktemp("serve"),
        redis_url,
        module_prefix,
        LOCKGATE_DB_URL=module_pg_url,
        LOCKGATE_AUTO_MIGRATE="1",
    )
    try:
        yield engine
    finally:
        code, stderr = engine.stop(signal.SIGINT)
    assert code == 0 and "lockgate serve: stopped" in stderr, stderr


def test_publish_list_show_and_watch_on_postgres(served: Served, tmp_path: Path) -> None:
    published = served.lockgate("publish", "--json", str(write_flow(tmp_path, GATE)))
    assert published.returncode == 0, published.stderr
    assert_schema(json.loads(published.stdout), "PublishedFlow")
    run_id = served.start_run("gate", {"tag": "pg"})["run_id"]
    served.wait_status(run_id, "waiting")
    listed = json.loads(served.lockgate("runs", "list", "--status", "waiting", "--json").stdout)
    assert_schema(listed, "RunList")
    assert [run["id"] for run in listed["runs"]] == [run_id]
    follower = watch(served, run_id)
    try:
        assert next_line(follower) == f"{run_id}\twaiting\task\task (approval)"
        served.decide(run_id, "reject")
        rest = follower.communicate(timeout=60)[0].splitlines()
    finally:
        follower.kill()
    assert rest[-1] == f"{run_id}\tsucceeded\tstop\t" and follower.returncode == 0
    shown = served.lockgate("runs", "show", run_id, "--json")
    run = json.loads(shown.stdout)
    assert_schema(run, "Run")
    assert (run["status"], run["result"], run["current_node"], run["waiting_on"]) == (
        "succeeded",
        "stopped",
        "stop",
        None,
    )
