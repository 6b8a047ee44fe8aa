"""The namespace network of the multi-host test: hosts reach the data namespace through the switch, a cut host
reaches nothing until restored, and teardown leaves no namespace, link or process behind, also when a test
failed with processes still running in it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.scaleout.network import Network, ip

LISTEN = "import socket, sys; s = socket.create_server((sys.argv[1], 7000)); print('ready', flush=True); " \
         "[s.accept()[0].close() for _ in iter(int, 1)]"
CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], 7000), timeout=1).close()"


def _listen(network: Network, namespace: str, address: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(network.exec_argv(namespace, [sys.executable, "-c", LISTEN, address]),
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _reaches(network: Network, namespace: str, address: str) -> bool:
    """A TCP connection from `namespace` to the listener at `address` succeeds within a second."""
    done = subprocess.run(network.exec_argv(namespace, [sys.executable, "-c", CONNECT, address]),
                          capture_output=True, timeout=20)
    return done.returncode == 0


def test_a_cut_host_reaches_nothing_until_restored_and_teardown_leaves_nothing() -> None:
    network = Network(hosts=2)
    sleeper: subprocess.Popen[bytes] | None = None
    try:
        network.build()
        host = network.host(1)
        listeners = [_listen(network, network.data, network.data_address),
                     _listen(network, host, network.host_address(1))]
        assert _reaches(network, host, network.data_address)
        assert _reaches(network, network.host(2), network.host_address(1))
        network.cut(host)
        assert not _reaches(network, host, network.data_address)
        network.restore(host)
        assert _reaches(network, host, network.data_address)
        sleeper = subprocess.Popen(network.exec_argv(host, ["sleep", "600"]))
        deadline = time.monotonic() + 10
        while sleeper.pid not in network.pids(host):  # `ip netns exec` enters the namespace, then execs
            assert time.monotonic() < deadline, "the process never showed up in its namespace"
            time.sleep(0.01)
        with pytest.raises(RuntimeError, match="a failing test"):
            try:
                raise RuntimeError("a failing test")
            finally:
                network.close()
    finally:
        network.close()
    assert sleeper is not None and sleeper.wait(10) == -9
    assert [listener.wait(10) for listener in listeners] == [-9, -9]
    assert network.prefix not in ip("netns", "list")
    assert network.prefix not in ip("-o", "link")
    assert not os.path.exists(f"/run/netns/{network.host(1)}")
