"""The Docker Compose topology of docker/compose.yaml without a Docker engine: three network namespaces (one per
service, named after it) on a bridge, each with the compose host names in /etc/netns/<ns>/hosts (what Docker's
embedded DNS answers), every node started through docker/entrypoint.sh with its docker/config/node-N.yaml, and the
published ports (localhost:19092, 29092, 39092) forwarded from the host to the node as docker-proxy does. A fourth
namespace, `client`, stands for a container on the Compose network.

    partition(n) / heal(n)   take node n's network interface down / up (a network partition, the process lives)
    kill(n) / start(n)       SIGKILL / start again
    in_client(code)          runs Python code (confluent-kafka available) inside the client namespace

Needs root and iproute2 (ip netns, veth, bridge); every test using it fails, not skips, when they are missing, so
that CI cannot pass without running it.
"""

import errno
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import MALA_BIN

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "docker"
ENTRYPOINT = DOCKER_DIR / "entrypoint.sh"
NODES = (1, 2, 3)
# One topology at a time on a host: the published ports are fixed, and pytest-xdist runs test files in parallel.
HOST_LOCK_PATH = Path("/tmp/mala-it-compose-topology.lock")
EXTERNAL_PORT = {n: n * 10000 + 9092 for n in NODES}  # compose.yaml: "19092:19092", ...
INTERNAL_PORT = 9092


def port_accepts(host, port) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def run(*cmd, check=True):
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: exit {r.returncode}: {r.stderr.strip()}")
    return r


class _Forwarder:
    """127.0.0.1:port -> (host, port): Docker's userland proxy for a published port. Port 0: the OS picks one
    (self.port). `observe`, if given, is called with every chunk of bytes a client sends, on that connection's
    thread, with an object that stands for the connection."""

    def __init__(self, listen_port, target, observe=None):
        self.target = target
        self.observe = observe
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # The published port lies in the ephemeral range: a client's outgoing connection (a reconnect attempt of
        # a client an earlier test left to the garbage collector) may hold it for a moment. Docker would fail the
        # same way; here the port is free again within a few seconds.
        deadline = time.monotonic() + 30
        while True:
            try:
                self.sock.bind(("127.0.0.1", listen_port))
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                    self.sock.close()
                    raise
                time.sleep(0.2)
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=3)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self.conns += [client, upstream]
            for a, b, observe in ((client, upstream, self.observe), (upstream, client, None)):
                threading.Thread(target=self._pipe, args=(a, b, observe), daemon=True).start()

    @staticmethod
    def _pipe(src, dst, observe):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if observe:
                    observe(src, data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the thread; close alone does not
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


class ComposeTopology:
    _instances = 0  # names of links and namespaces differ between topologies of one test process

    def __init__(self, work_dir: Path, overrides=()):
        if os.geteuid() != 0:
            pytest.fail("the Compose topology test needs root (ip netns)")
        for tool in ("ip",):
            if subprocess.run(["which", tool], capture_output=True).returncode != 0:
                pytest.fail(f"{tool} (iproute2) is missing")
        self._host_lock = open(HOST_LOCK_PATH, "w")
        fcntl.flock(self._host_lock, fcntl.LOCK_EX)  # waits for another worker's topology to close
        busy = [p for p in EXTERNAL_PORT.values() if port_accepts("127.0.0.1", p)]
        if busy:
            self._release_host_lock()
            pytest.fail(f"the published ports {busy} are in use on this host")
        self.work_dir = Path(work_dir)
        ComposeTopology._instances += 1
        tag = f"{os.getpid() % 10000}{ComposeTopology._instances % 10}"
        self.bridge = f"mbr{tag}"
        self.subnet = f"10.{200 + os.getpid() % 50}.{(os.getpid() + ComposeTopology._instances) % 250}"
        self.ns = {n: f"mala-{n}-{tag}" for n in NODES}  # the service names come from the hosts files
        self.ns["client"] = f"mala-client-{tag}"
        self.ip = {n: f"{self.subnet}.{n}" for n in NODES}
        self.ip["client"] = f"{self.subnet}.100"
        self.overrides = list(overrides)
        self.procs = {}
        self.logs = {}
        self.forwarders = []
        self._made = []
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    # --- network ----------------------------------------------------------------------------------------------------

    def _setup(self):
        run("ip", "link", "add", self.bridge, "type", "bridge")
        self._made.append(("link", self.bridge))
        run("ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        hosts = "127.0.0.1 localhost\n" + "".join(f"{self.ip[n]} mala-{n}\n" for n in NODES)
        for key, ns in self.ns.items():
            run("ip", "netns", "add", ns)
            self._made.append(("netns", ns))
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)
            self._made.append(("etc", str(etc)))
            host_end, ns_end = f"v{str(key)[0]}{self.bridge}"[:15], f"p{str(key)[0]}{self.bridge}"[:15]
            run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            self._made.append(("link", host_end))
            run("ip", "link", "set", ns_end, "netns", ns)
            run("ip", "netns", "exec", ns, "ip", "link", "set", ns_end, "name", "eth0")
            run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ip[key]}/24", "dev", "eth0")
            run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            run("ip", "link", "set", host_end, "master", self.bridge)
            run("ip", "link", "set", host_end, "up")
        # Bridged frames must not be dropped by the host's iptables FORWARD policy (Docker adds the same rule).
        if shutil.which("iptables"):
            run("iptables", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT", check=False)
        for n in NODES:
            self.forwarders.append(_Forwarder(EXTERNAL_PORT[n], (self.ip[n], EXTERNAL_PORT[n])))

    def partition(self, n):
        run("ip", "netns", "exec", self.ns[n], "ip", "link", "set", "eth0", "down")

    def heal(self, n):
        run("ip", "netns", "exec", self.ns[n], "ip", "link", "set", "eth0", "up")

    # --- nodes ------------------------------------------------------------------------------------------------------

    def start(self, n, wait=True):
        data = self.work_dir / f"node-{n}-data"
        log = open(self.work_dir / f"node-{n}.log", "ab")
        log.write(f"=== harness: start of node-{n} at {time.strftime('%H:%M:%S')} ===\n".encode())
        log.flush()
        env_overrides = " ".join([f"log.dirs={data}", *self.overrides])
        cmd = ["ip", "netns", "exec", self.ns[n], "env", f"MALA_BIN={MALA_BIN}",
               f"MALA_CONFIG={DOCKER_DIR / 'config' / f'node-{n}.yaml'}", f"MALA_OVERRIDES={env_overrides}",
               str(ENTRYPOINT)]
        self.procs[n] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.logs[n] = log
        if wait:
            deadline = time.monotonic() + 20
            while not port_accepts(self.ip[n], INTERNAL_PORT):
                if self.procs[n].poll() is not None:
                    pytest.fail(f"node {n} exited with {self.procs[n].returncode}\n{self.log_text(n)}")
                if time.monotonic() > deadline:
                    pytest.fail(f"node {n} does not accept connections\n{self.log_text(n)}")
                time.sleep(0.05)

    def start_all(self):
        for n in NODES:
            self.start(n, wait=False)
        for n in NODES:
            deadline = time.monotonic() + 20
            while not port_accepts(self.ip[n], INTERNAL_PORT):
                if time.monotonic() > deadline:
                    pytest.fail(f"node {n} does not accept connections\n{self.log_text(n)}")
                time.sleep(0.05)

    def kill(self, n):
        p = self.procs.get(n)
        if p and p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)

    def stop(self, n, timeout=20):
        p = self.procs.get(n)
        if not p or p.poll() is not None:
            return p.returncode if p else None
        os.killpg(p.pid, signal.SIGTERM)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
            return -9

    def log_text(self, n, tail=80):
        path = self.work_dir / f"node-{n}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(lines[-tail:])

    @property
    def external_bootstrap(self):
        return ",".join(f"localhost:{EXTERNAL_PORT[n]}" for n in NODES)

    @property
    def internal_bootstrap(self):
        return ",".join(f"mala-{n}:{INTERNAL_PORT}" for n in NODES)

    def in_client(self, code, timeout=90):
        """Python code run inside the client namespace (a container on the Compose network); returns stdout."""
        r = subprocess.run(["ip", "netns", "exec", self.ns["client"], sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            pytest.fail(f"client-namespace program failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def close(self):
        codes = {n: self.stop(n) for n in list(self.procs)}
        for f in self.forwarders:
            f.close()
        for log in self.logs.values():
            log.close()
        if shutil.which("iptables"):
            run("iptables", "-D", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT", check=False)
        for kind, name in reversed(self._made):
            if kind == "netns":
                run("ip", "netns", "del", name, check=False)
            elif kind == "link":
                run("ip", "link", "del", name, check=False)
            elif kind == "etc":
                subprocess.run(["rm", "-rf", name])
        self._release_host_lock()
        return codes

    def _release_host_lock(self):
        if self._host_lock is not None:
            fcntl.flock(self._host_lock, fcntl.LOCK_UN)
            self._host_lock.close()
            self._host_lock = None
