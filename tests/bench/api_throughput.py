"""`POST /api/v1/runs` with `wait` under wrk: the peer harness's flow through the HTTP front door.

    python tests/bench/api_throughput.py [--conc 1,8,32] [--duration 20] [--workers N]
                                          [--processes N] [--http-processes K]

Starts `lockgate worker --http` on an embedded engine in a fresh data folder (as `../shared/peers/lockgate/
start.sh` does), publishes `../shared/peers/lockgate/bench.flow.json`, and drives it with the peers' own
`load/bench.py` (wrk -t1, closed loop, keep-alive, wrk pinned to CPU 0) at each concurrency. Prints one JSON
object: per concurrency ok/s, p50/p99 ms, server CPU ms per request (the whole process tree, and split by the
processes' roles: supervisor, executor, projector, http, valkey) and peak tree RSS. The split comes from this
script's own samples of each process's CPU every 0.1 s, taken over the window each measured wrk run ran in.
wrk comes from Debian's packages; when it is missing and we are root it is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import process_tree

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("LOCKGATE_PEERS", ROOT.parent / "shared" / "peers"))
"""The peer harness; LOCKGATE_PEERS points elsewhere (e.g. from a git worktree)."""
FLOW = PEERS / "lockgate" / "bench.flow.json"
LUA = PEERS / "lockgate" / "bench.lua"
BENCH = PEERS / "load" / "bench.py"
LOCKGATE = [sys.executable, "-m", "app.main"]


def ensure_wrk() -> None:
    if shutil.which("wrk"):
        return
    if os.geteuid() != 0:
        sys.exit("api_throughput: wrk is missing; install it with `apt-get install -y wrk`")
    subprocess.run(["apt-get", "install", "-y", "wrk"], check=True, capture_output=True)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data: Path, port: int, processes: int | None,
                 http_processes: int | None = None, workers: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "LOCKGATE_DATA_DIR": str(data), "LOCKGATE_LOG_LEVEL": "warning"}
    for name in ("LOCKGATE_REDIS_URL", "LOCKGATE_DB_URL", "LOCKGATE_KEY_PREFIX"):
        env.pop(name, None)
    first = subprocess.run([*LOCKGATE, "run", str(FLOW), "--input", "id=1", "--input", "value=90", "--json"],
                           env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    if first.returncode != 0:
        sys.exit(f"api_throughput: the first run failed: {first.stderr[-2000:]}")
    made = subprocess.run([*LOCKGATE, "keys", "create", "bench"], env=env, capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    key = next((word for word in (made.stdout + made.stderr).split() if word.startswith("lgk_")), None)
    if key is None:
        sys.exit(f"api_throughput: no API key: {made.stdout} {made.stderr}")
    command = [*LOCKGATE, "worker", "--http", f"127.0.0.1:{port}"]
    if processes:
        command += ["--processes", str(processes)]
    if http_processes:
        command += ["--http-processes", str(http_processes)]
    if workers:
        command += ["--workers", str(workers)]
    with open(data / "server.log", "wb") as log:
        server = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log,
                                  start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v1/runs", timeout=1.0)
            return server, key
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    sys.exit("api_throughput: the server did not answer within 60 s; see " + str(data / "server.log"))


SAMPLE_SECONDS = 0.1


class RoleCpu(threading.Thread):
    """CPU seconds (user + system) of the server's processes summed by role, sampled every SAMPLE_SECONDS."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.stop = threading.Event()

    def _by_role(self) -> dict[str, float]:
        by_role: dict[str, float] = {}
        for pid, seconds in process_tree.cpu_seconds(process_tree.tree(self.root)).items():
            role = process_tree.role(pid, self.root)
            by_role[role] = by_role.get(role, 0.0) + seconds
        return by_role

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.time(), self._by_role()))
            self.stop.wait(SAMPLE_SECONDS)

    def between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds each role used from the sample nearest `start` to the one nearest `end`."""
        first = min(self.samples, key=lambda sample: abs(sample[0] - start))[1]
        last = min(self.samples, key=lambda sample: abs(sample[0] - end))[1]
        return {role: last[role] - first.get(role, 0.0) for role in sorted(last)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conc", default="1,8,32")
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--processes", type=int, default=None, help="lockgate worker --processes N")
    parser.add_argument("--workers", type=int, default=None, help="lockgate worker --workers N (threads)")
    parser.add_argument("--http-processes", type=int, default=None,
                        help="lockgate worker --http-processes K (without --processes: the engine in the worker, "
                             "the API in K children of it)")
    args = parser.parse_args()
    ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="lg-api-bench-") as scratch:
        data = Path(scratch) / "data"
        data.mkdir()
        port = _free_port()
        server, key = start_server(data, port, args.processes, args.http_processes, args.workers)
        try:
            pidfile = Path(scratch) / "lockgate.pid"
            pidfile.write_text(str(server.pid))
            results = Path(scratch) / "results"
            roles = RoleCpu(server.pid)
            roles.start()
            env = {**os.environ, "LG_KEY": key, "BENCH_LUA": str(LUA), "PEER_RESULTS": str(results)}
            run = subprocess.run([sys.executable, str(BENCH), "--url", f"http://127.0.0.1:{port}/api/v1/runs",
                                  "--pidfile", str(pidfile), "--label", "lockgate", "--conc", args.conc,
                                  "--duration", str(args.duration), "--runs", "1", "--warmup", str(args.warmup),
                                  "--pin"], env=env, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"api_throughput: bench.py failed: {run.stdout[-2000:]} {run.stderr[-2000:]}")
            rows = [json.loads(line) for line in (results / "lockgate.jsonl").read_text().splitlines()]
            roles.stop.set()
            roles.join()
            for row in rows:  # bench.py stamps a row (`ts`) as its wrk run ends
                seconds = row["wrk"]["duration_us"] / 1e6
                ok = max(1, row["wrk"]["requests"] - row["wrk"]["err_status"])
                row["cpu_ms_by_role"] = {role: round(used * 1000 / ok, 3)
                                         for role, used in roles.between(row["ts"] - seconds, row["ts"]).items()}
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
    print(json.dumps({
        "bench": "api_throughput", "flow": "peers/lockgate/bench.flow.json", "duration_s": args.duration,
        "processes": args.processes, "http_processes": args.http_processes, "workers": args.workers,
        "by_concurrency": [{
            "connections": row["conc"], "ok_per_s": round(row["ok_per_s"], 1), "p50_ms": round(row["p50_ms"], 2),
            "p99_ms": round(row["p99_ms"], 2), "server_cpu_ms_per_request": round(row["cpu_ms_per_ok"], 3),
            "server_cpu_ms_per_request_by_role": row["cpu_ms_by_role"],
            "peak_tree_rss_mib": round(row["rss_peak_mib"] or 0, 1),
            "errors": {k: v for k, v in row["wrk"].items() if k.startswith("err_") and v},
        } for row in rows],
    }, indent=2))


if __name__ == "__main__":
    main()
