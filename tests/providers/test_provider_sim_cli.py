"""`lockgate provider-sim` as a user starts it: a real process serving the simulator."""

from __future__ import annotations

import re
import subprocess

import httpx

from tests.cli import LOCKGATE


def test_provider_sim_serves_with_its_limits() -> None:
    process = subprocess.Popen([*LOCKGATE, "provider-sim", "--port", "0", "--rpm", "1", "--api-key", "k"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/v1) \(1 requests per 60s\)", banner)
        assert match, banner
        body = {"model": "sim-small", "messages": [{"role": "user", "content": "hello"}]}
        headers = {"authorization": "Bearer k"}
        first = httpx.post(match.group(1) + "/chat/completions", json=body, headers=headers, timeout=5)
        second = httpx.post(match.group(1) + "/chat/completions", json=body, headers=headers, timeout=5)
        assert first.status_code == 200 and first.headers["x-ratelimit-limit-requests"] == "1"
        if second.status_code == 200:  # the minute turned between the two calls: a fresh window
            assert second.headers["x-ratelimit-remaining-requests"] == "0"
        else:
            assert second.status_code == 429 and 1 <= int(second.headers["retry-after"]) <= 60
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_provider_sim_refuses_a_zero_limit() -> None:
    done = subprocess.run([*LOCKGATE, "provider-sim", "--port", "0", "--rpm", "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "--rpm 0 must be 1 or more" in done.stderr
