"""`callback_url()` in flow tests: a recording keeps a fixed URL per node in place of the run's own resume URLs,
and replay's `callback_url(node)` gives exactly that URL.

A run's resume URL (`<base>/callbacks/<run id>.<MAC>`) is unique to the run and the deployment, and a replay has
neither the run nor the data key. So the recorder writes every resume URL of the run (and of the runs a rerun
reused steps from) as `https://lockgate.test/callbacks/<node>` wherever it appears: in state, the result, the
steps' writes and what they were given. Percent-encoded copies (a URL put into a query string) are written
percent-encoded the same way, and a bare token (the URL's last part) as the node id. Replay renders
`callback_url("<node>")` as the same fixed URL, so a test compares the same text the recording holds; and a
re-recorded test does not differ in its URLs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from engine.parking.callback_links import CALLBACK_PATH, callback_token
from engine.secret_box import SecretBox, SecretBoxError

PLACEHOLDER_HOST = "lockgate.test"
"""A name under the `.test` top-level domain (RFC 2606): it never resolves, so no replayed URL reaches anyone."""
PLACEHOLDER_BASE = f"https://{PLACEHOLDER_HOST}"


def placeholder_url(node: str) -> str:
    """Replay's `callback_url(node)`: the fixed URL the recorder wrote in place of the run's URL of `node`."""
    return f"{PLACEHOLDER_BASE}{CALLBACK_PATH}{node}"


def run_tokens(box: SecretBox | None, run_ids: Iterable[str], nodes: Iterable[str]) -> dict[str, str]:
    """token → node of every `wait.callback` node of the given runs; empty without a usable data key."""
    if box is None:
        return {}
    node_ids = sorted(set(nodes))
    try:
        return {callback_token(box, run_id, node): node for run_id in run_ids for node in node_ids}
    except (SecretBoxError, OSError):
        return {}


# The base before `/callbacks/`: a scheme, `://` (or its percent-encoded form), then anything up to the path
# that holds no second scheme, no space, quote, angle bracket or backslash.
_BASE = r"https?(?P<colon>:|(?i:%3a))(?P<slashes>//|(?i:%2f%2f))(?:(?!https?(?::|(?i:%3a)))[^\s\"'<>\\])*?"
_SEP = r"(?P<sep>/|(?i:%2f))callbacks(?P=sep)"


class CallbackUrls:
    """Writes a run's resume URLs (found by their tokens) as the placeholder URLs replay renders."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._tokens = tokens
        alternatives = "|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True))
        self._url = re.compile(f"{_BASE}{_SEP}(?P<token>{alternatives})") if tokens else None
        self._bare = re.compile(f"(?:{alternatives})") if tokens else None

    def _url_text(self, match: re.Match[str]) -> str:
        sep, node = match["sep"], self._tokens[match["token"]]
        return f"https{match['colon']}{match['slashes']}{PLACEHOLDER_HOST}{sep}callbacks{sep}{node}"

    def text(self, value: str) -> str:
        if self._url is None or self._bare is None:
            return value
        value = self._url.sub(self._url_text, value)
        return self._bare.sub(lambda match: self._tokens[match[0]], value)

    def data(self, value: Any) -> Any:
        """`value` (JSON data) with every string, and every mapping key, rewritten."""
        if self._url is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(key) if isinstance(key, str) else key: self.data(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.data(item) for item in value]
        return value
