"""A real multi-node Ray cluster on this machine: a head and worker nodes as separate ``ray start`` processes.

Used by ``tests/parallel/test_ray_cluster.py`` (marked ``ray``) and ``benchmarks/bench_ray_cluster.py``. Each node
is one ``ray start --block`` process in a session (process group) of its own, with its own ``--num-cpus`` and a
custom resource naming it (``{"node_<name>": 1}``), every port picked free on this host (two clusters on one
machine never collide), and the session files under a temp dir given by the caller. Teardown never runs a bare
``ray stop`` (it would stop every Ray on the machine, other users' too): it kills each node's process group, then
any process still naming this cluster's temp dir, by pid.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 240.0  # a loaded 2-core machine takes minutes to start a head
START_ATTEMPTS = 3
RAY_BIN = Path(sys.executable).with_name("ray")
DRIVER_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
"""Environment of the nodes, and what a driver joining them needs: a throwaway cluster on this machine runs without
Ray's token authentication (no token file is read or written)."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on this host right now (bound to port 0 together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Node:
    name: str
    cpus: int
    proc: subprocess.Popen[bytes]
    log: Path
    killed: bool = False


@dataclass
class LocalCluster:
    """A head and workers on this machine; ``address`` is what ``PLANNING_RAY_ADDRESS`` takes."""

    root: Path
    address: str = ""
    nodes: list[Node] = field(default_factory=list)

    def _ports(self) -> list[str]:
        p = free_ports(6)
        # worker ports: a block of 200 of 20000-31999, between Ray's default (10002-19999, which every other
        # Ray on the machine uses) and the kernel's ephemeral range (32768-60999, where free_ports draws)
        lo = random.randrange(20000, 32000, 200)
        return [f"--node-manager-port={p[0]}", f"--object-manager-port={p[1]}",
                f"--metrics-export-port={p[2]}", f"--dashboard-agent-listen-port={p[3]}",
                f"--dashboard-agent-grpc-port={p[4]}", f"--runtime-env-agent-port={p[5]}",
                f"--min-worker-port={lo}", f"--max-worker-port={lo + 199}"]

    def _start(self, name: str, cpus: int, head: bool) -> Node:
        log = self.root / f"{name}.log"
        common = [str(RAY_BIN), "start", "--block", f"--num-cpus={cpus}",
                  "--num-gpus=0", f'--resources={{"node_{name}": 1}}', "--disable-usage-stats",
                  "--object-store-memory=100000000", "--include-log-monitor=false", *self._ports()]
        if head:
            (gcs,) = free_ports(1)
            self.address = f"{node_ip()}:{gcs}"
            args = [*common, "--head", f"--port={gcs}", "--include-dashboard=false",
                    f"--temp-dir={self.root / 'ray'}"]
        else:
            args = [*common, f"--address={self.address}"]
        env = {**os.environ, **DRIVER_ENV}
        env.pop("RAY_ADDRESS", None)
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env, cwd=self.root)
        node = Node(name, cpus, proc, log)
        self.nodes.append(node)
        return node

    def start(self, head_cpus: int, worker_cpus: list[int]) -> LocalCluster:
        """Start the head, then the workers; wait until the cluster counts them all (else raise, with logs)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._start_node("head", head_cpus, head=True)
        for i, cpus in enumerate(worker_cpus):
            self._start_node(f"w{i}", cpus, head=False)
        return self

    def _start_node(self, name: str, cpus: int, head: bool, attempts: int = START_ATTEMPTS) -> Node:
        """Start one node and wait for it; a node whose ``ray start`` gave up (Ray waits 30 s for its raylet to
        register, which a loaded machine can miss) is killed and started again."""
        for attempt in range(attempts):
            node = self._start(name, cpus, head)
            try:
                self._wait_nodes(sum(not n.killed for n in self.nodes))
                return node
            except RuntimeError:
                node.killed = True
                _killpg(node.proc, signal.SIGKILL)
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_nodes(self, n: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for node in self.nodes:
                if not node.killed and node.proc.poll() is not None:
                    raise RuntimeError(f"ray node {node.name} exited ({node.proc.returncode}):\n{self.logs()}")
            if self.alive_nodes() >= n:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the cluster did not reach {n} nodes in {START_TIMEOUT_S:.0f} s:\n{self.logs()}")

    def alive_nodes(self) -> int:
        """Nodes the head's GCS counts alive (0 while it does not answer)."""
        # the GCS's own view, without joining as a driver: the GCS client the ray CLI uses
        try:
            from ray._raylet import GcsClient

            client = GcsClient(address=self.address)
            return sum(1 for n in client.get_all_node_info(timeout=5).values() if n.state == 0)
        except Exception:
            return 0

    def add_worker(self, name: str, cpus: int) -> Node:
        """One more worker node (``{"node_<name>": 1}``); returns when the cluster counts it."""
        return self._start_node(name, cpus, head=False)

    def kill_node(self, name: str) -> None:
        """SIGKILL a node's whole process group (raylet, its workers, ``ray start`` itself): a machine lost."""
        node = next(n for n in self.nodes if n.name == name)
        node.killed = True
        _killpg(node.proc, signal.SIGKILL)

    def logs(self, tail: int = 30) -> str:
        parts = []
        for n in self.nodes:
            lines = n.log.read_text(errors="replace").splitlines()[-tail:] if n.log.exists() else []
            parts.append(f"--- {n.name} ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        """Kill every node's process group, then stragglers naming this cluster's dir; remove the session."""
        for node in reversed(self.nodes):
            _killpg(node.proc, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for node in self.nodes:
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _killpg(node.proc, signal.SIGKILL)
        for pid in stragglers(str(self.root)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root / "ray", ignore_errors=True)


def node_ip() -> str:
    """The address Ray gives this machine's nodes (its GCS listens there, not on 127.0.0.1)."""
    from ray.util import get_node_ip_address

    return str(get_node_ip_address())


def _killpg(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stragglers(marker: str) -> list[int]:
    """Pids of this user's processes whose command line or working directory contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if marker in cmd or cwd.startswith(marker):
            pids.append(int(entry.name))
    return pids
