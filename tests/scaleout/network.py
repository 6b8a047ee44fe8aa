"""A private network of Linux network namespaces: a "switch" namespace holding a bridge, one namespace per host
and one for the data tier, each wired to the switch by a veth pair, and a veth from the root namespace so the
test process can reach the data tier. Every name carries a prefix unique to the run; `close()` kills every
process left in the namespaces and deletes them (which removes their links), also after a failure.

Only addresses of this network (10.213.N.0/24, N picked unused) are ever targets."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field

SUBNET_BASE = "10.213"
DATA_HOST = 1
FIRST_HOST = 11
ROOT_HOST = 254


class NetworkUnavailable(RuntimeError):
    """The machine cannot build namespaces (not root, or `ip` missing): the multi-host test cannot run."""


def require_namespaces() -> None:
    """Fail loudly, never skip: CI runs as root with iproute2."""
    if os.geteuid() != 0:
        raise NetworkUnavailable("the multi-host test builds network namespaces and needs root (CI runs it as "
                                 "root); run it with sudo")
    for tool in ("ip", "unshare", "runuser"):
        if shutil.which(tool) is None:
            raise NetworkUnavailable(f"`{tool}` is missing; install iproute2/util-linux to run the multi-host test")


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _free_subnet() -> int:
    """A third octet whose 10.213.N.0/24 no interface or route of the root namespace uses."""
    used = ip("-o", "addr") + ip("route")
    start = os.getpid() % 250
    for step in range(250):
        octet = (start + step) % 250 + 1
        if f"{SUBNET_BASE}.{octet}." not in used:
            return octet
    raise RuntimeError(f"no free /24 left under {SUBNET_BASE}.0.0/16")


@dataclass
class Network:
    """The namespaces of one test run. `host(i)` and `data` name namespaces; `address(...)` their IPs."""

    hosts: int
    prefix: str = field(default_factory=lambda: "lgs" + uuid.uuid4().hex[:5])
    octet: int = 0
    namespaces: list[str] = field(default_factory=list)
    root_link: str = ""

    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    @property
    def data(self) -> str:
        return f"{self.prefix}-data"

    def host(self, index: int) -> str:
        return f"{self.prefix}-h{index}"

    def host_names(self) -> list[str]:
        return [self.host(index) for index in range(1, self.hosts + 1)]

    @property
    def data_address(self) -> str:
        return f"{SUBNET_BASE}.{self.octet}.{DATA_HOST}"

    def host_address(self, index: int) -> str:
        return f"{SUBNET_BASE}.{self.octet}.{FIRST_HOST + index - 1}"

    def _port(self, namespace: str) -> str:
        """The switch-side end of a namespace's cable."""
        return "p" + namespace.rsplit("-", 1)[1]

    def build(self) -> Network:
        require_namespaces()
        self.octet = _free_subnet()
        self._add(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        self._wire(self.data, self.data_address)
        for index in range(1, self.hosts + 1):
            self._wire(self.host(index), self.host_address(index))
        self.root_link = f"{self.prefix}r"
        ip("link", "add", "name", self.root_link, "type", "veth", "peer", "name", "proot", "netns", self.switch)
        ip("-n", self.switch, "link", "set", "proot", "master", "br0", "up")
        ip("addr", "add", f"{SUBNET_BASE}.{self.octet}.{ROOT_HOST}/24", "dev", self.root_link)
        ip("link", "set", self.root_link, "up")
        return self

    def _add(self, namespace: str) -> None:
        ip("netns", "add", namespace)
        self.namespaces.append(namespace)
        ip("-n", namespace, "link", "set", "lo", "up")

    def _wire(self, namespace: str, address: str) -> None:
        self._add(namespace)
        port = self._port(namespace)
        ip("link", "add", "name", "eth0", "netns", namespace, "type", "veth", "peer", "name", port, "netns",
           self.switch)
        ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", namespace, "link", "set", "eth0", "up")

    def cut(self, namespace: str) -> None:
        """Pull the host's cable at the switch: its processes live on, but reach nothing."""
        ip("-n", self.switch, "link", "set", self._port(namespace), "down")

    def restore(self, namespace: str) -> None:
        ip("-n", self.switch, "link", "set", self._port(namespace), "up")

    def exec_argv(self, namespace: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", namespace, *argv]

    def pids(self, namespace: str) -> list[int]:
        done = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=20)
        return [int(pid) for pid in done.stdout.split() if pid.isdigit()]

    def kill_all(self, namespace: str, timeout: float = 10.0) -> list[int]:
        """SIGKILL every process in the namespace (a host dying); returns their pids once all are gone."""
        killed: list[int] = []
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids(namespace)
            if not pids:
                return killed
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes {pids} of {namespace} survive SIGKILL")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if pid not in killed:
                    killed.append(pid)
            time.sleep(0.05)

    def close(self) -> None:
        """Kill what runs in the namespaces, delete them and the root link; keeps going past errors."""
        problems: list[str] = []
        for namespace in reversed(self.namespaces):
            try:
                self.kill_all(namespace)
            except Exception as exc:
                problems.append(str(exc))
            try:
                ip("netns", "del", namespace)
            except Exception as exc:
                problems.append(str(exc))
        self.namespaces.clear()
        if self.root_link:  # normally gone with its peer in the switch namespace
            try:
                ip("link", "del", self.root_link)
            except RuntimeError as exc:
                if "Cannot find device" not in str(exc):
                    problems.append(str(exc))
        if problems:
            raise RuntimeError("network teardown: " + "; ".join(problems))
