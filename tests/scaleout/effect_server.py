"""The counting HTTP server of the multi-host test, run inside the data namespace.

Usage: python -m tests.scaleout.effect_server ADDRESS PORT DELAY_SECONDS
POST /effect/<run id> counts one side effect of a non-idempotent step (answered DELAY seconds later, a slow
remote side); POST /delay?seconds=S changes that delay; GET /hits answers every path's count as JSON. Prints
`ready` once it serves."""

from __future__ import annotations

import sys
import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.engine.conftest import QuietHandler


def main() -> int:
    address, port, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    hits: dict[str, int] = {}
    lock = threading.Lock()
    answer_after = [delay]

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            if self.path.startswith("/delay?"):
                answer_after[0] = float(parse_qs(urlsplit(self.path).query)["seconds"][0])
                self.send_json(200, {"seconds": answer_after[0]})
                return
            with lock:
                hits[self.path] = hits.get(self.path, 0) + 1
            if answer_after[0]:
                time.sleep(answer_after[0])
            try:
                self.send_json(200, {"ok": True})
            except OSError:  # the caller died or was cut off meanwhile
                pass

        def do_GET(self) -> None:
            with lock:
                counts = dict(hits)
            self.send_json(200, counts)

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever(0.05)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
