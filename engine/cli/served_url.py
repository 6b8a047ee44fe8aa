"""Where a data folder's HTTP server last served: `lockgate serve` and `lockgate worker --http` note their URL in
the data folder, so that the commands beside them (`lockgate webhooks`) print URLs on the port actually served."""

from __future__ import annotations

import logging
import os
from pathlib import Path

FILE_NAME = "served_url"

log = logging.getLogger("lockgate.cli")


def record_served_url(data_dir: Path, url: str) -> None:
    """Note `url` in `data_dir`, replacing the file whole so that a reader never sees half of it; a folder that
    cannot take it only logs a warning (serving goes on)."""
    target = data_dir / FILE_NAME
    staging = data_dir / f"{FILE_NAME}.{os.getpid()}.tmp"
    try:
        staging.write_text(url + "\n", encoding="utf-8")
        os.replace(staging, target)
    except OSError as exc:
        log.warning("cannot note the served URL in %s (%s); `lockgate webhooks` will print another base URL "
                    "unless given --base-url", target, exc.strerror or exc)


def served_url(data_dir: Path) -> str | None:
    """The URL last noted in `data_dir`; None when there is none."""
    try:
        text = (data_dir / FILE_NAME).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None
