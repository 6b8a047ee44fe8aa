"""`lockgate webhooks enable|list` print URLs on the port `lockgate serve` serves on (it notes it in the data
folder); `--base-url`, then LOCKGATE_PUBLIC_URL, then LOCKGATE_HTTP_URL win over that."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cli import lockgate
from tests.cli_commands.conftest import Served, serve
from tests.engine.conftest import make_flow

TICKETS = make_flow("tickets", [{"id": "hook", "type": "trigger.webhook"}, {"id": "done", "type": "terminal"}],
                    [("hook", "done")])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_prefix: str) -> Iterator[Served]:
    engine = serve(tmp_path_factory.mktemp("serve"), redis_url, module_prefix, LOCKGATE_HTTP_URL="",
                   LOCKGATE_PUBLIC_URL="")  # unset: the served URL is the one to print
    try:
        with engine.http() as http:
            assert http.post("/api/v1/flows", json=TICKETS).status_code == 201
        yield engine
    finally:
        code, stderr = engine.stop(signal.SIGTERM)
    assert code == 0, stderr


def _webhooks(served: Served, *args: str, **env: str) -> list[dict[str, Any]]:
    """`lockgate webhooks *args tickets --json` beside the server, with `env` added to its environment."""
    done = lockgate({**served.env, **env}, "webhooks", *args, "tickets", "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def test_enable_and_list_print_the_served_port(served: Served) -> None:
    assert not served.url.endswith(":8080")  # port 0: the URL differs from the default's
    [enabled] = _webhooks(served, "enable")
    assert enabled["url"] == f"{served.url}/webhooks/{enabled['token']}"
    [listed] = _webhooks(served, "list")
    assert listed["url"] == enabled["url"]
    plain = served.lockgate("webhooks", "list", "tickets")
    assert f"{served.url}/webhooks/{enabled['token']}" in plain.stdout


def test_given_and_configured_urls_win_over_the_served_one(served: Served) -> None:
    [row] = _webhooks(served, "enable")
    token = row["token"]
    [given] = _webhooks(served, "list", "--base-url", "https://hooks.example.com/")
    assert given["url"] == f"https://hooks.example.com/webhooks/{token}"
    [http] = _webhooks(served, "list", LOCKGATE_HTTP_URL="http://10.0.0.5:9000")
    assert http["url"] == f"http://10.0.0.5:9000/webhooks/{token}"
    [public] = _webhooks(served, "list", LOCKGATE_HTTP_URL="http://10.0.0.5:9000",
                         LOCKGATE_PUBLIC_URL="https://public.example.com")
    assert public["url"] == f"https://public.example.com/webhooks/{token}"
