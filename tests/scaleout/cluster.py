"""Hosts as network namespaces running real `lockgate worker` processes against one data tier, and the
measurements the multi-host test and benchmark make on them: projector failover after a host is cut off, the
cut host's projector yielding once it is back, and a dead host's jobs reclaimed by the others.

Each host's worker runs in its own UTS namespace with its own hostname, so its consumer names and projector
lease holder name are those of a separate machine: nothing on another host can tell whether its process
lives, as on a real network. The test process (root namespace) plays the operator: it publishes, creates
runs and reads the data tier through `tests.chaos.conftest.Deployment`."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from engine.runtime.consumers import SLOT_TTL_SECONDS
from engine.runtime.jobs import delivery_of
from engine.runtime.reclaim import RECLAIMER_CONSUMER
from tests.chaos.conftest import JOURNAL, Deployment, effect_flow
from tests.scaleout.datatier import ROOT, DataTier
from tests.scaleout.network import Network

WORKER_THREADS = 2
HEARTBEAT_TIMEOUT = "5"
"""Workers beat every 2 s (`HEARTBEAT_SECONDS`): 2.5 beats, so a live worker slowed by two busy cores keeps its
jobs (a job taken from a live worker in its non-idempotent step ends `step_not_idempotent`)."""
JOB_IDLE_TIMEOUT = "8"
READY_TIMEOUT = 60.0
GUARD = 60.0
"""Hang guard of every wait on a signal (about 10x what it is expected to take)."""
POLL = 0.01
STOP_TIMEOUT = 120.0
"""A clean stop joins every engine thread (up to 10 s each); on two cores shared with a busy machine it is slow."""
SLOT_TTL_MS = SLOT_TTL_SECONDS * 1000
RECONNECTED_TTL_MS = SLOT_TTL_MS - 2000


@dataclass
class HostProcess:
    host: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Cluster:
    tmp: Path
    hosts: int = 3
    counter_delay: float = 0.0
    worker_threads: int = WORKER_THREADS
    worker_env: dict[str, str] = field(default_factory=dict)
    network: Network = field(init=False)
    data: DataTier = field(init=False)
    deployment: Deployment = field(init=False)
    running: dict[str, HostProcess] = field(default_factory=dict)
    started: int = 0

    def open(self) -> Cluster:
        self.network = Network(self.hosts)
        try:
            self.network.build()
            self.data = DataTier(self.network, self.counter_delay).start()
            assert self.data.counter is not None
            self.deployment = Deployment(self.tmp, self.data.redis_url, self.data.db_url, self.network.prefix,
                                         zygote=None, counter=self.data.counter)  # type: ignore[arg-type]
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Everything down, whatever state it is in; the first failure is raised after all was tried."""
        errors: list[BaseException] = []
        built = vars(self)  # the parts `open` got to build before it failed
        steps = [self._kill_workers]
        steps += [built["deployment"].handle.stop] if "deployment" in built else []
        steps += [built["data"].close] if "data" in built else []
        steps += [built["network"].close] if "network" in built else []
        for step in steps:
            try:
                step()
            except BaseException as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def _kill_workers(self) -> None:
        for host in list(self.running):
            process = self.running.pop(host)
            if process.proc.poll() is None:
                process.proc.kill()
            process.proc.wait(10)

    # --- hosts ------------------------------------------------------------------------------------

    @functools.cached_property
    def client(self) -> redis.Redis:
        """One client for every look at the data tier (a new one per look would leave a connection open each)."""
        assert self.deployment.handle.redis is not None
        return self.deployment.handle.redis.client()

    def host_names(self) -> list[str]:
        return self.network.host_names()

    def start_worker(self, host: str) -> HostProcess:
        """One `lockgate worker` on `host` (its namespace, its hostname); returns once it serves."""
        return self.ready(self.launch(host))

    def start_workers(self, hosts: list[str]) -> None:
        """Workers on all `hosts`, started together; returns once all serve."""
        for process in [self.launch(host) for host in hosts]:
            self.ready(process)

    def launch(self, host: str) -> HostProcess:
        assert host not in self.running, f"{host} already runs a worker"
        self.started += 1
        self.deployment.processes = self.started
        log = self.deployment.log(self.started)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKGATE_DATA_DIR": str(self.tmp / "data"),
               "LOCKGATE_REDIS_URL": self.data.redis_url, "LOCKGATE_DB_URL": self.data.db_url,
               "LOCKGATE_KEY_PREFIX": self.network.prefix, "LOCKGATE_EVENT_JOURNAL": str(JOURNAL),
               "LOCKGATE_LOG_DIR": str(self.tmp / "logs"), "LOCKGATE_HEARTBEAT_TIMEOUT": HEARTBEAT_TIMEOUT,
               "LOCKGATE_JOB_IDLE_TIMEOUT": JOB_IDLE_TIMEOUT,
               **self.worker_env}
        argv = self.network.exec_argv(host, ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host,
                                             sys.executable, "-m", "app.main", "worker", "--workers",
                                             str(self.worker_threads)])
        with open(log, "ab") as out:  # the child keeps its own descriptor
            out.write(f"--- {host}: {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        process = HostProcess(host, proc, log)
        self.running[host] = process
        return process

    def ready(self, process: HostProcess) -> HostProcess:
        deadline = time.monotonic() + READY_TIMEOUT
        while "worker(s) on" not in process.log.read_text(errors="replace"):
            if process.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the worker on {process.host} did not start (exit {process.proc.poll()})\n"
                                     f"{process.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)
        return process

    def stop_worker(self, host: str) -> None:
        process = self.running.pop(host)
        process.proc.send_signal(signal.SIGTERM)
        code = process.proc.wait(STOP_TIMEOUT)
        assert code == 0, f"the worker on {host} exited with {code} on SIGTERM\n{self.deployment.logs()}"

    def kill_host(self, host: str) -> list[int]:
        """SIGKILL every process of the host, as when the machine dies: its worker first, at once (the
        namespace's process list takes a subprocess to read), then whatever else runs there."""
        process = self.running.pop(host)
        process.proc.kill()
        killed = [process.proc.pid, *self.network.kill_all(host)]
        process.proc.wait(10)
        return killed

    # --- what the data tier says ----------------------------------------------------------------------

    def lease_host(self) -> str | None:
        holder: Any = self.client.get(self.deployment.handle.keys.projector_lease)
        return holder.decode().split(":")[0] if holder else None

    def journal_length(self) -> int:
        return int(self.client.xlen(self.deployment.handle.keys.events_journal))

    def pending_of(self, host: str) -> list[bytes]:
        """Job messages delivered to the host's consumers and not acknowledged."""
        keys = self.deployment.handle.keys
        held: list[bytes] = []
        for index in range(self.worker_threads):
            entries: Any = self.client.xpending_range(keys.jobs, keys.jobs_group, min="-", max="+", count=1000,
                                                      consumername=f"{host}:w{index}")
            held.extend(entry["message_id"] for entry in entries)
        return held

    def pending_of_consumer(self, consumer: str, among: list[bytes]) -> list[bytes]:
        keys = self.deployment.handle.keys
        entries: Any = self.client.xpending_range(keys.jobs, keys.jobs_group, min="-", max="+", count=10_000,
                                                  consumername=consumer)
        wanted = set(among)
        return [entry["message_id"] for entry in entries if entry["message_id"] in wanted]

    def attempts(self, message_ids: list[bytes]) -> dict[str, int]:
        """Attempt number in force for the job of each message (by the job's origin), as the fence reads it."""
        keys = self.deployment.handle.keys
        found: dict[str, int] = {}
        for message_id in message_ids:
            entries: Any = self.client.xrange(keys.jobs, min=message_id, max=message_id)
            for entry_id, fields in entries:
                delivery = delivery_of(entry_id, fields)
                found[delivery.origin] = max(self.attempt(delivery.origin), delivery.attempt)
        return found

    def attempt(self, origin: str) -> int:
        current: Any = self.client.get(self.deployment.handle.keys.job_attempt(origin))
        return int(current) if current else 1

    def slot_ttl_ms(self, host: str) -> int:
        """Time left on the host's first consumer slot: its heartbeat resets it to 30 s."""
        return int(self.client.pttl(self.deployment.handle.keys.consumer_slot(host, 0)))

    def publish_parked_flow(self) -> str:
        """trigger → queue (park 1 s) → POST (not idempotent) → end; returns the flow id."""
        self.deployment.publish(effect_flow(self.data.counter.url if self.data.counter else "", delay="1s"))
        return "parked"


def wait_until(check: Any, what: str, cluster: Cluster, guard: float = GUARD) -> float:
    """Poll `check` until true; returns when it became true (monotonic). Fails with the workers' logs."""
    deadline = time.monotonic() + guard
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {guard:g}s\n{cluster.deployment.logs()}")
        time.sleep(POLL)
    return time.monotonic()


class Feeder:
    """Creates `total` runs of a flow at `rate` per second from a thread, as clients would."""

    def __init__(self, cluster: Cluster, flow_id: str, total: int, rate: float) -> None:
        self.cluster = cluster
        self.flow_id = flow_id
        self.total = total
        self.rate = rate
        self.run_ids: list[str] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._feed, name="feeder", daemon=True)

    def _feed(self) -> None:
        began = time.monotonic()
        try:
            for index in range(self.total):
                delay = began + index / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self.run_ids.append(self.cluster.deployment.handle.create_run(self.flow_id).run_id)
        except BaseException as exc:
            self.error = exc

    @property
    def feeding(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def join(self) -> list[str]:
        self._thread.join(self.total / self.rate + GUARD)
        assert not self._thread.is_alive(), "the feeder did not finish creating runs"
        if self.error is not None:
            raise self.error
        return list(self.run_ids)


class LeaseWatch:
    """Every change of the projector lease's host, with when it happened."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.changes: list[tuple[float, str | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="lease-watch", daemon=True)

    def _watch(self) -> None:
        last: object = object()
        while not self._stop.is_set():
            host = self.cluster.lease_host()
            if host != last:
                self.changes.append((time.monotonic(), host))
                last = host
            self._stop.wait(POLL)

    @contextmanager
    def running(self) -> Iterator[LeaseWatch]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(5)


@dataclass(frozen=True)
class Failover:
    cut_host: str
    new_host: str
    cut_at: float
    """When the cable was pulled (monotonic)."""
    lease_seconds: float
    """From the cut to another host holding the lease."""
    apply_seconds: float
    """From the cut to the new holder's first applied batch (the events journal grows again)."""
    restored_at: float
    """When the cut host's cable went back in (monotonic)."""
    back_seconds: float
    """From the cable going back in to the cut host's heartbeat reaching Redis again (TCP retransmission)."""

    def yielded(self, watch: LeaseWatch, until: float) -> bool:
        """The cut host, back, never held the lease again between its return and `until`."""
        return self.cut_host not in {host for at, host in watch.changes if self.restored_at < at <= until}


def cut_active_projector(cluster: Cluster) -> Failover:
    """Cut the lease holder's host off, measure the takeover, bring the host back and wait until it talks to
    Redis again and events are still applied (by the new holder: `Failover.yielded`)."""
    cut_host = cluster.lease_host()
    assert cut_host in cluster.running, f"the lease is held by {cut_host!r}, not by one of the running hosts"
    cut_at = time.monotonic()
    cluster.network.cut(cut_host)
    try:
        leased_at = wait_until(lambda: cluster.lease_host() not in (cut_host, None), "a standby takes the lease",
                               cluster)
        new_host = cluster.lease_host()
        assert new_host is not None
        journal = cluster.journal_length()
        applied_at = wait_until(lambda: cluster.journal_length() > journal, f"{new_host} applies events", cluster)
    finally:
        restored_at = time.monotonic()
        cluster.network.restore(cut_host)
    # The lease lapsed while it was away (more than RECONNECTED_TTL_MS below a fresh slot TTL), so a slot TTL
    # back above that means its heartbeat reached Redis after the cable went back in.
    assert restored_at - cut_at > (SLOT_TTL_MS - RECONNECTED_TTL_MS) / 1000
    back_at = wait_until(lambda: cluster.slot_ttl_ms(cut_host) > RECONNECTED_TTL_MS,
                         f"{cut_host} talks to Redis again", cluster)
    journal = cluster.journal_length()
    wait_until(lambda: cluster.journal_length() > journal, "events are applied after the cut host is back",
               cluster)
    return Failover(cut_host, new_host, cut_at, leased_at - cut_at, applied_at - cut_at, restored_at,
                    back_at - restored_at)


@dataclass(frozen=True)
class Reclaim:
    host: str
    held: int
    """Jobs delivered to the host and not acknowledged when it died."""
    reclaimed: int
    """Of those, jobs redelivered by the other hosts (their attempt key moved past the dead host's attempt)."""
    seconds: float
    """From the SIGKILL to the last of its jobs requeued as its next attempt by another host."""


def kill_a_worker_host(cluster: Cluster, spare: set[str]) -> Reclaim:
    """SIGKILL every process of a host other than those in `spare` while it holds jobs; measure the reclaim."""
    candidates = [host for host in cluster.running if host not in spare]
    assert candidates, f"no host to kill besides {sorted(spare)}"
    found: dict[str, list[bytes]] = {}

    def holding() -> bool:
        for host in candidates:
            held = cluster.pending_of(host)
            if held:
                found[host] = held
                return True
        return False

    wait_until(holding, f"one of {candidates} holds a job", cluster)
    [(victim, held)] = found.items()
    attempts = cluster.attempts(held)
    killed_at = time.monotonic()
    cluster.kill_host(victim)
    wait_until(lambda: not cluster.pending_of(victim), f"the jobs of dead {victim} are claimed", cluster)
    # A reclaimer claims a message to its own consumer first, then requeues it as the next attempt.
    done_at = wait_until(lambda: not cluster.pending_of_consumer(RECLAIMER_CONSUMER, held),
                         f"the claimed jobs of dead {victim} are requeued", cluster)
    reclaimed = sum(1 for origin, attempt in attempts.items() if cluster.attempt(origin) > attempt)
    return Reclaim(victim, len(held), reclaimed, done_at - killed_at)
