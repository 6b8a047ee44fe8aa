"""Resume URLs of `wait.callback` nodes: `<public base>/callbacks/<token>`, one token per (run, node).

A token is the run id, a dot, and HMAC-SHA256 over run id and node id under a key derived from the
deployment's data key (`SecretBox.derived_key`), URL-safe base64 (256 bits). Nothing is stored: the
engine that made a token recognises it by recomputing the MAC for the run's `wait.callback` nodes, so a
URL works from the moment a template renders it, before its node runs. Without the data key nobody can
make one, and knowing a run id does not help.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Iterable

from engine.config import DEFAULT_HTTP_URL
from engine.secret_box import SecretBox

TOKEN_PURPOSE = "wait.callback tokens"
CALLBACK_PATH = "/callbacks/"
_MAC_CHARS = 43
"""URL-safe base64 of the 32-byte MAC, without padding."""


def _mac(box: SecretBox, run_id: str, node: str) -> str:
    digest = hmac.new(box.derived_key(TOKEN_PURPOSE), f"{run_id}\0{node}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def callback_token(box: SecretBox, run_id: str, node: str) -> str:
    """The token of node `node` of run `run_id`: the same every time it is asked for."""
    return f"{run_id}.{_mac(box, run_id, node)}"


def token_run_id(token: str) -> str | None:
    """The run a well-formed token names (not yet checked); None for anything else."""
    run_id, dot, mac = token.rpartition(".")
    if not dot or not run_id or len(mac) != _MAC_CHARS or len(run_id) > 64:
        return None
    return run_id


def token_node(box: SecretBox, token: str, run_id: str, candidates: Iterable[str]) -> str | None:
    """Which of `candidates` (the run's wait.callback node ids) `token` is for; None when none (compared in
    constant time, so a probe learns nothing from timing)."""
    found = None
    for node in candidates:
        if hmac.compare_digest(token, callback_token(box, run_id, node)):
            found = node
    return found


class CallbackLinks:
    """Makes resume URLs: the base is `public_url` (`LOCKGATE_PUBLIC_URL`), else the URL this process's HTTP
    server serves at, else `http_url` (`LOCKGATE_HTTP_URL`), else http://127.0.0.1:8080."""

    def __init__(self, box: SecretBox, public_url: str | None = None, http_url: str | None = None) -> None:
        self.box = box
        self._configured = public_url.rstrip("/") if public_url else None
        self._http_url = http_url.rstrip("/") if http_url else None
        self._served: str | None = None

    def serve_at(self, url: str) -> None:
        """Tell the links where this process's HTTP server listens (used when no public URL is set)."""
        self._served = url.rstrip("/")

    @property
    def base_url(self) -> str:
        return self._configured or self._served or self._http_url or DEFAULT_HTTP_URL

    def url(self, run_id: str, node: str) -> str:
        """`<base>/callbacks/<token>` for node `node` of run `run_id`."""
        return f"{self.base_url}{CALLBACK_PATH}{callback_token(self.box, run_id, node)}"

    def for_run(self, run_id: str) -> Callable[[str], str]:
        """The `callback_url(node)` template function of one run."""

        def callback_url(node: str) -> str:
            return self.url(run_id, str(node))

        return callback_url
