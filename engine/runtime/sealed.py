"""A run's secret data as Redis keeps it: its secret inputs, and the run data of its progress and checkpoints.

Secret inputs are sealed whole (`Keyspace.run_secrets`). A progress or checkpoint blob of a run with
secrets has its run data (state, errors, writes per node, result: where a step may have put a secret
it rendered) sealed into one field; the scheduling fields stay readable, so the due-set rebuild and
approval decisions read their wake times and park tokens without the key.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import orjson

from engine.secret_box import SecretBox, SecretBoxError

SEALED_FIELD = "sealed"
RUN_DATA_FIELDS = ("state", "errors", "writes", "result")


def _context(run_id: str, what: bytes) -> bytes:
    return what + b"\0" + run_id.encode()


def _box(box: SecretBox | None) -> SecretBox:
    if box is None:
        raise SecretBoxError("no_key", "this engine process was started without a secret box, so it cannot "
                                       "store or read a run's secret inputs")
    return box


def seal_secrets(box: SecretBox | None, run_id: str, secrets: dict[str, Any]) -> bytes:
    """The value of `run_secrets(run_id)`."""
    return _box(box).seal(orjson.dumps(secrets), _context(run_id, b"secrets"))


def _bytes(raw: bytes | str) -> bytes:
    return raw if isinstance(raw, bytes) else raw.encode()


def open_secrets(box: SecretBox | None, run_id: str, blob: bytes | str) -> dict[str, Any]:
    blob = _bytes(blob)
    opened: dict[str, Any] = orjson.loads(_box(box).open_sealed(blob, _context(run_id, b"secrets")))
    return opened


def dump_snapshot(box: SecretBox | None, run_id: str, snapshot: dict[str, Any],
                  default: Callable[[Any], Any] | None = None) -> bytes:
    """A progress or checkpoint blob; with `box` (a run with secrets) its run data is sealed."""
    if box is None:
        return orjson.dumps(snapshot, default=default)
    data = {name: snapshot[name] for name in RUN_DATA_FIELDS if name in snapshot}
    rest = {name: value for name, value in snapshot.items() if name not in RUN_DATA_FIELDS}
    sealed = box.seal(orjson.dumps(data, default=default), _context(run_id, b"snapshot"))
    rest[SEALED_FIELD] = base64.b64encode(sealed).decode()
    return orjson.dumps(rest, default=default)


def load_snapshot(box: SecretBox | None, run_id: str, raw: bytes | str) -> dict[str, Any]:
    """A blob of `dump_snapshot()` as the executor restores it, its run data opened when it was sealed."""
    snapshot: dict[str, Any] = orjson.loads(raw)
    sealed = snapshot.pop(SEALED_FIELD, None)
    if sealed is not None:
        snapshot.update(orjson.loads(_box(box).open_sealed(base64.b64decode(sealed),
                                                           _context(run_id, b"snapshot"))))
    return snapshot
